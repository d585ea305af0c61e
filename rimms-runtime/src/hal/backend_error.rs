//! What a backend reports when it fails, as data: [`BackendError`], returned by every backend
//! (`Backend`, [`crate::space::DeviceMemory`], the CUDA and FPGA drivers) and turned into the
//! crate's [`crate::Error`] in one place, `Error::from_backend`; and [`FpgaFault`], the
//! FPGA driver stack's faults, which [`BackendError::Fpga`] carries with the part that failed.
//! A request a device cannot take is [`BackendError::Unsupported`] on every backend, the FPGA's
//! included, and reaches the user as [`crate::Error::Unsupported`].
//!
//! Part of the vocabulary (`hal`): it imports nothing of the crate, so the crate's error can
//! carry backend faults without importing a backend, and the FPGA faults exist in builds
//! without the `fpga` feature.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Why a backend's copy, fill, kernel completion or check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// A range of device addresses outside the memory it was meant for.
    #[error("{len} bytes at device address {addr:#x} lie outside {memory}")]
    OutOfRange {
        /// First device address of the range.
        addr: usize,
        /// Bytes in the range.
        len: usize,
        /// The memory, as a user would name it (`sim0's memory (0x1000, 4096 bytes)`).
        memory: String,
    },

    /// A fault injected on purpose (a sim device's `fail_kernels` or `fail_copies`).
    #[error("injected {0} fault")]
    InjectedFault(&'static str),

    /// The device's driver reported an error of its own type; it is the source.
    #[error(transparent)]
    Driver(Box<dyn std::error::Error + Send + Sync>),

    /// A CUDA driver, NVRTC or cuFFT call failed.
    #[error("CUDA {what} failed: {why}")]
    Cuda {
        /// The call and what it was for (with the device and sizes).
        what: Box<str>,
        /// The error CUDA reported. (Boxed strings keep every `Result<_, Error>` small.)
        why: Box<str>,
    },

    /// An FPGA accelerator, its AXI DMA or its u-dma-buf failed.
    #[error("{device}: {fault}")]
    Fpga {
        /// The accelerator instance or u-dma-buf device (`fft0`, `udmabuf0`).
        device: String,
        /// What went wrong (boxed, so that every `Result<_, Error>` stays small).
        #[source]
        fault: Box<FpgaFault>,
    },

    /// A request the device cannot take (an FFT longer than its core's, an operation its core
    /// lacks, an API sent to the other kind of core), refused before anything moved; another
    /// device may well do it. The one way a backend says "not here": the crate reports it as
    /// [`crate::Error::Unsupported`], naming the API and the device.
    #[error("{api} is not supported: {why}")]
    Unsupported {
        /// The API (or the core's operation) asked for.
        api: &'static str,
        /// Why not, naming the part that refused where the device has several (an FPGA core,
        /// `fft0: …`), and what it has instead. (Boxed, so that every `Result<_, Error>`
        /// stays small.)
        why: Box<str>,
    },

    /// A call the backend cannot carry out as given: an argument outside the memory its
    /// driver reaches, a device handle of another kind, a buffer with no block to copy from.
    #[error("{0}")]
    Invalid(String),
}

impl BackendError {
    /// A driver's error, kept as the source.
    pub fn driver(error: impl std::error::Error + Send + Sync + 'static) -> BackendError {
        BackendError::Driver(Box::new(error))
    }

    /// A request the device cannot take: `api` asked for, refused because of `why`.
    pub fn unsupported(api: &'static str, why: impl Into<String>) -> BackendError {
        BackendError::Unsupported {
            api,
            why: why.into().into_boxed_str(),
        }
    }

    /// The FPGA part that failed and its fault, where this is an FPGA fault
    /// ([`BackendError::Fpga`]): what a caller matches on to tell one fault from another.
    pub fn fpga_fault(&self) -> Option<(&str, &FpgaFault)> {
        match self {
            BackendError::Fpga { device, fault } => Some((device, fault)),
            _ => None,
        }
    }
}

/// One FPGA fault. Carried by [`BackendError::Fpga`] together with the part it happened on.
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

/// One of the two DMA channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Memory to stream: reads the core's input.
    Mm2s,
    /// Stream to memory: writes the core's output.
    S2mm,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Channel::Mm2s => "MM2S",
            Channel::S2mm => "S2MM",
        })
    }
}

/// The three DMASR error bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaErrorBit {
    /// Bit 4, DMAIntErr: e.g. a zero length or a packet longer than the S2MM buffer.
    Internal,
    /// Bit 5, DMASlvErr: the memory answered a transfer with SLVERR.
    Slave,
    /// Bit 6, DMADecErr: the address decodes to nothing.
    Decode,
}

impl DmaErrorBit {
    /// The bit number in DMASR.
    pub fn bit(self) -> u32 {
        match self {
            DmaErrorBit::Internal => 4,
            DmaErrorBit::Slave => 5,
            DmaErrorBit::Decode => 6,
        }
    }
    /// The bit as a mask.
    pub fn mask(self) -> u32 {
        1 << self.bit()
    }
    /// The lowest error bit set in a status word, if any.
    pub fn from_status(status: u32) -> Option<Self> {
        [Self::Internal, Self::Slave, Self::Decode]
            .into_iter()
            .find(|b| status & b.mask() != 0)
    }
}

impl fmt::Display for DmaErrorBit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DmaErrorBit::Internal => "an internal error (DMAIntErr)",
            DmaErrorBit::Slave => "a slave error (DMASlvErr)",
            DmaErrorBit::Decode => "a decode error (DMADecErr)",
        })
    }
}
