//! `RIMMS_TRACE_FILE=trace.json`: a Chrome / Perfetto timeline of kernels and transfers.
//!
//! Two properties decide the file's shape:
//!
//! - **Slices on one track never overlap.** Trace viewers draw a track as a stack of nested
//!   slices; two that overlap without nesting are drawn wrongly. With scoped submission a
//!   device runs several calls at once (one per worker) and a simulated link has several
//!   copies in flight, so a track per device is not enough. Each device and each link is a
//!   *process* in the file, and each of its tracks (a *thread*) holds slices that start after
//!   everything already on it has ended: kernels go to the track of the thread that ran them,
//!   and an event that would overlap its track opens another one beside it ("worker 2 (2)").
//! - **The file is valid JSON at every moment.** It is created when the runtime is built (so
//!   an unwritable path fails the build, not silently the end of the run), and every event is
//!   written at once, overwriting the closing `]}` and writing it again after the event. A run
//!   stopped by Ctrl-C or a crash leaves a complete, loadable file of what it did.
//! - **One file per runtime.** The first runtime of a process to trace to `trace.json` writes
//!   that file; later ones (alive at once or not) write `trace.2.json`, `trace.3.json`, … and
//!   log which, so a program with several runtimes keeps every one's trace instead of the
//!   last one built replacing the others'.
//!
//! Times are written from whole nanoseconds as exact decimal microseconds, so a slice's end
//! (`ts + dur`) is exactly what was measured and back-to-back slices do not overlap by a
//! rounding error. Recording takes a mutex and one write per event, and only when the file
//! was asked for; without it the runtime carries `None` and pays one branch per kernel and
//! per copy.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable that names the trace file.
pub const TRACE_FILE_ENV: &str = "RIMMS_TRACE_FILE";

/// What every trace file starts with; events go between it and `TAIL`. Public so that a
/// program (the CLI) can tell a trace it may replace from a file of the user's.
pub const TRACE_FILE_HEAD: &str = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
const TAIL: &str = "\n]}\n";

/// A device or a link: a process of the trace, with its tracks.
struct Group {
    pid: usize,
    /// Per thread of the program, the tracks it has here: (tid, end of the last slice, ns).
    tracks: HashMap<u64, Vec<(usize, u64)>>,
}

struct State {
    file: File,
    /// Where the next event goes: the offset of `TAIL`.
    end: u64,
    /// Whether an event was written (the next one needs a comma).
    any: bool,
    groups: HashMap<String, Group>,
    next_tid: usize,
    /// Set after a failed write: the run goes on, the trace stops (said once).
    broken: bool,
}

pub(crate) struct Timeline {
    path: PathBuf,
    origin: Instant,
    state: Mutex<State>,
}

/// Which of the program's threads is running: a small number, the same for the thread's life.
fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: Cell<u64> = const { Cell::new(0) };
    }
    NUMBER.with(|n| {
        if n.get() == 0 {
            n.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        n.get()
    })
}

/// The trace file of the `n`th runtime to ask for `path`: `path` for the first,
/// `dir/trace.n.json` for later ones.
fn numbered(path: &Path, n: usize) -> PathBuf {
    if n <= 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// Why a file may not be replaced by a trace: it may hold something of the user's.
#[derive(Debug, thiserror::Error)]
pub enum NotATrace {
    /// It could not be read to tell.
    #[error("it cannot be read to tell whether it is a RIMMS trace: {0}")]
    Unreadable(io::Error),
    /// It holds bytes that do not begin as a trace does.
    #[error(
        "it holds something other than a RIMMS trace (it does not start with {TRACE_FILE_HEAD:?})"
    )]
    Foreign,
}

/// Whether a trace may replace what the open `file` holds: nothing (an empty file), a trace of
/// an earlier run (it starts with [`TRACE_FILE_HEAD`]), or no regular file's bytes at all
/// (`/dev/null`, a FIFO). The runtime asks this before it empties its trace file; a program
/// that writes traces later (the CLI's bench) asks it before any work, so that a refusal
/// comes before the run rather than after it.
pub fn may_replace_with_a_trace(file: &File) -> Result<(), NotATrace> {
    use std::os::unix::fs::FileExt as _;
    let meta = file.metadata().map_err(NotATrace::Unreadable)?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let mut head = [0u8; TRACE_FILE_HEAD.len()];
    match file.read_exact_at(&mut head, 0) {
        Ok(()) if head == *TRACE_FILE_HEAD.as_bytes() => Ok(()),
        Ok(()) => Err(NotATrace::Foreign),
        // Shorter than the head, and not empty: not a trace.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(NotATrace::Foreign),
        Err(e) => Err(NotATrace::Unreadable(e)),
    }
}

/// Opens `path` for writing an empty trace, creating it, but never destroys a file of the
/// user's ([`may_replace_with_a_trace`]): one it may not replace is refused, with an error
/// naming it, and left as it was.
fn open_replacing_only_a_trace(path: &Path) -> io::Result<File> {
    // No truncation at open: what is there is looked at first. Opened for writing only, as a
    // trace file always was (a FIFO's reader is waited for); read through a second handle.
    let file = File::options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        // Nothing to look at: a file that may only be written stays usable when empty.
        return Ok(file);
    }
    File::open(path)
        .map_err(NotATrace::Unreadable)
        .and_then(|reader| may_replace_with_a_trace(&reader))
        .map_err(|why| {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} holds a file that may not be replaced ({why}); it is kept: name \
                     another file, or remove it",
                    path.display()
                ),
            )
        })?;
    file.set_len(0)?;
    Ok(file)
}

/// "12.345" µs from 12345 ns, exactly.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl Timeline {
    /// Creates the file at `path` holding an empty trace, or, if another runtime of this
    /// process traced to `path` already, at its next free numbered variant ([`numbered`]).
    /// A trace there (of an earlier run) is replaced, as is an empty file; a file that is not
    /// a trace is refused and kept ([`open_replacing_only_a_trace`]).
    pub(crate) fn create(path: PathBuf) -> io::Result<Timeline> {
        static CLAIMED: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());
        // A poisoned map is still a map: it only counts paths.
        let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
        let users = claimed.get(&path).copied().unwrap_or(0);
        let file_path = numbered(&path, users + 1);
        let mut file = open_replacing_only_a_trace(&file_path)?;
        claimed.insert(path, users + 1);
        drop(claimed);
        if users > 0 {
            tracing::info!(path = %file_path.display(), "another runtime of this process traces to the same path: this one's trace goes here");
        }
        let path = file_path;
        file.write_all(TRACE_FILE_HEAD.as_bytes())?;
        file.write_all(TAIL.as_bytes())?;
        Ok(Timeline {
            state: Mutex::new(State {
                file,
                end: TRACE_FILE_HEAD.len() as u64,
                any: false,
                groups: HashMap::new(),
                next_tid: 1,
                broken: false,
            }),
            path,
            origin: Instant::now(),
        })
    }

    /// Records a slice of `group` (a device or a link) run by the current thread.
    fn record(
        &self,
        group: &str,
        name: &str,
        category: &str,
        started: Instant,
        duration: Duration,
        bytes: Option<u64>,
    ) {
        let start = u64::try_from(started.saturating_duration_since(self.origin).as_nanos())
            .unwrap_or(u64::MAX);
        let dur = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let thread = thread_number();
        // A poisoned lock only means another thread panicked between two whole writes.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.broken {
            return;
        }
        let mut text = String::new();
        let (pid, tid) = state.track(group, thread, start, start.saturating_add(dur), &mut text);
        let _ = write!(
            text,
            "{{\"name\":{},\"cat\":\"{category}\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}",
            quoted(name),
            micros(start),
            micros(dur),
        );
        if let Some(bytes) = bytes {
            let _ = write!(text, ",\"args\":{{\"bytes\":{bytes}}}");
        }
        text.push('}');
        if let Err(e) = state.append(&text) {
            state.broken = true;
            drop(state);
            // A copy's record is written under its buffer's lock: the subscriber runs after.
            let path = self.path.clone();
            super::after_locks::emit(move || {
                tracing::error!(path = %path.display(), error = %e, "cannot write the trace file; tracing stops here");
            });
        }
    }

    /// A kernel of `api` that ran on `device` from `started` for `duration`.
    pub(crate) fn kernel(&self, api: &str, device: &str, started: Instant, duration: Duration) {
        self.record(device, api, "kernel", started, duration, None);
    }

    /// A copy of `bytes` from `from` to `to`.
    pub(crate) fn transfer(
        &self,
        from: &str,
        to: &str,
        bytes: usize,
        started: Instant,
        duration: Duration,
    ) {
        let link = format!("{from} -> {to}");
        self.record(
            &link,
            &link,
            "transfer",
            started,
            duration,
            Some(bytes as u64),
        );
    }
}

impl State {
    /// The (pid, tid) for a slice `start..end` of `group` on `thread`: the thread's first
    /// track there whose slices have all ended by `start`, or a new one. Names of new
    /// processes and tracks are added to `text` as metadata events.
    fn track(
        &mut self,
        group: &str,
        thread: u64,
        start: u64,
        end: u64,
        text: &mut String,
    ) -> (usize, usize) {
        let pids = self.groups.len();
        let entry = self.groups.entry(group.to_string()).or_insert_with(|| {
            let pid = pids + 1;
            let _ = writeln!(
                text,
                "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}}},",
                quoted(group)
            );
            Group {
                pid,
                tracks: HashMap::new(),
            }
        });
        let pid = entry.pid;
        let tracks = entry.tracks.entry(thread).or_default();
        if let Some(track) = tracks.iter_mut().find(|(_, last)| *last <= start) {
            track.1 = end;
            return (pid, track.0);
        }
        let tid = self.next_tid;
        self.next_tid += 1;
        tracks.push((tid, end));
        let label = match tracks.len() {
            1 => format!("thread {thread}"),
            n => format!("thread {thread} ({n})"),
        };
        let _ = writeln!(
            text,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}},",
            quoted(&label)
        );
        (pid, tid)
    }

    /// Writes `events` (comma-separated, no trailing comma) over the tail and the tail after
    /// them, in one write: the file is a whole trace before and after.
    fn append(&mut self, events: &str) -> io::Result<()> {
        let mut chunk = String::with_capacity(events.len() + TAIL.len() + 2);
        chunk.push_str(if self.any { ",\n" } else { "\n" });
        chunk.push_str(events);
        let written = chunk.len() as u64;
        chunk.push_str(TAIL);
        self.file.seek(SeekFrom::Start(self.end))?;
        self.file.write_all(chunk.as_bytes())?;
        self.end += written;
        self.any = true;
        Ok(())
    }
}

fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pid, tid, start ns, end ns) of every slice in `text`, read back from the numbers.
    fn slices(text: &str) -> Vec<(u64, u64, u64, u64)> {
        let field = |line: &str, key: &str| -> String {
            let at = line.find(&format!("\"{key}\":")).expect(key) + key.len() + 3;
            line[at..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect()
        };
        let ns = |s: String| -> u64 {
            let (whole, frac) = s.split_once('.').expect("a decimal");
            whole.parse::<u64>().expect("µs") * 1000 + frac.parse::<u64>().expect("ns")
        };
        text.lines()
            .filter(|l| l.contains("\"ph\":\"X\""))
            .map(|l| {
                let start = ns(field(l, "ts"));
                (
                    field(l, "pid").parse().expect("pid"),
                    field(l, "tid").parse().expect("tid"),
                    start,
                    start + ns(field(l, "dur")),
                )
            })
            .collect()
    }

    #[test]
    fn overlapping_slices_get_tracks_of_their_own_and_the_file_is_whole_after_each() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.json");
        let timeline = Timeline::create(path.clone()).expect("created");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, format!("{TRACE_FILE_HEAD}{TAIL}"));
        let at = |us: u64| timeline.origin + Duration::from_micros(us);
        let us = Duration::from_micros;
        // Three overlapping calls on cpu from this thread (as deferred copies are), then one
        // after them all, and a link.
        timeline.kernel("fft", "cpu", at(10), us(10));
        timeline.kernel("zip", "cpu", at(15), us(10));
        timeline.kernel("fft", "cpu", at(12), us(2));
        timeline.kernel("fft", "cpu", at(30), us(1));
        timeline.transfer("host", "sim0", 64, at(0), us(5));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with(TRACE_FILE_HEAD) && text.ends_with(TAIL),
            "{text}"
        );
        assert_eq!(text.matches(TAIL).count(), 1);
        let all = slices(&text);
        assert_eq!(all.len(), 5);
        // On every track, each slice starts after the one before it ended.
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if (a.0, a.1) == (b.0, b.1) {
                    assert!(a.3 <= b.2 || b.3 <= a.2, "{a:?} and {b:?} overlap");
                }
            }
        }
        let cpu_tracks: std::collections::HashSet<_> = all[..4].iter().map(|s| s.1).collect();
        assert_eq!(cpu_tracks.len(), 3, "{all:?}");
        // The last one reuses the first track; exact times survive the decimal writing.
        assert_eq!(all[3].1, all[0].1);
        assert_eq!((all[0].2, all[0].3), (10_000, 20_000));
        assert!(text.contains("\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"cpu\"}"));
        assert!(text.contains("{\"name\":\"host -> sim0\""));
        assert!(text.contains("\"args\":{\"bytes\":64}"));
    }

    #[test]
    fn each_runtime_of_a_process_gets_its_own_file() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("several.json");
        let first = Timeline::create(path.clone()).expect("first");
        let second = Timeline::create(path.clone()).expect("second");
        drop(first);
        let third = Timeline::create(path.clone()).expect("third");
        assert_eq!(second.path, dir.path().join("several.2.json"));
        assert_eq!(third.path, dir.path().join("several.3.json"));
        for p in [
            path,
            dir.path().join("several.2.json"),
            dir.path().join("several.3.json"),
        ] {
            let text = std::fs::read_to_string(&p).expect("each file is there");
            assert_eq!(text, format!("{TRACE_FILE_HEAD}{TAIL}"), "{}", p.display());
        }
        assert_eq!(numbered(Path::new("a/t"), 2), Path::new("a/t.2"));
    }

    #[test]
    fn a_path_that_cannot_be_created_is_an_error() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(Timeline::create(dir.path().join("no/such/dir/t.json")).is_err());
        assert!(Timeline::create(dir.path().to_path_buf()).is_err());
    }

    /// `RIMMS_TRACE_FILE` (or the builder's `trace_file`) naming a file of the user's: it was
    /// truncated and replaced by an empty trace. A file that is not a trace is refused, named,
    /// and kept; an earlier trace, an empty file, no file and a device are written as before.
    #[test]
    fn a_file_that_is_not_a_trace_is_refused_and_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let kept = b"notes.json: a file of the user's, kept byte for byte\n".as_slice();
        let path = dir.path().join("notes.json");
        std::fs::write(&path, kept).expect("write");
        let e = Timeline::create(path.clone()).err().expect("refused");
        assert_eq!(std::fs::read(&path).expect("read"), kept);
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        // Refused again, the same way: a refusal claims no numbered name.
        assert!(Timeline::create(path.clone()).is_err());
        assert_eq!(std::fs::read(&path).expect("read"), kept);

        let whole = format!("{TRACE_FILE_HEAD}{TAIL}");
        let earlier = dir.path().join("earlier.json");
        std::fs::write(
            &earlier,
            format!("{TRACE_FILE_HEAD}\n{{\"name\":\"old\"}}{TAIL}"),
        )
        .expect("write");
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "").expect("write");
        let absent = dir.path().join("absent.json");
        for p in [&earlier, &empty, &absent] {
            let t = Timeline::create(p.clone()).expect("a trace, an empty file or none");
            assert_eq!(
                std::fs::read_to_string(p).expect("read"),
                whole,
                "{}",
                p.display()
            );
            drop(t);
        }
        if Path::new("/dev/null").exists() {
            Timeline::create(PathBuf::from("/dev/null")).expect("a device is written to");
        }

        // A later runtime's numbered file is checked the same way.
        let first = dir.path().join("run.json");
        let _first = Timeline::create(first.clone()).expect("first");
        let second = dir.path().join("run.2.json");
        std::fs::write(&second, kept).expect("write");
        let e = Timeline::create(first.clone()).err().expect("refused");
        assert_eq!(std::fs::read(&second).expect("read"), kept);
        assert!(e.to_string().contains(&second.display().to_string()), "{e}");
        std::fs::remove_file(&second).expect("remove");
        let t = Timeline::create(first).expect("second");
        assert_eq!(t.path, second);
    }

    /// The one rule both the runtime and the CLI ask: what a trace may replace.
    #[test]
    fn a_trace_may_replace_nothing_but_a_trace_an_empty_file_or_a_device() {
        let dir = tempfile::tempdir().expect("dir");
        let with = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write");
            may_replace_with_a_trace(&File::open(&path).expect("open"))
        };
        assert!(with("empty", b"").is_ok());
        assert!(with("trace", format!("{TRACE_FILE_HEAD}{TAIL}").as_bytes()).is_ok());
        assert!(with("head", TRACE_FILE_HEAD.as_bytes()).is_ok());
        // Shorter than the head, or the head with one byte changed: the user's.
        let head = TRACE_FILE_HEAD.as_bytes();
        for foreign in [&head[..head.len() - 1], b"x", b"{\"traceEvents\":[]}"] {
            assert!(
                matches!(with("short", foreign), Err(NotATrace::Foreign)),
                "{foreign:?}"
            );
        }
        let mut changed = head.to_vec();
        changed[head.len() - 1] = b'{';
        assert!(matches!(with("changed", &changed), Err(NotATrace::Foreign)));
        if Path::new("/dev/null").exists() {
            let null = File::open("/dev/null").expect("open");
            assert!(may_replace_with_a_trace(&null).is_ok());
        }
    }

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros(0), "0.000");
        assert_eq!(micros(12_345), "12.345");
        assert_eq!(micros(1_000_007), "1000.007");
    }
}
