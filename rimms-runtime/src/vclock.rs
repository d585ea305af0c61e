//! The virtual clock: modelled time for the parts of a run that an emulator stands in for.
//!
//! Why: the FPGA emulator runs the real driver against a model on this machine's cores. The
//! wall time of an emulated FPGA call is the emulator's polling and this machine's load, not a
//! board's; on a shared machine it swings several-fold between runs (issue 31). With a timing
//! model the driver's calls, the emulator's transfers and the host's copies into the u-dma-buf
//! do not wait out modelled time: they **charge** it here, and the wall time they spend is
//! **excluded**.
//!
//! # Lanes: a small critical-path model
//!
//! Time is kept on one axis (nanoseconds), and every thread has a **lane**: where its own work
//! so far ends on that axis. A lane moves by
//!
//! - **measured host work**: while a thread is *measuring* (a timed frame on the thread that
//!   reads the clock, and the scope jobs that frame hands out), its wall time outside excluded
//!   calls and outside blocking waits ([`blocked`]) is added as it passes;
//! - **modelled host-side work** the thread does itself ([`charge`]: register accesses, cache
//!   maintenance, copies into and out of the u-dma-buf, the driver's passes over it): the A53
//!   thread that makes a driver call does these one after another, so they add up on its lane;
//! - **accelerators**: each accelerator (its AXI DMA's two channels and its core) is one
//!   resource with its own timeline. A driver call holds the accelerator from [`acquire`] to
//!   [`release`]: it starts at the later of the calling lane and the accelerator's free time,
//!   and the DMA transfers the emulator modelled meanwhile ([`post_transfer`]) are added to the
//!   lane before the accelerator is free again.
//!   The DMA channels and the core are not separate timelines because nothing uses them
//!   separately: the driver serialises every call on an accelerator under one lock (register
//!   set-up, the transfers, the completion wait), a batched FFT waits for each row's round
//!   trip before the next, and the model's phases of a transfer (start-up, MM2S, core, S2MM)
//!   follow one another. Per-channel timelines would only ever repeat the accelerator's;
//! - **hand-offs** ([`Mark`], [`strand`], [`join`]): work sent to another thread (a scope's
//!   jobs) starts there no earlier than where the sender's lane stood when it sent it, and a
//!   thread that waited for work takes the latest end of what it waited for. A job's wait in
//!   a queue is not counted (on this machine it is load, not the board's).
//!
//! So a call's start is the later of its resource's free time and its inputs' readiness (the
//! program order of its thread, and the ends of what that thread waited for): two independent
//! FFTs on two FFT cores, submitted from two threads or to one scope, overlap; a chain, where
//! each call is made after the one before returned, adds up. Host work that a thread does
//! while a call it handed out runs on another thread overlaps that call's modelled time
//! instead of adding to it.
//!
//! A frame's time is the advance of the lane of the thread that reads the clock around it:
//!
//! ```text
//! frame = lane(end) − lane(start)
//!       = host's own measured work + modelled FPGA time, along the frame's critical path
//! ```
//!
//! and where nothing overlaps (one thread, or a thread that only waits for the calls it hands
//! out), that is the host's measured work plus the sum of the modelled terms. The emulator's
//! spin time is never counted. [`Reading::terms`] keep the modelled work by kind, summed over
//! every lane (what each term cost, whether or not it overlapped another).
//!
//! The clock is one per process (a bench builds many runtimes; each FPGA row's frames read the
//! same clock) and is off until a runtime opens an emulated board with a timing model
//! ([`enable`]). While it is off, every function here returns at once or runs its closure, so
//! code paths that call them cost nothing on a board or without a model.
//!
//! What the lanes do not see: a thread that blocks on something other than a scope's wait (a
//! buffer's lock held by another thread's FPGA call, a `prefetch_async` landing) counts that
//! wait as host work; threads a program starts itself begin at the axis's origin and are not
//! joined unless it hands them a [`Mark`] and joins theirs.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static MODELLED_NS: [AtomicU64; TERMS] = [const { AtomicU64::new(0) }; TERMS];
static EXCLUDED: Mutex<Excluded> = Mutex::new(Excluded {
    active: 0,
    since: None,
    total_ns: 0,
});
static MODEL: OnceLock<ModelCosts> = OnceLock::new();
/// The accelerators' timelines and the transfers posted to them, by accelerator key.
static ACCELERATORS: Mutex<BTreeMap<String, Timeline>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// This thread's lane.
    static LANE: Cell<Lane> = const { Cell::new(Lane { at: 0, since: None }) };
}

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

/// Adds `d` of modelled time of kind `term`, done by the calling thread: it moves this
/// thread's lane (nothing while the clock is off).
pub fn charge(term: Term, d: Duration) {
    if is_on() {
        let ns = nanos(d);
        MODELLED_NS[term as usize].fetch_add(ns, Ordering::AcqRel);
        with_lane(|l| l.at = l.at.saturating_add(ns));
    }
}

/// A DMA transfer through accelerator `key` that the emulator modelled as `d`, charged as
/// [`Term::Transfer`] and posted to the accelerator: the driver call that holds it adds it to
/// its lane at [`release`]. The emulator's thread calls this, not the driver's.
pub fn post_transfer(key: &str, d: Duration) {
    if is_on() {
        let ns = nanos(d);
        MODELLED_NS[Term::Transfer as usize].fetch_add(ns, Ordering::AcqRel);
        let mut all = accelerators();
        let t = all.entry(key.to_owned()).or_default();
        t.posted = t.posted.saturating_add(ns);
    }
}

/// A driver call takes accelerator `key`: this thread's lane moves to the accelerator's free
/// time if that is later (the call waits for the one before it on the board too).
pub fn acquire(key: &str) {
    if is_on() {
        let free = accelerators().get(key).map_or(0, |t| t.free);
        with_lane(|l| Timeline::acquire(free, l, Instant::now()));
    }
}

/// The driver call gives accelerator `key` back: the transfers posted to it meanwhile are
/// added to this thread's lane (the call waited for them), and the accelerator is free from
/// there.
pub fn release(key: &str) {
    if is_on() {
        let mut all = accelerators();
        let t = all.entry(key.to_owned()).or_default();
        with_lane(|l| t.release(l, Instant::now()));
    }
}

fn accelerators() -> MutexGuard<'static, BTreeMap<String, Timeline>> {
    // Two counters per accelerator, each updated in one statement: a panic elsewhere cannot
    // leave them half-updated.
    ACCELERATORS.lock().unwrap_or_else(|p| p.into_inner())
}

/// One accelerator's timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Timeline {
    /// Where on the axis its last call ended.
    free: u64,
    /// Modelled transfer time posted by the emulator and not yet taken by a call.
    posted: u64,
}

impl Timeline {
    /// A call on `lane` takes an accelerator free from `free`.
    fn acquire(free: u64, lane: &mut Lane, now: Instant) {
        lane.catch_up(now);
        lane.at = lane.at.max(free);
    }

    /// The call on `lane` gives it back, having waited for the transfers posted meanwhile.
    fn release(&mut self, lane: &mut Lane, now: Instant) {
        lane.catch_up(now);
        lane.at = lane.at.saturating_add(std::mem::take(&mut self.posted));
        self.free = lane.at;
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A thread's place on the axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lane {
    /// Where its work so far ends (nanoseconds on the axis).
    at: u64,
    /// While measuring: the wall instant up to which its host work is already in `at`.
    since: Option<Instant>,
}

impl Lane {
    /// Adds the host work measured since the last catch-up.
    fn catch_up(&mut self, now: Instant) {
        if let Some(since) = self.since {
            self.at = self
                .at
                .saturating_add(nanos(now.saturating_duration_since(since)));
            self.since = Some(now);
        }
    }

    /// Stops measuring at `now` (an excluded call, a blocking wait); returns whether it was.
    fn pause(&mut self, now: Instant) -> bool {
        self.catch_up(now);
        self.since.take().is_some()
    }

    /// Measures again from `now` if it was measuring before the matching [`Lane::pause`].
    fn resume(&mut self, was: bool, now: Instant) {
        self.since = was.then_some(now);
    }

    /// Starts work handed over at `sent`: no earlier than the sender stood, measuring if the
    /// sender was. Returns what to restore when the work ends.
    fn take_over(&mut self, sent: Mark, now: Instant) -> bool {
        let was = self.pause(now);
        self.at = self.at.max(sent.at);
        if sent.measuring {
            self.since = Some(now);
        }
        was
    }

    /// Ends handed-over work at `now`: where it ended, and the lane measures again as before.
    fn hand_back(&mut self, was: bool, now: Instant) -> Mark {
        let end = self.mark(now);
        self.resume(was, now);
        end
    }

    /// Where the lane stands at `now`.
    fn mark(&mut self, now: Instant) -> Mark {
        self.catch_up(now);
        Mark {
            at: self.at,
            measuring: self.since.is_some(),
        }
    }

    /// Waited-for work that ended at `end`.
    fn join(&mut self, end: u64) {
        self.at = self.at.max(end);
    }

    /// Steps aside at `now` to run work for others (see [`beside`]): stops measuring, and
    /// returns where the lane stood, to come back to. Meanwhile the lane stands at the origin,
    /// so work handed over ([`Lane::take_over`]) starts where it was sent.
    fn step_aside(&mut self, now: Instant) -> Aside {
        let measuring = self.pause(now);
        let aside = Aside {
            at: self.at,
            measuring,
        };
        self.at = 0;
        aside
    }

    /// Comes back at `now` from work run aside: the lane stands where it stood before it.
    fn come_back(&mut self, aside: Aside, now: Instant) {
        self.at = aside.at;
        self.resume(aside.measuring, now);
    }
}

/// Where a lane stood when it stepped aside ([`Lane::step_aside`]).
#[derive(Clone, Copy, Debug)]
struct Aside {
    at: u64,
    measuring: bool,
}

fn with_lane<T>(f: impl FnOnce(&mut Lane) -> T) -> T {
    LANE.with(|cell| {
        let mut lane = cell.get();
        let out = f(&mut lane);
        cell.set(lane);
        out
    })
}

/// Where a thread's lane stood, to hand to work it sends elsewhere ([`strand`]) or to join
/// ([`join`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    at: u64,
    measuring: bool,
}

impl Mark {
    /// Nanoseconds on the axis.
    pub fn ns(self) -> u64 {
        self.at
    }

    /// The point `ns` on the axis (to [`join`]: where some work ended).
    pub fn at_ns(ns: u64) -> Mark {
        Mark {
            at: ns,
            measuring: false,
        }
    }
}

/// Where this thread's lane stands now (the origin while the clock is off).
pub fn mark() -> Mark {
    if !is_on() {
        return Mark::default();
    }
    with_lane(|l| l.mark(Instant::now()))
}

/// Work sent at `sent` runs on this thread from here until the returned [`Strand`] is ended or
/// dropped: the lane starts no earlier than `sent` and measures host work if the sender did.
pub fn strand(sent: Mark) -> Strand {
    if !is_on() {
        return Strand { was: None };
    }
    let was = with_lane(|l| l.take_over(sent, Instant::now()));
    Strand { was: Some(was) }
}

/// Handed-over work running on this thread (see [`strand`]).
#[must_use = "a strand measures until it is ended"]
pub struct Strand {
    /// `None` when the clock was off at the start; else whether the lane was measuring before.
    was: Option<bool>,
}

impl Strand {
    /// Ends the work: where it ended, for the thread that waits for it to [`join`].
    pub fn end(mut self) -> Mark {
        self.finish()
    }

    fn finish(&mut self) -> Mark {
        match self.was.take() {
            Some(was) => with_lane(|l| l.hand_back(was, Instant::now())),
            None => Mark::default(),
        }
    }
}

impl Drop for Strand {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Runs `f`, other devices' work that this thread runs while it waits (jobs whose devices'
/// workers have not taken them yet), as if another thread ran it: its strands start where
/// they were sent, not where this thread's own work (a group a scope ran here) or the last
/// job it ran ended, and this thread's lane stands where it was afterwards. A waiting thread
/// that ran the jobs of two devices one after another otherwise added them up on the axis,
/// where the devices run side by side (and the result depended on which thread ran which
/// job). Jobs of one device chain within one `f`, as on the device's worker; an
/// accelerator's own timeline ([`acquire`]) orders its calls whoever makes them.
pub fn beside<T>(f: impl FnOnce() -> T) -> T {
    around(Lane::step_aside, Lane::come_back, f)
}

/// This thread waited for work that ended at `end`: its lane moves there if that is later.
pub fn join(end: Mark) {
    if is_on() {
        with_lane(|l| l.join(end.at));
    }
}

/// Runs `f`, a wait for other threads' work, without measuring it as this thread's host work
/// (join what it waited for afterwards). `f` runs outside the clock's locks.
pub fn blocked<T>(f: impl FnOnce() -> T) -> T {
    around(Lane::pause, Lane::resume, f)
}

/// Runs `f` (while the clock is on) between `enter` and `leave` on this thread's lane,
/// `leave` getting what `enter` returned; `leave` runs when `f` unwinds too.
fn around<S: Copy, T>(
    enter: fn(&mut Lane, Instant) -> S,
    leave: fn(&mut Lane, S, Instant),
    f: impl FnOnce() -> T,
) -> T {
    if !is_on() {
        return f();
    }
    let entered = with_lane(|l| enter(l, Instant::now()));
    struct Leave<S: Copy>(S, fn(&mut Lane, S, Instant));
    impl<S: Copy> Drop for Leave<S> {
        fn drop(&mut self) {
            let Leave(entered, leave) = *self;
            with_lane(|l| leave(l, entered, Instant::now()));
        }
    }
    let _leave = Leave(entered, leave);
    f()
}

/// Runs `f` with its wall time excluded from frames (while the clock is on): it is not this
/// thread's measured host work, and its union over threads is counted in
/// [`Reading::excluded_ns`]. `f` runs outside the clock's locks.
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
    blocked(f)
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
    /// Modelled nanoseconds charged so far, by [`Term`] (in [`Term::ALL`] order), over every
    /// lane.
    pub terms: [u64; TERMS],
    /// Wall nanoseconds excluded so far, the union over threads (finished intervals).
    pub excluded_ns: u64,
    /// Where the reading thread's lane stood; `None` while the clock is off.
    pub lane_ns: Option<u64>,
}

/// The counters now. While the clock is on, the calling thread's lane measures its host work
/// from here on (it is timing a frame).
pub fn read() -> Reading {
    let lane_ns = is_on().then(|| {
        with_lane(|l| {
            let now = Instant::now();
            l.catch_up(now);
            l.since.get_or_insert(now);
            l.at
        })
    });
    Reading {
        terms: terms(),
        excluded_ns: lock().total_ns,
        lane_ns,
    }
}

/// Modelled nanoseconds charged so far, by term ([`Reading::terms`]), without touching the
/// calling thread's lane (unlike [`read`], this does not start measuring it).
pub fn terms() -> [u64; TERMS] {
    MODELLED_NS.each_ref().map(|t| t.load(Ordering::Acquire))
}

impl Reading {
    /// Modelled nanoseconds charged so far, all terms.
    pub fn modelled_ns(&self) -> u64 {
        self.terms.iter().sum()
    }

    /// A frame's time between `self` and `end`, read on one thread: on the virtual clock, the
    /// advance of that thread's lane (its measured host work and the modelled time along the
    /// frame's critical path); while the clock is off, its `wall` time.
    pub fn frame_time(self, end: Reading, wall: Duration) -> Duration {
        match (self.lane_ns, end.lane_ns) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => wall,
        }
    }

    /// Modelled time charged between `self` and `end`, summed over every lane.
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
    fn a_frame_is_the_reading_threads_lane_advance_and_wall_time_while_the_clock_is_off() {
        let off = Reading::default();
        let wall = Duration::from_micros(10);
        assert_eq!(off.frame_time(off, wall), wall);
        let a = Reading {
            terms: [1_000, 0, 0, 0, 0],
            excluded_ns: 5_000,
            lane_ns: Some(5_000),
        };
        let b = Reading {
            terms: [3_000, 0, 2_000, 0, 0],
            excluded_ns: 1_505_000,
            lane_ns: Some(47_000),
        };
        // On the clock: 47,000 − 5,000 ns, whatever the wall and the excluded time were.
        assert_eq!(
            a.frame_time(b, Duration::from_millis(2)),
            Duration::from_nanos(42_000)
        );
        assert_eq!(a.modelled_until(b), Duration::from_nanos(4_000));
        assert_eq!(
            a.terms_until(b)[Term::CacheSync as usize],
            Duration::from_nanos(2_000)
        );
    }

    /// A waiting thread whose lane is paused at 5,000 (it ran some of the work itself after
    /// sending the rest at 1,000) runs two devices' jobs, sent at 1,000, each beside its own
    /// lane: each starts at 1,000 and ends at 1,000 plus its own work, and the thread's lane
    /// is back at 5,000 after. Run in a row on the lane, each began where the lane stood.
    #[test]
    fn jobs_run_beside_a_waiting_lane_each_start_where_they_were_sent() {
        let now = Instant::now();
        let mut lane = Lane {
            at: 5_000,
            since: None,
        };
        let sent = Mark {
            at: 1_000,
            measuring: false,
        };
        let run = |lane: &mut Lane, work: u64| {
            let was = lane.take_over(sent, now);
            lane.at += work; // its modelled time, as `charge` adds it
            lane.hand_back(was, now).at
        };
        let aside = lane.step_aside(now);
        let a = run(&mut lane, 3_000);
        lane.come_back(aside, now);
        let aside = lane.step_aside(now);
        let b = run(&mut lane, 5_000);
        lane.come_back(aside, now);
        assert_eq!((a, b), (4_000, 6_000));
        assert_eq!(lane.at, 5_000);
        assert_eq!(lane.since, None);
        // Without stepping aside, each job queues behind what the lane did before it.
        let a = run(&mut lane, 3_000);
        let b = run(&mut lane, 5_000);
        assert_eq!((a, b), (8_000, 13_000));
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

    /// The host-side part of one 256-point FFT call under the zcu102 model (syncs 18,072 ns,
    /// registers 1,130 ns: `tests/vclock.rs` derives them) and its transfer (8,680 ns).
    const FFT_HOST: u64 = 18_072 + 1_130;
    const FFT_TRANSFER: u64 = 8_680;

    /// One FFT call on `acc` made by `lane`: take the accelerator, the host-side part, the
    /// emulator's transfer posted meanwhile, give it back.
    fn fft_call(acc: &mut Timeline, lane: &mut Lane, now: Instant) {
        Timeline::acquire(acc.free, lane, now);
        let was = lane.pause(now);
        lane.at += FFT_HOST;
        acc.posted += FFT_TRANSFER;
        lane.resume(was, now);
        acc.release(lane, now);
    }

    /// Where a strand sent at `sent` ends after one FFT call on `acc`, not measuring.
    fn fft_strand(sent: Mark, acc: &mut Timeline, now: Instant) -> Mark {
        let mut lane = Lane { at: 0, since: None };
        let was = lane.take_over(sent, now);
        fft_call(acc, &mut lane, now);
        lane.hand_back(was, now)
    }

    #[test]
    fn independent_calls_on_two_accelerators_overlap_and_a_chain_adds_up() {
        let now = Instant::now();
        let sent = Mark {
            at: 1_000,
            measuring: false,
        };
        // By hand: one call is 18,072 + 1,130 + 8,680 = 27,882 ns.
        let one = 27_882;
        assert_eq!(FFT_HOST + FFT_TRANSFER, one);

        // Two threads, two FFT cores, sent at the same point: both end at 1,000 + 27,882, and
        // the thread that waits for both is there too (not at 1,000 + 55,764).
        let (mut fft0, mut fft1) = (Timeline::default(), Timeline::default());
        let a = fft_strand(sent, &mut fft0, now);
        let b = fft_strand(sent, &mut fft1, now);
        let mut waiter = Lane {
            at: 1_000,
            since: None,
        };
        waiter.join(a.at);
        waiter.join(b.at);
        assert_eq!(waiter.at, 1_000 + one);

        // Two threads on one core: the second call waits for the first, 1,000 + 2 · 27,882.
        let mut fft0 = Timeline::default();
        let a = fft_strand(sent, &mut fft0, now);
        let b = fft_strand(sent, &mut fft0, now);
        assert_eq!((a.at, b.at), (1_000 + one, 1_000 + 2 * one));

        // A chain over two cores: the second call is sent where the first ended; it adds up.
        let (mut fft0, mut fft1) = (Timeline::default(), Timeline::default());
        let a = fft_strand(sent, &mut fft0, now);
        let b = fft_strand(a, &mut fft1, now);
        assert_eq!(b.at, 1_000 + 2 * one);

        // One thread calling both cores one after the other (a blocking driver): they add up.
        let (mut fft0, mut fft1) = (Timeline::default(), Timeline::default());
        let mut lane = Lane {
            at: 1_000,
            since: None,
        };
        fft_call(&mut fft0, &mut lane, now);
        fft_call(&mut fft1, &mut lane, now);
        assert_eq!(lane.at, 1_000 + 2 * one);
    }

    /// A frame whose thread computes `host_ns` of its own while an FFT it handed to another
    /// thread runs (the emulator taking `emulator_ns` of wall time on this machine), then
    /// waits for the FFT.
    fn host_beside_fpga(host_ns: u64, emulator_ns: u64) -> u64 {
        let t0 = Instant::now();
        let at = |ns: u64| t0 + Duration::from_nanos(ns);
        let mut main = Lane { at: 0, since: None };
        main.since = Some(t0); // the frame is timed from t0 (`read`)
        let sent = main.mark(t0);
        // The worker: its call is excluded wall time from t0 to t0 + emulator_ns.
        let mut worker = Lane { at: 0, since: None };
        let was = worker.take_over(sent, t0);
        let mut fft0 = Timeline::default();
        Timeline::acquire(fft0.free, &mut worker, t0);
        let inside = worker.pause(t0);
        worker.at += FFT_HOST;
        fft0.posted += FFT_TRANSFER;
        worker.resume(inside, at(emulator_ns));
        fft0.release(&mut worker, at(emulator_ns));
        let end = worker.hand_back(was, at(emulator_ns));
        // The frame's thread: host work, then it blocks until the later of the two, and joins.
        let waits_from = at(host_ns);
        let waited = main.pause(waits_from);
        main.resume(waited, at(host_ns.max(emulator_ns)));
        main.join(end.at);
        main.mark(at(host_ns.max(emulator_ns))).at
    }

    #[test]
    fn host_work_beside_an_fpga_call_overlaps_its_modelled_time() {
        // 5 µs of host work beside a 27,882 ns call: the call is the critical path.
        // 40 µs of host work: the host is. Neither depends on the emulator's wall time, and
        // neither is the sum (32,882 / 67,882 ns).
        for emulator_ns in [10_000, 3_000_000] {
            assert_eq!(
                host_beside_fpga(5_000, emulator_ns),
                27_882,
                "{emulator_ns}"
            );
            assert_eq!(
                host_beside_fpga(40_000, emulator_ns),
                40_000,
                "{emulator_ns}"
            );
        }
    }

    #[test]
    fn a_lane_measures_only_outside_pauses_and_only_while_measuring() {
        let t0 = Instant::now();
        let at = |ns: u64| t0 + Duration::from_nanos(ns);
        let mut l = Lane {
            at: 100,
            since: None,
        };
        l.catch_up(at(1_000));
        assert_eq!(l.at, 100, "not measuring: wall time is not host work");
        l.since = Some(at(1_000));
        l.catch_up(at(3_000));
        assert_eq!(l.at, 2_100);
        let was = l.pause(at(4_000));
        assert_eq!(l.at, 3_100);
        l.catch_up(at(9_000));
        assert_eq!(l.at, 3_100, "paused: an excluded call or a wait");
        l.resume(was, at(9_000));
        l.catch_up(at(9_500));
        assert_eq!(l.at, 3_600);
        // Handed-over work measures as its sender did, then the lane is as it was.
        let was = l.take_over(
            Mark {
                at: 10_000,
                measuring: false,
            },
            at(9_500),
        );
        assert_eq!(l.at, 10_000);
        l.catch_up(at(20_000));
        let end = l.hand_back(was, at(20_000));
        assert_eq!(end.at, 10_000);
        l.catch_up(at(20_700));
        assert_eq!(l.at, 10_700, "measuring again after the strand");
    }
}
