//! What can go wrong on the FPGA path, as data.
//!
//! The runtime needs to tell a refused request (nothing happened, fall back or report) from a
//! device fault (a DMA error bit, a transfer that never ended, a short packet), and a test needs
//! to assert which one it got, so faults are an enum (defined with the backends' errors in the vocabulary, [`crate::backend::error`])
//! carried by [`crate::Error::Fpga`] rather than
//! a string.

use std::path::PathBuf;

use crate::hal::Error;
pub use crate::hal::FpgaFault;

impl FpgaFault {
    /// Wraps the fault into the crate's error for `device`.
    pub fn on(self, device: &str) -> Error {
        Error::Fpga {
            device: device.to_owned(),
            fault: self,
        }
    }
}

/// Shorthand for a [`FpgaFault::File`] error.
pub(crate) fn file_error(device: &str, path: impl Into<PathBuf>, what: impl Into<String>) -> Error {
    FpgaFault::File {
        path: path.into(),
        what: what.into(),
    }
    .on(device)
}

/// Shorthand for a [`FpgaFault::Rejected`] error.
pub(crate) fn rejected(device: &str, what: impl Into<String>) -> Error {
    FpgaFault::Rejected(what.into()).on(device)
}
