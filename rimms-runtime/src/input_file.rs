//! Opening a file a user names — a board file, a stats page, an application's input — so that
//! a wrong path is an error, never a hang or an exhausted machine.
//!
//! Why this is not `std::fs::read`: opening a FIFO for reading blocks until a writer comes,
//! which may be never, and reading `/dev/zero` or a runaway file never ends, so a mistyped
//! path, or a FIFO another local user planted in a shared folder (the stats page's temp
//! dir), would hang a command with no message. Checking the path's metadata before opening
//! does not help: the path can be swapped for a FIFO between the check and the open. So
//! [`open_regular`] opens with
//! `O_NONBLOCK` (a FIFO's open then returns at once; a regular file's reads ignore the flag),
//! asks the opened handle what it is (`fstat`), and refuses anything but a regular file.
//! [`read_capped`] then reads at most a limit the caller sets per kind of file, through
//! `Read::take`, so that a file that grows or reports a wrong size cannot run past it either.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a file a user named cannot be taken as input. Every message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputFileError {
    /// The file cannot be opened or read (missing, no permission, an I/O error).
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// Not a regular file: a FIFO, a device, a socket or a folder, none of which can be read
    /// as a file's contents (a FIFO blocks, a device may never end).
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead, with its article: "a FIFO", "a character device", …
        kind: &'static str,
    },
    /// Longer than a file of its kind may be.
    #[error("{} is larger than the {} a {what} may be", path.display(), Size(*limit))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The kind of file, as the limit's owner calls it: "board file", "CEDR input file".
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
}

impl InputFileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            InputFileError::Io { path, .. }
            | InputFileError::NotRegular { path, .. }
            | InputFileError::TooLarge { path, .. } => path,
        }
    }

    /// Whether the file does not exist, for callers that say more about a missing file.
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputFileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// A byte count as a limit is stated: whole MiB where it is some, else bytes.
struct Size(u64);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: u64 = 1 << 20;
        if self.0 >= MIB && self.0 % MIB == 0 {
            write!(f, "{} MiB", self.0 / MIB)
        } else {
            write!(f, "{} bytes", self.0)
        }
    }
}

/// Opens `path` for reading if it is a regular file, without blocking whatever it is.
pub fn open_regular(path: &Path) -> Result<File, InputFileError> {
    open_checked(path).map(|(file, _)| file)
}

/// Reads the whole of the regular file `path`, refusing one longer than `limit` bytes (a
/// `what`, as the message calls it).
pub fn read_capped(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, InputFileError> {
    let too_large = || InputFileError::TooLarge {
        path: path.to_path_buf(),
        what,
        limit,
    };
    let (file, len) = open_checked(path)?;
    // Said before reading anything where the size shows it already.
    if len > limit {
        return Err(too_large());
    }
    // At most `limit` (checked above), and a length the file has.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // One byte past the limit tells a file that grew (or misreports its size, as /proc's
    // do) from one that is exactly the limit long.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| InputFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_capped`] of a text file: contents that are not UTF-8 are an [`InputFileError::Io`]
/// of kind `InvalidData`, as `std::fs::read_to_string` reports them.
pub fn read_text_capped(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, InputFileError> {
    String::from_utf8(read_capped(path, limit, what)?).map_err(|_| InputFileError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, "the file is not UTF-8 text"),
    })
}

/// The opened regular file and its length.
fn open_checked(path: &Path) -> Result<(File, u64), InputFileError> {
    let io_err = |source| InputFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    // O_NOCTTY: a terminal named as a file must not become this process's controlling one.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(path).map_err(io_err)?;
    // The handle's own type, not the path's: the path may name something else by now.
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(InputFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind(&meta.file_type()),
        });
    }
    Ok((file, meta.len()))
}

/// What a file that is not a regular one is, for the message.
fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a folder"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_its_limit_reads_whole_and_one_past_it_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").expect("write");
        assert_eq!(
            read_capped(&path, 10, "test file").expect("read"),
            b"0123456789"
        );
        let err = read_capped(&path, 9, "test file").expect_err("over");
        assert_eq!(
            err.to_string(),
            format!(
                "{} is larger than the 9 bytes a test file may be",
                path.display()
            )
        );
        let err = read_capped(&path, 0, "test file").expect_err("over");
        assert!(
            matches!(err, InputFileError::TooLarge { limit: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_missing_file_a_folder_and_bad_utf8_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = dir.path().join("missing");
        let err = read_capped(&missing, 1 << 20, "test file").expect_err("missing");
        assert!(err.is_not_found() && err.path() == missing, "{err}");
        assert!(err
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())));
        let err = read_capped(dir.path(), 1 << 20, "test file").expect_err("folder");
        assert_eq!(
            err.to_string(),
            format!("{} is a folder, not a regular file", dir.path().display())
        );
        let latin1 = dir.path().join("latin1");
        std::fs::write(&latin1, b"caf\xe9").expect("write");
        let err = read_text_capped(&latin1, 1 << 20, "test file").expect_err("not UTF-8");
        assert!(
            matches!(&err, InputFileError::Io { source, .. } if source.kind() == io::ErrorKind::InvalidData),
            "{err}"
        );
    }

    #[test]
    fn a_limit_in_whole_mib_is_stated_in_mib() {
        assert_eq!(Size(4 << 20).to_string(), "4 MiB");
        assert_eq!(Size((4 << 20) + 1).to_string(), "4194305 bytes");
        assert_eq!(Size(512).to_string(), "512 bytes");
    }
}
