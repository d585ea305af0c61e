//! Scheduling: which device runs a call that names none (`Target::Auto`).
//!
//! CEDR places each ready task on a processing element from per-API cost tables (round-robin,
//! minimum execution time, earliest finish time). Those schedulers are blind to where the data
//! is, so on a machine with separate memories they happily send each step of a chain to a
//! different device and pay for the copies. The data-aware policy adds the one thing RIMMS knows
//! and CEDR does not — how many bytes of each argument are not yet valid on each candidate and
//! what moving them would cost over its links — the way StarPU's `dmda` does. Data that already
//! sits on a device then tends to stay there.
//!
//! Everything here is off the resident fast path: a call that names its device never touches
//! the scheduler.
//!
//! The scheduler is policy alone: it is handed the candidates and asks the caller what each
//! would cost to move data to (`kernel::choose` hands it the device table and the call's
//! arguments), so it imports neither the runtime nor the kernels nor the buffers.

pub(crate) mod calibrate;
mod costs;

pub use costs::CostTable;

use crate::hal::Device;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How the scheduler places `Target::Auto` calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Policy {
    /// A fixed device per API name, and `default` for the rest (CEDR's static mapping).
    Fixed {
        /// Where APIs not listed run.
        default: Device,
        /// API name and its device.
        per_api: Vec<(String, Device)>,
    },
    /// The next candidate in turn.
    RoundRobin,
    /// Minimum execution time: the candidate whose cost table says it runs the call fastest.
    Met,
    /// Earliest finish time: execution time plus the wait for the work already queued on each
    /// candidate (none while it has a free slot: the CPU runs several calls at once, see
    /// [`CostTable::concurrency`]).
    Eft,
    /// Earliest finish time plus the time to move the argument bytes not yet valid on each
    /// candidate, from the cheapest source over the runtime's links.
    #[default]
    DataAwareEft,
}

impl Policy {
    /// The policy's name as the CLI and reports spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Fixed { .. } => "fixed",
            Policy::RoundRobin => "round-robin",
            Policy::Met => "met",
            Policy::Eft => "eft",
            Policy::DataAwareEft => "data-aware-eft",
        }
    }
}

/// The scheduler's state: its policy, the cost tables, and what it has placed but not yet seen
/// finish on each device.
pub(crate) struct Scheduler {
    policy: Policy,
    costs: CostTable,
    turn: AtomicUsize,
    /// What each device (by position) has placed on it and not yet finished.
    queues: Vec<DeviceQueue>,
    /// Held from reading the queues to booking the pick: two calls placed at once would
    /// otherwise both see the same free device and both take it.
    placing: Mutex<()>,
}

/// One device's placed, unfinished calls, as the scheduler sees them.
struct DeviceQueue {
    /// How many calls the device runs at once (from the cost table).
    concurrency: usize,
    /// Calls placed and not finished.
    calls: AtomicUsize,
    /// Their estimated nanoseconds.
    ns: AtomicU64,
}

impl DeviceQueue {
    /// How long a call placed now waits before it starts: nothing while the device has a free
    /// slot, else the queued work shared over its slots.
    fn wait_ns(&self) -> u64 {
        if self.calls.load(Ordering::Relaxed) < self.concurrency {
            0
        } else {
            self.ns.load(Ordering::Relaxed) / self.concurrency as u64
        }
    }
}

/// A placed call: its estimate stays on its device's queue until the ticket is dropped, when
/// the call has finished (or failed).
pub(crate) struct Ticket<'a> {
    queue: &'a DeviceQueue,
    estimate: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.queue.ns.fetch_sub(self.estimate, Ordering::Relaxed);
        self.queue.calls.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Scheduler {
    /// A scheduler for `devices`, in the runtime's device order.
    pub(crate) fn new(
        policy: Policy,
        costs: CostTable,
        devices: impl IntoIterator<Item = Device>,
    ) -> Scheduler {
        let queues = devices
            .into_iter()
            .map(|device| DeviceQueue {
                concurrency: costs.concurrent_calls(device),
                calls: AtomicUsize::new(0),
                ns: AtomicU64::new(0),
            })
            .collect();
        Scheduler {
            policy,
            costs,
            turn: AtomicUsize::new(0),
            queues,
            placing: Mutex::new(()),
        }
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Picks the device (its position in `devices`) for a call of the API named `api` on `bytes` bytes of arguments among
    /// the `devices` (the runtime's device table, in order) that `takes` (those that implement
    /// the API and whose check accepts the call, a device limit such as an FFT core's largest
    /// size); `transfer_ns` is what moving the call's data to a device would cost.
    ///
    /// `takes` runs users' `accepts` checks, which may call the runtime (a `Target::Auto`
    /// call of their own included), so every device is asked before the lock is taken: held
    /// around them, the lock would be waited for by the thread that holds it.
    pub(crate) fn choose<'s, E>(
        &'s self,
        devices: &[E],
        device_of: impl Fn(&E) -> Device,
        api: &str,
        bytes: usize,
        takes: impl Fn(&E) -> bool,
        transfer_ns: impl Fn(&E) -> u64,
    ) -> Result<(usize, Ticket<'s>), NoCandidate> {
        let takes: Vec<usize> = (0..devices.len()).filter(|&i| takes(&devices[i])).collect();
        // Nothing inside can leave the unit value half-changed, so a poisoned lock is fine.
        let _one_at_a_time = self.placing.lock().unwrap_or_else(|e| e.into_inner());
        let candidates = || takes.iter().copied();
        let run_ns = |i: usize| self.costs.estimate(api, device_of(&devices[i]), bytes);
        let wait = |i: usize| self.queues[i].wait_ns();
        let transfer_ns = |i: usize| transfer_ns(&devices[i]);
        let pick = match &self.policy {
            Policy::Fixed { default, per_api } => {
                let wanted = per_api
                    .iter()
                    .find(|(name, _)| name == api)
                    .map_or(*default, |(_, device)| *device);
                candidates().find(|&i| device_of(&devices[i]) == wanted)
            }
            Policy::RoundRobin => {
                let count = candidates().count().max(1);
                candidates().nth(self.turn.fetch_add(1, Ordering::Relaxed) % count)
            }
            Policy::Met => cheapest(candidates(), run_ns, |_| 0),
            Policy::Eft => cheapest(candidates(), |i| wait(i) + run_ns(i), |_| 0),
            Policy::DataAwareEft => cheapest(candidates(), |i| wait(i) + run_ns(i), transfer_ns),
        };
        let pick = pick.ok_or(NoCandidate)?;
        let estimate = run_ns(pick);
        let queue = &self.queues[pick];
        queue.ns.fetch_add(estimate, Ordering::Relaxed);
        queue.calls.fetch_add(1, Ordering::Relaxed);
        Ok((pick, Ticket { queue, estimate }))
    }
}

/// No device implements the API and accepts the call.
pub(crate) struct NoCandidate;

/// The candidate of least cost, `base(i) + extra(i)`; ties go to the earlier device (the CPU
/// first), so a decision is repeatable. `extra` (the transfer estimate, which takes the buffer's
/// lock and plans its copies) is only asked of a candidate whose `base` alone could still win.
fn cheapest(
    candidates: impl Iterator<Item = usize>,
    base: impl Fn(usize) -> u64,
    extra: impl Fn(usize) -> u64,
) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for i in candidates {
        let floor = base(i);
        if best.is_some_and(|(_, cost)| floor >= cost) {
            continue;
        }
        let cost = floor.saturating_add(extra(i));
        if best.is_none_or(|(_, best_cost)| cost < best_cost) {
            best = Some((i, cost));
        }
    }
    best.map(|(i, _)| i)
}
