//! The one error type of RIMMS.
//!
//! Every fallible call returns [`Error`] and changes nothing when it fails: buffers keep their
//! last valid copy, pools their allocations, stats their figures. Messages name what was wrong
//! and where, so they can be shown to a user as they are.
//!
//! Backends do not return it: they report a [`BackendError`] (the FPGA driver's faults and the
//! CUDA driver's failures included), and [`Error::from_backend`] is the one place that turns
//! one into this error, with what the runtime was doing ([`During`]): a backend's "not here"
//! ([`BackendError::Unsupported`]) becomes [`Error::Unsupported`] naming the API and the
//! device, anything else the `source` of [`Error::Kernel`], [`Error::Transfer`],
//! [`Error::Fill`] or [`Error::Backend`].

use crate::hal::BackendError;
use crate::hal::SpaceName;
use crate::hal::{Device, Target};
use std::fmt;
use std::io;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in RIMMS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A buffer of an element type with no size was requested.
    #[error("cannot allocate a buffer of {type_name}: the element type has no size, so its elements cannot be told apart in memory")]
    EmptyBuffer {
        /// Element type.
        type_name: &'static str,
    },

    /// The requested length does not fit in memory addresses.
    #[error("a buffer of {len} elements of {type_name} ({elem_size} bytes each) overflows the address space")]
    LengthOverflow {
        /// Requested elements.
        len: usize,
        /// Element type.
        type_name: &'static str,
        /// Bytes per element.
        elem_size: usize,
    },

    /// A buffer whose per-fragment records this process cannot allocate: a huge buffer, or
    /// fragments made very small.
    #[error("a buffer of {bytes} bytes in fragments of {fragment_bytes} bytes needs {fragments} fragment records, more than this process can allocate; use larger fragments (`HeteData::fragment`) or a smaller buffer")]
    TooManyFragments {
        /// Bytes of the buffer.
        bytes: usize,
        /// The fragment size asked for.
        fragment_bytes: usize,
        /// Fragments that size makes.
        fragments: usize,
    },

    /// A fragment size that is not a power of two or not a whole number of elements.
    #[error(
        "fragment size {bytes} bytes is invalid for {type_name} ({elem_size} bytes each): {why}"
    )]
    FragmentSize {
        /// Requested fragment size.
        bytes: usize,
        /// Element type.
        type_name: &'static str,
        /// Bytes per element.
        elem_size: usize,
        /// What rule it broke.
        why: &'static str,
    },

    /// An element type whose alignment the pools cannot honour.
    #[error(
        "{type_name} needs {align}-byte alignment, but pools hand out {granule}-byte granules"
    )]
    Alignment {
        /// Element type.
        type_name: &'static str,
        /// Its alignment.
        align: usize,
        /// The pool granule.
        granule: usize,
    },

    /// A range outside a buffer or view.
    #[error("range {start}..{end} is out of bounds of a view of {len} elements")]
    OutOfBounds {
        /// Start of the requested range.
        start: usize,
        /// End of the requested range.
        end: usize,
        /// Elements in the view it was taken from.
        len: usize,
    },

    /// A `parallel_for!` that overwrites a buffer whole without reading it, cut short: an
    /// iteration left its task early (a `?`, or a `return` or `break` a macro hid), so the
    /// overwrite is not proven and is not recorded as one.
    #[error("parallel_for! finished {completed} of its {total} iterations (an iteration left early, through `?` or a macro), so its overwrite of `{buffer}` is not recorded: every element of `{buffer}` holds its earlier value or the one the loop wrote")]
    LoopCutShort {
        /// The buffer the loop overwrote.
        buffer: &'static str,
        /// Iterations that ran to their end.
        completed: usize,
        /// Iterations in the loop's range.
        total: usize,
    },

    /// A mutable split whose boundary falls inside a fragment, which two devices could then
    /// write at once.
    #[error("cannot split mutably at element {at}: byte offset {byte_offset} is inside a {fragment_bytes}-byte fragment; split at fragment boundaries or choose a smaller fragment size with `fragment()`")]
    MisalignedSplit {
        /// Element index of the split.
        at: usize,
        /// Its byte offset in the buffer.
        byte_offset: usize,
        /// The buffer's fragment size.
        fragment_bytes: usize,
    },

    /// A chunk or row length of zero or one that does not divide the view.
    #[error("cannot cut a view of {len} elements into pieces of {piece}: {why}")]
    BadPieces {
        /// Elements in the view.
        len: usize,
        /// Requested piece length.
        piece: usize,
        /// What rule it broke.
        why: &'static str,
    },

    /// A device the runtime does not have.
    #[error("device {device} is not present in this runtime (it has: {})", Listed(.available))]
    NoDevice {
        /// The device asked for.
        device: Device,
        /// The devices it has.
        available: Vec<Device>,
    },

    /// A buffer used with a runtime other than the one that allocated it.
    #[error("argument `{arg}` of {api} belongs to another runtime")]
    ForeignBuffer {
        /// API name.
        api: &'static str,
        /// Argument name.
        arg: &'static str,
    },

    /// Arguments whose shapes do not fit the API.
    #[error("{api} on {device}: {what}")]
    Shape {
        /// API name.
        api: &'static str,
        /// Where it was called: a device, or `auto` where a call is refused before placement.
        device: Target,
        /// What does not fit.
        what: String,
    },

    /// An operation the chosen device cannot do (an FFT size beyond an accelerator's limit).
    #[error("{api} on {device} is not supported: {why}")]
    Unsupported {
        /// API name.
        api: &'static str,
        /// Device it was called on.
        device: Device,
        /// Why not.
        why: String,
    },

    /// A pool that cannot satisfy a request.
    #[error("memory space {space} is exhausted: asked for {requested} bytes, {free} bytes free, largest free block {largest_free} bytes")]
    PoolExhausted {
        /// The space.
        space: SpaceName,
        /// Bytes asked for (rounded up to granules).
        requested: usize,
        /// Bytes free in the pool.
        free: usize,
        /// Largest contiguous free block.
        largest_free: usize,
    },

    /// A device pool too full for an allocation even after evicting every block not in use:
    /// what the call itself needs does not fit there.
    #[error("memory space {space} cannot fit {needed} bytes: {free} bytes free (largest free run {largest_free} bytes, which the allocator may not hand out in one piece) and {evictable} more could be freed by eviction; {in_use} bytes are held by buffers in use now (this call's arguments, running jobs, host views) — give the space a larger pool or split the data")]
    DoesNotFit {
        /// The space.
        space: SpaceName,
        /// Bytes asked for (rounded up to granules).
        needed: usize,
        /// Bytes free in the pool.
        free: usize,
        /// The longest run of free bytes.
        largest_free: usize,
        /// Bytes that evicting every block not in use would free.
        evictable: usize,
        /// Bytes held by blocks that cannot be evicted now.
        in_use: usize,
    },

    /// Evicting a block from a full pool needed its last valid copy written back elsewhere,
    /// and that failed; the block and its state are as they were.
    #[error("eviction from memory space {space} failed: writing back {bytes} bytes (the only valid copy) did not succeed, so the block stays: {source}")]
    WriteBack {
        /// The space being evicted from.
        space: SpaceName,
        /// Bytes to write back.
        bytes: usize,
        /// What failed: the copy, or finding a space with room.
        source: Box<Error>,
    },

    /// The operating system refused to reserve a pool.
    #[error("could not reserve {bytes} bytes for memory space {space}: {source}")]
    Reserve {
        /// The space.
        space: SpaceName,
        /// Bytes asked for.
        bytes: usize,
        /// What the OS said.
        source: io::Error,
    },

    /// Zeroing fresh fragments in a device's memory failed.
    #[error("zero fill of {bytes} bytes in {space} failed: {source}")]
    Fill {
        /// The space.
        space: SpaceName,
        /// Bytes to zero.
        bytes: usize,
        /// What the backend reported.
        source: BackendError,
    },

    /// A copy between spaces failed.
    #[error("copy of {bytes} bytes from {from} to {to} failed: {source}")]
    Transfer {
        /// Source space.
        from: SpaceName,
        /// Destination space.
        to: SpaceName,
        /// Bytes in the copy.
        bytes: usize,
        /// What the backend (or the copy path) reported.
        source: BackendError,
    },

    /// A kernel failed on its device; its outputs keep their last valid copy.
    #[error("kernel {api} failed on {device}: {source}")]
    Kernel {
        /// API name.
        api: &'static str,
        /// The device it ran on.
        device: Device,
        /// What the device's backend reported.
        source: BackendError,
    },

    /// A kernel argument taken as an element type its bytes do not fit: a length that is not
    /// a whole number of elements, a misaligned start, or a written view of an argument the
    /// call only reads.
    #[error("kernel argument `{arg}` cannot be taken as {type_name}: {why}")]
    ArgumentType {
        /// The argument's name.
        arg: &'static str,
        /// The element type asked for.
        type_name: &'static str,
        /// What does not fit.
        why: &'static str,
    },

    /// `validate()` found two valid copies of a fragment that differ: something wrote to a
    /// buffer behind the runtime's back.
    #[error("fragment {fragment} (bytes {start}..{end}) differs between {} and {second}, which should both hold its newest bytes", .first.as_ref().map_or("zero", SpaceName::as_str))]
    Diverged {
        /// Fragment index.
        fragment: usize,
        /// First byte of the fragment.
        start: usize,
        /// End of the fragment.
        end: usize,
        /// One valid space, or `None` where the fragment is marked zero (and so holds zeros
        /// wherever it is valid).
        first: Option<SpaceName>,
        /// The space that differs from it.
        second: SpaceName,
    },

    /// A fragment's bytes in a space no longer match the checksum recorded when it was last
    /// written (with checksums on: `RuntimeBuilder::checksums`, `RIMMS_CHECK=checksums`):
    /// something wrote them behind the runtime's back, a ghost write (a device writing past
    /// its output, legacy code or another process writing a shared mapping). Found when the
    /// fragments are next read, in any space, or at `validate()`; the bytes are never used.
    #[error("ghost write: buffer #{buffer}, fragments {}..{} (bytes {start}..{end}) in {space} changed behind the runtime's back since {writer} last wrote them", .fragments.start, .fragments.end)]
    GhostWrite {
        /// The buffer's id (its creation order in its runtime).
        buffer: u64,
        /// The run of neighbouring fragments that do not match.
        fragments: std::ops::Range<usize>,
        /// First byte of the run.
        start: usize,
        /// End of the run.
        end: usize,
        /// The space whose bytes do not match.
        space: SpaceName,
        /// The last writer the runtime knows of: `"host"`, or an API and its device
        /// (`"zip on sim(0)"`).
        writer: String,
    },

    /// A fragment of a secure buffer ([`crate::HeteData::alloc_secure`]) did not authenticate
    /// when it was decrypted: its ciphertext (or tag) was changed, or a fragment of another
    /// buffer or index was put in its place, while it was outside the trusted spaces. Its
    /// bytes were not used, and nothing was changed.
    #[error("secure buffer #{buffer}: fragment {fragment} (bytes {start}..{end}) held in {held_in} failed authentication: it was changed or swapped outside the trusted spaces, and was not used")]
    Tampered {
        /// The buffer's id (its creation order in its runtime, or the id the caller sealed a
        /// run under: [`crate::SecureKey::seal_run`]).
        buffer: u64,
        /// The fragment that failed.
        fragment: usize,
        /// Its first byte in the buffer.
        start: usize,
        /// Its end.
        end: usize,
        /// Where the ciphertext was held: a space's name, or `"transport"` for a run opened
        /// with [`crate::SecureKey::open_run`].
        held_in: String,
    },

    /// A secure buffer's plaintext was asked for in a space that is not trusted
    /// ([`crate::RuntimeBuilder::trust`]): a kernel there, or a host view in place there, would
    /// see its bytes in the clear. Refused before anything moved.
    #[error("secure buffer #{buffer} cannot be used in the clear in {space}: that space is not trusted (RuntimeBuilder::trust), and {why} needs its plaintext there; run it on a device whose memory is trusted, or mark {space} trusted")]
    Untrusted {
        /// The buffer's id.
        buffer: u64,
        /// The untrusted space.
        space: SpaceName,
        /// What asked: `"kernel zip, argument x"`, `"host view"`.
        why: String,
    },

    /// A secure key could not be made or used: a key of the wrong length, a run whose length
    /// does not match its seals, or a key whose nonces are used up.
    #[error("secure key: {0}")]
    SecureKey(String),

    /// No implementation of the API for the kind of device asked for.
    #[error("{api} has no implementation for {device} (implemented for: {available})")]
    NoImplementation {
        /// API name.
        api: &'static str,
        /// Where it was asked to run.
        device: Target,
        /// Device kinds that implement it.
        available: String,
    },

    /// A stats lookup named a space or an API that does not exist.
    #[error("no {what} named `{name}` in this runtime (it has: {known}){hint}")]
    UnknownName {
        /// What was looked up: "space" or "API".
        what: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
        /// How to find the right name, or empty.
        hint: &'static str,
    },

    /// A pool set (`RuntimeBuilder::pool`) for a memory space the runtime does not have.
    #[error("invalid runtime configuration: no memory space named {name} to size the pool of; this runtime has {known}")]
    NoSuchSpace {
        /// The name given.
        name: String,
        /// The spaces the runtime has, comma-separated.
        known: String,
    },

    /// A runtime configuration that cannot work.
    #[error("invalid runtime configuration: {0}")]
    Config(String),

    /// The `rimms memstat` page could not be created or its publisher started.
    #[error("cannot publish the stats page {}: {source}", path.display())]
    StatsPage {
        /// The page's path.
        path: std::path::PathBuf,
        /// What the OS said.
        source: io::Error,
    },

    /// A GPU was required but none is usable: no driver library, no device, or a library the
    /// backend needs (NVRTC, cuFFT) is missing. The builder's answer to `.gpu(n)`, not a
    /// backend's fault: nothing was opened.
    #[error("no GPU: {why}")]
    NoGpu {
        /// Why there is none, as the probe found it.
        why: String,
    },

    /// A device's backend failed outside any call: opening, mapping or resetting its hardware
    /// (an FPGA board's u-dma-buf or register page, a CUDA context or its memory). The message
    /// is the backend's own, which names the part that failed (`udmabuf0: …`, `CUDA … failed:
    /// …`).
    #[error("{source}")]
    Backend {
        /// What the backend reported.
        source: BackendError,
    },
}

/// What the runtime was doing when a backend failed: what [`Error::from_backend`] adds to the
/// backend's own report.
#[derive(Clone, Debug)]
pub(crate) enum During {
    /// Running (or checking, or completing) a call of `api` on `device`.
    Kernel {
        /// API name.
        api: &'static str,
        /// The device it ran on.
        device: Device,
    },
    /// Copying `bytes` between two spaces.
    Transfer {
        /// Source space.
        from: SpaceName,
        /// Destination space.
        to: SpaceName,
        /// Bytes in the copy.
        bytes: usize,
    },
    /// Zeroing `bytes` in a space.
    Fill {
        /// The space.
        space: SpaceName,
        /// Bytes to zero.
        bytes: usize,
    },
    /// Opening, mapping or resetting a device, outside any call.
    // Only the CUDA and FPGA backends open hardware.
    #[cfg_attr(not(any(feature = "cuda", feature = "fpga")), allow(dead_code))]
    Setup,
}

impl Error {
    /// The crate's error for a backend's, the one place where one becomes the other. In a call,
    /// a request the device cannot take ([`BackendError::Unsupported`]) is
    /// [`Error::Unsupported`] naming the call's API and device; every other report is kept as
    /// the `source` of the error that says what was being done.
    pub(crate) fn from_backend(during: During, source: BackendError) -> Error {
        match (during, source) {
            (During::Kernel { api, device }, BackendError::Unsupported { why, .. }) => {
                Error::Unsupported {
                    api,
                    device,
                    why: why.into(),
                }
            }
            (During::Kernel { api, device }, source) => Error::Kernel {
                api,
                device,
                source,
            },
            (During::Transfer { from, to, bytes }, source) => Error::Transfer {
                from,
                to,
                bytes,
                source,
            },
            (During::Fill { space, bytes }, source) => Error::Fill {
                space,
                bytes,
                source,
            },
            (During::Setup, source) => Error::Backend { source },
        }
    }
}

/// A list shown comma-separated in a message.
struct Listed<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Listed<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            item.fmt(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{During, Error};
    use crate::hal::{BackendError, Device};

    fn in_call(source: BackendError) -> Error {
        Error::from_backend(
            During::Kernel {
                api: "fft",
                device: Device::Fpga(0),
            },
            source,
        )
    }

    /// A backend's "not here" reaches the user as the one `Unsupported`, naming the call's API
    /// and device and keeping the backend's reason; anything else stays the kernel's source.
    #[test]
    fn a_backends_unsupported_is_the_users_unsupported_and_the_rest_a_source() {
        match in_call(BackendError::unsupported("fft", "fft0: not 4096 points")) {
            Error::Unsupported { api, device, why } => {
                assert_eq!((api, device), ("fft", Device::Fpga(0)));
                assert_eq!(why, "fft0: not 4096 points");
            }
            other => panic!("{other:?}"),
        }
        let err = in_call(BackendError::Invalid("bad".into()));
        assert!(
            matches!(
                err,
                Error::Kernel {
                    api: "fft",
                    device: Device::Fpga(0),
                    source: BackendError::Invalid(_),
                }
            ),
            "{err:?}"
        );
        // Outside a call the backend's message is shown as it is.
        let err = Error::from_backend(
            During::Setup,
            BackendError::Invalid("udmabuf0: gone".into()),
        );
        assert_eq!(err.to_string(), "udmabuf0: gone");
    }
}
