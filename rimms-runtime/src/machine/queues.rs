//! The worker queues scoped calls on accelerators run on: one queue with one worker thread per
//! accelerator instance. (CPU jobs stay in their scope's own queue, see `scope`.)
//!
//! An accelerator runs one job at a time, in the order they were submitted, as CEDR's
//! per-processing-element queues do; the CPU's jobs run as many at once as it has workers. A
//! device's worker is started the first time a job is sent to it, so a runtime that never opens
//! a scope starts no thread, and it ends when the runtime is dropped.
//!
//! Whoever runs on a device holds its *turn* (a lock): the worker around its jobs, or a thread
//! that runs work itself while the device is idle ([`DeviceQueues::run_here_if_idle`]). Jobs
//! may open scopes of their own, so a turn holder can end up waiting for work on a device
//! queue, and two rules keep every such wait finite:
//!
//! - **Inline runs.** Work submitted to a device whose turn the submitting thread holds runs
//!   right there: queued, it would wait for a turn whose holder waits for it.
//! - **Help while waiting.** A turn holder that waits for a nested scope runs the jobs queued on
//!   the devices whose turns it holds (`run_held_job`, from `ScopeState::wait`). Two workers
//!   whose jobs nest into each other's devices then each run the other's job, and a job sent
//!   back to a device held by a thread outside its worker still runs. A job run that way may
//!   wait and help in turn, one level deeper on the stack each time; past a few levels the
//!   next runs on a thread of its own that is lent the turns while the holder waits for it
//!   (`run_helping`), so a long queue of such jobs cannot overflow the stack.
//!
//! The second rule is why the queue is a `VecDeque` behind the turn rather than a channel, and
//! why a worker takes the turn *before* it takes a job: a job must stay in its queue, where the
//! turn holder can find it, until whoever runs it holds the turn. A worker that took a job
//! first and then waited for the turn would hold that job out of reach of the one thread that
//! can run it.
//!
//! **Hand-off without a wake-up** (issue 29). A worker that has just run a job, or was just
//! woken, spins briefly ([`Spin`]: spin-loop hints, a `yield_now` every few) looking for the
//! next one before it parks (crossbeam's `Parker`). A submitter
//! wakes it with an `Unparker`, which for a worker that is not parked is one atomic swap, not
//! a futex wake. And a thread waiting for its scope runs the jobs queued on an idle device
//! itself ([`DeviceQueues::run_queued_if_idle`]), in their order, holding the turn as a worker
//! would: a one-job scope then costs no thread hand-off at all, and a worker woken late under
//! load delays nothing. The worker only ever *tries* the turn: where another thread holds it,
//! that thread runs the queue, and wakes the worker when it gives the turn back with jobs left
//! ([`Holding`]'s drop), so a parked worker never sleeps through work that is its own.
//!
//! Who runs a job does not change what it does: a sim device's modelled link time is booked
//! on the link (`space::Occupancy`) and waited out by whichever thread makes the copy, and one
//! turn per device keeps its jobs one at a time and in order wherever they run.

use crate::hal::Device;
use crossbeam_utils::sync::{Parker, Unparker};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};

thread_local! {
    /// The turns this thread holds, innermost last (a worker's job may close a scope whose
    /// calls run here on another idle device).
    static HELD: RefCell<Vec<Arc<Turn>>> = const { RefCell::new(Vec::new()) };
    /// How many jobs [`run_held_job`] is running on this thread's stack, one inside another.
    static HELPING: Cell<usize> = const { Cell::new(0) };
}

/// How many jobs a waiting turn holder runs one inside another on its own stack; the next
/// runs on a thread of its own (see [`run_held_job`]).
const HELP_DEPTH: usize = 16;

/// How a thread looks for work before it parks or sleeps: [`SPIN_LOOKS`] looks, a spin-loop
/// hint between two of them and a `yield_now` every [`YIELD_EVERY`], so that a submitter (or a
/// worker) that shares this thread's core gets it within a few hints, where crossbeam's
/// `Backoff` spins 64 hints at a stretch (about 7 µs on this machine's cores, during which a
/// submitter on the same core cannot hand anything over).
pub(crate) struct Spin(u32);

/// Looks before a waiting thread parks: a few microseconds.
const SPIN_LOOKS: u32 = 64;
/// One look in this many yields the core rather than hinting.
const YIELD_EVERY: u32 = 8;

impl Spin {
    pub(crate) const fn new() -> Spin {
        Spin(0)
    }

    /// Waits a little; false, without waiting, once the spin is over.
    pub(crate) fn step(&mut self) -> bool {
        if self.0 >= SPIN_LOOKS {
            return false;
        }
        self.0 += 1;
        if self.0 % YIELD_EVERY == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        true
    }

    /// Starts the spin again (after work was found, or a wake-up).
    pub(crate) fn reset(&mut self) {
        self.0 = 0;
    }
}

/// A job with its lifetime erased; the scope that made it waits for it before that lifetime
/// ends (see `scope`).
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

pub(crate) struct DeviceQueues {
    /// One per device position: whether the device's worker runs (false if its thread could
    /// not be started); unset until the first job. The CPU's stays unset.
    workers: Vec<OnceLock<bool>>,
    /// One per device position: whose turn it is on the device, and its queue.
    turns: Vec<Arc<Turn>>,
}

/// Who runs on a device: its worker takes the lock around its jobs, and a thread that would
/// otherwise hand work over and wait may take it to run the work itself when nothing is
/// queued ([`DeviceQueues::run_here_if_idle`]), so the device still runs one thing at a time
/// in the order it came.
#[derive(Default)]
pub(crate) struct Turn {
    lock: Mutex<()>,
    /// Jobs submitted and not started, oldest first.
    queue: Mutex<VecDeque<Job>>,
    /// How many jobs `queue` holds, stored under its lock: what a spinning worker and a
    /// waiting scope look at without taking the lock. Only a hint; whoever acts on it takes
    /// the lock.
    queued: AtomicUsize,
    /// How many jobs were ever taken from `queue`, counted under its lock. A job's ticket is
    /// how many had been pushed once it was (see [`Turn::push`]): it is taken when this
    /// reaches its ticket, so a waiting scope knows which queued jobs are ahead of its own.
    taken: AtomicU64,
    /// How many jobs were ever pushed, counted under the queue's lock.
    pushed: AtomicU64,
    /// Set when the runtime is dropped: the worker ends once the queue is empty.
    closed: AtomicBool,
    /// Wakes the device's worker, once it is started.
    worker: OnceLock<Unparker>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The turn guards nothing, and the queue is left consistent by every holder (a job never
    // runs under it).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes `m` if no one holds it (a poisoned lock too: see [`lock`]).
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(taken) => Some(taken),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

impl Turn {
    fn next_job(&self) -> Option<Job> {
        self.next_job_upto(u64::MAX)
    }

    /// The oldest queued job, if its ticket is at most `last`: the job at the front is
    /// taken as the `taken + 1`-th.
    fn next_job_upto(&self, last: u64) -> Option<Job> {
        let mut queue = lock(&self.queue);
        if self.taken.load(Ordering::Relaxed) >= last {
            return None;
        }
        let job = queue.pop_front();
        if job.is_some() {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        self.queued.store(queue.len(), Ordering::Release);
        job
    }

    /// Queues `job`; returns its ticket (see [`Turn::taken`]).
    fn push(&self, job: Job) -> u64 {
        let ticket = {
            let mut queue = lock(&self.queue);
            queue.push_back(job);
            self.queued.store(queue.len(), Ordering::Release);
            self.pushed.fetch_add(1, Ordering::Relaxed) + 1
        };
        self.wake();
        ticket
    }

    /// Wakes the worker if it is parked; for one that runs or spins, one atomic swap.
    fn wake(&self) {
        if let Some(worker) = self.worker.get() {
            worker.unpark();
        }
    }

    fn idle(&self) -> bool {
        lock(&self.queue).is_empty()
    }

    /// Whether this thread holds the turn.
    fn held_here(self: &Arc<Self>) -> bool {
        HELD.with_borrow(|held| held.iter().any(|t| Arc::ptr_eq(t, self)))
    }
}

/// A turn taken by this thread: listed in [`HELD`] while it is held, and given back (listing
/// first) when this is dropped, on unwind too. Jobs still queued then are the worker's, which
/// is woken: it may have parked after finding the turn taken.
struct Holding<'a> {
    turn: &'a Turn,
    taken: Option<MutexGuard<'a, ()>>,
}

impl<'a> Holding<'a> {
    fn new(turn: &'a Arc<Turn>, taken: MutexGuard<'a, ()>) -> Holding<'a> {
        HELD.with_borrow_mut(|held| held.push(Arc::clone(turn)));
        Holding {
            turn,
            taken: Some(taken),
        }
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        // Turns are given back in the reverse order they were taken (each `Holding` lives in
        // one stack frame), so the last one listed is this one.
        HELD.with_borrow_mut(|held| held.pop());
        drop(self.taken.take());
        // Looked at under the queue's lock after the turn is given back: a job pushed after
        // this look was pushed after the turn was free, and its own wake-up finds it free.
        if !self.turn.idle() {
            self.turn.wake();
        }
    }
}

/// Runs one job queued on a device whose turn this thread holds, innermost turn first;
/// returns whether there was one. For a turn holder waiting on a nested scope, whose devices
/// would otherwise run nothing until it returns.
pub(crate) fn run_held_job() -> bool {
    // Looked up one at a time, not borrowed across the job: the job takes and gives back
    // turns of its own.
    let mut depth = 0;
    while let Some(turn) = HELD.with_borrow(|held| held.iter().rev().nth(depth).cloned()) {
        if let Some(job) = turn.next_job() {
            run_helping(job);
            return true;
        }
        depth += 1;
    }
    false
}

/// Runs a job [`run_held_job`] took. A job run while waiting may wait in turn and run the
/// next queued job, one level deeper each time: a few thousand queued jobs that each wait on
/// a nested scope overflowed the stack (and aborted the process). So past [`HELP_DEPTH`]
/// levels the job runs on a thread of its own, lent this thread's turns while this one
/// waits for it: it runs, nests and helps exactly as it would here (no one else acts on the
/// turns meanwhile), on a fresh stack. Should no thread start, it runs here.
fn run_helping(job: Job) {
    let depth = HELPING.get();
    if depth < HELP_DEPTH {
        HELPING.set(depth + 1);
        // Jobs catch their own panics (see `scope`), so this is reached.
        job();
        HELPING.set(depth);
        return;
    }
    let lent = HELD.with_borrow(|held| held.clone());
    let slot = Mutex::new(Some(job));
    std::thread::scope(|s| {
        let slot = &slot;
        // Where no thread starts, the job stays in the slot and runs here, nested below. (Not
        // logged: this is a scope's wait, which must not unwind, and a `tracing` subscriber
        // is the program's code.)
        let _ = std::thread::Builder::new()
            .name("rimms-help".to_string())
            .spawn_scoped(s, move || {
                HELD.with_borrow_mut(|held| *held = lent);
                let job = lock(slot).take();
                if let Some(job) = job {
                    job();
                }
                HELD.with_borrow_mut(Vec::clear);
            });
    });
    // Taken out first: the slot's lock is not held while the job runs.
    let left = lock(&slot).take();
    if let Some(job) = left {
        job();
    }
}

/// Whether this thread holds any device's turn (and so must not sleep without looking at
/// those devices' queues now and then).
pub(crate) fn holds_a_turn() -> bool {
    HELD.with_borrow(|held| !held.is_empty())
}

impl DeviceQueues {
    pub(crate) fn new(devices: usize) -> DeviceQueues {
        DeviceQueues {
            workers: (0..devices).map(|_| OnceLock::new()).collect(),
            turns: (0..devices).map(|_| Arc::default()).collect(),
        }
    }

    /// Runs `work` on this thread if the accelerator at `position` has nothing queued or
    /// running, holding its turn so that jobs sent meanwhile wait behind it (or run here, if
    /// `work` waits for them); gives `work` back otherwise (or for the CPU, whose pool has no
    /// turn). A thread that already holds the turn runs `work` at once.
    pub(crate) fn run_here_if_idle<W: FnOnce()>(
        &self,
        position: usize,
        device: Device,
        work: W,
    ) -> Option<W> {
        let Some(turn) = self.turns.get(position).filter(|_| device != Device::Cpu) else {
            return Some(work);
        };
        if turn.held_here() {
            work();
            return None;
        }
        let Some(taken) = try_lock(&turn.lock) else {
            return Some(work);
        };
        // Checked under the turn: a job queued from now on waits behind `work`.
        if !turn.idle() {
            return Some(work);
        }
        let _holding = Holding::new(turn, taken);
        work();
        None
    }

    /// Runs the jobs queued on the accelerator at `position` on this thread, oldest first, if
    /// no one holds its turn, until `enough` says so or none is left up to the one with
    /// ticket `last` (what [`DeviceQueues::submit`] returned for the caller's last job there);
    /// returns whether it ran any. Jobs behind the caller's last are not its to run: it would
    /// wait for them (one may wait for what their own program does once the caller's scope
    /// has returned), where the worker runs them anyway. For a thread that would otherwise sleep until the device's worker has run them
    /// (a scope's thread waiting for its jobs): it holds the turn as the worker would, so the
    /// device still runs one job at a time in the order they came, and jobs those jobs send to
    /// the device run inline, as on the worker.
    pub(crate) fn run_queued_if_idle(
        &self,
        position: usize,
        last: u64,
        enough: impl Fn() -> bool,
    ) -> bool {
        let Some(turn) = self.turns.get(position) else {
            return false;
        };
        if turn.queued.load(Ordering::Acquire) == 0 || enough() {
            return false;
        }
        // A turn this thread already holds is not taken again (`try_lock` does not nest): its
        // queue is `run_held_job`'s.
        let Some(taken) = try_lock(&turn.lock) else {
            return false;
        };
        let _holding = Holding::new(turn, taken);
        let mut ran = false;
        while !enough() {
            let Some(job) = turn.next_job_upto(last) else {
                break;
            };
            job();
            ran = true;
        }
        ran
    }

    /// Queues `job` on the device at `position` without starting its worker: what a test
    /// uses to make sure that only the thread it watches can run the job.
    #[cfg(test)]
    pub(crate) fn queue_without_worker(&self, position: usize, job: Job) -> u64 {
        self.turns[position].push(job)
    }

    /// Runs `job` on the queue of the device at `position`: returns its ticket there (for
    /// [`DeviceQueues::run_queued_if_idle`]), or `None` where it ran at once, here.
    pub(crate) fn submit(&self, position: usize, device: Device, job: Job) -> Option<u64> {
        let (Some(turn), Some(worker)) = (self.turns.get(position), self.workers.get(position))
        else {
            // Positions come from the runtime's own device table, so this does not happen;
            // running the job here still keeps the scope's promise that it runs.
            job();
            return None;
        };
        if turn.held_here() {
            // A job running on this device opened a scope and sent work to the same device:
            // queued, it would wait behind the job that waits for it. It runs here instead,
            // now.
            job();
            return None;
        }
        if !*worker.get_or_init(|| start_worker(device, Arc::clone(turn))) {
            // Its thread could not be started: run the job here rather than lose it.
            job();
            return None;
        }
        Some(turn.push(job))
    }
}

impl Drop for DeviceQueues {
    fn drop(&mut self) {
        // No scope is open (each borrows the runtime), so the queues are empty: the workers
        // end as soon as they see this.
        for turn in &self.turns {
            turn.closed.store(true, Ordering::Release);
            turn.wake();
        }
    }
}

/// Starts the worker thread of `device`'s queue; returns whether it runs.
fn start_worker(device: Device, turn: Arc<Turn>) -> bool {
    let parker = Parker::new();
    // Set before the thread starts, and before any job is pushed (`submit` pushes only once
    // this has returned): no job is queued unseen by a wake-up. A thread that could not be
    // started leaves an unparker that wakes no one.
    let _ = turn.worker.set(parker.unparker().clone());
    let started = std::thread::Builder::new()
        .name(format!("rimms-{device}"))
        .spawn(move || work(&turn, &parker));
    if let Err(e) = &started {
        tracing::warn!(%device, error = %e, "could not start the device's worker thread; its jobs run on the submitting thread");
    }
    started.is_ok()
}

/// A worker's life: wait for a job to be queued while the device's turn is free, take the
/// turn, then run jobs until the queue is empty (a turn holder waiting on a nested scope, or a
/// scope's thread on an idle device, may have run them meanwhile). It waits by spinning
/// briefly ([`Spin`]), then parking; each job it ran, and each wake-up,
/// starts the spin again, so a device fed job after job is never parked when the next one
/// comes. Jobs catch their own panics (see `scope`), so one failing job never ends the worker;
/// it ends when the runtime is dropped.
fn work(turn: &Arc<Turn>, parker: &Parker) {
    loop {
        let mut spin = Spin::new();
        let taken = loop {
            if turn.queued.load(Ordering::Acquire) > 0 {
                // The turn first, then the job (see the module's comment). A thread that holds
                // the turn runs the queue itself, or wakes this worker when it gives the turn
                // back with jobs left.
                if let Some(taken) = try_lock(&turn.lock) {
                    break taken;
                }
            } else if turn.closed.load(Ordering::Acquire) {
                return;
            }
            if !spin.step() {
                // A wake-up after the look above is not lost: it leaves a token that makes
                // this return at once.
                parker.park();
                spin.reset();
            }
        };
        let _holding = Holding::new(turn, taken);
        while let Some(job) = turn.next_job() {
            job();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Sender};
    use std::sync::Barrier;
    use std::thread::ThreadId;
    use std::time::{Duration, Instant};

    const SIM: Device = Device::Sim(0);
    /// A liveness bound, far above any thread hand-off.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// Jobs from one thread run on the worker in the order they came.
    #[test]
    fn a_queue_runs_its_jobs_in_order() {
        let queues = DeviceQueues::new(2);
        let (ran, order) = channel();
        for k in 0..50 {
            let ran = ran.clone();
            queues.submit(1, SIM, Box::new(move || ran.send(k).expect("receiver")));
        }
        let got: Vec<i32> = (0..50)
            .map(|_| order.recv_timeout(PATIENCE).expect("every job runs"))
            .collect();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
    }

    /// The worker ends once the queues are dropped: it gives back its share of the turn.
    #[test]
    fn the_worker_ends_when_the_queues_are_dropped() {
        let queues = DeviceQueues::new(2);
        let (ran, done) = channel();
        queues.submit(1, SIM, Box::new(move || ran.send(()).expect("receiver")));
        done.recv_timeout(PATIENCE).expect("the job runs");
        let turn = Arc::clone(&queues.turns[1]);
        drop(queues);
        let start = Instant::now();
        while Arc::strong_count(&turn) > 1 {
            assert!(start.elapsed() < PATIENCE, "the worker did not end");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn says_where_it_ran(tx: Sender<ThreadId>) -> Job {
        Box::new(move || tx.send(std::thread::current().id()).expect("receiver"))
    }

    /// Work run here on an idle device holds its turn: work it submits to the same device runs
    /// inline, and a job another thread queues meanwhile is run by it on request (what a
    /// waiting scope does), not by the worker, which waits for the turn.
    #[test]
    fn a_turn_holder_runs_its_devices_work_itself() {
        let queues = DeviceQueues::new(2);
        // Start the worker, so that it is there to take the queued job if it could.
        let (ran, done) = channel();
        queues.submit(1, SIM, Box::new(move || ran.send(()).expect("receiver")));
        done.recv_timeout(PATIENCE).expect("the warm-up job runs");
        let here = std::thread::current().id();
        let mut ran_inline = None;
        let mut ran_queued = None;
        let mut wait_for_turn = 0;
        let outcome = loop {
            // The worker may still be giving back the turn after the warm-up job.
            let gave_back = queues.run_here_if_idle(1, SIM, || {
                assert!(holds_a_turn());
                let (tx, rx) = channel();
                queues.submit(1, SIM, says_where_it_ran(tx));
                ran_inline = Some(rx.try_recv().expect("ran inline"));
                let (tx, rx) = channel();
                std::thread::scope(|s| {
                    s.spawn(|| queues.submit(1, SIM, says_where_it_ran(tx)));
                });
                assert!(run_held_job(), "the queued job waits for this thread");
                ran_queued = Some(rx.try_recv().expect("ran by the turn holder"));
                assert!(!run_held_job(), "nothing else is queued");
            });
            match gave_back {
                None => break true,
                Some(_) if wait_for_turn < 1000 => {
                    wait_for_turn += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Some(_) => break false,
            }
        };
        assert!(outcome, "sim0 never went idle");
        assert_eq!((ran_inline, ran_queued), (Some(here), Some(here)));
        assert!(!holds_a_turn(), "the turn is given back");
    }

    /// A spin is bounded: [`SPIN_LOOKS`] steps, then none until it is reset.
    #[test]
    fn a_spin_ends_and_starts_again_when_reset() {
        let mut spin = Spin::new();
        let steps = std::iter::from_fn(|| spin.step().then_some(())).count();
        assert_eq!(steps, SPIN_LOOKS as usize);
        assert!(!spin.step(), "still over");
        spin.reset();
        assert!(spin.step(), "reset");
    }

    /// A thread that finds the device idle runs its queued jobs itself, oldest first, holding
    /// the turn (a job it runs that submits to the same device runs inline, right there), and
    /// stops when told to; a turn another thread holds it leaves alone.
    #[test]
    fn an_idle_devices_queue_runs_on_the_thread_that_asks() {
        let queues = Arc::new(DeviceQueues::new(2));
        let here = std::thread::current().id();
        let (ran, order) = channel();
        let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for k in 0..3 {
            let (ran, nested_queues) = (ran.clone(), Arc::clone(&queues));
            let finished = Arc::clone(&finished);
            queues.queue_without_worker(
                1,
                Box::new(move || {
                    assert!(holds_a_turn(), "job {k} runs holding sim0's turn");
                    let (tx, rx) = channel();
                    // Sent to its own device from inside a job: queued, it would wait behind
                    // the job that sent it. It runs here, before this job goes on.
                    nested_queues.submit(1, SIM, says_where_it_ran(tx));
                    let nested = rx.try_recv().expect("the nested job ran inline");
                    ran.send((k, std::thread::current().id(), nested))
                        .expect("receiver");
                    finished.fetch_add(1, Ordering::Relaxed);
                }),
            );
        }
        // Told to stop after two jobs: the third stays queued.
        let enough = || finished.load(Ordering::Relaxed) >= 2;
        assert!(queues.run_queued_if_idle(1, u64::MAX, enough));
        assert_eq!(
            order.try_iter().collect::<Vec<_>>(),
            vec![(0, here, here), (1, here, here)]
        );
        assert!(!holds_a_turn(), "the turn is given back");
        // Held by another thread: left alone.
        let (took, release) = (Barrier::new(2), Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _taken = lock(&queues.turns[1].lock);
                took.wait();
                release.wait();
            });
            took.wait();
            assert!(!queues.run_queued_if_idle(1, u64::MAX, || false));
            release.wait();
        });
        assert_eq!(order.try_iter().count(), 0, "job 2 waits");
        assert!(queues.run_queued_if_idle(1, u64::MAX, || false));
        assert_eq!(order.try_iter().collect::<Vec<_>>(), vec![(2, here, here)]);
        assert!(
            !queues.run_queued_if_idle(1, u64::MAX, || false),
            "nothing is left"
        );
    }

    /// A thread that runs an idle device's queue for its own jobs runs none queued behind the
    /// last of them: those are the worker's (red when it ran the queue to its end).
    #[test]
    fn an_idle_devices_queue_runs_only_up_to_the_askers_last_job() {
        let queues = DeviceQueues::new(2);
        let (ran, order) = channel();
        let tickets: Vec<u64> = (0..3)
            .map(|k| {
                let ran = ran.clone();
                queues.queue_without_worker(1, Box::new(move || ran.send(k).expect("receiver")))
            })
            .collect();
        assert_eq!(tickets, [1, 2, 3], "tickets count the jobs pushed");
        assert!(queues.run_queued_if_idle(1, tickets[1], || false));
        assert_eq!(order.try_iter().collect::<Vec<_>>(), vec![0, 1]);
        assert!(
            !queues.run_queued_if_idle(1, tickets[1], || false),
            "job 2 is not its"
        );
        assert_eq!(order.try_iter().count(), 0, "job 2 waits for the worker");
        assert!(queues.run_queued_if_idle(1, tickets[2], || false));
        assert_eq!(order.try_iter().collect::<Vec<_>>(), vec![2]);
    }

    /// A job queued while another thread holds the turn runs once the turn is given back,
    /// though the worker parked meanwhile (it found the turn taken): giving the turn back
    /// wakes it.
    #[test]
    fn a_worker_that_found_the_turn_taken_runs_the_job_once_it_is_given_back() {
        let queues = DeviceQueues::new(2);
        let (ran, done) = channel();
        queues.submit(1, SIM, Box::new(move || ran.send(()).expect("receiver")));
        done.recv_timeout(PATIENCE).expect("the warm-up job runs");
        let (tx, rx) = channel();
        let mut attempts = 0;
        while queues
            .run_here_if_idle(1, SIM, || {
                std::thread::scope(|s| {
                    s.spawn(|| queues.submit(1, SIM, says_where_it_ran(tx.clone())));
                });
                // Long past the worker's spin: it has parked.
                std::thread::sleep(Duration::from_millis(50));
                assert!(rx.try_recv().is_err(), "the job waits for the turn");
            })
            .is_some()
        {
            attempts += 1;
            assert!(attempts < 1000, "sim0 never went idle");
            std::thread::sleep(Duration::from_millis(1));
        }
        let worker = rx.recv_timeout(PATIENCE).expect("the worker runs the job");
        assert_ne!(worker, std::thread::current().id());
    }
}
