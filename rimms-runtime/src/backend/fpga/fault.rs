//! What can go wrong on the FPGA path, as data.
//!
//! The runtime needs to tell a refused request (nothing happened, fall back or report) from a
//! device fault (a DMA error bit, a transfer that never ended, a short packet), and a test needs
//! to assert which one it got, so faults are an enum carried by [`crate::Error::Fpga`] rather than
//! a string.

use std::path::PathBuf;
use std::time::Duration;

use super::axi_dma::{Channel, DmaErrorBit};
use crate::Error;

/// One FPGA fault. Carried by [`crate::Error::Fpga`] together with the device it happened on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FpgaFault {
    /// A file the driver needs (a device node, a sysfs attribute, a register page) is missing,
    /// unreadable, unparsable or of the wrong size.
    #[error("{}: {what}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        what: String,
    },

    /// The AXI DMA raised an error bit. The channel halts and stays halted until a reset, which
    /// the driver issues before its next transfer.
    #[error("AXI DMA {channel} channel reported {bit} (DMASR bit {}, status {status:#010x})", bit.bit())]
    DmaError {
        /// The channel whose status register had the bit set.
        channel: Channel,
        /// Which error.
        bit: DmaErrorBit,
        /// The whole status register as read.
        status: u32,
    },

    /// A channel halted during a transfer without an error bit (it was stopped or reset by
    /// someone else).
    #[error("AXI DMA {channel} channel halted during a transfer (status {status:#010x})")]
    Halted {
        /// The channel.
        channel: Channel,
        /// Its status register as read.
        status: u32,
    },

    /// The S2MM channel completed with fewer bytes than the core should have produced.
    #[error("short transfer: S2MM received {received} bytes, expected {expected}")]
    ShortTransfer {
        /// Bytes the driver programmed and expected.
        expected: u32,
        /// Bytes the S2MM LENGTH register reported.
        received: u32,
    },

    /// A bounded wait ran out.
    #[error("timed out after {} ms waiting for {what}", waited.as_millis())]
    Timeout {
        /// What the driver was waiting for.
        what: String,
        /// How long it waited.
        waited: Duration,
    },

    /// A request refused before any register was written: a misaligned or out-of-range address,
    /// a zero or over-long length.
    #[error("request refused before starting: {0}")]
    Rejected(String),

    /// A register offset outside its page or not 4-byte aligned (a driver bug or a page too
    /// small for the block it was configured for).
    #[error("register offset {offset:#x} is {why} (page of {len} bytes)")]
    Register {
        /// The offset asked for.
        offset: usize,
        /// The page length.
        len: usize,
        /// Out of bounds or misaligned.
        why: &'static str,
    },
}

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
