//! How a kernel or a host view uses an argument: the mode coherence plans by and an API
//! declares for each of its buffers.

/// How a kernel (or a host view) uses an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads the bytes; leaves them unchanged.
    Read,
    /// Reads and then changes the bytes.
    ReadWrite,
    /// Overwrites every byte without reading any (write-discard): nothing is copied in.
    Write,
}

impl Access {
    /// Whether the access changes the bytes.
    pub fn writes(self) -> bool {
        !matches!(self, Access::Read)
    }
}
