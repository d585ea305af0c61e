//! `rimms memstat --pid N`: a running program's memory figures, per space and per link, read
//! from the stats page its runtime publishes (`RIMMS_STATS_PAGE=1`, see
//! [`rimms::stats::page`]).
//!
//! It lives apart from `run` and `bench` because it never builds a runtime: it only maps
//! another process's page read-only, so it can watch a program that is busy or stuck without
//! disturbing it.

use crate::bench::mib;
use rimms::stats::page::{default_path, PageError, PageSnapshot, StatsPage, STATS_PAGE_ENV};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Why memstat has nothing to show.
#[derive(Debug, thiserror::Error)]
pub enum MemstatError {
    /// `--pid` of a process that does not exist.
    #[error("no process {pid} is running (is the process id right? `pgrep -a NAME` lists them)")]
    NoProcess {
        /// The process asked about.
        pid: u32,
    },
    /// `--page` of a folder.
    #[error("{} is a folder; --page takes the stats page file itself (by default <temp dir>/rimms-stats-<pid>)", path.display())]
    Folder {
        /// The path given.
        path: PathBuf,
    },
    /// The figures could not be written out.
    #[error("cannot write to standard output: {0}")]
    Write(#[source] std::io::Error),
    /// The process has no page: not started with the variable, or not a RIMMS program.
    #[error("process {pid} publishes no stats page ({} does not exist); start it with {STATS_PAGE_ENV}=1", path.display())]
    NoPage {
        /// The process asked about.
        pid: u32,
        /// Where its page would be.
        path: PathBuf,
    },
    /// A page whose process is gone.
    #[error("process {pid} is not running; {} is a stale stats page it left behind", path.display())]
    Stale {
        /// The process the page names.
        pid: u32,
        /// The page.
        path: PathBuf,
    },
    /// A page at the process's path that another process wrote.
    #[error("{} was published by process {found}, not {pid}", path.display())]
    OtherProcess {
        /// The process asked about.
        pid: u32,
        /// The process the page names.
        found: u32,
        /// The page.
        path: PathBuf,
    },
    /// A page that cannot be read.
    #[error(transparent)]
    Page(#[from] PageError),
    /// `--watch` with an interval that is not a positive number of seconds up to a day.
    #[error("--watch takes a positive number of seconds up to {MAX_WATCH_S}, got {0}")]
    Interval(f64),
}

/// The longest `--watch` interval: longer is surely a typo, and `Duration` has a limit.
pub const MAX_WATCH_S: f64 = 86_400.0;

/// Where to look: a process's default page, or an explicit file.
#[derive(Clone, Debug)]
pub enum Target {
    /// `<temp dir>/rimms-stats-<pid>`.
    Pid(u32),
    /// A page at a path given to `RuntimeBuilder::stats_page`.
    Page(PathBuf),
}

impl Target {
    fn path(&self) -> PathBuf {
        match self {
            Target::Pid(pid) => default_path(*pid),
            Target::Page(path) => path.clone(),
        }
    }
}

/// Whether process `pid` exists, where the OS says (Linux's /proc); elsewhere assumed so.
fn running(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// One reading of `target`'s page.
pub fn read(target: &Target) -> Result<(PathBuf, PageSnapshot), MemstatError> {
    let path = target.path();
    match target {
        // Said first: "publishes no stats page" would send the user looking for a variable
        // when the process id is wrong.
        Target::Pid(pid) if !running(*pid) && !path.exists() => {
            return Err(MemstatError::NoProcess { pid: *pid })
        }
        // Opening a folder succeeds and mapping it fails with "No such device".
        Target::Page(_) if path.is_dir() => return Err(MemstatError::Folder { path }),
        _ => {}
    }
    let page = match StatsPage::open(&path) {
        Err(PageError::Missing { path }) => {
            return Err(match target {
                Target::Pid(pid) => MemstatError::NoPage { pid: *pid, path },
                Target::Page(_) => PageError::Missing { path }.into(),
            })
        }
        other => other?,
    };
    if let Target::Pid(pid) = target {
        if page.pid() != *pid {
            return Err(MemstatError::OtherProcess {
                pid: *pid,
                found: page.pid(),
                path,
            });
        }
    }
    if !running(page.pid()) {
        return Err(MemstatError::Stale {
            pid: page.pid(),
            path,
        });
    }
    let snapshot = page.read()?;
    Ok((path, snapshot))
}

/// The two tables: spaces, then links that carried something.
pub fn render(path: &Path, s: &PageSnapshot, now: SystemTime) -> String {
    // Sequence 0: the page exists but its publisher has not filled it in yet.
    let age = match s.sequence {
        0 => "not updated yet".to_string(),
        _ => format!(
            "updated {} ms ago",
            now.duration_since(s.updated)
                .unwrap_or(Duration::ZERO)
                .as_millis()
        ),
    };
    let mut out = format!("process {}: {} ({age})\n\n", s.pid, path.display());
    let _ = writeln!(
        out,
        "{:<10} {:>14} {:>12} {:>15} {:>12} {:>10} {:>11} {:>10} {:>14} {:>16}",
        "space",
        "capacity MiB",
        "in use MiB",
        "high water MiB",
        "allocations",
        "frees",
        "zero fills",
        "evictions",
        "dropped MiB",
        "written back MiB"
    );
    for sp in &s.spaces {
        let _ = writeln!(
            out,
            "{:<10} {:>14.2} {:>12.3} {:>15.3} {:>12} {:>10} {:>11} {:>10} {:>14.3} {:>16.3}",
            sp.name,
            mib(sp.capacity as u64),
            mib(sp.in_use as u64),
            mib(sp.high_water as u64),
            sp.allocations,
            sp.frees,
            sp.zero_fills,
            sp.evictions,
            mib(sp.dropped_bytes),
            mib(sp.written_back_bytes)
        );
    }
    for sp in s.spaces.iter().filter(|sp| sp.prefetched_bytes > 0) {
        let _ = writeln!(
            out,
            "{}: copied ahead of use {:.3} MiB, used {:.3} MiB, wasted {:.3} MiB",
            sp.name,
            mib(sp.prefetched_bytes),
            mib(sp.prefetch_used_bytes),
            mib(sp.prefetch_wasted_bytes)
        );
    }
    out.push('\n');
    if s.links.is_empty() {
        out.push_str("links: nothing copied yet\n");
        return out;
    }
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>16} {:>12} {:>12}",
        "link", "copies", "bytes", "MiB", "time ms"
    );
    for l in &s.links {
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>16} {:>12.3} {:>12.3}",
            format!("{} -> {}", l.from, l.to),
            l.copies,
            l.bytes,
            mib(l.bytes),
            l.time.as_secs_f64() * 1e3
        );
    }
    out
}

/// Prints `target`'s figures once, or with `watch` every so many seconds until its process
/// ends (which ends the watch without an error once something was shown). A failed `print`
/// ends it with [`MemstatError::Write`] (a closed pipe included: the caller decides how
/// quietly).
pub fn run(
    target: &Target,
    watch: Option<f64>,
    mut print: impl FnMut(&str) -> std::io::Result<()>,
) -> Result<(), MemstatError> {
    let interval = match watch {
        None => None,
        Some(s) if s > 0.0 && s <= MAX_WATCH_S => {
            Some(Duration::try_from_secs_f64(s).map_err(|_| MemstatError::Interval(s))?)
        }
        Some(s) => return Err(MemstatError::Interval(s)),
    };
    let mut print = |text: &str| print(text).map_err(MemstatError::Write);
    let (path, snapshot) = read(target)?;
    print(&render(&path, &snapshot, SystemTime::now()))?;
    let Some(interval) = interval else {
        return Ok(());
    };
    loop {
        std::thread::sleep(interval);
        match read(target) {
            Ok((path, snapshot)) => print(&format!(
                "\n{}",
                render(&path, &snapshot, SystemTime::now())
            ))?,
            Err(
                MemstatError::NoPage { .. }
                | MemstatError::NoProcess { .. }
                | MemstatError::Stale { .. }
                | MemstatError::Page(PageError::Missing { .. }),
            ) => {
                return print("\nthe process has ended (its stats page is gone)\n");
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rimms::{LinkStats, SpaceStats};

    #[test]
    fn render_names_every_space_and_each_busy_link() {
        let space = |name: &str| SpaceStats {
            name: name.to_string(),
            capacity: 1 << 30,
            in_use: 3 << 20,
            high_water: 4 << 20,
            allocations: 7,
            frees: 2,
            zero_fills: 1,
            evictions: 9,
            dropped_bytes: 5 << 20,
            written_back_bytes: 6 << 20,
            prefetched_bytes: 3 << 20,
            prefetch_used_bytes: 2 << 20,
            prefetch_wasted_bytes: 1 << 20,
        };
        let snap = PageSnapshot {
            pid: 42,
            sequence: 10,
            updated: SystemTime::UNIX_EPOCH,
            spaces: vec![space("host"), space("sim0")],
            links: vec![LinkStats {
                from: "host".into(),
                to: "sim0".into(),
                copies: 5,
                bytes: 1 << 20,
                time: Duration::from_millis(2),
            }],
        };
        let text = render(
            Path::new("/tmp/p"),
            &snap,
            SystemTime::UNIX_EPOCH + Duration::from_millis(30),
        );
        assert!(
            text.contains("process 42: /tmp/p (updated 30 ms ago)"),
            "{text}"
        );
        let host = text.lines().find(|l| l.starts_with("host ")).expect(&text);
        assert!(host.contains("1024.00") && host.contains("3.000") && host.contains("4.000"));
        // The eviction columns: 9 blocks, 5 MiB dropped, 6 MiB written back.
        let columns: Vec<&str> = host.split_whitespace().collect();
        assert_eq!(columns[7..], ["9", "5.000", "6.000"], "{host}");
        let link = text
            .lines()
            .find(|l| l.starts_with("host -> sim0"))
            .expect(&text);
        assert!(link.contains(" 5 ") && link.contains("1048576"), "{link}");
        let quiet = PageSnapshot {
            links: Vec::new(),
            ..snap
        };
        assert!(render(Path::new("/tmp/p"), &quiet, SystemTime::UNIX_EPOCH)
            .contains("nothing copied yet"));
        let fresh = PageSnapshot {
            sequence: 0,
            ..quiet
        };
        assert!(
            render(Path::new("/tmp/p"), &fresh, SystemTime::now()).contains("(not updated yet)")
        );
    }

    #[test]
    fn a_bad_interval_is_refused_before_anything_is_read() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300, MAX_WATCH_S * 2.0] {
            let r = run(&Target::Pid(u32::MAX), Some(bad), |_| Ok(()));
            assert!(matches!(r, Err(MemstatError::Interval(_))), "{bad}: {r:?}");
        }
    }
}
