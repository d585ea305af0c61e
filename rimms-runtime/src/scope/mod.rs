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

use crate::hal::{Device, Error, Result};
use crate::machine::queues::{self, Job};
use crate::machine::Runtime;
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
    calls: Mutex<calls::Held<'scope>>,
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
/// finishing job wakes it only if it does sleep.
#[derive(Default)]
struct ScopeState {
    /// CPU jobs submitted and not started yet.
    cpu_jobs: Mutex<VecDeque<Job>>,
    /// Helpers on rayon's pool that may still take CPU jobs.
    helpers: AtomicUsize,
    /// Jobs submitted and not yet finished.
    pending: AtomicUsize,
    /// Whether the scope's thread sleeps on `finished` (set and read under this lock, so a
    /// finishing job cannot miss it).
    sleeping: Mutex<bool>,
    finished: Condvar,
    /// The first error a job returned; later ones are logged.
    error: Mutex<Option<Error>>,
    /// The first panic of a job, resumed once every job has finished.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// On the virtual clock: the latest point where a job of the scope ended.
    ended: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // These locks guard plain values that every holder leaves consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScopeState {
    fn failed(&self, error: Error) {
        let mut first = lock(&self.error);
        match &*first {
            None => *first = Some(error),
            Some(_) => tracing::warn!(%error, "a further call of the scope failed"),
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

    /// Waits for every job, running the queued CPU jobs itself. On a rayon worker (a scope
    /// opened inside a CPU job) it runs other pool work meanwhile, so jobs queued behind it
    /// cannot starve. A thread that holds accelerators' turns (a job on a device worker, or a
    /// held group run on an idle device) runs the jobs queued on those devices meanwhile: no
    /// one else can until it returns, and the jobs it waits for may be among them, or wait for
    /// them (see [`queues`]).
    fn wait(&self) {
        // Neither a rayon worker nor a turn holder may sleep through work only it can run, so
        // both look again after a nap; a turn holder's naps grow while there is nothing to run,
        // as nested scopes on other devices may take long.
        let mut turn_nap = MIN_NAP;
        loop {
            while let Some(job) = self.next_cpu_job() {
                job();
            }
            if self.done() {
                return;
            }
            if queues::run_held_job() {
                turn_nap = MIN_NAP;
                continue;
            }
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => continue,
                Some(rayon::Yield::Idle) | None => {}
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
            match nap {
                Some(nap) => {
                    if !self.done() {
                        sleeping = self
                            .finished
                            .wait_timeout(sleeping, nap)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
                None => {
                    while !self.done() {
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
        calls: Mutex::default(),
        scope: PhantomData,
        env: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Calls the body submitted and the scope still holds go to their queues now (they
    // were accepted, and their borrows end with the scope like the jobs').
    scope.close_calls();
    // Whatever `f` did, no job may outlive the borrows it holds.
    // On the virtual clock the wait is not this thread's work: the frame's thread stands,
    // after it, where the last of the scope's work ended (or where it was, if later).
    crate::vclock::blocked(|| scope.state.wait());
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
        let run = move || {
            let strand = crate::vclock::strand(sent);
            match catch_unwind(AssertUnwindSafe(|| job(rt))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => state.failed(error),
                Err(payload) => {
                    lock(&state.panic).get_or_insert(payload);
                }
            }
            state.ended.fetch_max(strand.end().ns(), Ordering::AcqRel);
            // Last, after the job and everything it borrowed are gone.
            state.finish();
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
            self.rt.shared().queues().submit(position, device, run);
        }
    }
}
