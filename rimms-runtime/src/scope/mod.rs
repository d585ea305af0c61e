//! `Runtime::scope`: calls that run concurrently, with borrows instead of a barrier.
//!
//! Its part of `impl Runtime`: `scope`, opening one.
//!
//! CEDR's non-blocking `_nb` calls return at once and a barrier waits for them; nothing stops
//! a program from touching a buffer a pending call still writes. Here a scope's jobs borrow
//! what they use, as `std::thread::scope`'s threads do, so a job that writes a view holds it
//! mutably until the scope ends: two jobs that conflict do not compile, while disjoint fragment
//! views of one buffer (`rows_mut`, `split_at_mut`) go to different jobs at once. Every job has
//! finished when `scope` returns, even if one panicked.
//!
//! A job goes to a queue: `spawn` to the scope's own queue of CPU jobs, which helpers on
//! rayon's pool and, once the body has returned, the scope's own thread work through (see
//! `ScopeState`); `spawn_on` to one accelerator's queue (see [`queues`]). Calls inside a job
//! name their device or pass `Target::Auto`, and the coherence state takes them from any
//! thread: per buffer a lock guards the fragment table while the resident check stays one
//! lock-free load.
//!
//! Jobs, merge rules and kernels may open scopes of their own, and every wait for one must
//! end. A nested scope's work sent to an accelerator whose turn the waiting thread holds runs
//! right there, and a thread that holds accelerators' turns keeps running their queued jobs
//! while it waits (help-while-wait; see [`queues`]), so neither nesting on one accelerator,
//! nor across two that nest into each other, nor a merge rule that opens a scope, waits for
//! itself. No runtime lock is held while a job runs, beyond the device's turn.

mod calls;
mod dangling;

use crate::hal::{Device, Error, Result};
use crate::machine::queues::{self, DeviceQueues, Job, Spin};
use crate::machine::Runtime;
use dangling::MaybeDangling;
use std::any::Any;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Submits calls that run concurrently; made by [`Runtime::scope`].
pub struct Scope<'scope, 'env: 'scope> {
    rt: &'env Runtime,
    state: Arc<ScopeState>,
    /// Calls submitted to the scope and held while the next ones continue them.
    calls: calls::HeldLock<'scope>,
    // Invariant in both lifetimes, as `std::thread::Scope` is: a job may borrow anything that
    // outlives 'scope and nothing shorter.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// What the jobs of one scope share with it.
///
/// Why it is built this way: handing each job to another thread and sleeping until the last
/// one wakes the scope cost a thread wake-up per job and one per scope (15–35 µs a scope on a
/// loaded machine). So CPU jobs wait in the scope's own queue; a few helpers on rayon's pool
/// (at most one per pool thread, not one per job) take them from there while the scope's
/// body runs, and the thread that opened the scope runs whatever is left itself once the body
/// returns, as rayon's own scope does. It sleeps only for jobs still running elsewhere, and a
/// finishing job wakes it only if it does sleep. The same goes for accelerator jobs: those
/// still queued on an idle device when the scope waits, it runs itself (issue 29: a one-job
/// scope on a sim device took 30–90 µs at the median in a third of runs on a loaded machine,
/// a late wake-up of the worker and then of the scope's thread).
#[derive(Default)]
struct ScopeState {
    /// CPU jobs submitted and not started yet.
    cpu_jobs: Mutex<VecDeque<Job>>,
    /// Helpers on rayon's pool that may still take CPU jobs.
    helpers: AtomicUsize,
    /// Jobs submitted and not yet finished.
    pending: AtomicUsize,
    /// The accelerators the scope sent jobs to, a bit per device position (the first 64;
    /// jobs on others are left to their workers): where its thread, waiting, may run them.
    devices: AtomicU64,
    /// Per device position of those: the ticket of the scope's last job queued there. Its
    /// thread runs no job queued behind it (see `DeviceQueues::run_queued_if_idle`).
    last: Tickets,
    /// Whether the scope's thread sleeps on `finished` (set and read under this lock, so a
    /// finishing job, or a job submitted meanwhile, cannot miss it).
    sleeping: Mutex<bool>,
    finished: Condvar,
    /// The first error a job returned; later ones are logged.
    error: Mutex<Option<Error>>,
    /// The first panic of a job, resumed once every job has finished.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// On the virtual clock: the latest point where a job of the scope ended.
    ended: AtomicU64,
    /// Tests only: what a job's thread runs after the job's `finish`, before its closure
    /// returns, the window in which the scope may end under it (see `dangling`).
    #[cfg(test)]
    after_finish: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// A ticket per device position of the first 64 (see `ScopeState::last`).
struct Tickets([AtomicU64; 64]);

impl Default for Tickets {
    fn default() -> Tickets {
        Tickets(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // These locks guard plain values that every holder leaves consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScopeState {
    fn failed(&self, error: Error) {
        let mut first = lock(&self.error);
        if first.is_none() {
            *first = Some(error);
            return;
        }
        // The subscriber is the program's code: not under the scope's lock.
        drop(first);
        tracing::warn!(%error, "a further call of the scope failed");
    }

    /// Records how a job (or a group run on the scope's thread) ended: its error or panic
    /// becomes the scope's if it is the first. Never unwinds: dropping a later error or panic
    /// payload, or logging it, runs the program's code (a payload's `Drop`, an error source's,
    /// a subscriber's formatting), and a panic from there used to unwind through the job's
    /// bookkeeping: `finish` was skipped (the scope waited forever), and on the scope's own
    /// thread (a job it ran itself, a group run as the scope closed) the unwind left
    /// `Runtime::scope` while other jobs still ran on borrows that ended with it.
    fn record(&self, outcome: std::thread::Result<Result<()>>) {
        let recorded = catch_unwind(AssertUnwindSafe(|| match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => self.failed(error),
            // A later payload is dropped here, outside the lock.
            Err(payload) => drop(self.keep_first_panic(payload)),
        }));
        if let Err(nested) = recorded {
            // Dropping this one may panic again: it is the scope's panic if there is none
            // yet, and leaked otherwise.
            std::mem::forget(self.keep_first_panic(nested));
        }
    }

    /// Keeps `payload` as the scope's panic if it is the first; gives it back otherwise.
    fn keep_first_panic(&self, payload: Box<dyn Any + Send>) -> Option<Box<dyn Any + Send>> {
        let mut first = lock(&self.panic);
        match &*first {
            None => {
                *first = Some(payload);
                None
            }
            Some(_) => Some(payload),
        }
    }

    /// Called by every job last: the scope may return as soon as the count reaches 0.
    fn finish(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 && *lock(&self.sleeping) {
            self.finished.notify_all();
        }
    }

    fn next_cpu_job(&self) -> Option<Job> {
        lock(&self.cpu_jobs).pop_front()
    }

    /// Queues a CPU job and, while fewer helpers than pool threads are about, sends one more
    /// to the pool to take jobs from the queue.
    fn push_cpu_job(self: &Arc<Self>, job: Job) {
        lock(&self.cpu_jobs).push_back(job);
        // A job may submit jobs to its scope after the scope's thread went to sleep for the
        // jobs running elsewhere. It is woken to run the new one: a helper may never come to
        // it (every pool thread may be taken by a job that waits for this one), and it slept
        // until a job finished, which none then did.
        if *lock(&self.sleeping) {
            self.finished.notify_all();
        }
        let most = rayon::current_num_threads();
        let mut helpers = self.helpers.load(Ordering::Relaxed);
        while helpers < most {
            match self.helpers.compare_exchange_weak(
                helpers,
                helpers + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let state = Arc::clone(self);
                    rayon::spawn(move || state.help());
                    return;
                }
                Err(now) => helpers = now,
            }
        }
    }

    /// A helper's life: run queued jobs until there are none. It signs off before a last look
    /// at the queue, so a job queued meanwhile either sees fewer helpers (and sends one) or is
    /// found here; the scope's thread runs any job left over in any case.
    fn help(&self) {
        loop {
            while let Some(job) = self.next_cpu_job() {
                job();
            }
            self.helpers.fetch_sub(1, Ordering::AcqRel);
            if lock(&self.cpu_jobs).is_empty() {
                return;
            }
            self.helpers.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Where the scope's jobs ended on the virtual clock, for the thread that waited for them.
    fn ended(&self) -> crate::vclock::Mark {
        crate::vclock::Mark::at_ns(self.ended.load(Ordering::Acquire))
    }

    fn done(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Notes that a job went to the accelerator at `position`, queued there with `ticket`.
    fn sent_to(&self, position: usize, ticket: u64) {
        let Some(bit) = u32::try_from(position)
            .ok()
            .and_then(|p| 1u64.checked_shl(p))
        else {
            return;
        };
        // Before the bit: a thread that sees the bit finds the ticket (or a later one).
        self.last.0[position].fetch_max(ticket, Ordering::AcqRel);
        // A load first: a scope's jobs mostly go to devices it already sent to.
        if self.devices.load(Ordering::Relaxed) & bit == 0 {
            self.devices.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Runs jobs queued on the idle accelerators this scope sent jobs to, until its own have
    /// finished; returns whether it ran any. Jobs of other scopes queued before this one's run
    /// too, as the device's order demands (the worker would run them first).
    fn run_idle_devices(&self, queues: &DeviceQueues) -> bool {
        let mut devices = self.devices.load(Ordering::Relaxed);
        let mut ran = false;
        while devices != 0 && !self.done() {
            let position = devices.trailing_zeros() as usize;
            devices &= devices - 1;
            // Each device's jobs as its worker would run them: side by side with the other
            // devices' on the virtual clock, not after them on this thread's lane.
            let last = self.last.0[position].load(Ordering::Acquire);
            ran |=
                crate::vclock::beside(|| queues.run_queued_if_idle(position, last, || self.done()));
        }
        ran
    }

    /// Waits for every job, running the queued CPU jobs itself. On a rayon worker (a scope
    /// opened inside a CPU job) it runs other pool work meanwhile, so jobs queued behind it
    /// cannot starve. A thread that holds accelerators' turns (a job on a device worker, or a
    /// held group run on an idle device) runs the jobs queued on those devices meanwhile: no
    /// one else can until it returns, and the jobs it waits for may be among them, or wait for
    /// them (see [`queues`]). Jobs queued on an idle accelerator the scope sent jobs to it
    /// runs itself, in the device's order, rather than wait for the device's worker to wake.
    /// Before it sleeps it spins briefly (then yields a few times): a job that is about to
    /// finish elsewhere then needs no wake-up of this thread.
    fn wait(&self, queues: &DeviceQueues) {
        // Neither a rayon worker nor a turn holder may sleep through work only it can run, so
        // both look again after a nap; a turn holder's naps grow while there is nothing to run,
        // as nested scopes on other devices may take long.
        let mut turn_nap = MIN_NAP;
        let mut spin = Spin::new();
        loop {
            while let Some(job) = self.next_cpu_job() {
                job();
            }
            if self.done() {
                return;
            }
            if queues::run_held_job() {
                turn_nap = MIN_NAP;
                spin.reset();
                continue;
            }
            if self.run_idle_devices(queues) {
                spin.reset();
                continue;
            }
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => continue,
                Some(rayon::Yield::Idle) | None => {}
            }
            if spin.step() {
                continue;
            }
            let nap = if rayon::current_thread_index().is_some() {
                Some(MIN_NAP)
            } else if queues::holds_a_turn() {
                let nap = turn_nap;
                turn_nap = (turn_nap * 2).min(MAX_TURN_NAP);
                Some(nap)
            } else {
                None
            };
            let mut sleeping = lock(&self.sleeping);
            *sleeping = true;
            // Set and looked at under the lock `push_cpu_job` and `finish` take to wake it.
            let woken = || self.done() || !lock(&self.cpu_jobs).is_empty();
            match nap {
                Some(nap) => {
                    if !woken() {
                        sleeping = self
                            .finished
                            .wait_timeout(sleeping, nap)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
                None => {
                    while !woken() {
                        sleeping = self
                            .finished
                            .wait(sleeping)
                            .unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
            *sleeping = false;
        }
    }
}

/// How long a waiting rayon worker or turn holder sleeps before it looks for work again.
const MIN_NAP: Duration = Duration::from_micros(50);
/// The longest a turn holder's naps grow to while nothing is queued on its devices.
const MAX_TURN_NAP: Duration = Duration::from_millis(1);

/// Runs `f` in a new scope on `rt`: `Runtime::scope`.
pub(crate) fn run<'env, F, T>(rt: &'env Runtime, f: F) -> Result<T>
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        rt,
        state: Arc::new(ScopeState::default()),
        calls: calls::HeldLock::new(calls::Held::new(rt.shared().merges_calls())),
        scope: PhantomData,
        env: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Calls the body submitted and the scope still holds go to their queues now (they
    // were accepted, and their borrows end with the scope like the jobs'). Nothing may
    // unwind out of here before the wait below, which the jobs' borrows rely on; closing
    // runs the program's code (the copies ahead it starts reach a `tracing` subscriber), so
    // a panic there is the scope's panic, as a job's is, and the scope still waits. (It left
    // `Runtime::scope` with the jobs still running.)
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| scope.close_calls())) {
        scope.state.record(Err(payload));
    }
    // Whatever `f` did, no job may outlive the borrows it holds.
    // On the virtual clock the wait is not this thread's work (a job it runs meanwhile
    // measures its own, as a strand): the frame's thread stands, after it, where the last of
    // the scope's work ended (or where it was, if later).
    crate::vclock::blocked(|| scope.state.wait(rt.shared().queues()));
    crate::vclock::join(scope.state.ended());
    if let Some(payload) = lock(&scope.state.panic).take() {
        resume_unwind(payload);
    }
    let value = outcome.unwrap_or_else(|payload| resume_unwind(payload));
    let error = lock(&scope.state.error).take();
    match error {
        Some(error) => Err(error),
        None => Ok(value),
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Runs `job` on the CPU's worker pool. Its calls name their devices (or pass
    /// `Target::Auto`); an accelerator call made there runs on that accelerator, from the
    /// worker.
    pub fn spawn<F>(&'scope self, job: F)
    where
        F: FnOnce(&Runtime) -> Result<()> + Send + 'scope,
    {
        self.submit(0, Device::Cpu, job);
    }

    /// Runs `job` on `device`'s queue: the CPU's pool, or the accelerator's one worker, which
    /// runs its jobs one at a time in the order they came. An unknown device is the scope's
    /// error, and the job does not run.
    pub fn spawn_on<F>(&'scope self, device: Device, job: F)
    where
        F: FnOnce(&Runtime) -> Result<()> + Send + 'scope,
    {
        match self.rt.shared().position(device) {
            Ok(position) => self.submit(position, device, job),
            Err(error) => self.state.failed(error),
        }
    }

    /// The runtime the scope belongs to.
    pub fn runtime(&self) -> &'env Runtime {
        self.rt
    }

    fn submit<F>(&'scope self, position: usize, device: Device, job: F)
    where
        F: FnOnce(&Runtime) -> Result<()> + Send + 'scope,
    {
        self.state.pending.fetch_add(1, Ordering::AcqRel);
        let (rt, state) = (self.rt, Arc::clone(&self.state));
        // On the virtual clock the job starts no earlier than this thread stands now.
        let sent = crate::vclock::mark();
        // The job and the runtime it gets are the borrows that end with the scope: the closure
        // holds them where they are not protected for its whole call (see `dangling`), since
        // it still runs after `finish`, which lets the scope end.
        let borrowed = MaybeDangling::new((job, rt));
        let run = move || {
            let strand = crate::vclock::strand(sent);
            let (job, rt) = borrowed.into_inner();
            state.record(catch_unwind(AssertUnwindSafe(|| job(rt))));
            state.ended.fetch_max(strand.end().ns(), Ordering::AcqRel);
            // Last, after the job and everything it borrowed are gone.
            state.finish();
            // Taken out first: in edition 2021 an `if let` would keep the guard over the call.
            #[cfg(test)]
            {
                let after_finish = lock(&state.after_finish).take();
                if let Some(after_finish) = after_finish {
                    after_finish();
                }
            }
        };
        let run: Box<dyn FnOnce() + Send + 'scope> = Box::new(run);
        // SAFETY: `Runtime::scope` waits until every submitted job has called `finish`, which
        // each does after it ran (panic or not), before 'scope can end; so nothing the job
        // borrows is used after it is gone. This is how `std::thread::scope` and rayon's scopes
        // hand borrowing jobs to threads that outlive them.
        let run: Job =
            unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'scope>, Job>(run) };
        if device == Device::Cpu {
            self.state.push_cpu_job(run);
        } else {
            if let Some(ticket) = self.rt.shared().queues().submit(position, device, run) {
                self.state.sent_to(position, ticket);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::finishes;
    use crate::machine::queues::DeviceQueues;
    use std::sync::mpsc::channel;
    use std::thread::ThreadId;

    fn runtime() -> Runtime {
        crate::runtime::small_test_runtime()
    }

    /// A job on sim0 that opens a scope and submits to sim0 again, from inside that job, and
    /// once more one level down: every wait finishes, whoever runs the outer job (the scope's
    /// thread, which may take sim0's idle turn, or sim0's worker, forced by a body that waits
    /// until the outer job has started), and the nested jobs run on the thread that holds
    /// sim0's turn.
    #[test]
    fn a_job_that_submits_to_its_own_device_from_inside_a_job_finishes() {
        for body_waits in [false, true] {
            let (outer, nested) = finishes("a job nesting on its own device", move || {
                let rt = runtime();
                let (started, outer_started) = channel::<ThreadId>();
                let (ran, nested_ran) = channel::<ThreadId>();
                rt.scope(|s| {
                    s.spawn_on(Device::Sim(0), move |rt| {
                        started.send(std::thread::current().id()).expect("receiver");
                        rt.scope(|inner| {
                            inner.spawn_on(Device::Sim(0), move |rt| {
                                rt.scope(|innermost| {
                                    innermost.spawn_on(Device::Sim(0), move |_| {
                                        ran.send(std::thread::current().id()).expect("receiver");
                                        Ok(())
                                    });
                                })
                            });
                        })
                    });
                    body_waits.then(|| outer_started.recv().expect("the outer job starts"))
                })
                .expect("scope");
                let outer = outer_started.try_recv().ok();
                (outer, nested_ran.try_recv().expect("the nested job ran"))
            });
            if let Some(outer) = outer {
                assert_eq!(
                    outer, nested,
                    "the nested jobs ran where sim0's turn is held"
                );
            }
        }
    }

    /// A job's closure still runs after its `finish` has let the scope end, so it may hold
    /// nothing that the aliasing rules keep valid until it returns (`dangling`). Here the job
    /// borrows the scope's `Scope` itself, as a merged group's job does, and its thread is
    /// parked after `finish` until the scope has returned and freed that `Scope`. Miri (Tree
    /// Borrows) reports that deallocation as undefined behaviour when the closure holds the
    /// job as a plain capture (it did, before `MaybeDangling`); CI runs this test under Miri.
    #[test]
    fn a_scope_may_end_while_its_finished_job_returns() {
        finishes("a job parked after its finish", || {
            let rt = runtime();
            let (started, job_started) = channel::<usize>();
            let (returned, scope_returned) = channel::<()>();
            rt.scope(|s| {
                *lock(&s.state.after_finish) = Some(Box::new(move || {
                    scope_returned.recv().expect("the scope returns");
                }));
                s.spawn_on(Device::Sim(0), move |_| {
                    started
                        .send(std::ptr::from_ref(s) as usize)
                        .expect("receiver");
                    Ok(())
                });
                // The job starts on sim0's worker: this thread, blocked here, cannot take the
                // idle device's turn as it would once the body returned.
                let job_saw = job_started.recv().expect("the job starts");
                assert_eq!(job_saw, std::ptr::from_ref(s) as usize, "the job's scope");
            })
            .expect("scope");
            // The scope has returned and its `Scope` is gone: only now does the job's
            // closure return.
            returned.send(()).expect("the job's thread waits");
        });
    }

    /// A scope whose job is queued on a device no worker serves (its worker is not started)
    /// still ends: its thread, waiting, runs the job itself on the idle device, and a job that
    /// job sends to the same device runs inline there.
    #[test]
    fn a_waiting_scope_runs_its_job_on_an_idle_device_itself() {
        let here = finishes("a scope waiting for a job no worker takes", || {
            let queues = Arc::new(DeviceQueues::new(2));
            let state = Arc::new(ScopeState::default());
            let (ran, where_ran) = channel::<(ThreadId, ThreadId)>();
            state.pending.fetch_add(1, Ordering::AcqRel);
            let (job_state, job_queues) = (Arc::clone(&state), Arc::clone(&queues));
            let ticket = queues.queue_without_worker(
                1,
                Box::new(move || {
                    let (tx, rx) = channel();
                    job_queues.submit(
                        1,
                        Device::Sim(0),
                        Box::new(move || tx.send(std::thread::current().id()).expect("rx")),
                    );
                    let nested = rx.try_recv().expect("the nested job ran inline");
                    ran.send((std::thread::current().id(), nested))
                        .expect("receiver");
                    job_state.finish();
                }),
            );
            state.sent_to(1, ticket);
            state.wait(&queues);
            let (job, nested) = where_ran.try_recv().expect("the job ran");
            assert_eq!((job, nested), (std::thread::current().id(), job));
            job
        });
        assert_ne!(here, std::thread::current().id());
    }
}
