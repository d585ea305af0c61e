//! `Runtime::scope`: calls that run concurrently, with borrows instead of a barrier.
//!
//! CEDR's non-blocking `_nb` calls return at once and a barrier waits for them; nothing stops
//! a program from touching a buffer a pending call still writes. Here a scope's jobs borrow
//! what they use, as `std::thread::scope`'s threads do, so a job that writes a view holds it
//! mutably until the scope ends: two jobs that conflict do not compile, while disjoint fragment
//! views of one buffer (`rows_mut`, `split_at_mut`) go to different jobs at once. Every job has
//! finished when `scope` returns, even if one panicked.
//!
//! A job goes to a queue: `spawn` to the CPU's worker pool, `spawn_on` to one device's queue
//! (see [`queues`]). Calls inside a job name their device or pass `Target::Auto`, and the
//! coherence state takes them from any thread: per buffer a lock guards the fragment table
//! while the resident check stays one lock-free load.

mod calls;
pub(crate) mod queues;

use crate::error::{Error, Result};
use crate::runtime::{Device, Runtime};
use queues::Job;
use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
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
#[derive(Default)]
struct ScopeState {
    /// Jobs submitted and not yet finished.
    pending: Mutex<usize>,
    finished: Condvar,
    /// The first error a job returned; later ones are logged.
    error: Mutex<Option<Error>>,
    /// The first panic of a job, resumed once every job has finished.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
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

    fn finish(&self) {
        let mut pending = lock(&self.pending);
        *pending -= 1;
        if *pending == 0 {
            self.finished.notify_all();
        }
    }

    /// Waits for every job. On a rayon worker (a scope opened inside a CPU job) it runs other
    /// pool work meanwhile, so jobs queued behind it cannot starve.
    fn wait(&self) {
        loop {
            if *lock(&self.pending) == 0 {
                return;
            }
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => {}
                Some(rayon::Yield::Idle) => {
                    let pending = lock(&self.pending);
                    if *pending > 0 {
                        let _ = self
                            .finished
                            .wait_timeout(pending, Duration::from_micros(50));
                    }
                }
                None => {
                    let mut pending = lock(&self.pending);
                    while *pending > 0 {
                        pending = self
                            .finished
                            .wait(pending)
                            .unwrap_or_else(|e| e.into_inner());
                    }
                    return;
                }
            }
        }
    }
}

impl Runtime {
    /// Runs `f`, whose submitted calls run concurrently, and returns once all have finished:
    /// `Ok` with `f`'s value, or the first error a job returned. A panic in a job is resumed
    /// here after the others finished.
    ///
    /// ```
    /// # use rimms_runtime::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let signal = HeteData::from_slice(&rt, &vec![Complex32::new(1.0, 0.0); 4 * 1024])?;
    /// let mut spectrum = HeteData::<Complex32>::alloc(&rt, 4 * 1024)?;
    /// let (rows_in, mut rows_out) = (signal.rows(1024)?, spectrum.rows_mut(1024)?);
    /// rt.scope(|s| {
    ///     for (k, (row, out)) in rows_in.iter().zip(rows_out.iter_mut()).enumerate() {
    ///         let device = if k % 2 == 0 { Device::Cpu } else { Device::Sim(0) };
    ///         s.spawn(move |rt| rt.fft(device, FftDirection::Forward, 1024, row, out));
    ///     }
    /// })?;
    /// assert_eq!(spectrum.host()?[3 * 1024].re, 1024.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scope<'env, F, T>(&'env self, f: F) -> Result<T>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    {
        let scope = Scope {
            rt: self,
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
        scope.state.wait();
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
        *lock(&self.state.pending) += 1;
        let (rt, state) = (self.rt, Arc::clone(&self.state));
        let run = move || {
            match catch_unwind(AssertUnwindSafe(|| job(rt))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => state.failed(error),
                Err(payload) => {
                    lock(&state.panic).get_or_insert(payload);
                }
            }
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
        self.rt.shared().queues.submit(position, device, run);
    }
}
