//! The worker queues scoped calls on accelerators run on: one queue with one worker thread per
//! accelerator instance. (CPU jobs stay in their scope's own queue, see `scope`.)
//!
//! An accelerator runs one job at a time, in the order they were submitted, as CEDR's
//! per-processing-element queues do; the CPU's jobs run as many at once as it has workers. A
//! device's worker is started the first time a job is sent to it, so a runtime that never opens
//! a scope starts no thread, and it ends when the runtime is dropped (its sender with it).

use crate::device::Device;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// The device whose worker this thread is, if it is one.
    static WORKER_OF: Cell<Option<Device>> = const { Cell::new(None) };
}

/// A job with its lifetime erased; the scope that made it waits for it before that lifetime
/// ends (see `scope`).
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

pub(crate) struct DeviceQueues {
    /// One per device position; the CPU's stays empty (its jobs stay in their scope).
    senders: Vec<OnceLock<Sender<Job>>>,
    /// One per device position: whose turn it is on the device.
    turns: Vec<Arc<Turn>>,
}

/// Who runs on a device: its worker takes the lock around each job, and a thread that would
/// otherwise hand work over and wait may take it to run the work itself when nothing is
/// queued ([`DeviceQueues::run_here_if_idle`]), so the device still runs one thing at a time
/// in the order it came.
#[derive(Default)]
struct Turn {
    lock: Mutex<()>,
    /// Jobs sent and not finished.
    queued: AtomicUsize,
}

impl DeviceQueues {
    pub(crate) fn new(devices: usize) -> DeviceQueues {
        DeviceQueues {
            senders: (0..devices).map(|_| OnceLock::new()).collect(),
            turns: (0..devices).map(|_| Arc::default()).collect(),
        }
    }

    /// Runs `work` on this thread if the accelerator at `position` has nothing queued or
    /// running, holding its turn so that jobs sent meanwhile wait behind it; gives `work`
    /// back otherwise (or for the CPU, whose pool has no turn).
    pub(crate) fn run_here_if_idle<W: FnOnce()>(
        &self,
        position: usize,
        device: Device,
        work: W,
    ) -> Option<W> {
        let Some(turn) = self.turns.get(position).filter(|_| device != Device::Cpu) else {
            return Some(work);
        };
        let Ok(_turn) = turn.lock.try_lock() else {
            return Some(work);
        };
        if turn.queued.load(Ordering::Acquire) != 0 {
            return Some(work);
        }
        work();
        None
    }

    /// Runs `job` on the queue of the device at `position`.
    pub(crate) fn submit(&self, position: usize, device: Device, job: Job) {
        if WORKER_OF.get() == Some(device) {
            // A job of this queue opened a scope and sent work to its own queue: queued, it
            // would wait behind the job that waits for it. It runs here instead, now.
            job();
            return;
        }
        let Some(slot) = self.senders.get(position) else {
            // Positions come from the runtime's own device table, so this does not happen;
            // running the job here still keeps the scope's promise that it runs.
            job();
            return;
        };
        // Positions index both tables alike.
        let turn = self.turns.get(position).cloned().unwrap_or_default();
        let sender = slot.get_or_init(|| start_worker(device, Arc::clone(&turn)));
        turn.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(refused) = sender.send(job) {
            // The worker is gone only if its thread could not be started; run the job here
            // rather than lose it.
            turn.queued.fetch_sub(1, Ordering::AcqRel);
            (refused.0)();
        }
    }
}

/// Starts the worker thread of `device`'s queue.
fn start_worker(device: Device, turn: Arc<Turn>) -> Sender<Job> {
    let (sender, receiver) = channel::<Job>();
    let started = std::thread::Builder::new()
        .name(format!("rimms-{device}"))
        .spawn(move || {
            WORKER_OF.set(Some(device));
            // Jobs catch their own panics (see `scope`), so one failing job never ends the
            // worker; it ends when every sender is gone.
            while let Ok(job) = receiver.recv() {
                let held = turn.lock.lock().unwrap_or_else(|e| e.into_inner());
                job();
                turn.queued.fetch_sub(1, Ordering::AcqRel);
                drop(held);
            }
        });
    if let Err(e) = started {
        tracing::warn!(%device, error = %e, "could not start the device's worker thread; its jobs run on the submitting thread");
    }
    sender
}
