//! Counters that are always on and cheap, and the snapshot `Runtime::stats` returns.
//!
//! Per link: copies, bytes and time; per space: pool use, high-water mark, allocations and zero
//! fills; per API: calls, hits (nothing moved) and misses. Counters are relaxed atomics bumped
//! where the work happens; a snapshot is a consistent-enough read for reporting, and exact once
//! the program is quiet, which is when tests compare it.

mod after_locks;
pub mod page;
mod timeline;
mod trace;

pub(crate) use after_locks::AfterLocks;
pub(crate) use timeline::Timeline;
pub use timeline::{may_replace_with_a_trace, NotATrace, TRACE_FILE_ENV, TRACE_FILE_HEAD};
pub(crate) use trace::Reason;

pub(crate) use trace::{
    enabled_from_env as trace_enabled_from_env, trace_eviction, trace_transfer,
};

use crate::hal::{Error, Result};
use crate::hal::{SpaceId, MAX_SPACES};
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
    /// Calls of this API a scope merged with their neighbours, and the device calls they
    /// became (see `kernel::merge`).
    merged: AtomicU64,
    merged_into: AtomicU64,
    /// Merged calls that failed and ran again one call a row.
    merge_retries: AtomicU64,
}

/// What eviction did in one space.
#[derive(Default)]
pub(crate) struct EvictionCounter {
    evictions: AtomicU64,
    dropped_bytes: AtomicU64,
    written_back_bytes: AtomicU64,
}

/// Bytes of copies made ahead of their use (prefetches, a scope's copies at submission,
/// predictions) into one space, and what became of them.
#[derive(Default)]
pub(crate) struct AheadCounter {
    issued: AtomicU64,
    used: AtomicU64,
    wasted: AtomicU64,
}

/// What became of bytes copied ahead of their use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// Copied ahead.
    Issued,
    /// Read in the space they were copied to.
    Used,
    /// Overwritten, evicted or freed before any read there.
    Wasted,
}

/// The live counters of one runtime's memory system: copies per link, fills, evictions and
/// copies made ahead per space.
#[derive(Default)]
pub(crate) struct Counters {
    links: [[LinkCounter; MAX_SPACES]; MAX_SPACES],
    fills: [AtomicU64; MAX_SPACES],
    evictions: [EvictionCounter; MAX_SPACES],
    ahead: [AheadCounter; MAX_SPACES],
}

impl Counters {
    pub(crate) fn record_copy(&self, from: usize, to: usize, bytes: usize, time: Duration) {
        let link = &self.links[from][to];
        link.copies.fetch_add(1, Relaxed);
        link.bytes.fetch_add(bytes as u64, Relaxed);
        link.nanos.fetch_add(time.as_nanos() as u64, Relaxed);
    }

    /// One block evicted from `space`: `dropped` bytes of valid copies dropped for free,
    /// `written_back` bytes copied out first.
    pub(crate) fn record_eviction(&self, space: usize, dropped: usize, written_back: usize) {
        let e = &self.evictions[space];
        e.evictions.fetch_add(1, Relaxed);
        e.dropped_bytes.fetch_add(dropped as u64, Relaxed);
        e.written_back_bytes.fetch_add(written_back as u64, Relaxed);
    }

    /// (evictions, bytes dropped, bytes written back) of one space.
    pub(crate) fn evictions(&self, space: usize) -> (u64, u64, u64) {
        let e = &self.evictions[space];
        (
            e.evictions.load(Relaxed),
            e.dropped_bytes.load(Relaxed),
            e.written_back_bytes.load(Relaxed),
        )
    }

    /// `bytes` copied ahead into `space`, or used or wasted there.
    pub(crate) fn record_ahead(&self, space: usize, what: Ahead, bytes: u64) {
        let a = &self.ahead[space];
        let counter = match what {
            Ahead::Issued => &a.issued,
            Ahead::Used => &a.used,
            Ahead::Wasted => &a.wasted,
        };
        counter.fetch_add(bytes, Relaxed);
    }

    /// (issued, used, wasted) bytes copied ahead into one space.
    pub(crate) fn ahead(&self, space: usize) -> (u64, u64, u64) {
        let a = &self.ahead[space];
        (
            a.issued.load(Relaxed),
            a.used.load(Relaxed),
            a.wasted.load(Relaxed),
        )
    }

    pub(crate) fn record_fill(&self, space: usize) {
        self.fills[space].fetch_add(1, Relaxed);
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

    pub(crate) fn clear(&self) {
        for link in self.links.iter().flatten() {
            link.copies.store(0, Relaxed);
            link.bytes.store(0, Relaxed);
            link.nanos.store(0, Relaxed);
        }
        for f in &self.fills {
            f.store(0, Relaxed);
        }
        for e in &self.evictions {
            e.evictions.store(0, Relaxed);
            e.dropped_bytes.store(0, Relaxed);
            e.written_back_bytes.store(0, Relaxed);
        }
        for a in &self.ahead {
            a.issued.store(0, Relaxed);
            a.used.store(0, Relaxed);
            a.wasted.store(0, Relaxed);
        }
    }
}

/// The live call counters of one runtime, per declared API.
pub(crate) struct ApiCounters {
    apis: Vec<ApiCounter>,
}

impl ApiCounters {
    pub(crate) fn new(apis: usize) -> ApiCounters {
        ApiCounters {
            apis: (0..apis).map(|_| ApiCounter::default()).collect(),
        }
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

    /// `calls` calls of API `api` ran as one merged device call.
    pub(crate) fn record_merge(&self, api: usize, calls: usize) {
        if let Some(c) = self.apis.get(api) {
            c.merged.fetch_add(calls as u64, Relaxed);
            c.merged_into.fetch_add(1, Relaxed);
        }
    }

    /// A merged call of API `api` failed and its calls run again one by one.
    pub(crate) fn record_merge_retry(&self, api: usize) {
        if let Some(c) = self.apis.get(api) {
            c.merge_retries.fetch_add(1, Relaxed);
        }
    }

    /// Merged calls of one API that ran again one by one.
    pub(crate) fn merge_retries(&self, api: usize) -> u64 {
        self.apis
            .get(api)
            .map_or(0, |c| c.merge_retries.load(Relaxed))
    }

    /// (calls merged, device calls they became) of one API.
    pub(crate) fn merges(&self, api: usize) -> (u64, u64) {
        self.apis.get(api).map_or((0, 0), |c| {
            (c.merged.load(Relaxed), c.merged_into.load(Relaxed))
        })
    }

    /// (calls, hits) of one API.
    pub(crate) fn api(&self, api: usize) -> (u64, u64) {
        self.apis.get(api).map_or((0, 0), |c| {
            let calls = c.calls.load(Relaxed);
            (calls, calls.saturating_sub(c.misses.load(Relaxed)))
        })
    }

    pub(crate) fn clear(&self) {
        for a in &self.apis {
            a.calls.store(0, Relaxed);
            a.misses.store(0, Relaxed);
            a.merged.store(0, Relaxed);
            a.merged_into.store(0, Relaxed);
            a.merge_retries.store(0, Relaxed);
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
    /// Blocks evicted from this space's pool to make room.
    pub evictions: u64,
    /// Bytes of valid copies evicted blocks held that another space (or the zero mark) also
    /// held: dropped without a copy.
    pub dropped_bytes: u64,
    /// Bytes evicted blocks held the only valid copy of, written back elsewhere first.
    pub written_back_bytes: u64,
    /// Bytes copied into this space ahead of the call that needs them: prefetches
    /// ([`crate::HeteData::prefetch_async`]), a scope's inputs at submission, and predicted
    /// copies (see [`crate::RuntimeBuilder::prefetch`]).
    pub prefetched_bytes: u64,
    /// Of those, bytes that a read here used.
    pub prefetch_used_bytes: u64,
    /// Of those, bytes overwritten, evicted or freed before any read here: the cost of a
    /// wrong prediction. Bytes neither used nor wasted yet are still waiting for their read.
    pub prefetch_wasted_bytes: u64,
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
    /// Calls of this API that a scope merged with their neighbours (see
    /// [`crate::kernel::MergeRule`]); they are not in `calls`, which counts device calls.
    pub merged: u64,
    /// The device calls those merged calls became, each counted in `calls` of the API it ran
    /// as (`zip`s with a shared operand run as one `zip_rows`).
    pub merged_into: u64,
    /// Merged calls that failed (a merged call over many rows may not fit where its rows one
    /// at a time do, under memory pressure) and whose calls ran again one by one.
    pub merge_retries: u64,
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

/// A memory space in a stats lookup: its name (`"host"`, `"sim0"`, `"udmabuf0"`) or its
/// [`SpaceId`], which [`Runtime::space_of`](crate::Runtime::space_of) gives for a device.
///
/// A device and its memory are named differently (`fpga0` computes in `udmabuf0`), so a
/// lookup by a name that is not a space is an error rather than a silent zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceRef<'a> {
    /// The space's name, as in [`SpaceStats::name`].
    Name(&'a str),
    /// The space's id.
    Id(SpaceId),
}

impl<'a> From<&'a str> for SpaceRef<'a> {
    fn from(name: &'a str) -> Self {
        SpaceRef::Name(name)
    }
}

/// A name from a list of names (`for name in &["host", "sim0"]`).
impl<'a> From<&&'a str> for SpaceRef<'a> {
    fn from(name: &&'a str) -> Self {
        SpaceRef::Name(name)
    }
}

impl<'a> From<&'a String> for SpaceRef<'a> {
    fn from(name: &'a String) -> Self {
        SpaceRef::Name(name)
    }
}

impl From<SpaceId> for SpaceRef<'_> {
    fn from(id: SpaceId) -> Self {
        SpaceRef::Id(id)
    }
}

impl Stats {
    /// The name of a space, checked: an unknown name or id is an [`Error::UnknownName`].
    fn space_name<'s>(&'s self, space: SpaceRef<'_>) -> Result<&'s str> {
        let found = match space {
            SpaceRef::Name(name) => self.spaces.iter().find(|s| s.name == name),
            // Snapshots list spaces in id order.
            SpaceRef::Id(id) => self.spaces.get(id.index()),
        };
        found.map(|s| s.name.as_str()).ok_or_else(|| Error::UnknownName {
            what: "space",
            name: match space {
                SpaceRef::Name(name) => name.to_string(),
                SpaceRef::Id(id) => format!("#{}", id.index()),
            },
            known: self.spaces.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
            hint: "; a device computes in a space of another name (fpga0 in udmabuf0): look it up with `Runtime::space_of(device)`",
        })
    }

    /// The link `from` → `to` (by name or [`SpaceId`]); `Ok(None)` if it carried nothing, an
    /// error if either space does not exist.
    ///
    /// ```
    /// # fn main() -> rimms_runtime::Result<()> {
    /// use rimms_runtime::{Complex32, Device, HeteData, Runtime, SimConfig, SpaceId};
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 2.0); 256])?;
    /// let mut y = HeteData::<Complex32>::alloc(&rt, 256)?;
    /// rt.conj(Device::Sim(0), &x, &mut y)?;
    /// let sim = rt.space_of(Device::Sim(0))?;
    /// let stats = rt.stats();
    /// // x went to the simulated device once: 256 elements of 8 bytes.
    /// assert_eq!(stats.link(SpaceId::HOST, sim)?.map(|l| l.bytes), Some(2048));
    /// assert_eq!(stats.link("sim0", "host")?, None);
    /// assert!(stats.link("host", "fpga0").is_err()); // no such space
    /// # Ok(())
    /// # }
    /// ```
    pub fn link<'a>(
        &self,
        from: impl Into<SpaceRef<'a>>,
        to: impl Into<SpaceRef<'a>>,
    ) -> Result<Option<&LinkStats>> {
        let (from, to) = (self.space_name(from.into())?, self.space_name(to.into())?);
        Ok(self.links.iter().find(|l| l.from == from && l.to == to))
    }

    /// Bytes copied over `from` → `to` (0 if none); an error if either space does not exist.
    pub fn bytes<'a>(
        &self,
        from: impl Into<SpaceRef<'a>>,
        to: impl Into<SpaceRef<'a>>,
    ) -> Result<u64> {
        Ok(self.link(from, to)?.map_or(0, |l| l.bytes))
    }

    /// Copies over `from` → `to` (0 if none); an error if either space does not exist.
    pub fn copies<'a>(
        &self,
        from: impl Into<SpaceRef<'a>>,
        to: impl Into<SpaceRef<'a>>,
    ) -> Result<u64> {
        Ok(self.link(from, to)?.map_or(0, |l| l.copies))
    }

    /// Bytes copied over every link.
    pub fn total_bytes(&self) -> u64 {
        self.links.iter().map(|l| l.bytes).sum()
    }

    /// Copies over every link.
    pub fn total_copies(&self) -> u64 {
        self.links.iter().map(|l| l.copies).sum()
    }

    /// The space named `space` (or with that id); an error if there is none.
    pub fn space<'a>(&self, space: impl Into<SpaceRef<'a>>) -> Result<&SpaceStats> {
        let name = self.space_name(space.into())?;
        // `space_name` found it among `spaces`.
        self.spaces
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| Error::Config(format!("space {name} vanished from its snapshot")))
    }

    /// The figures of the API named `name` (zeros if it was never called); an error if no
    /// API of that name is declared.
    pub fn api(&self, name: &str) -> Result<ApiStats> {
        if let Some(a) = self.apis.iter().find(|a| a.name == name) {
            return Ok(a.clone());
        }
        let declared = crate::hal::registry::registry().apis();
        match declared.iter().find(|a| a.name() == name) {
            Some(a) => Ok(ApiStats {
                name: a.name(),
                calls: 0,
                hits: 0,
                misses: 0,
                merged: 0,
                merged_into: 0,
                merge_retries: 0,
            }),
            None => Err(Error::UnknownName {
                what: "API",
                name: name.to_string(),
                known: declared
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                hint: "",
            }),
        }
    }
}
