//! The one error type of the applications: everything `rimms::Error` says, plus what can be
//! wrong with an app's input (a file that cannot be read, a line that does not parse, a
//! parameter out of range). Messages name the file, the line and, where it helps, the column,
//! so they can be shown to a user as they are.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// What went wrong running an application.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// The runtime refused or failed a call.
    #[error(transparent)]
    Runtime(#[from] rimms::Error),

    /// A distributed call failed or was refused, the same on every rank.
    #[error(transparent)]
    Distributed(#[from] rimms_dist::ClusterError),

    /// The FPGA driver failed a call the native mappings make on it directly (a fault of a
    /// core, its DMA or its u-dma-buf), as the driver reports it (`fft0: …`).
    #[error(transparent)]
    Driver(#[from] rimms::BackendError),

    /// The board file `RIMMS_FPGA_BOARD` names cannot be read or does not describe a
    /// usable board.
    #[error("{source}\n  (the FPGA board file {} comes from RIMMS_FPGA_BOARD; fix it, or unset the variable to use the built-in emulator)", .path.display())]
    Board {
        /// The variable's value.
        path: PathBuf,
        /// What the runtime said.
        source: rimms::Error,
    },

    /// An input file that cannot be opened or read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },

    /// An input file that is not a regular file (a FIFO, a device, a folder) or is larger
    /// than an input may be; refused before it is read.
    #[error(transparent)]
    Input(rimms::drivers::input_file::InputFileError),

    /// An output file that cannot be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },

    /// An input file whose contents do not fit the format.
    #[error("{place}: {what}")]
    Malformed {
        /// File, and line and column where known.
        place: Place,
        /// What is wrong there.
        what: String,
    },

    /// A parameter out of its range (a delay longer than the signal, zero frames).
    #[error("invalid parameter: {0}")]
    Param(String),

    /// An option this app or mapping does not take.
    #[error("{0}")]
    Unsupported(String),

    /// Stopped between frames by Ctrl-C or SIGTERM ([`crate::interrupt`]).
    #[error("interrupted")]
    Interrupted,
}

/// Where in an input file something is wrong: `file`, `file:line` or `file:line:column`
/// (both 1-based, the column counting characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub path: PathBuf,
    /// The line, if the problem is on one.
    pub line: Option<usize>,
    /// The column, if the problem is at one spot of the line.
    pub column: Option<usize>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// A file that cannot be opened or read stays an [`AppError::Read`], as it always was; one
/// refused for what it is becomes an [`AppError::Input`].
impl From<rimms::drivers::input_file::InputFileError> for AppError {
    fn from(e: rimms::drivers::input_file::InputFileError) -> Self {
        use rimms::drivers::input_file::InputFileError;
        match e {
            InputFileError::Io { path, source } => AppError::Read { path, source },
            other => AppError::Input(other),
        }
    }
}
