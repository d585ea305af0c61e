//! A stream-ordering model of a GPU, to check [`super`]'s decisions without one.
//!
//! Each device has a compute and a copy lane, FIFO queues of operations: work (a copy, a
//! kernel, a fill, a fault), event records and event waits. Nothing runs when it is
//! enqueued. Work runs only when a host wait needs it (an event waited for, a lane drained)
//! or when the model's seeded scheduler picks it: at every stream call it runs a few lane
//! heads chosen at random, so different seeds give different interleavings, each consistent
//! with per-lane FIFO order and event waits. Work can be *held* (a kernel still running, a
//! prefetch still in flight): a host wait that needs held work is a violation — it means the
//! caller waited for something it should have overlapped.
//!
//! Memory is a map from locations to values, so a wrong order shows up as a wrong value; and
//! the model records violations as they happen: work touching a device's pool after it was
//! freed, the host overwriting a staging buffer that queued work still reads.

use super::super::stream::{Lane, Streams};
use super::super::{cuda_error, Result};
use super::StagingPool;
use crate::hal::Device;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

/// A place bytes live: a word of a device's pool, of host memory, or a staging buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Loc {
    Dev(usize, u32),
    Host(u32),
    Staging(u32),
}

/// What a piece of work does when it runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Effect {
    /// `to = from`.
    Copy { from: Loc, to: Loc },
    /// `to = f(from)`: a kernel.
    Kernel {
        from: Loc,
        to: Loc,
        f: fn(u64) -> u64,
    },
    /// `to = value`: a fill.
    Set { to: Loc, value: u64 },
    /// An asynchronous fault (an illegal address): the lane fails, the context too.
    Fault,
}

impl Effect {
    fn reads(&self) -> Option<Loc> {
        match *self {
            Effect::Copy { from, .. } | Effect::Kernel { from, .. } => Some(from),
            _ => None,
        }
    }

    fn writes(&self) -> Option<Loc> {
        match *self {
            Effect::Copy { to, .. } | Effect::Kernel { to, .. } | Effect::Set { to, .. } => {
                Some(to)
            }
            Effect::Fault => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Work(&'static str, Effect),
    Record(u64),
    Wait(u64),
}

#[derive(Clone, Debug)]
struct Op {
    id: u64,
    step: Step,
}

type LaneId = (usize, Lane);

#[derive(Default)]
struct State {
    lanes: HashMap<LaneId, VecDeque<Op>>,
    /// Where each event was recorded, and whether it has completed.
    events: HashMap<u64, LaneId>,
    done_events: HashSet<u64>,
    held: HashSet<u64>,
    memory: HashMap<Loc, u64>,
    freed: HashSet<usize>,
    failed_lanes: HashSet<LaneId>,
    sticky: HashSet<usize>,
    /// Which lane each piece of work ran on, in the order it ran.
    ran: Vec<(&'static str, LaneId)>,
    violations: Vec<String>,
    next_id: u64,
    rng: u64,
}

/// The devices and the host of one model run.
pub(crate) struct World {
    state: RefCell<State>,
}

impl World {
    /// A world whose scheduler draws from `seed`.
    pub(crate) fn new(seed: u64) -> Rc<World> {
        Rc::new(World {
            state: RefCell::new(State {
                rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                ..State::default()
            }),
        })
    }

    /// Device `index` of this world.
    pub(crate) fn gpu(self: &Rc<World>, index: usize) -> ModelGpu {
        let queue = |lane| ModelQueue {
            world: self.clone(),
            lane: (index, lane),
        };
        ModelGpu {
            world: self.clone(),
            index,
            compute: queue(Lane::Compute),
            copy: queue(Lane::Copy),
        }
    }

    pub(crate) fn read(&self, loc: Loc) -> u64 {
        self.state.borrow().memory.get(&loc).copied().unwrap_or(0)
    }

    /// The host writes `loc`: a violation if queued work still reads it.
    pub(crate) fn host_write(&self, loc: Loc, value: u64) {
        let mut st = self.state.borrow_mut();
        let readers: Vec<&'static str> = st
            .lanes
            .values()
            .flatten()
            .filter_map(|op| match &op.step {
                Step::Work(label, effect) if effect.reads() == Some(loc) => Some(*label),
                _ => None,
            })
            .collect();
        if !readers.is_empty() {
            st.violations.push(format!(
                "the host overwrote {loc:?} while queued work still reads it: {readers:?}"
            ));
        }
        st.memory.insert(loc, value);
    }

    /// Device `index`'s pool goes back to the driver: later work touching it is a violation.
    pub(crate) fn free_pool(&self, index: usize) {
        self.state.borrow_mut().freed.insert(index);
    }

    /// Lets held work run (the kernel finished on its own).
    pub(crate) fn release(&self, op: u64) {
        self.state.borrow_mut().held.remove(&op);
    }

    /// Runs everything still queued, held or not, as the device would in the end.
    pub(crate) fn run_all(&self) {
        let mut st = self.state.borrow_mut();
        st.held.clear();
        while let Some(lane) = st
            .lanes
            .iter()
            .find(|(_, q)| !q.is_empty())
            .map(|(l, _)| *l)
        {
            st.force_lane(lane, usize::MAX);
        }
    }

    /// Pieces of work labelled `label` still queued.
    pub(crate) fn pending(&self, label: &str) -> usize {
        let st = self.state.borrow();
        st.lanes
            .values()
            .flatten()
            .filter(|op| matches!(op.step, Step::Work(l, _) if l == label))
            .count()
    }

    /// The lanes the work labelled `label` ran on.
    pub(crate) fn lanes_of(&self, label: &str) -> Vec<Lane> {
        let st = self.state.borrow();
        st.ran
            .iter()
            .filter(|(l, _)| *l == label)
            .map(|(_, (_, lane))| *lane)
            .collect()
    }

    pub(crate) fn violations(&self) -> Vec<String> {
        self.state.borrow().violations.clone()
    }
}

impl State {
    fn next(&mut self) -> u64 {
        // xorshift64: a reproducible stream of choices per seed.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    fn push(&mut self, lane: LaneId, step: Step) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        if let Step::Record(event) = step {
            self.events.insert(event, lane);
        }
        self.lanes
            .entry(lane)
            .or_default()
            .push_back(Op { id, step });
        id
    }

    /// Whether a lane's head may run now without a host wait: not held, not waiting for an
    /// event that has not completed.
    fn head_ready(&self, lane: LaneId) -> bool {
        match self.lanes.get(&lane).and_then(|q| q.front()) {
            None => false,
            Some(op) if self.held.contains(&op.id) => false,
            Some(Op {
                step: Step::Wait(event),
                ..
            }) => self.done_events.contains(event),
            Some(_) => true,
        }
    }

    /// The adversary: runs up to two lane heads that are ready, chosen at random.
    fn progress(&mut self) {
        let steps = self.next() % 3;
        for _ in 0..steps {
            let mut ready: Vec<LaneId> = self
                .lanes
                .keys()
                .copied()
                .filter(|&l| self.head_ready(l))
                .collect();
            if ready.is_empty() {
                return;
            }
            ready.sort_by_key(|&(d, l)| (d, l == Lane::Copy));
            let pick = ready[(self.next() % ready.len() as u64) as usize];
            self.run_head(pick);
        }
    }

    /// Runs the head of `lane`, first what it waits for; a violation where it is held.
    fn run_head(&mut self, lane: LaneId) {
        let Some(op) = self.lanes.get(&lane).and_then(|q| q.front()).cloned() else {
            return;
        };
        if self.held.remove(&op.id) {
            let label = match op.step {
                Step::Work(label, _) => label,
                _ => "an event",
            };
            self.violations.push(format!(
                "a host wait needed `{label}` on {lane:?}, which was still running: it did not overlap"
            ));
        }
        if let Step::Wait(event) = op.step {
            self.force_event(event);
        }
        if let Some(q) = self.lanes.get_mut(&lane) {
            q.pop_front();
        }
        match op.step {
            Step::Record(event) => {
                self.done_events.insert(event);
            }
            Step::Wait(_) => {}
            Step::Work(label, effect) => self.execute(lane, label, effect),
        }
    }

    fn execute(&mut self, lane: LaneId, label: &'static str, effect: Effect) {
        self.ran.push((label, lane));
        for loc in [effect.reads(), effect.writes()].into_iter().flatten() {
            if let Loc::Dev(d, _) = loc {
                if self.freed.contains(&d) {
                    self.violations.push(format!(
                        "`{label}` on {lane:?} touched gpu{d}'s pool after it was freed"
                    ));
                }
            }
        }
        match effect {
            Effect::Copy { from, to } => {
                let v = self.memory.get(&from).copied().unwrap_or(0);
                self.memory.insert(to, v);
            }
            Effect::Kernel { from, to, f } => {
                let v = f(self.memory.get(&from).copied().unwrap_or(0));
                self.memory.insert(to, v);
            }
            Effect::Set { to, value } => {
                self.memory.insert(to, value);
            }
            Effect::Fault => {
                self.failed_lanes.insert(lane);
                self.sticky.insert(lane.0);
            }
        }
    }

    /// Runs `lane` until `count` heads ran or it is empty.
    fn force_lane(&mut self, lane: LaneId, count: usize) {
        for _ in 0..count {
            if self.lanes.get(&lane).is_none_or(|q| q.is_empty()) {
                return;
            }
            self.run_head(lane);
        }
    }

    /// Runs the lane `event` was recorded on until the event completed.
    fn force_event(&mut self, event: u64) {
        let Some(&lane) = self.events.get(&event) else {
            return;
        };
        while !self.done_events.contains(&event) {
            if self.lanes.get(&lane).is_none_or(|q| q.is_empty()) {
                return;
            }
            self.run_head(lane);
        }
    }

    fn lane_result(&self, lane: LaneId) -> Result<()> {
        if self.failed_lanes.contains(&lane) {
            Err(cuda_error(
                format!("model {lane:?}"),
                "an asynchronous fault",
            ))
        } else {
            Ok(())
        }
    }
}

/// Where a model device's work is enqueued.
pub(crate) struct ModelQueue {
    world: Rc<World>,
    lane: LaneId,
}

impl ModelQueue {
    /// Enqueues work; its id.
    pub(crate) fn push(&self, label: &'static str, effect: Effect) -> u64 {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.push(self.lane, Step::Work(label, effect))
    }

    /// Enqueues work that is still running until [`World::release`]d.
    pub(crate) fn push_held(&self, label: &'static str, effect: Effect) -> u64 {
        let id = self.push(label, effect);
        self.world.state.borrow_mut().held.insert(id);
        id
    }
}

/// One model GPU: its two lanes in a [`World`].
pub(crate) struct ModelGpu {
    world: Rc<World>,
    index: usize,
    compute: ModelQueue,
    copy: ModelQueue,
}

/// An event of the model.
pub(crate) struct ModelEvent(u64);

impl Streams for ModelGpu {
    type Queue = ModelQueue;
    type Event = ModelEvent;

    fn device(&self) -> Device {
        Device::Gpu(self.index as u8)
    }

    fn queue(&self, lane: Lane) -> &ModelQueue {
        match lane {
            Lane::Compute => &self.compute,
            Lane::Copy => &self.copy,
        }
    }

    fn record(&self, lane: Lane) -> Result<ModelEvent> {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.next_id += 1;
        let event = st.next_id;
        st.push((self.index, lane), Step::Record(event));
        Ok(ModelEvent(event))
    }

    fn order_after(&self, lane: Lane, event: &ModelEvent) -> Result<()> {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.push((self.index, lane), Step::Wait(event.0));
        Ok(())
    }

    fn host_wait(&self, event: &ModelEvent) -> Result<()> {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.force_event(event.0);
        let lane = st.events.get(&event.0).copied();
        lane.map_or(Ok(()), |lane| st.lane_result(lane))
    }

    fn drain(&self, lane: Lane) -> Result<()> {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.force_lane((self.index, lane), usize::MAX);
        st.lane_result((self.index, lane))
    }

    fn poll(&self, lane: Lane) -> Result<()> {
        let mut st = self.world.state.borrow_mut();
        st.progress();
        st.lane_result((self.index, lane))
    }

    fn sticky_error(&self) -> Result<()> {
        let st = self.world.state.borrow();
        if st.sticky.contains(&self.index) {
            Err(cuda_error(
                format!("model gpu{}", self.index),
                "a sticky error",
            ))
        } else {
            Ok(())
        }
    }
}

/// The staging pool's reuse rule (as `Staging`'s): a buffer whose copy's event has not
/// completed is reused only after a host wait for it.
pub(crate) struct ModelStaging {
    world: Rc<World>,
    slots: usize,
    state: RefCell<StagingState>,
}

#[derive(Default)]
struct StagingState {
    free: Vec<u32>,
    busy: VecDeque<(u32, ModelEvent)>,
    count: u32,
    leaked: usize,
}

impl ModelStaging {
    pub(crate) fn new(world: &Rc<World>, slots: usize) -> ModelStaging {
        ModelStaging {
            world: world.clone(),
            slots,
            state: RefCell::default(),
        }
    }

    pub(crate) fn leaked(&self) -> usize {
        self.state.borrow().leaked
    }
}

impl StagingPool<ModelEvent> for ModelStaging {
    type Buffer = u32;

    fn take(&self) -> Result<u32> {
        let mut pool = self.state.borrow_mut();
        let done = |event: &ModelEvent| self.world.state.borrow().done_events.contains(&event.0);
        while pool.busy.front().is_some_and(|(_, e)| done(e)) {
            if let Some((buf, _)) = pool.busy.pop_front() {
                pool.free.push(buf);
            }
        }
        if let Some(buf) = pool.free.pop() {
            return Ok(buf);
        }
        if pool.count as usize >= self.slots {
            if let Some((buf, event)) = pool.busy.pop_front() {
                self.world.state.borrow_mut().force_event(event.0);
                return Ok(buf);
            }
        }
        pool.count += 1;
        Ok(pool.count)
    }

    fn release(&self, buffer: u32) {
        self.state.borrow_mut().free.push(buffer);
    }

    fn release_after(&self, buffer: u32, event: ModelEvent) {
        self.state.borrow_mut().busy.push_back((buffer, event));
    }

    fn leak(&self, _buffer: u32) {
        self.state.borrow_mut().leaked += 1;
    }
}
