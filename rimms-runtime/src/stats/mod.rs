//! Counters that are always on and cheap, and the snapshot `Runtime::stats` returns.
//!
//! Per link: copies, bytes and time; per space: pool use, high-water mark, allocations and zero
//! fills; per API: calls, hits (nothing moved) and misses. Counters are relaxed atomics bumped
//! where the work happens; a snapshot is a consistent-enough read for reporting, and exact once
//! the program is quiet, which is when tests compare it.

pub mod page;
mod timeline;
mod trace;

pub(crate) use timeline::Timeline;
pub use timeline::TRACE_FILE_ENV;
pub(crate) use trace::Reason;
pub(crate) use trace::{enabled_from_env as trace_enabled_from_env, trace_transfer};

use crate::space::MAX_SPACES;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct LinkCounter {
    copies: AtomicU64,
    bytes: AtomicU64,
    nanos: AtomicU64,
}

#[derive(Default)]
pub(crate) struct ApiCounter {
    calls: AtomicU64,
    /// Misses rather than hits, so that a hit costs one atomic add, not two.
    misses: AtomicU64,
}

/// The live counters of one runtime.
pub(crate) struct Counters {
    links: [[LinkCounter; MAX_SPACES]; MAX_SPACES],
    fills: [AtomicU64; MAX_SPACES],
    apis: Vec<ApiCounter>,
}

impl Counters {
    pub(crate) fn new(apis: usize) -> Counters {
        Counters {
            links: Default::default(),
            fills: Default::default(),
            apis: (0..apis).map(|_| ApiCounter::default()).collect(),
        }
    }

    pub(crate) fn record_copy(&self, from: usize, to: usize, bytes: usize, time: Duration) {
        let link = &self.links[from][to];
        link.copies.fetch_add(1, Relaxed);
        link.bytes.fetch_add(bytes as u64, Relaxed);
        link.nanos.fetch_add(time.as_nanos() as u64, Relaxed);
    }

    pub(crate) fn record_fill(&self, space: usize) {
        self.fills[space].fetch_add(1, Relaxed);
    }

    #[inline]
    pub(crate) fn record_call(&self, api: usize, hit: bool) {
        if let Some(c) = self.apis.get(api) {
            c.calls.fetch_add(1, Relaxed);
            if !hit {
                c.misses.fetch_add(1, Relaxed);
            }
        }
    }

    pub(crate) fn link(&self, from: usize, to: usize) -> (u64, u64, Duration) {
        let l = &self.links[from][to];
        (
            l.copies.load(Relaxed),
            l.bytes.load(Relaxed),
            Duration::from_nanos(l.nanos.load(Relaxed)),
        )
    }

    pub(crate) fn fills(&self, space: usize) -> u64 {
        self.fills[space].load(Relaxed)
    }

    /// (calls, hits) of one API.
    pub(crate) fn api(&self, api: usize) -> (u64, u64) {
        self.apis.get(api).map_or((0, 0), |c| {
            let calls = c.calls.load(Relaxed);
            (calls, calls.saturating_sub(c.misses.load(Relaxed)))
        })
    }

    pub(crate) fn clear(&self) {
        for link in self.links.iter().flatten() {
            link.copies.store(0, Relaxed);
            link.bytes.store(0, Relaxed);
            link.nanos.store(0, Relaxed);
        }
        for f in &self.fills {
            f.store(0, Relaxed);
        }
        for a in &self.apis {
            a.calls.store(0, Relaxed);
            a.misses.store(0, Relaxed);
        }
    }
}

/// Figures of one link (a direction between two spaces) that carried at least one copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStats {
    /// Source space.
    pub from: String,
    /// Destination space.
    pub to: String,
    /// Number of copies.
    pub copies: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Time spent copying.
    pub time: Duration,
}

/// Figures of one memory space's pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceStats {
    /// Space name.
    pub name: String,
    /// Pool size in bytes.
    pub capacity: usize,
    /// Bytes allocated now.
    pub in_use: usize,
    /// Most bytes allocated at once.
    pub high_water: usize,
    /// Blocks allocated so far.
    pub allocations: u64,
    /// Blocks freed so far.
    pub frees: u64,
    /// Runs of zero-marked fragments materialised by a fill (no transfer).
    pub zero_fills: u64,
}

/// Figures of one API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiStats {
    /// API name.
    pub name: &'static str,
    /// Calls made.
    pub calls: u64,
    /// Calls for which nothing had to move or be filled.
    pub hits: u64,
    /// Calls that moved or filled something first.
    pub misses: u64,
}

/// A snapshot of a runtime's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Links that carried at least one copy.
    pub links: Vec<LinkStats>,
    /// Every space.
    pub spaces: Vec<SpaceStats>,
    /// APIs called at least once.
    pub apis: Vec<ApiStats>,
}

impl Stats {
    /// The link `from` → `to`, by space name, if it carried anything.
    pub fn link(&self, from: &str, to: &str) -> Option<&LinkStats> {
        self.links.iter().find(|l| l.from == from && l.to == to)
    }

    /// Bytes copied over `from` → `to` (0 if none).
    pub fn bytes(&self, from: &str, to: &str) -> u64 {
        self.link(from, to).map_or(0, |l| l.bytes)
    }

    /// Copies over `from` → `to` (0 if none).
    pub fn copies(&self, from: &str, to: &str) -> u64 {
        self.link(from, to).map_or(0, |l| l.copies)
    }

    /// Bytes copied over every link.
    pub fn total_bytes(&self) -> u64 {
        self.links.iter().map(|l| l.bytes).sum()
    }

    /// Copies over every link.
    pub fn total_copies(&self) -> u64 {
        self.links.iter().map(|l| l.copies).sum()
    }

    /// The space named `name`.
    pub fn space(&self, name: &str) -> Option<&SpaceStats> {
        self.spaces.iter().find(|s| s.name == name)
    }

    /// The API named `name`.
    pub fn api(&self, name: &str) -> Option<&ApiStats> {
        self.apis.iter().find(|a| a.name == name)
    }
}
