//! The virtual clock: modelled time for the parts of a run that an emulator stands in for.
//!
//! Why: the FPGA emulator runs the real driver against a model on this machine's cores. The
//! wall time of an emulated FPGA call is the emulator's polling and this machine's load, not a
//! board's; on a shared machine it swings several-fold between runs (issue 31). With a timing
//! model the driver's calls, the emulator's transfers and the host's copies into the u-dma-buf
//! do not wait out modelled time: they **charge** it here, and the wall time they spend is
//! **excluded**. A frame's time is then
//!
//! ```text
//! frame = wall − excluded + modelled
//! ```
//!
//! that is, the host's own measured work plus the modelled FPGA time; the emulator's spin time
//! is never counted.
//!
//! The clock is one per process (a bench builds many runtimes; each FPGA row's frames read the
//! same clock) and is off until a runtime opens an emulated board with a timing model
//! ([`enable`]). While it is off, [`exclude`] and [`charge`] do nothing, so code paths that
//! call them cost nothing on a board or without a model.
//!
//! Modelled time is summed: two FPGA calls that ran at the same time on two cores are counted
//! one after the other, as if one A53 thread drove both (an upper bound on the board's time for
//! independent calls; chains are sequential on the board too). Excluded wall time is the union
//! of the excluded intervals of every thread, so overlapping calls are not subtracted twice.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static MODELLED_NS: [AtomicU64; TERMS] = [const { AtomicU64::new(0) }; TERMS];
static EXCLUDED: Mutex<Excluded> = Mutex::new(Excluded {
    active: 0,
    since: None,
    total_ns: 0,
});
static MODEL: OnceLock<ModelCosts> = OnceLock::new();

/// What a piece of modelled time is, so a frame's modelled time can be taken apart (which
/// term makes the difference between two modes, or between the model and a paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// DMA transfers through the cores (the emulator's account).
    Transfer,
    /// AXI-Lite register accesses by the driver.
    Register,
    /// Cache maintenance of u-dma-buf ranges.
    CacheSync,
    /// Host copies between host memory and a u-dma-buf (the runtime's links, native uploads).
    Copy,
    /// The A53 reading and writing a u-dma-buf in place inside a driver call (ZIP staging, the
    /// inverse FFT's 1/N pass).
    CpuPass,
}

/// How many [`Term`]s there are.
pub const TERMS: usize = 5;

impl Term {
    /// Every term, in [`Reading::terms`] order.
    pub const ALL: [Term; TERMS] = [
        Term::Transfer,
        Term::Register,
        Term::CacheSync,
        Term::Copy,
        Term::CpuPass,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Term::Transfer => "dma+core",
            Term::Register => "registers",
            Term::CacheSync => "cache sync",
            Term::Copy => "host copies",
            Term::CpuPass => "cpu passes",
        }
    }
}

/// The excluded intervals' union so far.
struct Excluded {
    /// Threads inside an excluded interval now.
    active: u32,
    /// When the current union interval began.
    since: Option<Instant>,
    /// Wall nanoseconds of finished union intervals.
    total_ns: u64,
}

/// The host-side costs the clock charges itself (the emulator charges its transfers, the
/// register pages their accesses): copies between host memory and a u-dma-buf, and cache
/// maintenance of a range. Set once, by [`enable`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelCosts {
    /// A53 memcpy into or out of a cached u-dma-buf (bytes per second).
    pub copy_cached_bps: f64,
    /// A53 memcpy into or out of an uncached u-dma-buf (bytes per second).
    pub copy_uncached_bps: f64,
    /// Fixed cost of one host copy.
    pub copy_latency_ns: u64,
    /// Fixed cost of one cache-maintenance request (the sysfs write and its syscall).
    pub sync_call_ns: u64,
    /// Cache maintenance per byte of the range (clean / invalidate by line), bytes per second.
    pub sync_bps: f64,
}

impl ModelCosts {
    /// One host copy of `bytes` to or from a u-dma-buf that is `cached` or not.
    pub fn copy(&self, bytes: usize, cached: bool) -> Duration {
        let bps = if cached {
            self.copy_cached_bps
        } else {
            self.copy_uncached_bps
        };
        Duration::from_nanos(self.copy_latency_ns) + per_byte(bytes, bps)
    }

    /// One cache-maintenance request over `bytes`.
    pub fn sync(&self, bytes: usize) -> Duration {
        Duration::from_nanos(self.sync_call_ns) + per_byte(bytes, self.sync_bps)
    }
}

/// `bytes` at `bps`, cut to whole nanoseconds as `LinkModel::cost_ns` cuts a link's copy (one
/// convention for every modelled copy, and a hand computation matches exactly).
fn per_byte(bytes: usize, bps: f64) -> Duration {
    if bps > 0.0 {
        Duration::from_nanos((bytes as f64 * 1e9 / bps) as u64)
    } else {
        Duration::ZERO
    }
}

/// Turns the clock on with these host-side costs. The first caller's costs stay (one timing
/// model per process; a second, different one is logged and ignored).
pub fn enable(costs: ModelCosts) {
    let kept = MODEL.get_or_init(|| costs);
    if *kept != costs {
        tracing::warn!(
            "a second timing model asked for the virtual clock; the first one's costs stay"
        );
    }
    ON.store(true, Ordering::Release);
}

/// Whether the clock is on.
pub fn is_on() -> bool {
    ON.load(Ordering::Acquire)
}

/// The host-side costs, while the clock is on.
pub fn costs() -> Option<ModelCosts> {
    is_on().then(|| MODEL.get().copied()).flatten()
}

/// Adds `d` of modelled time of kind `term` (nothing while the clock is off).
pub fn charge(term: Term, d: Duration) {
    if is_on() {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        MODELLED_NS[term as usize].fetch_add(ns, Ordering::AcqRel);
    }
}

/// Runs `f` with its wall time excluded from frames (while the clock is on). `f` runs outside
/// the clock's lock.
pub fn exclude<T>(f: impl FnOnce() -> T) -> T {
    if !is_on() {
        return f();
    }
    enter();
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            leave();
        }
    }
    let _leave = Leave;
    f()
}

fn lock() -> std::sync::MutexGuard<'static, Excluded> {
    // The guarded data is three counters, consistent after every statement: a panic elsewhere
    // cannot leave them half-updated.
    EXCLUDED.lock().unwrap_or_else(|p| p.into_inner())
}

fn enter() {
    let mut e = lock();
    if e.active == 0 {
        e.since = Some(Instant::now());
    }
    e.active += 1;
}

fn leave() {
    let mut e = lock();
    e.active = e.active.saturating_sub(1);
    if e.active == 0 {
        if let Some(since) = e.since.take() {
            let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            e.total_ns = e.total_ns.saturating_add(ns);
        }
    }
}

/// The clock's counters at one moment; two of them bracket a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Modelled nanoseconds charged so far, by [`Term`] (in [`Term::ALL`] order).
    pub terms: [u64; TERMS],
    /// Wall nanoseconds excluded so far (finished intervals; a frame reads the clock when no
    /// call of its own is in flight).
    pub excluded_ns: u64,
}

/// The counters now.
pub fn read() -> Reading {
    Reading {
        terms: MODELLED_NS.each_ref().map(|t| t.load(Ordering::Acquire)),
        excluded_ns: lock().total_ns,
    }
}

impl Reading {
    /// Modelled nanoseconds charged so far, all terms.
    pub fn modelled_ns(&self) -> u64 {
        self.terms.iter().sum()
    }

    /// A frame's time on the virtual clock: its `wall` time less the wall time excluded since
    /// `self`, plus the modelled time charged since `self`, up to `end`.
    pub fn frame_time(self, end: Reading, wall: Duration) -> Duration {
        let excluded = Duration::from_nanos(end.excluded_ns.saturating_sub(self.excluded_ns));
        wall.saturating_sub(excluded) + self.modelled_until(end)
    }

    /// Modelled time charged between `self` and `end`.
    pub fn modelled_until(self, end: Reading) -> Duration {
        Duration::from_nanos(end.modelled_ns().saturating_sub(self.modelled_ns()))
    }

    /// Modelled time charged between `self` and `end`, by term (in [`Term::ALL`] order).
    pub fn terms_until(self, end: Reading) -> [Duration; TERMS] {
        std::array::from_fn(|i| Duration::from_nanos(end.terms[i].saturating_sub(self.terms[i])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_wall_less_excluded_plus_modelled() {
        let a = Reading {
            terms: [1_000, 0, 0, 0, 0],
            excluded_ns: 5_000,
        };
        let b = Reading {
            terms: [3_000, 0, 2_000, 0, 0],
            excluded_ns: 6_500,
        };
        // 10 µs wall, 1.5 µs of it excluded, 4 µs modelled: 12.5 µs.
        assert_eq!(
            a.frame_time(b, Duration::from_nanos(10_000)),
            Duration::from_nanos(12_500)
        );
        assert_eq!(a.modelled_until(b), Duration::from_nanos(4_000));
        assert_eq!(
            a.terms_until(b)[Term::CacheSync as usize],
            Duration::from_nanos(2_000)
        );
        // More excluded than wall (a call that began before the frame): never negative.
        assert_eq!(
            a.frame_time(b, Duration::from_nanos(1_000)),
            Duration::from_nanos(4_000)
        );
    }

    #[test]
    fn copy_and_sync_costs_follow_the_constants() {
        let c = ModelCosts {
            copy_cached_bps: 1e9,
            copy_uncached_bps: 1e8,
            copy_latency_ns: 2_000,
            sync_call_ns: 3_000,
            sync_bps: 4e9,
        };
        // 1 MB: 1 ms cached, 10 ms uncached, 0.25 ms of maintenance, plus the fixed costs.
        assert_eq!(c.copy(1_000_000, true), Duration::from_nanos(1_002_000));
        assert_eq!(c.copy(1_000_000, false), Duration::from_nanos(10_002_000));
        assert_eq!(c.sync(1_000_000), Duration::from_nanos(253_000));
    }
}
