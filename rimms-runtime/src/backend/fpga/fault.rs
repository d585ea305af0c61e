//! What can go wrong on the FPGA path, as data.
//!
//! The runtime needs to tell a refused request (nothing happened, fall back or report) from a
//! device fault (a DMA error bit, a transfer that never ended, a short packet), and a test needs
//! to assert which one it got, so the driver's calls return a [`BackendError`], as every
//! backend's do: a fault is [`BackendError::Fpga`] carrying the part that failed (`fft0`,
//! `udmabuf0`) and an [`FpgaFault`] (defined with the backends' errors in the vocabulary,
//! `hal`) rather than a string; a size or operation a core does not have is
//! [`BackendError::Unsupported`], its reason starting with the part's name. The runtime turns
//! either into its own error in one place (`Error::from_backend`).

use std::fmt::Display;
use std::path::PathBuf;

use crate::hal::BackendError;
pub use crate::hal::FpgaFault;

/// Result of the FPGA driver's calls: a [`BackendError`] when they fail.
pub type Result<T, E = BackendError> = std::result::Result<T, E>;

impl FpgaFault {
    /// The fault as the error of the part `device` (as the board names it).
    pub fn on(self, device: &str) -> BackendError {
        BackendError::Fpga {
            device: device.to_owned(),
            fault: Box::new(self),
        }
    }
}

/// A size or operation the core of `device` does not have, asked for by `api`: nothing was
/// started, and another device may well do it. The reason names the part (`fft0: …`).
pub(crate) fn unsupported(device: &str, api: &'static str, why: impl Display) -> BackendError {
    BackendError::unsupported(api, format!("{device}: {why}"))
}

/// Shorthand for a [`FpgaFault::File`] error.
pub(crate) fn file_error(
    device: &str,
    path: impl Into<PathBuf>,
    what: impl Into<String>,
) -> BackendError {
    FpgaFault::File {
        path: path.into(),
        what: what.into(),
    }
    .on(device)
}

/// Shorthand for a [`FpgaFault::Rejected`] error.
pub(crate) fn rejected(device: &str, what: impl Into<String>) -> BackendError {
    FpgaFault::Rejected(what.into()).on(device)
}
