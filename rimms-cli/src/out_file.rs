//! Files the user names for a command's results (`run --out`, `bench --plot`): written whole
//! or not at all.
//!
//! A command that fails, or is interrupted, must leave the user's file as it was. So the path
//! is only checked before the work ([`OutFile::check`]: a file could be created beside it),
//! nothing is created or truncated while the work runs, and the result goes to a new file in
//! the same folder that is renamed over the path once it is complete ([`OutFile::write`]).
//! The rename replaces the old file in one step on the same file system; the only file
//! `rimms` ever removes is that temporary one, which it created itself.
//!
//! A path that names something other than a regular file (a device node such as `/dev/null`,
//! a FIFO, a folder) is refused: a rename would replace the node itself.
//!
//! The folder is opened at the check and the file is written, and renamed, in that open
//! folder (`openat`, `renameat`): a folder on the path moved away or replaced by a symbolic
//! link while the command runs cannot send the result into another folder, over a file the
//! check never saw. Before the rename the file is looked at again, and one that is no longer
//! the file checked (or is there now where there was none) is refused and kept.

use nix::fcntl::{openat, renameat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A checked path for a result file.
#[derive(Debug)]
pub struct OutFile {
    /// The option that named it, for messages ("--out").
    flag: &'static str,
    /// The path as the user gave it, for messages.
    given: PathBuf,
    /// The file the rename replaces: the path with symbolic links followed, so that a link
    /// keeps pointing where it pointed and the file it points at gets the new contents.
    target: PathBuf,
    /// The target's folder, opened at the check: the file is written and renamed there,
    /// whatever its path names by then.
    folder: File,
    /// The target's name in `folder`.
    name: OsString,
    /// The file that was there at the check, or none: its device and inode, and the file
    /// held open (`O_PATH`) so that its inode cannot be freed and given to a file put in its
    /// place.
    checked: Option<((u64, u64), File)>,
}

/// A temporary file being written in the target's folder; removed when dropped unless it
/// was renamed into place.
struct Temporary<'a> {
    folder: &'a File,
    name: OsString,
    kept: bool,
}

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        if !self.kept {
            // Ours, created with `O_EXCL`; if it is already gone there is nothing to undo.
            let _ = unlinkat(
                self.folder,
                self.name.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// The file `name` in `folder`, not following a link; `None` where there is nothing.
fn look_at(folder: &File, name: &OsStr) -> io::Result<Option<FileStat>> {
    match fstatat(folder, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl OutFile {
    /// Checks, before any work, that `path` can take a result: a regular file or nothing
    /// there yet (a link to either is followed), in a folder where a file can be created.
    /// Creates nothing that outlives the check.
    pub fn check(flag: &'static str, path: &Path) -> Result<OutFile, String> {
        let fail = |why: String| format!("{flag} {}: {why}", path.display());
        let target = match fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                // The rename would replace a file its owner made read-only, or one this user
                // may not write, as a shell's `>` or `cp` would not: refused, so that a file
                // kept from changes stays as it is.
                if meta.permissions().readonly() {
                    return Err(fail(
                        "is write-protected (no write permission); make it writable or name \
                         another file"
                            .to_string(),
                    ));
                }
                if let Err(e) = OpenOptions::new().write(true).open(path) {
                    return Err(fail(format!("cannot write the file: {e}")));
                }
                // `rimms … --out log.txt >> log.txt` or `--out /dev/stdout`: the rename would
                // put the result in place of the file standard output writes to, losing what
                // it held and what the command prints.
                for (stream, fd) in [
                    ("standard output", io::stdout().as_fd().try_clone_to_owned()),
                    ("standard error", io::stderr().as_fd().try_clone_to_owned()),
                ] {
                    let stream_meta = fd.and_then(|fd| File::from(fd).metadata());
                    if stream_meta.is_ok_and(|s| same_file(&s, &meta)) {
                        return Err(fail(format!(
                            "is the file {stream} goes to; name another file"
                        )));
                    }
                }
                fs::canonicalize(path).map_err(|e| fail(e.to_string()))?
            }
            Ok(meta) => {
                return Err(fail(format!(
                    "is {}, not a regular file; {flag} writes a file, replacing it only once \
                     the result is complete, so it takes a file's name",
                    kind(&meta)
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(path).is_ok() {
                    return Err(fail(
                        "is a symbolic link to nothing; name the file itself".to_string(),
                    ));
                }
                path.to_path_buf()
            }
            Err(e) => return Err(fail(format!("cannot use the file: {e}"))),
        };
        let (Some(name), folder) = (target.file_name(), parent(&target)) else {
            return Err(fail("names no file".to_string()));
        };
        // `O_PATH`: a folder one may create files in but not list is still a folder to
        // write in.
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let folder = nix::fcntl::open(folder, flags, Mode::empty())
            .map(File::from)
            .map_err(|e| {
                fail(format!(
                    "cannot create the file: {e} (opening its folder {})",
                    folder.display()
                ))
            })?;
        let name = name.to_os_string();
        let checked = match look_at(&folder, &name) {
            Ok(None) => None,
            Ok(Some(_)) => {
                let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                let held = openat(&folder, name.as_os_str(), flags, Mode::empty())
                    .map(File::from)
                    .map_err(|e| fail(format!("cannot use the file: {e}")))?;
                let meta = held
                    .metadata()
                    .map_err(|e| fail(format!("cannot use the file: {e}")))?;
                use std::os::unix::fs::MetadataExt;
                Some(((meta.dev(), meta.ino()), held))
            }
            Err(e) => return Err(fail(format!("cannot use the file: {e}"))),
        };
        let out = OutFile {
            flag,
            given: path.to_path_buf(),
            target,
            folder,
            name,
            checked,
        };
        // Proves the folder takes a new file, without touching the user's one.
        drop(out.temporary().map_err(|e| out.cannot_create(&e))?);
        Ok(out)
    }

    /// Refuses, before any work, a path that names `input`, a file the command reads, by any
    /// name (`./x`, a symbolic or hard link): the result would replace the input it was
    /// computed from. An input that cannot be looked at is not this file.
    pub fn refuse_input(&self, input: &Path) -> Result<(), String> {
        if is_same_file(&self.target, input) {
            return Err(format!(
                "{} {}: is the input {}; the result would replace it, so name another file",
                self.flag,
                self.given.display(),
                input.display()
            ));
        }
        Ok(())
    }

    /// Writes the file whole: `contents` into a new file beside it, which then replaces it.
    /// On any failure the old file is as it was.
    pub fn write(
        &self,
        contents: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), String> {
        let (file, mut temporary) = self.temporary().map_err(|e| self.cannot_create(&e))?;
        let failed = |e: io::Error| {
            format!(
                "{} {}: cannot write the file: {e}",
                self.flag,
                self.given.display()
            )
        };
        let mut out = BufWriter::new(file);
        contents(&mut out).map_err(failed)?;
        let file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        // The contents reach the disk before the name does, so a crash cannot leave the
        // name on an empty file.
        file.sync_all().map_err(failed)?;
        // What is there now must be what the check saw: a file put in its place since (a
        // write-protected one, a link) was never checked, and is kept.
        let now = look_at(&self.folder, &self.name).map_err(failed)?;
        let same = match (now, &self.checked) {
            (None, None) => true,
            (Some(s), Some((id, _))) => {
                SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
                    && (s.st_dev, s.st_ino) == *id
            }
            _ => false,
        };
        if !same {
            return Err(format!(
                "{} {}: was {} while the command ran; it is kept as it is now, and the result \
                 is not written",
                self.flag,
                self.given.display(),
                if self.checked.is_some() {
                    "replaced or removed"
                } else {
                    "created"
                }
            ));
        }
        // A replaced file keeps its permissions; a new one has the umask's, as any new file.
        if let Some(s) = now {
            file.set_permissions(fs::Permissions::from_mode(s.st_mode & 0o7777))
                .map_err(failed)?;
        }
        renameat(
            &self.folder,
            temporary.name.as_os_str(),
            &self.folder,
            self.name.as_os_str(),
        )
        .map_err(|e| failed(e.into()))?;
        temporary.kept = true;
        Ok(())
    }

    fn cannot_create(&self, e: &io::Error) -> String {
        let mut message = format!(
            "{} {}: cannot create the file: {e}",
            self.flag,
            self.given.display()
        );
        // Writable in place is not enough: the new contents go to a new file beside it.
        if self.target.exists() {
            message += " (it is replaced by a new file written in the same folder, which must \
                        let files be created)";
        }
        message
    }

    /// A new file beside the target, with a name no other file has (`O_EXCL`), in the
    /// folder opened at the check.
    fn temporary(&self) -> io::Result<(File, Temporary<'_>)> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut name = self.name.to_string_lossy().into_owned();
        // A name near the 255-byte limit is valid, but not with the prefix and suffix added
        // here: only the start of it names the temporary file (which needs no more).
        let mut end = name.len().min(120);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        loop {
            let temporary = OsString::from(format!(
                ".{name}.rimms-{}-{}.tmp",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let flags = OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            let mode = Mode::from_bits_truncate(0o666);
            match openat(&self.folder, temporary.as_os_str(), flags, mode) {
                Ok(fd) => {
                    let file = File::from(fd);
                    let temporary = Temporary {
                        folder: &self.folder,
                        name: temporary,
                        kept: false,
                    };
                    return Ok((file, temporary));
                }
                // Left by another process that had this pid: take the next number.
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The folder a file at `path` is in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether two files' metadata are of one file (device and inode), whatever their names.
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Whether the paths `a` and `b` both name one existing file, by any names (`./x`, symbolic
/// or hard links); false where either cannot be looked at.
pub fn is_same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => same_file(&a, &b),
        _ => false,
    }
}

/// Refuses, before any work, a trace file path (`RIMMS_TRACE_FILE`, or the file a bench
/// writes for one cell, `cell`) naming a file a trace may not replace
/// ([`rimms::may_replace_with_a_trace`]): the runtime would refuse it only as it starts, after
/// the bench's earlier cells had run. Nothing there, an empty file, or something other than a
/// regular file (`/dev/null`, a FIFO, which is not opened here), is left to the runtime.
pub fn refuse_foreign_trace(var: &str, path: &Path, cell: Option<&Path>) -> Result<(), String> {
    let file = cell.unwrap_or(path);
    match fs::metadata(file) {
        // An empty file is not opened: one that may only be written stays usable.
        Ok(meta) if meta.is_file() && meta.len() > 0 => {}
        _ => return Ok(()),
    }
    File::open(file)
        .map_err(rimms::NotATrace::Unreadable)
        .and_then(|f| rimms::may_replace_with_a_trace(&f))
        .map_err(|why| match cell {
            Some(cell) => format!(
                "{var}={}: the bench writes the trace of one cell to {}, and {why}; the trace \
                 would replace it, so name another file or remove this one",
                path.display(),
                cell.display()
            ),
            None => format!(
                "{var}={}: {why}; the trace would replace it, so name another file or remove \
                 this one",
                path.display()
            ),
        })
}

/// What a non-regular file is, in words.
fn kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".rimms-"))
            .collect()
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("image.txt");
        fs::write(&path, "precious\n").expect("write");
        let out = OutFile::check("--out", &path).expect("checks");
        assert_eq!(fs::read_to_string(&path).expect("read"), "precious\n");
        let err = out
            .write(|w| {
                w.write_all(b"half")?;
                Err(io::Error::other("disk on fire"))
            })
            .unwrap_err();
        assert!(
            err.contains("--out") && err.contains("disk on fire"),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&path).expect("read"), "precious\n");
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );
        out.write(|w| w.write_all(b"new\n")).expect("writes");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_link_keeps_pointing_at_its_file_which_gets_the_contents() {
        let dir = tempfile::tempdir().expect("dir");
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        fs::write(&real, "old").expect("write");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        OutFile::check("--out", &link)
            .expect("checks")
            .write(|w| w.write_all(b"new"))
            .expect("writes");
        assert!(fs::symlink_metadata(&link).expect("link").is_symlink());
        assert_eq!(fs::read_to_string(&real).expect("read"), "new");
    }

    #[test]
    fn devices_folders_and_dangling_links_are_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).expect("symlink");
        for (path, says) in [
            (Path::new("/dev/null"), "is a device"),
            (dir.path(), "is a folder"),
            (dangling.as_path(), "a symbolic link to nothing"),
        ] {
            let err = OutFile::check("--out", path).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
        assert!(Path::new("/dev/null").exists());
    }

    /// `rimms bench --plot out/chart.svg`, and while it measures, `out` is moved away and a
    /// link to another folder put in its place: the chart used to go through the link, over
    /// that folder's `chart.svg`, a write-protected file the check never saw. It goes to the
    /// folder that was checked.
    #[test]
    fn a_folder_swapped_for_a_link_after_the_check_does_not_carry_the_write() {
        let dir = tempfile::tempdir().expect("dir");
        let (out, moved, other) = (
            dir.path().join("out"),
            dir.path().join("out.old"),
            dir.path().join("other"),
        );
        for folder in [&out, &other] {
            fs::create_dir(folder).expect("dir");
        }
        fs::write(out.join("chart.svg"), "old").expect("write");
        let precious = other.join("chart.svg");
        fs::write(&precious, "precious").expect("write");
        let mut protected = fs::metadata(&precious).expect("meta").permissions();
        protected.set_readonly(true);
        fs::set_permissions(&precious, protected).expect("read-only");

        let file = OutFile::check("--plot", &out.join("chart.svg")).expect("checks");
        fs::rename(&out, &moved).expect("move the folder away");
        std::os::unix::fs::symlink(&other, &out).expect("symlink");
        file.write(|w| w.write_all(b"new")).expect("writes");

        assert_eq!(fs::read_to_string(&precious).expect("read"), "precious");
        assert_eq!(
            fs::read_to_string(moved.join("chart.svg")).expect("read"),
            "new"
        );
        assert!(leftovers(&moved).is_empty() && leftovers(&other).is_empty());
    }

    /// The file itself replaced after the check (by a write-protected one, by a link, or
    /// created where there was none): the rename would put the result over a file the check
    /// never saw. Refused, naming the path, and what is there is kept.
    #[test]
    fn a_file_replaced_after_the_check_is_refused_and_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let elsewhere = dir.path().join("elsewhere.txt");
        fs::write(&elsewhere, "elsewhere").expect("write");
        for (existed, replacement) in [(true, "protected"), (true, "link"), (false, "new")] {
            let path = dir.path().join(format!("{replacement}.txt"));
            if existed {
                fs::write(&path, "checked").expect("write");
            }
            let file = OutFile::check("--out", &path).expect("checks");
            let _ = fs::remove_file(&path);
            match replacement {
                "link" => std::os::unix::fs::symlink(&elsewhere, &path).expect("symlink"),
                _ => {
                    fs::write(&path, "precious").expect("write");
                    let mut protected = fs::metadata(&path).expect("meta").permissions();
                    protected.set_readonly(true);
                    fs::set_permissions(&path, protected).expect("read-only");
                }
            }
            let err = file.write(|w| w.write_all(b"result")).unwrap_err();
            assert!(
                err.contains("--out") && err.contains(&path.display().to_string()),
                "{err}"
            );
            assert_eq!(
                fs::read_to_string(&path).expect("read"),
                if replacement == "link" {
                    "elsewhere"
                } else {
                    "precious"
                },
                "{replacement}"
            );
            if replacement == "link" {
                assert!(fs::symlink_metadata(&path).expect("link").is_symlink());
            }
            assert!(
                leftovers(dir.path()).is_empty(),
                "{:?}",
                leftovers(dir.path())
            );
        }
    }
}
