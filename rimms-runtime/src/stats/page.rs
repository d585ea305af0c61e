//! The stats page: a runtime's live counters in a small file that another process maps
//! read-only (`rimms memstat --pid N`).
//!
//! Why a file-backed page and not a socket or a signal: the reader needs nothing from the
//! running program (no thread answering requests, no protocol), it works while the program is
//! busy or stuck, and the program pays nothing on its hot path. A publisher thread copies
//! [`Runtime::stats`](crate::Runtime::stats) into the page every [`PUBLISH_INTERVAL`]; kernel
//! calls and copies only bump the counters they always bump.
//!
//! It is off by default. `RuntimeBuilder::stats_page(path)` publishes at `path`;
//! `RIMMS_STATS_PAGE=1` publishes at [`default_path`]`(pid)`, `<temp dir>/rimms-stats-<pid>`
//! (the temp dir is `std::env::temp_dir()`, so `TMPDIR` must agree between the program and the
//! reader). With the variable set, the first runtime of a process publishes; runtimes built
//! while it lives do not (their counters would overwrite each other), and the next runtime
//! built after it is dropped takes the page over. Two runtimes of one process never publish
//! at one page, however its path is spelt (`d/p`, `d/../d/p`, a link to `d`): paths are
//! compared with their folder resolved. The file is created whole under a temporary name,
//! with mode 0600, and renamed into place, so a reader never sees half a header; it is
//! removed when the runtime is dropped, if it is still the file that runtime created (another
//! program may have published at the same path since).
//!
//! The reader opens the page without blocking and refuses anything but a regular file before
//! mapping it (a FIFO planted at `<temp dir>/rimms-stats-<pid>` would otherwise block
//! `rimms memstat --pid` forever), and maps no more than the largest page.
//!
//! The publisher holds only a weak handle, so it never keeps a runtime alive; it upgrades it
//! for the microseconds a snapshot takes. Should the program drop its last handle in exactly
//! that window, the publisher thread finishes the drop (and removes the file) a moment later;
//! a process that exits in that moment leaves its page behind, which `rimms memstat` reports
//! as stale since the pid is gone.
//!
//! Layout (every field a native-endian `u64`, so the page is an array of words that both
//! sides access atomically):
//!
//! | words | what |
//! |---|---|
//! | 0 | magic, `b"RIMMSTAT"` |
//! | 1 | [`VERSION`] |
//! | 2 | page length in bytes |
//! | 3 | pid of the publisher |
//! | 4 | sequence: odd while the publisher writes (a seqlock) |
//! | 5 | number of spaces, S |
//! | 6 | time of the last update, milliseconds since the Unix epoch |
//! | 7 | reserved, zero |
//! | 8 … | S names, 32 bytes each, UTF-8 padded with zeros |
//! | then | S × (capacity, in use, high water, allocations, frees, zero fills, evictions, bytes dropped by eviction, bytes written back by eviction, bytes copied ahead of use, of them used, of them wasted) |
//! | then | S × S × (copies, bytes, nanoseconds) for link from → to, row `from` |
//!
//! Words 0–5 and the names never change after creation; the rest changes only between two
//! stores of the sequence word. The reader ([`StatsPage`]) checks magic, version and length
//! before it trusts anything, and retries a read that overlapped an update.

use super::{LinkStats, SpaceStats, Stats};
use crate::hal::MAX_SPACES;
use crate::hal::{Error, Result};
use crate::input_file::{open_regular, InputFileError};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The environment variable that turns the page on: `RIMMS_STATS_PAGE=1`.
pub const STATS_PAGE_ENV: &str = "RIMMS_STATS_PAGE";

/// Layout version; a reader refuses any other.
pub const VERSION: u64 = 3;

/// How often the publisher refreshes the page.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

const MAGIC: u64 = u64::from_ne_bytes(*b"RIMMSTAT");
const HEADER_WORDS: usize = 8;
const NAME_BYTES: usize = 32;
const NAME_WORDS: usize = NAME_BYTES / 8;
const SPACE_WORDS: usize = 12;
const LINK_WORDS: usize = 3;
const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_LEN: usize = 2;
const W_PID: usize = 3;
const W_SEQ: usize = 4;
const W_SPACES: usize = 5;
const W_UPDATED: usize = 6;
/// Reads that overlap an update are retried this many times before giving up.
const READ_TRIES: usize = 200;

/// Where a process with `RIMMS_STATS_PAGE=1` publishes: `<temp dir>/rimms-stats-<pid>`.
pub fn default_path(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("rimms-stats-{pid}"))
}

fn names_at() -> usize {
    HEADER_WORDS
}

fn spaces_at(spaces: usize) -> usize {
    HEADER_WORDS + spaces * NAME_WORDS
}

fn links_at(spaces: usize) -> usize {
    spaces_at(spaces) + spaces * SPACE_WORDS
}

fn page_words(spaces: usize) -> usize {
    links_at(spaces) + spaces * spaces * LINK_WORDS
}

/// Views `len` bytes of a mapping at `base` as words.
///
/// # Safety
/// `base` must be 8-byte aligned (a mapping is page-aligned), point at `len` bytes of a
/// mapping that outlives `'a`, and carry write permission if anything stores through the
/// words (a pointer from `MmapMut::as_mut_ptr`, not one derived from a `&[u8]`). Every access
/// to those bytes, in this process and in others, must go through atomics while the returned
/// slice lives.
unsafe fn words<'a>(base: *const u8, len: usize) -> &'a [AtomicU64] {
    debug_assert_eq!(base.addr() % 8, 0, "mappings are page-aligned");
    // SAFETY: AtomicU64 has the size and alignment of u64; the caller vouches for alignment,
    // lifetime, permission and atomic access; the length is rounded down to whole words.
    unsafe { std::slice::from_raw_parts(base.cast::<AtomicU64>(), len / 8) }
}

/// What can go wrong reading a stats page. Never a panic: a missing, foreign, truncated or
/// stuck page is an error that names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageError {
    /// No file at the path.
    #[error("no stats page at {}", path.display())]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file exists but cannot be opened, measured or mapped.
    #[error("cannot read the stats page {}: {source}", path.display())]
    Io {
        /// The page.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// Not a regular file (a FIFO, a device, a folder): refused before it is read or mapped,
    /// since a FIFO's reader would wait for a writer forever.
    #[error("{} is {kind}, not a regular file; a stats page is a file its runtime creates", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead: "a FIFO", "a character device", …
        kind: &'static str,
    },
    /// Shorter than its header or than its header says.
    #[error("{} is too short for a stats page: {len} bytes, {need} needed", path.display())]
    Truncated {
        /// The page.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The length its header (or the smallest header) needs.
        need: u64,
    },
    /// The file does not start with the page's magic.
    #[error("{} is not a RIMMS stats page (wrong magic number)", path.display())]
    Magic {
        /// The file.
        path: PathBuf,
    },
    /// A page of another layout version.
    #[error("{} is a stats page of version {found}; this reader knows version {VERSION}", path.display())]
    Version {
        /// The page.
        path: PathBuf,
        /// Its version.
        found: u64,
    },
    /// A header or name that cannot be right.
    #[error("the stats page {} is corrupt: {why}", path.display())]
    Corrupt {
        /// The page.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Every read overlapped an update: the publisher died mid-update or is stuck.
    #[error("the stats page {} was being updated during each of {tries} reads", path.display())]
    Busy {
        /// The page.
        path: PathBuf,
        /// Reads tried.
        tries: usize,
    },
}

/// One consistent reading of a stats page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageSnapshot {
    /// The publishing process.
    pub pid: u32,
    /// The page's sequence number (two per update).
    pub sequence: u64,
    /// When the publisher last updated it.
    pub updated: SystemTime,
    /// Every space of the runtime, in its order (`host` first).
    pub spaces: Vec<SpaceStats>,
    /// Links that carried at least one copy.
    pub links: Vec<LinkStats>,
}

impl PageSnapshot {
    /// The space named `name`.
    pub fn space(&self, name: &str) -> Option<&SpaceStats> {
        self.spaces.iter().find(|s| s.name == name)
    }

    /// Bytes copied over `from` → `to` (0 if none).
    pub fn bytes(&self, from: &str, to: &str) -> u64 {
        self.links
            .iter()
            .find(|l| l.from == from && l.to == to)
            .map_or(0, |l| l.bytes)
    }
}

/// A stats page mapped read-only, its header checked.
pub struct StatsPage {
    path: PathBuf,
    map: Mmap,
    pid: u32,
    names: Vec<String>,
}

impl std::fmt::Debug for StatsPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsPage")
            .field("path", &self.path)
            .field("pid", &self.pid)
            .field("spaces", &self.names)
            .finish()
    }
}

impl StatsPage {
    /// Maps the page at `path` and checks its magic, version, length and names.
    pub fn open(path: impl AsRef<Path>) -> Result<StatsPage, PageError> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source: io::Error| PageError::Io {
            path: path.clone(),
            source,
        };
        // Never `File::open`: a FIFO planted at a page's path would block it forever.
        let file = match open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => return Err(PageError::Missing { path }),
            Err(InputFileError::NotRegular { kind, .. }) => {
                return Err(PageError::NotRegular { path, kind })
            }
            Err(InputFileError::Io { source, .. }) => return Err(io_err(source)),
            Err(other) => return Err(io_err(io::Error::other(other))),
        };
        let len = file.metadata().map_err(io_err)?.len();
        let header = (HEADER_WORDS * 8) as u64;
        if len < header {
            return Err(PageError::Truncated {
                path,
                len,
                need: header,
            });
        }
        // No page is longer than one of the most spaces a runtime has: what lies past that is
        // not the page's, and a huge file is not mapped whole.
        let largest = (page_words(MAX_SPACES) * 8) as u64;
        // At most `largest`, a few KiB, so it fits in usize.
        let map_len = len.min(largest) as usize;
        // SAFETY: the mapping is read-only and read only through atomics (`words`). A page
        // shrunk by another process while mapped would fault; the publisher never shrinks it.
        let map = unsafe { MmapOptions::new().len(map_len).map(&file) }.map_err(io_err)?;
        // SAFETY: page-aligned, outlives `w` (a local of this function), and only read, through
        // atomics, below.
        let w = unsafe { words(map.as_ptr(), map.len()) };
        if w[W_MAGIC].load(Ordering::Acquire) != MAGIC {
            return Err(PageError::Magic { path });
        }
        let found = w[W_VERSION].load(Ordering::Relaxed);
        if found != VERSION {
            return Err(PageError::Version { path, found });
        }
        let spaces = w[W_SPACES].load(Ordering::Relaxed);
        if spaces == 0 || spaces > MAX_SPACES as u64 {
            return Err(PageError::Corrupt {
                path,
                why: format!("{spaces} spaces (a runtime has 1 to {MAX_SPACES})"),
            });
        }
        // At most MAX_SPACES (checked above), so this fits in usize.
        let spaces = spaces as usize;
        let need = (page_words(spaces) * 8) as u64;
        let stated = w[W_LEN].load(Ordering::Relaxed);
        if stated != need {
            return Err(PageError::Corrupt {
                path,
                why: format!("its header says {stated} bytes, {spaces} spaces need {need}"),
            });
        }
        if (map.len() as u64) < need {
            return Err(PageError::Truncated {
                path,
                len: map.len() as u64,
                need,
            });
        }
        let pid =
            u32::try_from(w[W_PID].load(Ordering::Relaxed)).map_err(|_| PageError::Corrupt {
                path: path.clone(),
                why: "the pid does not fit in 32 bits".to_string(),
            })?;
        let mut names = Vec::with_capacity(spaces);
        for s in 0..spaces {
            let at = names_at() + s * NAME_WORDS;
            let mut bytes: Vec<u8> = w[at..at + NAME_WORDS]
                .iter()
                .flat_map(|word| word.load(Ordering::Relaxed).to_ne_bytes())
                .collect();
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            bytes.truncate(end);
            let name = String::from_utf8(bytes).map_err(|_| PageError::Corrupt {
                path: path.clone(),
                why: format!("the name of space {s} is not UTF-8"),
            })?;
            names.push(name);
        }
        Ok(StatsPage {
            path,
            map,
            pid,
            names,
        })
    }

    /// The publishing process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The page's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A consistent reading: retried while the publisher is mid-update.
    pub fn read(&self) -> Result<PageSnapshot, PageError> {
        // SAFETY: page-aligned, owned by `self`, which outlives `w`, and only read, through
        // atomics, below.
        let w = unsafe { words(self.map.as_ptr(), self.map.len()) };
        let spaces = self.names.len();
        let data = spaces_at(spaces)..page_words(spaces);
        let mut copy = vec![0u64; data.len()];
        for attempt in 0..READ_TRIES {
            let before = w[W_SEQ].load(Ordering::Acquire);
            if before % 2 == 0 {
                let updated = w[W_UPDATED].load(Ordering::Relaxed);
                for (c, word) in copy.iter_mut().zip(&w[data.clone()]) {
                    *c = word.load(Ordering::Relaxed);
                }
                fence(Ordering::Acquire);
                if w[W_SEQ].load(Ordering::Relaxed) == before {
                    return self.decode(before, updated, &copy);
                }
            }
            if attempt < 10 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Err(PageError::Busy {
            path: self.path.clone(),
            tries: READ_TRIES,
        })
    }

    fn decode(&self, sequence: u64, updated: u64, data: &[u64]) -> Result<PageSnapshot, PageError> {
        let n = self.names.len();
        let size = |v: u64, what: &str| {
            usize::try_from(v).map_err(|_| PageError::Corrupt {
                path: self.path.clone(),
                why: format!("{what} {v} does not fit in this machine's usize"),
            })
        };
        let mut spaces = Vec::with_capacity(n);
        for (name, s) in self.names.iter().zip(data.chunks_exact(SPACE_WORDS)) {
            spaces.push(SpaceStats {
                name: name.clone(),
                capacity: size(s[0], "capacity")?,
                in_use: size(s[1], "bytes in use")?,
                high_water: size(s[2], "high-water mark")?,
                allocations: s[3],
                frees: s[4],
                zero_fills: s[5],
                evictions: s[6],
                dropped_bytes: s[7],
                written_back_bytes: s[8],
                prefetched_bytes: s[9],
                prefetch_used_bytes: s[10],
                prefetch_wasted_bytes: s[11],
            });
        }
        let links_data = &data[n * SPACE_WORDS..];
        let mut links = Vec::new();
        for (i, l) in links_data.chunks_exact(LINK_WORDS).enumerate() {
            if l[0] > 0 {
                links.push(LinkStats {
                    from: self.names[i / n].clone(),
                    to: self.names[i % n].clone(),
                    copies: l[0],
                    bytes: l[1],
                    time: Duration::from_nanos(l[2]),
                });
            }
        }
        Ok(PageSnapshot {
            pid: self.pid,
            sequence,
            updated: UNIX_EPOCH + Duration::from_millis(updated),
            spaces,
            links,
        })
    }
}

/// Paths published by live runtimes of this process.
static CLAIMED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn claimed() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A poisoned lock only means a thread panicked while pushing or removing a whole path.
    CLAIMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stop signal of the publisher thread.
#[derive(Default)]
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Waits up to `interval`; true once stopped.
    fn wait(&self, interval: Duration) -> bool {
        // A poisoned lock only means a thread panicked holding a bool.
        let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, interval, |s| !*s)
            .unwrap_or_else(|e| e.into_inner());
        *stopped
    }

    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }
}

/// The writing side: the mapped page and where each space's name sits in it.
struct Writer {
    map: MmapMut,
    /// The page's first byte, taken with `as_mut_ptr` so that stores through it may write.
    base: *mut u8,
    names: Vec<String>,
}

// SAFETY: `base` points into `map`, which the writer owns and which does not move when the
// writer does (it is a mapping, not inline data); every access through it is atomic.
unsafe impl Send for Writer {}
// SAFETY: as for `Send`: shared access writes and reads only through atomics.
unsafe impl Sync for Writer {}

impl Writer {
    fn new(mut map: MmapMut, names: Vec<String>) -> Writer {
        let base = map.as_mut_ptr();
        Writer { map, base, names }
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: page-aligned, with write permission (from `as_mut_ptr`), inside `map`,
        // which `self` owns; this process writes only through these atomics and readers read
        // only through atomics.
        unsafe { words(self.base, self.map.len()) }
    }

    /// Copies `stats` into the page between two stores of the sequence word.
    fn publish(&self, stats: &Stats) {
        let n = self.names.len();
        let mut data = vec![0u64; page_words(n) - spaces_at(n)];
        let index = |name: &str| self.names.iter().position(|s| s == name);
        for s in &stats.spaces {
            if let Some(i) = index(&s.name) {
                data[i * SPACE_WORDS..(i + 1) * SPACE_WORDS].copy_from_slice(&space_words(s));
            }
        }
        for l in &stats.links {
            if let (Some(from), Some(to)) = (index(&l.from), index(&l.to)) {
                let at = n * SPACE_WORDS + (from * n + to) * LINK_WORDS;
                data[at..at + LINK_WORDS].copy_from_slice(&[
                    l.copies,
                    l.bytes,
                    u64::try_from(l.time.as_nanos()).unwrap_or(u64::MAX),
                ]);
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let w = self.words();
        let seq = w[W_SEQ].load(Ordering::Relaxed);
        w[W_SEQ].store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        w[W_UPDATED].store(now, Ordering::Relaxed);
        for (word, v) in w[spaces_at(n)..].iter().zip(&data) {
            word.store(*v, Ordering::Relaxed);
        }
        w[W_SEQ].store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// A runtime's stats page: created by the builder, kept in the runtime's shared state, and
/// on drop stops its thread and removes the file, if it is still the one it created.
pub(crate) struct Publisher {
    /// The page's path with its folder resolved ([`resolved`]): what `CLAIMED` holds and the
    /// drop removes, whatever the working directory is by then.
    path: PathBuf,
    /// The file this publisher created, so that the drop never removes another's.
    identity: FileIdentity,
    writer: Mutex<Option<Writer>>,
    stop: Arc<Stop>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Publisher {
    /// Creates the page for a runtime with these spaces, if one was asked for (`path`, else
    /// `RIMMS_STATS_PAGE=1`). `None` when none was, or when the variable's page is already
    /// published by another runtime of this process.
    pub(crate) fn create<'a>(
        path: Option<PathBuf>,
        spaces: impl Iterator<Item = &'a str>,
    ) -> Result<Option<Publisher>> {
        let (path, explicit) = match path {
            Some(p) => (p, true),
            None if crate::hal::env_switch(STATS_PAGE_ENV)? => {
                (default_path(std::process::id()), false)
            }
            None => return Ok(None),
        };
        let given = path;
        let path = resolved(&given).map_err(|source| Error::StatsPage {
            path: given.clone(),
            source,
        })?;
        let mut claimed = claimed();
        if claimed.contains(&path) {
            if explicit {
                return Err(Error::Config(format!(
                    "the stats page {} is already published by another runtime of this process (as {})",
                    given.display(),
                    path.display()
                )));
            }
            tracing::debug!(path = %path.display(), "stats page already published by another runtime");
            return Ok(None);
        }
        let names: Vec<String> = spaces.map(|s| truncate_name(s).to_string()).collect();
        let (writer, identity) = create_page(&path, names).map_err(|source| Error::StatsPage {
            path: given.clone(),
            source,
        })?;
        claimed.push(path.clone());
        Ok(Some(Publisher {
            path,
            identity,
            writer: Mutex::new(Some(writer)),
            stop: Arc::default(),
            thread: Mutex::new(None),
        }))
    }

    /// Starts the thread that refreshes the page from `snapshot` every [`PUBLISH_INTERVAL`]
    /// until the publisher is dropped or `snapshot` returns `None` (the runtime is gone).
    pub(crate) fn start(
        &self,
        mut snapshot: impl FnMut() -> Option<Stats> + Send + 'static,
    ) -> Result<()> {
        let taken = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(writer) = taken else {
            return Ok(()); // already started
        };
        let stop = Arc::clone(&self.stop);
        let handle = std::thread::Builder::new()
            .name("rimms-stats-page".to_string())
            .spawn(move || loop {
                match snapshot() {
                    Some(stats) => writer.publish(&stats),
                    None => return,
                }
                if stop.wait(PUBLISH_INTERVAL) {
                    return;
                }
            })
            .map_err(|source| Error::StatsPage {
                path: self.path.clone(),
                source,
            })?;
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(())
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.stop();
        let handle = self
            .thread
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // The thread itself drops the runtime when its snapshot held the last reference;
        // it is returning then, and cannot wait for itself.
        if let Some(h) = handle.filter(|h| h.thread().id() != std::thread::current().id()) {
            let _ = h.join();
        }
        // Only the file this publisher created: another program may have published at the
        // same path since (renaming its page over this one), and its page is not ours to
        // remove. Another page could still take its place between this check and the
        // removal, but that window is a few system calls long, not the runtime's whole life.
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| FileIdentity::of(&meta) == self.identity);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the stats page");
                }
            }
        } else {
            tracing::debug!(path = %self.path.display(), "the stats page was replaced or removed by someone else; left as it is");
        }
        claimed().retain(|p| p != &self.path);
    }
}

/// A space's figures as the page stores them, in the order `decode` reads them back.
fn space_words(s: &SpaceStats) -> [u64; SPACE_WORDS] {
    [
        s.capacity as u64,
        s.in_use as u64,
        s.high_water as u64,
        s.allocations,
        s.frees,
        s.zero_fills,
        s.evictions,
        s.dropped_bytes,
        s.written_back_bytes,
        s.prefetched_bytes,
        s.prefetch_used_bytes,
        s.prefetch_wasted_bytes,
    ]
}

/// `name` cut to fit a name slot, at a character boundary.
fn truncate_name(name: &str) -> &str {
    let mut end = name.len().min(NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// `path` with its folder made absolute and free of links and `..`: one spelling per page,
/// so that `d/p`, `d/../d/p` and `link-to-d/p` are seen to be the same page. The file name
/// itself is kept as given: the page is renamed into place there, replacing whatever that
/// name was (a link included), so the name is what the page is. The folder must exist.
fn resolved(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path ends in `..` or a root, not in a file name",
        )
    })?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok(std::fs::canonicalize(folder)?.join(name))
}

/// Which file a path named at one moment: its device and inode where there are such, else
/// nothing to tell files apart by (the drop then removes whatever is at the path, as it did
/// everywhere before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileIdentity(Option<(u64, u64)>);

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> FileIdentity {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileIdentity(Some((meta.dev(), meta.ino())))
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileIdentity(None)
        }
    }
}

/// Creates the file under a temporary name (never following a link planted there), fills in
/// header and names, and renames it into place; returns its writer and which file it is.
fn create_page(path: &Path, names: Vec<String>) -> io::Result<(Writer, FileIdentity)> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&tmp)?;
    let built = (|| {
        let n = names.len();
        file.set_len((page_words(n) * 8) as u64)?;
        // SAFETY: a file this process just created and sized; nobody else writes it, and it
        // is accessed only through atomics.
        let map = unsafe { MmapMut::map_mut(&file) }?;
        let writer = Writer::new(map, names);
        let w = writer.words();
        for (s, name) in writer.names.iter().enumerate() {
            let mut slot = [0u8; NAME_BYTES];
            slot[..name.len()].copy_from_slice(name.as_bytes());
            for (k, chunk) in slot.chunks_exact(8).enumerate() {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                w[names_at() + s * NAME_WORDS + k]
                    .store(u64::from_ne_bytes(word), Ordering::Relaxed);
            }
        }
        w[W_VERSION].store(VERSION, Ordering::Relaxed);
        w[W_LEN].store((page_words(n) * 8) as u64, Ordering::Relaxed);
        w[W_PID].store(u64::from(std::process::id()), Ordering::Relaxed);
        w[W_SPACES].store(n as u64, Ordering::Relaxed);
        w[W_MAGIC].store(MAGIC, Ordering::Release);
        writer.map.flush_async()?;
        let identity = FileIdentity::of(&file.metadata()?);
        std::fs::rename(&tmp, path)?;
        Ok((writer, identity))
    })();
    if built.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    built
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, HeteData, Runtime, SimConfig};
    use num_complex::Complex32;

    fn temp_page(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("rimms-page-test-{}-{tag}", std::process::id()))
    }

    fn page_of(spaces: &[&str]) -> (PathBuf, Writer) {
        let path = temp_page(&spaces.join("-"));
        let names = spaces.iter().map(|s| s.to_string()).collect();
        let (writer, _) = create_page(&path, names).expect("create");
        (path, writer)
    }

    #[test]
    fn a_published_snapshot_reads_back() {
        let (path, writer) = page_of(&["host", "sim0"]);
        let stats = Stats {
            links: vec![LinkStats {
                from: "host".into(),
                to: "sim0".into(),
                copies: 3,
                bytes: 12288,
                time: Duration::from_nanos(777),
            }],
            spaces: ["host", "sim0"]
                .iter()
                .enumerate()
                .map(|(i, name)| SpaceStats {
                    name: name.to_string(),
                    capacity: 1 << 20,
                    in_use: 4096 * (i + 1),
                    high_water: 8192,
                    allocations: 5,
                    frees: 4,
                    zero_fills: i as u64,
                    evictions: 7 + i as u64,
                    dropped_bytes: 4096,
                    written_back_bytes: 8192 * i as u64,
                    prefetched_bytes: 3 * 4096,
                    prefetch_used_bytes: 2 * 4096 + i as u64,
                    prefetch_wasted_bytes: 4096 * i as u64,
                })
                .collect(),
            apis: Vec::new(),
        };
        writer.publish(&stats);
        let page = StatsPage::open(&path).expect("open");
        assert_eq!(page.pid(), std::process::id());
        let snap = page.read().expect("read");
        assert_eq!(snap.spaces, stats.spaces);
        assert_eq!(snap.links, stats.links);
        assert_eq!(snap.sequence, 2);
        std::fs::remove_file(&path).expect("remove");
    }

    #[test]
    fn a_truncated_page_is_an_error_not_a_panic() {
        let (path, _writer) = page_of(&["host", "trunc"]);
        let full = std::fs::read(&path).expect("read");
        for len in [0, 7, HEADER_WORDS * 8 - 1, HEADER_WORDS * 8, full.len() - 8] {
            std::fs::write(&path, &full[..len]).expect("write");
            let err = StatsPage::open(&path).expect_err("truncated");
            assert!(
                matches!(err, PageError::Truncated { .. }),
                "{len} bytes: {err}"
            );
            assert!(err.to_string().contains(&path.display().to_string()));
        }
        std::fs::remove_file(&path).expect("remove");
    }

    #[test]
    fn a_foreign_or_newer_file_is_refused() {
        let (path, _writer) = page_of(&["host", "magic"]);
        let full = std::fs::read(&path).expect("read");
        let mut wrong = full.clone();
        wrong[0] ^= 0xff;
        std::fs::write(&path, &wrong).expect("write");
        assert!(matches!(
            StatsPage::open(&path),
            Err(PageError::Magic { .. })
        ));
        let mut newer = full.clone();
        newer[8..16].copy_from_slice(&(VERSION + 1).to_ne_bytes());
        std::fs::write(&path, &newer).expect("write");
        assert!(matches!(
            StatsPage::open(&path),
            Err(PageError::Version { found, .. }) if found == VERSION + 1
        ));
        let mut lying = full.clone();
        lying[40..48].copy_from_slice(&1000u64.to_ne_bytes());
        std::fs::write(&path, &lying).expect("write");
        assert!(matches!(
            StatsPage::open(&path),
            Err(PageError::Corrupt { .. })
        ));
        std::fs::remove_file(&path).expect("remove");
        assert!(matches!(
            StatsPage::open(&path),
            Err(PageError::Missing { .. })
        ));
    }

    /// Stats whose every figure is `k`, so a torn read shows as two different figures.
    fn uniform(k: u64) -> Stats {
        let k_usize = usize::try_from(k).expect("small");
        Stats {
            links: vec![LinkStats {
                from: "host".into(),
                to: "torn".into(),
                copies: k,
                bytes: k,
                time: Duration::from_nanos(k),
            }],
            spaces: ["host", "torn"]
                .iter()
                .map(|name| SpaceStats {
                    name: name.to_string(),
                    capacity: k_usize,
                    in_use: k_usize,
                    high_water: k_usize,
                    allocations: k,
                    frees: k,
                    zero_fills: k,
                    evictions: k,
                    dropped_bytes: k,
                    written_back_bytes: k,
                    prefetched_bytes: k,
                    prefetch_used_bytes: k,
                    prefetch_wasted_bytes: k,
                })
                .collect(),
            apis: Vec::new(),
        }
    }

    #[test]
    fn reads_during_constant_updates_are_never_torn() {
        let (path, writer) = page_of(&["host", "torn"]);
        writer.publish(&uniform(1));
        let page = StatsPage::open(&path).expect("open");
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut k = 2;
                while !done.load(Ordering::Relaxed) {
                    writer.publish(&uniform(k));
                    k += 1;
                    // Back to back, but not in a loop so tight that a reader on a loaded
                    // machine never finds the page between two updates (its 200 tries all
                    // overlap one, which is `Busy`, not a torn read).
                    std::thread::yield_now();
                }
            });
            // Stops the writer however the reader ends, a failed assertion included.
            struct Done<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _done = Done(&done);
            let mut last = 0;
            for _ in 0..2000 {
                let snap = page.read().expect("read");
                let link = &snap.links[0];
                let k = link.copies;
                assert!(k >= last, "went back from {last} to {k}");
                last = k;
                let figures = [link.bytes, link.time.as_nanos() as u64]
                    .into_iter()
                    .chain(snap.spaces.iter().flat_map(space_words));
                for f in figures {
                    assert_eq!(f, k, "a torn read: {snap:?}");
                }
            }
        });
        std::fs::remove_file(&path).expect("remove");
    }

    #[test]
    fn a_page_stuck_mid_update_reads_as_busy() {
        let (path, writer) = page_of(&["host", "busy"]);
        writer.words()[W_SEQ].store(7, Ordering::Relaxed);
        let page = StatsPage::open(&path).expect("open");
        assert!(matches!(page.read(), Err(PageError::Busy { .. })));
        std::fs::remove_file(&path).expect("remove");
    }

    #[test]
    fn a_runtime_publishes_live_figures_and_removes_its_page() {
        let path = temp_page("runtime");
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .stats_page(&path)
            .build()
            .expect("runtime");
        let again = Runtime::builder().stats_page(&path).build();
        assert!(matches!(again, Err(Error::Config(_))), "{again:?}");
        let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 1024]).expect("x");
        let mut y = HeteData::alloc(&rt, 1024).expect("y");
        rt.conj(Device::Sim(0), &x, &mut y).expect("conj");
        let page = StatsPage::open(&path).expect("open");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let snap = loop {
            let snap = page.read().expect("read");
            if snap.bytes("host", "sim0") > 0 || std::time::Instant::now() > deadline {
                break snap;
            }
            std::thread::sleep(PUBLISH_INTERVAL / 2);
        };
        assert_eq!(snap.bytes("host", "sim0"), 8192);
        // x copied in, y written there.
        assert_eq!(snap.space("sim0").map(|s| s.in_use), Some(2 * 8192));
        assert!(snap.space("host").is_some_and(|s| s.allocations >= 1));
        drop((x, y, rt));
        // Removed by the drop, or a moment later by the publisher thread if its snapshot
        // happened to hold the last reference.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while path.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!path.exists(), "the page outlived its runtime");
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let name = "é".repeat(20);
        let cut = truncate_name(&name);
        assert!(cut.len() <= NAME_BYTES && cut.len() == 32);
        assert_eq!(truncate_name("host"), "host");
    }
}
