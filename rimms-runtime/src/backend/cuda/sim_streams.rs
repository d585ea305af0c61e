//! A model of a device's four streams for the ordering tests, on machines with no GPU.
//!
//! A GPU runs the work of one stream in order, and the work of different streams in any
//! order unless a stream waits for an event of another. The model does exactly that and no
//! more: each stream is a queue of operations (wait for an event, record an event, run some
//! work on a byte array standing in for device memory), and a step runs the head of any
//! stream that is not blocked, the one [`Sim::prefer`] ranks first, or a pseudo-random one.
//! Nothing runs until a thread synchronises, waits, or steps it ([`Sim::step_once`]),
//! so a test controls how far work has got, and an ordering the lanes forgot to ask for
//! shows up as wrong bytes.
//!
//! It also plays the parts of a driver that the rules of `lanes` guard against: an event
//! whose query fails, a record that fails, a query with no context current (an error here,
//! counted), and a hook that runs while a stream is being synchronised (another thread
//! submitting in the meantime).

use super::lanes::Streams;
use crate::error::{Error, Result};
use std::cell::Cell;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Work on the model's device memory.
type Work = Box<dyn FnOnce(&mut [u8]) + Send>;

enum Op {
    Wait(usize),
    Record(usize),
    Work(Work),
}

struct State {
    queues: [VecDeque<Op>; 4],
    /// Per event id: whether it has been reached.
    done: Vec<bool>,
    mem: Vec<u8>,
    rng: u64,
}

/// A hook run while a stream is being synchronised.
type Hook = Box<dyn FnOnce() + Send>;

thread_local! {
    /// The model whose "context" is current on this thread (its address).
    static BOUND: Cell<usize> = const { Cell::new(0) };
}

/// Four modelled streams (0 compute, 1 host→device, 2 device→host, 3 device→device) over
/// `mem` bytes of modelled device memory.
pub(crate) struct Sim {
    state: Mutex<State>,
    prefer: Mutex<Option<[usize; 4]>>,
    failing_queries: Mutex<HashSet<usize>>,
    fail_next_record: AtomicBool,
    unbound_queries: AtomicUsize,
    queries: AtomicUsize,
    on_sync: Mutex<Option<(usize, Hook)>>,
}

fn sim_error(what: &str) -> Error {
    Error::Cuda {
        what: format!("{what} on the modelled device"),
        why: "modelled failure".to_string(),
    }
}

impl Sim {
    /// A model with `mem` zero bytes of device memory, stepping pseudo-randomly from `seed`.
    pub(crate) fn new(mem: usize, seed: u64) -> Sim {
        Sim {
            state: Mutex::new(State {
                queues: Default::default(),
                done: Vec::new(),
                mem: vec![0; mem],
                rng: seed | 1,
            }),
            prefer: Mutex::new(None),
            failing_queries: Mutex::new(HashSet::new()),
            fail_next_record: AtomicBool::new(false),
            unbound_queries: AtomicUsize::new(0),
            queries: AtomicUsize::new(0),
            on_sync: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `work` on `stream`.
    pub(crate) fn push(&self, stream: usize, work: impl FnOnce(&mut [u8]) + Send + 'static) {
        self.lock().queues[stream].push_back(Op::Work(Box::new(work)));
    }

    /// Steps run the first unblocked stream of `order` instead of a pseudo-random one.
    pub(crate) fn prefer(&self, order: [usize; 4]) {
        *self.prefer.lock().unwrap() = Some(order);
    }

    /// Makes queries of `event` fail.
    pub(crate) fn fail_queries_of(&self, event: usize) {
        self.failing_queries.lock().unwrap().insert(event);
    }

    /// Makes the next record fail.
    pub(crate) fn fail_next_record(&self) {
        self.fail_next_record.store(true, Ordering::SeqCst);
    }

    /// Runs `hook` (once) when `stream` is next synchronised, before the wait.
    pub(crate) fn on_synchronize(&self, stream: usize, hook: impl FnOnce() + Send + 'static) {
        *self.on_sync.lock().unwrap() = Some((stream, Box::new(hook)));
    }

    /// Queries made, and how many of them with no context current.
    pub(crate) fn queries(&self) -> (usize, usize) {
        (
            self.queries.load(Ordering::SeqCst),
            self.unbound_queries.load(Ordering::SeqCst),
        )
    }

    /// Operations still queued on `stream`.
    pub(crate) fn queued(&self, stream: usize) -> usize {
        self.lock().queues[stream].len()
    }

    /// A copy of the device memory.
    pub(crate) fn memory(&self) -> Vec<u8> {
        self.lock().mem.clone()
    }

    /// Runs one unblocked operation; false if every stream is empty or blocked.
    fn step(&self, st: &mut State) -> bool {
        let runnable: Vec<usize> = (0..4)
            .filter(|&s| match st.queues[s].front() {
                None => false,
                Some(Op::Wait(e)) => st.done[*e],
                Some(_) => true,
            })
            .collect();
        if runnable.is_empty() {
            return false;
        }
        let pick = match *self.prefer.lock().unwrap() {
            Some(order) => order.into_iter().find(|s| runnable.contains(s)),
            None => None,
        };
        let pick = pick.unwrap_or_else(|| {
            // xorshift64
            st.rng ^= st.rng << 13;
            st.rng ^= st.rng >> 7;
            st.rng ^= st.rng << 17;
            runnable[(st.rng % runnable.len() as u64) as usize]
        });
        match st.queues[pick].pop_front() {
            Some(Op::Record(e)) => st.done[e] = true,
            Some(Op::Work(work)) => work(&mut st.mem),
            Some(Op::Wait(_)) | None => {}
        }
        true
    }

    /// Steps until `until` holds. Panics if nothing can run first: a stream waiting for an
    /// event that is never reached is an ordering bug in itself.
    fn run_until(&self, until: impl Fn(&State) -> bool) {
        loop {
            let mut st = self.lock();
            if until(&st) {
                return;
            }
            if !self.step(&mut st) {
                panic!("the modelled streams are stuck: every queue is empty or blocked");
            }
        }
    }

    /// Blocks until `event` has been reached.
    pub(crate) fn wait_event(&self, event: usize) {
        self.run_until(|st| st.done[event]);
    }

    /// Runs one unblocked operation, if there is one (a GPU going on while the host does:
    /// call it in a loop on another thread). Whether one ran.
    pub(crate) fn step_once(&self) -> bool {
        let mut st = self.lock();
        self.step(&mut st)
    }

    fn address(&self) -> usize {
        self as *const Sim as usize
    }
}

impl Streams for Sim {
    type Stream = usize;
    type Event = usize;

    fn device(&self) -> &str {
        "sim0"
    }

    fn bind(&self) -> Result<()> {
        BOUND.with(|b| b.set(self.address()));
        Ok(())
    }

    fn wait(&self, stream: &usize, event: &usize) -> Result<()> {
        self.lock().queues[*stream].push_back(Op::Wait(*event));
        Ok(())
    }

    fn record(&self, stream: &usize) -> Result<usize> {
        if self.fail_next_record.swap(false, Ordering::SeqCst) {
            return Err(sim_error("recording an event"));
        }
        let mut st = self.lock();
        let id = st.done.len();
        st.done.push(false);
        st.queues[*stream].push_back(Op::Record(id));
        Ok(id)
    }

    fn is_done(&self, event: &usize) -> Result<bool> {
        self.queries.fetch_add(1, Ordering::SeqCst);
        if BOUND.with(|b| b.get()) != self.address() {
            self.unbound_queries.fetch_add(1, Ordering::SeqCst);
            return Err(sim_error("querying an event with no context current"));
        }
        if self.failing_queries.lock().unwrap().contains(event) {
            return Err(sim_error("querying an event"));
        }
        Ok(self.lock().done[*event])
    }

    fn synchronize(&self, stream: &usize) -> Result<()> {
        let hook = {
            let mut slot = self.on_sync.lock().unwrap();
            match slot.take() {
                Some((s, hook)) if s == *stream => Some(hook),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if let Some(hook) = hook {
            hook();
        }
        self.run_until(|st| st.queues[*stream].is_empty());
        Ok(())
    }
}
