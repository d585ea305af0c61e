//! The memory system: every memory space of a runtime with its pool, its link and who holds
//! blocks in it; the copy and fill engine, the one place bytes move between spaces; and what
//! it counts and traces.
//!
//! It is kept apart from coherence and from the devices the way StarPU keeps its memory nodes,
//! copy drivers and allocator apart from the coherence protocol: coherence decides which copies
//! a call needs, a buffer carries the plan out through this, and this neither knows why a copy
//! is made nor which device will read it. A buffer holds the memory system (not the runtime)
//! so that its blocks go back to their pools whatever is dropped first.
//!
//! The one parameter, `H`, is what holds blocks (the data layer's buffers): the memory system
//! keeps weak handles to them per space, by id, so that eviction can walk them, and knows
//! nothing else of them.

use super::{
    DeviceMemoryRef, LinkModel, Occupancy, Pending, Pool, SpaceId, SpaceName, SpaceSet, MAX_SPACES,
};
use crate::hal::BackendError;
use crate::hal::{Device, FragmentRule};
use crate::hal::{During, Error, Result};
use crate::stats::{trace_transfer, Counters, LinkStats, Reason, SpaceStats, Timeline};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;
use zeroize::{Zeroize, Zeroizing};

/// What a staged copy or fill does to the bytes on the host between source and destination
/// (a secure buffer's sealing or opening, `data::secure`); an error stops the copy before the
/// destination is written.
pub(crate) type Transform<'a> = &'a mut dyn FnMut(&mut [u8]) -> Result<()>;

/// One memory space as the memory system keeps it.
pub(crate) struct SpaceEntry<H> {
    /// Its memory; the pool also carries the space's name (`SpaceName`).
    pool: Pool,
    /// Link to and from the host; `None` for the host itself. A simulated link's copies take
    /// this long.
    link: Option<LinkModel>,
    /// What copies over the link were measured to take, if the runtime calibrated it; the
    /// copy planner and the scheduler rank by this when it is set.
    measured: OnceLock<LinkModel>,
    simulate: bool,
    /// Copies over the link charge the virtual clock instead of waiting ([`crate::vclock`]).
    virtual_clock: bool,
    /// Copies to and from this space fail (fault injection): set by `SimConfig::fail_copies`,
    /// switched by `Runtime::inject_copy_faults`.
    fail_copies: AtomicBool,
    /// The holders of a block here, for eviction.
    residents: Residents<H>,
    /// The CPU reaches this space in place (always true of the host itself).
    host_mapped: bool,
    /// For memory the CPU cannot address, the backend's way in; `None` for host-addressable
    /// spaces.
    device_memory: Option<DeviceMemoryRef>,
    /// When its simulated link is next free.
    busy: Occupancy,
}

impl<H> SpaceEntry<H> {
    /// Host memory, carved from `pool`.
    pub(crate) fn host(pool: Pool) -> Self {
        SpaceEntry {
            pool,
            link: None,
            measured: OnceLock::new(),
            simulate: false,
            virtual_clock: false,
            fail_copies: AtomicBool::new(false),
            residents: Residents::default(),
            host_mapped: true,
            device_memory: None,
            busy: Occupancy::default(),
        }
    }

    /// A device's space, carved from `pool` (which names it), reached from the host over
    /// `link`.
    /// Its copies take no modelled time, succeed, and the CPU cannot reach its bytes in place
    /// until the setters below say otherwise.
    pub(crate) fn linked(pool: Pool, link: LinkModel) -> Self {
        SpaceEntry {
            link: Some(link),
            host_mapped: false,
            ..SpaceEntry::host(pool)
        }
    }

    /// [`MemorySystem::timed_link`] of this space.
    pub(crate) fn timed_link(&self) -> Option<LinkModel> {
        (self.simulate && !self.virtual_clock)
            .then_some(self.link)
            .flatten()
    }

    /// Copies over the link take the modelled time (a simulated device).
    #[must_use]
    pub(crate) fn simulated(mut self, on: bool) -> Self {
        self.simulate = on;
        self
    }

    /// Copies over the link charge their modelled time to the virtual clock and their wall
    /// time is excluded (an emulated FPGA under a timing model), instead of waiting it out.
    #[must_use]
    pub(crate) fn virtual_clock(mut self, on: bool) -> Self {
        self.virtual_clock = on;
        self
    }

    /// Every copy to and from the space fails from the start (fault injection).
    #[must_use]
    pub(crate) fn failing_copies(self, on: bool) -> Self {
        self.fail_copies.store(on, Ordering::Relaxed);
        self
    }

    /// The CPU reads and writes the space in place (a u-dma-buf).
    #[must_use]
    pub(crate) fn host_mapped(mut self, on: bool) -> Self {
        self.host_mapped = on;
        self
    }

    /// The space is memory the CPU cannot address, reached through `memory`.
    #[must_use]
    pub(crate) fn device_memory(mut self, memory: Option<DeviceMemoryRef>) -> Self {
        self.device_memory = memory;
        self
    }

    pub(crate) fn name(&self) -> &str {
        self.pool.name().as_str()
    }

    fn named(&self) -> &SpaceName {
        self.pool.name()
    }

    /// The backend's way into the space, if the CPU cannot address it.
    pub(crate) fn memory(&self) -> Option<&DeviceMemoryRef> {
        self.device_memory.as_ref()
    }

    /// The link model copies to and from this space are ranked by.
    fn cost_model(&self) -> Option<LinkModel> {
        self.measured.get().copied().or(self.link)
    }
}

/// The holders of a block in one space, by id (creation order), held weakly: a holder that is
/// dropped gives its blocks back itself.
pub(crate) struct Residents<H> {
    holders: Mutex<BTreeMap<u64, Weak<H>>>,
}

impl<H> Default for Residents<H> {
    fn default() -> Self {
        Residents {
            holders: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<H> Residents<H> {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Weak<H>>> {
        // Inserts and removes of a map cannot leave it half-changed; a poisoned lock is fine.
        self.holders.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn insert(&self, id: u64, holder: Weak<H>) {
        self.lock().insert(id, holder);
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// The live holders, ordered by `stamp` (then by id, oldest first). The registry's lock is
    /// released before the caller touches any of them.
    pub(crate) fn by_stamp(&self, stamp: impl Fn(&H) -> u64) -> Vec<Arc<H>> {
        let mut order: Vec<(u64, u64, Arc<H>)> = self
            .lock()
            .iter()
            .filter_map(|(&id, weak)| weak.upgrade().map(|h| (stamp(&h), id, h)))
            .collect();
        order.sort_unstable_by_key(|&(stamp, id, _)| (stamp, id));
        order.into_iter().map(|(_, _, h)| h).collect()
    }
}

/// Every memory space of a runtime, the copies between them and their counters.
pub(crate) struct MemorySystem<H> {
    spaces: Vec<SpaceEntry<H>>,
    granule: usize,
    /// The space each device's data moves to when it needs it, for placement hints and
    /// prefetches, which name a device.
    device_spaces: Vec<(Device, SpaceId)>,
    /// Spaces besides the host that host code reaches in place.
    host_mapped: SpaceSet,
    /// Where a buffer without a placement lives when a device that reaches it writes it first;
    /// `None`: in the writer's own space.
    default_home: Option<SpaceId>,
    /// Spaces whose blocks are evicted when their pool is full.
    evictable: SpaceSet,
    /// The logical clock of least-recent use: advanced by every slow-path acquire, read (not
    /// advanced) by the fast path, which stamps buffers with it.
    clock: AtomicU64,
    /// Ids of holders, in creation order (eviction's tie-break).
    next_holder: AtomicU64,
    counters: Counters,
    /// Whether transfer (and eviction) events go to `tracing`.
    trace: bool,
    /// Kernels and transfers for `RIMMS_TRACE_FILE`, written to the file as they happen.
    timeline: Option<Timeline>,
    /// Whether buffers record a checksum per written fragment and check it on the next read
    /// (`RuntimeBuilder::checksums`, `RIMMS_CHECK=checksums`; `data::checksum`).
    checksums: bool,
    /// Whether copies start ahead of the calls that need them (`RuntimeBuilder::prefetch`;
    /// `kernel::ahead`): a held group's inputs, and a write's bytes to where their owner
    /// history predicts they go next once the write ends.
    prefetches: bool,
    /// Spaces a secure buffer's bytes are ciphertext in (`RuntimeBuilder::trust`;
    /// `data::secure`). Never the host.
    untrusted: SpaceSet,
    /// The fragment size the devices call for (`hal::FragmentRule`), and whether buffers are
    /// allocated with it (`RuntimeBuilder::fragments_from_devices`) instead of 4 KiB.
    fragment_rule: FragmentRule,
    rule_for_alloc: bool,
}

impl<H> MemorySystem<H> {
    /// The memory system over `spaces`, the host first, whose pools all allocate in `granule`s.
    /// Nothing is evicted, unplaced data lives where it is first written, and nothing is
    /// traced until the setters below say otherwise.
    pub(crate) fn new(spaces: Vec<SpaceEntry<H>>, granule: usize) -> Self {
        debug_assert!(
            spaces.len() <= MAX_SPACES && spaces.first().is_some_and(|host| host.link.is_none())
        );
        let host_mapped = spaces
            .iter()
            .enumerate()
            .filter(|(i, s)| s.host_mapped && *i != SpaceId::HOST.index())
            .fold(SpaceSet::EMPTY, |set, (i, _)| set.with(SpaceId(i as u8)));
        MemorySystem {
            device_spaces: Vec::new(),
            host_mapped,
            default_home: None,
            evictable: SpaceSet::EMPTY,
            spaces,
            granule,
            clock: AtomicU64::new(0),
            next_holder: AtomicU64::new(0),
            counters: Counters::default(),
            trace: false,
            timeline: None,
            checksums: false,
            prefetches: false,
            untrusted: SpaceSet::EMPTY,
            fragment_rule: FragmentRule::new(Vec::new(), granule),
            rule_for_alloc: false,
        }
    }

    /// The devices the memory system serves, each with the space its data moves to when it
    /// needs it (what a placement hint or a prefetch naming the device means).
    #[must_use]
    pub(crate) fn serving(mut self, devices: impl IntoIterator<Item = (Device, SpaceId)>) -> Self {
        self.device_spaces = devices.into_iter().collect();
        self
    }

    /// The space `device`'s data moves to when it needs it.
    pub(crate) fn device_space(&self, device: Device) -> Result<SpaceId> {
        match self.device_spaces.iter().find(|(d, _)| *d == device) {
            Some(&(_, space)) => Ok(space),
            None => Err(Error::NoDevice {
                device,
                available: self.device_spaces.iter().map(|&(d, _)| d).collect(),
            }),
        }
    }

    /// Full device pools evict their least recently used blocks (every space but the host,
    /// which is where write-backs go).
    #[must_use]
    pub(crate) fn evicting(mut self, on: bool) -> Self {
        self.evictable = if on {
            (1..self.spaces.len()).fold(SpaceSet::EMPTY, |set, i| set.with(SpaceId(i as u8)))
        } else {
            SpaceSet::EMPTY
        };
        self
    }

    /// Buffers without a placement that a device reaching the first host-mapped space writes
    /// first live there (`RuntimeBuilder::zero_copy`), if there is one.
    #[must_use]
    pub(crate) fn zero_copy(mut self, on: bool) -> Self {
        self.default_home = self.host_mapped.iter().next().filter(|_| on);
        self
    }

    /// Transfer and eviction events go to `tracing` (`trace`), and transfers to `timeline`.
    #[must_use]
    pub(crate) fn traced(mut self, trace: bool, timeline: Option<Timeline>) -> Self {
        self.trace = trace;
        self.timeline = timeline;
        self
    }

    /// The allocation granule of every pool.
    pub(crate) fn granule(&self) -> usize {
        self.granule
    }

    /// How many spaces there are; their ids are `0..count`.
    pub(crate) fn space_count(&self) -> usize {
        self.spaces.len()
    }

    /// Spaces besides the host that host code reaches in place.
    #[inline]
    pub(crate) fn host_mapped(&self) -> SpaceSet {
        self.host_mapped
    }

    /// Spaces whose blocks are evicted when their pool is full.
    #[inline(always)]
    pub(crate) fn evictable(&self) -> SpaceSet {
        self.evictable
    }

    /// Where a buffer without a placement lives when a device that reaches it writes it first.
    #[inline]
    pub(crate) fn default_home(&self) -> Option<SpaceId> {
        self.default_home
    }

    /// A fresh holder id: creation order, the key of the eviction registries.
    pub(crate) fn next_holder_id(&self) -> u64 {
        self.next_holder.fetch_add(1, Ordering::Relaxed)
    }

    /// The least-recent-use clock as it stands (the fast path stamps with it).
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// Advances the least-recent-use clock and returns its new value.
    pub(crate) fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn pool(&self, space: SpaceId) -> &Pool {
        &self.spaces[space.index()].pool
    }

    /// The holders of a block in `space`.
    pub(crate) fn residents(&self, space: SpaceId) -> &Residents<H> {
        &self.spaces[space.index()].residents
    }

    /// The name of `space` ("host", "sim0", …), as stats report it; "?" for an unknown id.
    pub(crate) fn space_name(&self, space: SpaceId) -> &str {
        self.spaces.get(space.index()).map_or("?", SpaceEntry::name)
    }

    /// `space` as errors name it.
    pub(crate) fn named(&self, space: SpaceId) -> SpaceName {
        match self.spaces.get(space.index()) {
            Some(s) => s.named().clone(),
            // Ids come from this table; an unknown one still names itself by number.
            None => SpaceName::new(space, &format!("#{}", space.index())),
        }
    }

    /// The names of every space, in id order.
    pub(crate) fn space_names(&self) -> impl Iterator<Item = &str> {
        self.spaces.iter().map(SpaceEntry::name)
    }

    /// The link of `space` if its copies take modelled time that the caller waits out (a
    /// simulated link not on the virtual clock): only such a copy can overlap compute here,
    /// since every other copy is complete when it returns.
    pub(crate) fn timed_link(&self, space: SpaceId) -> Option<LinkModel> {
        self.spaces.get(space.index())?.timed_link()
    }

    /// The model copies between `space` and the host are ranked by: measured if calibrated,
    /// else configured; `None` for the host and for an unknown space.
    pub(crate) fn link_model(&self, space: SpaceId) -> Option<LinkModel> {
        self.spaces
            .get(space.index())
            .and_then(SpaceEntry::cost_model)
    }

    /// The configured link of `space` and whether its copies take the modelled time; `None`
    /// for the host.
    pub(crate) fn configured_link(&self, space: SpaceId) -> Option<(LinkModel, bool)> {
        let entry = &self.spaces[space.index()];
        entry.link.map(|link| (link, entry.simulate))
    }

    /// Records what copies over `space`'s link were measured to take; ranks by it from now
    /// on. Only the first measurement counts (calibration runs once, from the builder).
    pub(crate) fn set_measured_link(&self, space: SpaceId, model: LinkModel) {
        let _ = self.spaces[space.index()].measured.set(model);
    }

    /// Makes every copy to and from `space` fail (`on`), or succeed again.
    pub(crate) fn inject_copy_faults(&self, space: SpaceId, on: bool) -> Result<()> {
        let entry = self.spaces.get(space.index()).ok_or_else(|| {
            Error::Config(format!(
                "no memory space with id {} in this runtime",
                space.0
            ))
        })?;
        entry.fail_copies.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Buffers made from now on record and check fragment checksums (`data::checksum`).
    #[must_use]
    pub(crate) fn checksummed(mut self, on: bool) -> Self {
        self.checksums = on;
        self
    }

    /// Whether buffers record and check fragment checksums.
    pub(crate) fn checksums(&self) -> bool {
        self.checksums
    }

    /// Copies start ahead of the calls that need them (`prefetches`).
    #[must_use]
    pub(crate) fn prefetching(mut self, on: bool) -> Self {
        self.prefetches = on;
        self
    }

    /// Whether copies start ahead of the calls that need them.
    #[inline(always)]
    pub(crate) fn prefetches(&self) -> bool {
        self.prefetches
    }

    /// The spaces where secure buffers keep only ciphertext (`data::secure`); the host is
    /// never among them.
    #[must_use]
    pub(crate) fn with_untrusted(mut self, spaces: SpaceSet) -> Self {
        self.untrusted = SpaceSet(spaces.0 & !SpaceId::HOST.bit());
        self
    }

    /// The devices' fragment-size rule, used for allocations if `for_alloc`.
    #[must_use]
    pub(crate) fn with_fragment_rule(mut self, rule: FragmentRule, for_alloc: bool) -> Self {
        self.fragment_rule = rule;
        self.rule_for_alloc = for_alloc;
        self
    }

    /// The fragment size the devices call for.
    pub(crate) fn fragment_rule(&self) -> &FragmentRule {
        &self.fragment_rule
    }

    /// Whether buffers are allocated with the devices' fragment size.
    pub(crate) fn fragments_from_devices(&self) -> bool {
        self.rule_for_alloc
    }

    /// The spaces where secure buffers keep only ciphertext.
    #[inline]
    pub(crate) fn untrusted(&self) -> SpaceSet {
        self.untrusted
    }

    /// Whether transfer (and eviction) events go to `tracing`.
    pub(crate) fn tracing(&self) -> bool {
        self.trace
    }

    /// The timeline kernels and transfers are written to, if one is recorded.
    #[inline(always)]
    pub(crate) fn timeline(&self) -> Option<&Timeline> {
        self.timeline.as_ref()
    }

    /// One block evicted from `space`: `dropped` bytes of valid copies dropped for free,
    /// `written_back` bytes copied out first.
    pub(crate) fn record_eviction(&self, space: SpaceId, dropped: usize, written_back: usize) {
        self.counters
            .record_eviction(space.index(), dropped, written_back);
    }

    /// Bytes copied ahead of their use into `space`, or used or wasted there.
    pub(crate) fn record_ahead(&self, space: SpaceId, what: crate::stats::Ahead, bytes: u64) {
        self.counters.record_ahead(space.index(), what, bytes);
    }

    /// The links that carried at least one copy since the last reset, with their figures.
    pub(crate) fn link_stats(&self) -> Vec<LinkStats> {
        let mut links = Vec::new();
        for (from, a) in self.spaces.iter().enumerate() {
            for (to, b) in self.spaces.iter().enumerate() {
                let (copies, bytes, time) = self.counters.link(from, to);
                if copies > 0 {
                    links.push(LinkStats {
                        from: a.name().to_string(),
                        to: b.name().to_string(),
                        copies,
                        bytes,
                        time,
                    });
                }
            }
        }
        links
    }

    /// Each space's pool use, fills and evictions.
    pub(crate) fn space_stats(&self) -> Vec<SpaceStats> {
        self.spaces
            .iter()
            .enumerate()
            .map(|(i, sp)| {
                let usage = sp.pool.usage();
                let evicted = self.counters.evictions(i);
                let ahead = self.counters.ahead(i);
                SpaceStats {
                    name: sp.name().to_string(),
                    capacity: sp.pool.capacity(),
                    in_use: usage.in_use,
                    high_water: usage.high_water,
                    allocations: usage.allocations,
                    frees: usage.frees,
                    zero_fills: self.counters.fills(i),
                    evictions: evicted.0,
                    dropped_bytes: evicted.1,
                    written_back_bytes: evicted.2,
                    prefetched_bytes: ahead.0,
                    prefetch_used_bytes: ahead.1,
                    prefetch_wasted_bytes: ahead.2,
                }
            })
            .collect()
    }

    /// Zeroes the link, fill and eviction counters and sets each pool's high-water mark to its
    /// current use.
    pub(crate) fn reset_stats(&self) {
        self.counters.clear();
        for sp in &self.spaces {
            sp.pool.reset_high_water();
        }
    }

    /// The link between two different spaces: a device's own link to and from the host, and
    /// between two devices the slower of their host links (a peer copy through the same
    /// switch).
    fn link(&self, a: SpaceId, b: SpaceId) -> Option<(LinkModel, bool)> {
        let simulate = self.spaces[a.index()].simulate || self.spaces[b.index()].simulate;
        self.slower_link(a, b).map(|link| (link, simulate))
    }

    /// The slower of the configured links of `a` and `b` to the host: a copy between two
    /// devices crosses both.
    fn slower_link(&self, a: SpaceId, b: SpaceId) -> Option<LinkModel> {
        match (self.spaces[a.index()].link, self.spaces[b.index()].link) {
            (None, None) => None,
            (Some(l), None) | (None, Some(l)) => Some(l),
            (Some(x), Some(y)) => Some(if x.cost_ns(1 << 20) >= y.cost_ns(1 << 20) {
                x
            } else {
                y
            }),
        }
    }

    /// What a copy between `src` and `dst` is expected to cost, for picking the cheapest
    /// source and for the scheduler: measured where the runtime calibrated, else configured.
    /// A copy between two devices crosses both their links, so it costs what the dearer of
    /// the two costs for these bytes: the link that is slower for a MiB may have the lower
    /// latency, and priced alone would make a small peer copy look cheaper than the copy
    /// from the host over the destination's own link.
    pub(crate) fn link_cost(&self, src: SpaceId, dst: SpaceId, bytes: usize) -> u64 {
        let cost = |space: SpaceId| {
            self.spaces[space.index()]
                .cost_model()
                .map_or(0, |l| l.cost_ns(bytes))
        };
        cost(src).max(cost(dst))
    }

    /// One copy of `len` bytes between two blocks in different spaces, counted and traced. On
    /// a simulated link the bytes have moved when this returns, but the modelled time is left
    /// to the caller to wait out (see [`Pending`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
        frags: &Range<usize>,
        reason: &Reason,
    ) -> Result<Pending> {
        self.copy_staged(from, to, src, dst, bytes, frags, reason, None)
    }

    /// [`Self::copy`] through a host staging copy that `transform` rewrites on the way (a
    /// secure buffer's fragments sealed or opened: `data::secure`): the source's bytes are
    /// read into host memory, transformed, and only then written to the destination, so the
    /// destination sees only what `transform` made and nothing at all if it fails. The
    /// staging copy is zeroised after. Counted and traced as one copy from `from` to `to`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_through(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
        frags: &Range<usize>,
        reason: &Reason,
        transform: Transform<'_>,
    ) -> Result<Pending> {
        self.copy_staged(from, to, src, dst, bytes, frags, reason, Some(transform))
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_staged(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
        frags: &Range<usize>,
        reason: &Reason,
        transform: Option<Transform<'_>>,
    ) -> Result<Pending> {
        let failed = |source: BackendError| {
            Error::from_backend(
                During::Transfer {
                    from: self.named(from),
                    to: self.named(to),
                    bytes: bytes.len(),
                },
                source,
            )
        };
        let faulty = |s: SpaceId| self.spaces[s.index()].fail_copies.load(Ordering::Relaxed);
        if faulty(from) || faulty(to) {
            return Err(failed(BackendError::InjectedFault("copy")));
        }
        let started = Instant::now();
        let (a, b) = (&self.spaces[from.index()], &self.spaces[to.index()]);
        let virtual_clock = a.virtual_clock || b.virtual_clock;
        // Under the virtual clock a copy's wall time is excluded (its modelled time is charged
        // below); a staged copy's transform is host work and stays counted.
        let mv = |f: SpaceId, t: SpaceId, s: *mut u8, d: *mut u8| {
            let go = || self.move_bytes(f, t, s, d, bytes.clone());
            if virtual_clock {
                crate::vclock::exclude(go)
            } else {
                go()
            }
        };
        match transform {
            None => mv(from, to, src, dst).map_err(failed)?,
            Some(transform) => {
                let mut stage = Zeroizing::new(vec![0u8; bytes.len()]);
                // The staging copy stands for the block at the range: byte `bytes.start` of
                // the buffer is its first byte, so its base lies `bytes.start` before it (a
                // wrapping base, as a window's, never dereferenced itself).
                let base = stage.as_mut_ptr().wrapping_sub(bytes.start);
                mv(from, SpaceId::HOST, src, base).map_err(failed)?;
                transform(&mut stage)?;
                mv(SpaceId::HOST, to, base, dst).map_err(failed)?;
            }
        }
        let pending = match self.link(from, to) {
            Some((link, true)) if virtual_clock => {
                // The modelled copy counts on the virtual clock; nothing to wait out.
                crate::vclock::charge(crate::vclock::Term::Copy, link.duration(bytes.len()));
                Pending::NONE
            }
            Some((link, true)) => {
                let (a, b) = (&self.spaces[from.index()], &self.spaces[to.index()]);
                let links = [a, b].map(|s| s.link.is_some().then_some(&s.busy));
                Pending::until(Occupancy::book(links, started, link.duration(bytes.len())))
            }
            _ => Pending::NONE,
        };
        let took = pending
            .deadline()
            .map_or_else(|| started.elapsed(), |d| d - started);
        self.counters
            .record_copy(from.index(), to.index(), bytes.len(), took);
        if let Some(timeline) = &self.timeline {
            timeline.transfer(
                self.space_name(from),
                self.space_name(to),
                bytes.len(),
                started,
                took,
            );
        }
        if self.trace {
            trace_transfer(
                self.space_name(from),
                self.space_name(to),
                bytes.len(),
                frags,
                reason,
            );
        }
        Ok(pending)
    }

    /// Copies `bytes` of one block into the same bytes of another, each in its space: a
    /// memcpy between host-addressable spaces, the backend's copy where one is device memory,
    /// and between two device memories a peer copy where they can, else a bounce through the
    /// host. Neither counted nor traced (calibration times these).
    pub(crate) fn move_bytes(
        &self,
        from: SpaceId,
        to: SpaceId,
        src: *mut u8,
        dst: *mut u8,
        bytes: Range<usize>,
    ) -> std::result::Result<(), BackendError> {
        // A device address is a number the backend understands, not a pointer to offset. A
        // base may be a window's (`data::window`): the address byte 0 of the buffer would
        // have, possibly before the block, so it is offset with wrapping arithmetic and only
        // the result, inside the block, is used.
        let at = |base: *mut u8| base.addr().wrapping_add(bytes.start);
        match (self.device_memory(from), self.device_memory(to)) {
            // SAFETY: both blocks hold the whole range (they were sized for the buffer or
            // argument the range lies in) and belong to different allocations, so they do
            // not overlap.
            (None, None) => unsafe {
                std::ptr::copy_nonoverlapping(
                    src.wrapping_add(bytes.start),
                    dst.wrapping_add(bytes.start),
                    bytes.len(),
                );
                Ok(())
            },
            (None, Some(device)) => {
                // SAFETY: the source is a host-addressable block holding the range, and no
                // writer of those fragments runs while the buffer's lock is held.
                let host = unsafe {
                    std::slice::from_raw_parts(src.wrapping_add(bytes.start), bytes.len())
                };
                device.copy_in(at(dst), host)
            }
            (Some(device), None) => {
                // SAFETY: as above for the destination, which this copy alone writes.
                let host = unsafe {
                    std::slice::from_raw_parts_mut(dst.wrapping_add(bytes.start), bytes.len())
                };
                device.copy_out(at(src), host)
            }
            (Some(source), Some(target)) => {
                let peer = source.copy_to_peer(at(src), &**target, at(dst), bytes.len());
                if let Some(done) = peer {
                    return done;
                }
                let mut bounce = vec![0u8; bytes.len()];
                source.copy_out(at(src), &mut bounce)?;
                target.copy_in(at(dst), &bounce)
            }
        }
    }

    /// Fills `bytes` of a block in `space` (at `base`, as [`Self::fill_zero`]) with zeros
    /// that `transform` rewrote first, on the host (a secure buffer's zero fragments, sealed
    /// for an untrusted space: `data::secure`). Counted as a fill.
    pub(crate) fn fill_through(
        &self,
        space: SpaceId,
        base: *mut u8,
        bytes: Range<usize>,
        transform: Transform<'_>,
    ) -> Result<()> {
        let mut stage = vec![0u8; bytes.len()];
        transform(&mut stage)?;
        let stage_base = stage.as_mut_ptr().wrapping_sub(bytes.start);
        self.move_bytes(SpaceId::HOST, space, stage_base, base, bytes.clone())
            .map_err(|source| {
                Error::from_backend(
                    During::Fill {
                        space: self.named(space),
                        bytes: bytes.len(),
                    },
                    source,
                )
            })?;
        self.counters.record_fill(space.index());
        Ok(())
    }

    /// Zeroises `len` bytes of a block in `space` from its first byte `ptr`, with writes the
    /// compiler may not drop: a secure buffer's block before it goes back to its pool.
    pub(crate) fn wipe(&self, space: SpaceId, ptr: *mut u8, len: usize) -> Result<()> {
        match self.device_memory(space) {
            None => {
                // SAFETY: `ptr` is the first byte of a block of `space`'s pool, which holds
                // at least `len` bytes (the pool bytes the block takes) and is
                // host-addressable (no device memory); bytes need no alignment, so nothing
                // about the block's placement is assumed. Its buffer is giving it up under
                // its lock, so no view, kernel or copy uses these bytes now.
                let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
                bytes.zeroize();
                Ok(())
            }
            Some(device) => device.fill_zero(ptr.addr(), len).map_err(|source| {
                Error::from_backend(
                    During::Fill {
                        space: self.named(space),
                        bytes: len,
                    },
                    source,
                )
            }),
        }
    }

    /// The backend's way into `space`, if the CPU cannot address it.
    pub(crate) fn device_memory(&self, space: SpaceId) -> Option<&DeviceMemoryRef> {
        self.spaces[space.index()].device_memory.as_ref()
    }

    /// Fills `bytes` of a block in `space` with zeros: how zero-marked fragments materialise.
    pub(crate) fn fill_zero(
        &self,
        space: SpaceId,
        base: *mut u8,
        bytes: Range<usize>,
    ) -> Result<()> {
        match self.device_memory(space) {
            // SAFETY: the block holds the range (`base` is its buffer's byte 0, see
            // `move_bytes`), so the bytes written lie inside it.
            None => unsafe {
                std::ptr::write_bytes(base.wrapping_add(bytes.start), 0, bytes.len())
            },
            Some(device) => device
                .fill_zero(base.addr().wrapping_add(bytes.start), bytes.len())
                .map_err(|source| {
                    Error::from_backend(
                        During::Fill {
                            space: self.named(space),
                            bytes: bytes.len(),
                        },
                        source,
                    )
                })?,
        }
        self.counters.record_fill(space.index());
        Ok(())
    }
}
