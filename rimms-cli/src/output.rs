//! How the command writes its results and its errors.
//!
//! `println!` panics when standard output cannot be written, which a user meets as a crash
//! for `rimms run … | head` or a full disk. Here every write returns its error instead: a
//! closed pipe ([`Failure::Quiet`]) ends the command without a word and with success, as
//! well-behaved Unix tools do (the reader has all it wanted), and any other failure is an
//! error naming standard output and the reason.

use std::fmt;
use std::io::{self, Write};

/// Why a command stopped before it was done.
#[derive(Debug)]
pub enum Failure {
    /// Standard output was closed by its reader: nothing more to say, nothing went wrong.
    Quiet,
    /// An error for the user, printed after the command's name: a run that failed (exit
    /// status 1).
    Error(String),
    /// A command line asking for something the command does not do (an option an app does
    /// not take, a parameter out of range): exit status 2, as for clap's own usage errors.
    Usage(String),
}

impl Failure {
    /// The exit status: 2 for a usage error, 1 for a failed run, 0 when the reader of
    /// standard output just stopped reading.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Quiet => 0,
            Failure::Error(_) => 1,
            Failure::Usage(_) => 2,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Quiet => f.write_str("standard output was closed"),
            Failure::Error(message) | Failure::Usage(message) => f.write_str(message),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Error(message)
    }
}

impl From<io::Error> for Failure {
    /// A failed write to standard output.
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::Quiet
        } else {
            Failure::Error(format!("cannot write to standard output: {e}"))
        }
    }
}

/// Writes `text` to standard output and flushes it, so that a failure shows here and not
/// later at exit (where Rust would drop it silently).
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes "rimms COMMAND: MESSAGE" to standard error; if even that fails there is no one
/// left to tell.
pub fn complain(command: &str, message: &dyn fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "rimms {command}: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_quiet_and_other_write_errors_name_standard_output() {
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(matches!(Failure::from(pipe), Failure::Quiet));
        let full = io::Error::other("No space left on device");
        let Failure::Error(message) = Failure::from(full) else {
            panic!("a full disk is an error");
        };
        assert!(
            message.starts_with("cannot write to standard output: "),
            "{message}"
        );
    }
}
