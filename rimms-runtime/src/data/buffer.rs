//! The untyped buffer behind every `HeteData`: its per-space blocks, its fragment table and the
//! lock-free summary, and the acquire / mark steps that carry out the coherence plans.

use super::checksum::{Checksums, WrittenBy};
use super::evict::{self, Pressure};
use super::in_flight::InFlight;
use super::lease::{Held, Lease, Leases};
use super::secure::{Seals, SecureKey};
use super::window::Window;
use super::BufferMemorySystem;
use crate::coherence::{
    self, Access, AcquirePlan, EvictPlan, FragmentSpan, FragmentState, FragmentTable, Published,
    WithTable,
};
use crate::hal::BackendError;
use crate::hal::{During, Error, Result};
use crate::hal::{SpaceId, SpaceSet, MAX_SPACES};
use crate::space::Pending;
use crate::stats::Ahead;
use crate::stats::{trace_eviction, AfterLocks, Reason};
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Weak;
use std::time::Instant;

const NO_HOME: u8 = u8::MAX;

/// What `ptrs` holds for a space with no block: not null, and aligned for any Rust type (2^29
/// is the largest alignment there is), so an empty slice may start there, at any offset that
/// is a whole number of elements. Only empty ranges are ever read at it: a non-empty one is
/// acquired first, which makes the block.
const NO_BLOCK: *mut u8 = std::ptr::without_provenance_mut(1 << 29);
use std::sync::Arc;

pub(crate) struct RawBuffer {
    /// The memory system of the runtime it was made in: its blocks' pools, the copy engine.
    memory: Arc<BufferMemorySystem>,
    /// Creation order in its runtime: the key of the eviction registries.
    id: u64,
    /// Itself, for the eviction registry of a space it gets a block in.
    me: Weak<RawBuffer>,
    /// What keeps its blocks from being moved or evicted: the leases of the paths using it,
    /// and spaces host views point into (`data::lease`).
    leases: Leases,
    /// Per space, the runtime's clock when a call last used the buffer there.
    stamps: [AtomicU64; MAX_SPACES],
    bytes: usize,
    /// log2 of the fragment size. Changes only through `refragment`, which the typed layer
    /// calls with the buffer borrowed mutably, so no view can see it change.
    frag_shift: AtomicU32,
    /// Where the buffer lives when it has a choice (its placement): set by a hint, or by the
    /// first space that writes it. Host code and CPU kernels write a buffer whose home is a
    /// host-mapped space there, so the device that owns that space needs no copy. `NO_HOME`
    /// until then.
    home: AtomicU8,
    /// Per space, the address byte 0 of the buffer has there ([`Window::base`]), `NO_BLOCK`
    /// where it has no block. Set under the lock before the summary that makes it reachable
    /// from the fast path.
    ptrs: [AtomicPtr<u8>; MAX_SPACES],
    /// Per space, the pool bytes its block there takes (0: none), for an evictor's estimate
    /// of what evicting it would free without taking its lock.
    held: [AtomicUsize; MAX_SPACES],
    /// The fragment table and the blocks, and the summary the fast path reads.
    state: Published<Inner>,
    /// The key of a secure buffer (`data::secure`): its fragments are ciphertext in the
    /// runtime's untrusted spaces.
    key: Option<SecureKey>,
}

/// A buffer's table, locked. The thread's log events wait while it is held and go out after
/// the lock is released (`stats::after_locks`: a subscriber is the program's code, and may
/// use this buffer).
pub(super) struct Locked<'a> {
    guard: coherence::Locked<'a, Inner>,
    // Dropped after `guard`, so the events go out with the lock released.
    _events: AfterLocks,
}

impl<'a> Locked<'a> {
    fn hold(guard: coherence::Locked<'a, Inner>) -> Locked<'a> {
        Locked {
            guard,
            _events: AfterLocks::hold(),
        }
    }
}

impl<'a> Deref for Locked<'a> {
    type Target = coherence::Locked<'a, Inner>;
    fn deref(&self) -> &Self::Target {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.guard
    }
}

/// What an acquire leaves its caller to wait for, outside the lock.
#[derive(Clone, Copy, Debug)]
struct Landing {
    /// When its bytes (its own copies, and copies in flight it needs) have landed.
    pending: Pending,
    /// Whether copies were in flight: their spaces' bits come back once they land.
    in_flight: bool,
}

impl Landing {
    const NONE: Landing = Landing {
        pending: Pending::NONE,
        in_flight: false,
    };
}

pub(super) struct Inner {
    pub(super) table: FragmentTable,
    /// Per space, the block there: the whole buffer, or a window of it (`data::window`).
    pub(super) blocks: [Option<Window>; MAX_SPACES],
    /// Per fragment, the checksum of its bytes as last written, where checksums are on
    /// (`data::checksum`).
    pub(super) sums: Option<Checksums>,
    /// For a secure buffer, the seal (nonce and tag) of each fragment in each untrusted space
    /// that holds its ciphertext (`data::secure`).
    pub(super) seals: Option<Seals>,
    /// The spaces whose "every fragment is valid here" bit the published summary leaves out:
    /// a secure buffer's untrusted spaces, where no access may use its bytes in place.
    pub(super) hidden: u64,
    /// Copies in flight (`data::in_flight`): their spaces' bits are left out of the summary
    /// too, until the copies land.
    pub(super) in_flight: InFlight,
}

impl WithTable for Inner {
    fn table(&self) -> &FragmentTable {
        &self.table
    }

    /// A checksummed buffer is never resident to the fast path, which cannot check bytes; a
    /// secure buffer is never resident in a space that holds only its ciphertext. (Only the
    /// "every fragment" bits go: a copy there still keeps a write elsewhere off the fast
    /// path, so the write is marked and the ciphertext invalidated.)
    fn summary(&self) -> u64 {
        match self.sums {
            Some(_) => coherence::WITHDRAWN,
            None => self.table.summary() & !self.hidden & !self.in_flight.mask,
        }
    }
}

impl RawBuffer {
    /// A buffer of `bytes` in fragments of `1 << frag_shift`, secure under `key` if given.
    /// Fails where its fragment records cannot be allocated (no block is taken here: a
    /// buffer's blocks come with its first use, so its length is checked against no pool).
    pub(crate) fn new(
        memory: Arc<BufferMemorySystem>,
        bytes: usize,
        frag_shift: u32,
        key: Option<SecureKey>,
    ) -> Result<Arc<RawBuffer>> {
        let count = bytes.div_ceil(1 << frag_shift);
        let too_many = || Error::TooManyFragments {
            bytes,
            fragment_bytes: 1 << frag_shift,
            fragments: count,
        };
        let table = FragmentTable::try_new(count).ok_or_else(too_many)?;
        let sums = match memory.checksums() {
            true => Some(Checksums::try_new(count).ok_or_else(too_many)?),
            false => None,
        };
        let id = memory.next_holder_id();
        let seals = key.as_ref().map(|_| Seals::new());
        let hidden = match key {
            Some(_) => u64::from(memory.untrusted().0),
            None => 0,
        };
        Ok(Arc::new_cyclic(|me| RawBuffer {
            memory,
            id,
            me: me.clone(),
            leases: Leases::new(),
            stamps: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes,
            frag_shift: AtomicU32::new(frag_shift),
            home: AtomicU8::new(NO_HOME),
            ptrs: std::array::from_fn(|_| AtomicPtr::new(NO_BLOCK)),
            held: std::array::from_fn(|_| AtomicUsize::new(0)),
            state: Published::new(Inner {
                table,
                blocks: [None; MAX_SPACES],
                sums,
                seals,
                hidden,
                in_flight: InFlight::default(),
            }),
            key,
        }))
    }

    /// The key of a secure buffer.
    pub(crate) fn key(&self) -> Option<&SecureKey> {
        self.key.as_ref()
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether the buffer was made in the runtime whose memory system is `memory`.
    #[inline(always)]
    pub(crate) fn belongs_to(&self, memory: &Arc<BufferMemorySystem>) -> bool {
        Arc::ptr_eq(&self.memory, memory)
    }

    /// The memory system the buffer lives in.
    pub(crate) fn memory(&self) -> &BufferMemorySystem {
        &self.memory
    }

    /// Records a use in `space` that found the data in place: stamps the clock's current
    /// value, without advancing it (a relaxed load and a relaxed store).
    #[inline(always)]
    pub(crate) fn touch(&self, space: SpaceId) {
        let now = self.memory.now();
        self.stamps[space.index()].store(now, Ordering::Relaxed);
    }

    /// When a call last used the buffer in `space`, on the runtime's clock.
    pub(crate) fn stamp(&self, space: SpaceId) -> u64 {
        self.stamps[space.index()].load(Ordering::Relaxed)
    }

    /// Takes a lease for a kernel call's argument (`data::lease`), given back with
    /// [`Self::unpin`] after the call's marks; taken before the resident check. A kernel call
    /// counts its leases itself rather than hold a [`Lease`] per argument: it keeps them in a
    /// bit mask, which the fast path needs.
    #[inline(always)]
    pub(crate) fn pin(&self) {
        self.leases.take();
    }

    #[inline(always)]
    pub(crate) fn unpin(&self) {
        self.leases.give_back();
    }

    /// A lease on the buffer, held by a path that is not a kernel call (`data::lease`).
    pub(crate) fn lease(&self) -> Lease<'_> {
        Lease::take(&self.leases)
    }

    /// Whether an evictor (which holds no lease) must leave the buffer's block in `space`:
    /// someone holds a lease, or a host view may point into that space.
    pub(crate) fn pinned_in(&self, space: SpaceId) -> bool {
        !self.leases.may_move(space, Held::NONE)
    }

    /// Host views hand out plain slices whose end the runtime cannot see; one that may point
    /// into an evictable space keeps the buffer's block there until the buffer is next
    /// borrowed mutably ([`Self::end_host_views`]). Set while the view's lease is held (from
    /// before the resident check), before the lease goes: a mover sees one or the other.
    fn pin_host_views(&self) {
        let spaces = self.memory.host_mapped().0 & self.memory.evictable().0;
        self.leases.pin_host_views(spaces);
    }

    /// The buffer is borrowed mutably, so no host view of it is alive.
    pub(crate) fn end_host_views(&self) {
        self.leases.end_host_views();
    }

    pub(super) fn lock(&self) -> Locked<'_> {
        Locked::hold(self.state.lock())
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn shift(&self) -> u32 {
        self.frag_shift.load(Ordering::Relaxed)
    }

    pub(crate) fn fragment_bytes(&self) -> usize {
        1 << self.shift()
    }

    /// The fast path: no lock, no allocation.
    #[inline(always)]
    pub(crate) fn resident(&self, space: SpaceId, access: Access) -> bool {
        coherence::resident(self.state.summary(), space, access)
    }

    /// The first space of `spaces` where an access of `access` mode needs no work (one
    /// summary load for all of them).
    #[inline]
    pub(crate) fn resident_in(&self, spaces: SpaceSet, access: Access) -> Option<SpaceId> {
        let summary = self.state.summary();
        spaces
            .iter()
            .find(|&s| coherence::resident(summary, s, access))
    }

    /// Whether a device whose space is `own`, and which reaches `reach` in place, can access
    /// the buffer with `access` where it stands (in its own space or one it reaches).
    #[inline]
    pub(crate) fn resident_for(&self, own: SpaceId, reach: SpaceSet, access: Access) -> bool {
        self.resident(own, access) || self.resident_in(reach, access).is_some()
    }

    /// Where host code accesses bytes `start..start+len` with `access`: in place where the
    /// host or a host-mapped space holds the whole buffer as the access needs, otherwise in
    /// host memory after an acquire (and, for a write, a mark). Both happen here, so a host
    /// view is one call.
    pub(crate) fn host_space(&self, start: usize, len: usize, access: Access) -> Result<SpaceId> {
        let host = self.host_acquire(start, len, access)?;
        if let Some(_lease) = host.owed {
            self.mark_written(start, len, host.space, WrittenBy::HostView);
        }
        Ok(host.space)
    }

    /// As [`Self::host_space`] without the mark: also says whether a write there must still be
    /// recorded with [`Self::mark_written`] (or, if it fails, [`Self::mark_failed`]), and then
    /// hands over the lease the caller must hold until that record. A space that already holds
    /// the only valid copy owes nothing.
    pub(crate) fn host_acquire(
        &self,
        start: usize,
        len: usize,
        access: Access,
    ) -> Result<HostAccess<'_>> {
        // The host is never evicted, and an eviction writes back only fragments valid nowhere
        // else: bytes resident on the host as the access needs stay put without a lease (and
        // a view there needs no host-view pin either: the host is not an evictable space).
        if self.resident(SpaceId::HOST, access) {
            return Ok(HostAccess::in_place(SpaceId::HOST));
        }
        // From here until the write is recorded: an eviction elsewhere would write its last
        // copies back into the bytes this writer is writing (`data::lease`). The lease, taken
        // before the summary check, is also what keeps a block from moving until the view's
        // host-view pin is set below (the pin is set while the lease is still held, on the
        // same word, so a mover that no longer sees the lease sees the pin).
        let lease = self.lease();
        if let Some(space) = self.resident_in(self.memory.host_mapped(), access) {
            self.touch(space);
            self.pin_host_views();
            return Ok(HostAccess::in_place(space));
        }
        let target = self.target_for(SpaceId::HOST, self.memory.host_mapped(), access);
        // Pinned only after the acquire: pinned before, this view's own pin counted as a live
        // view's in the acquire's `may_rewindow`, so a view whose window had to grow or move
        // (none of its own slices exist yet) failed with `DoesNotFit` even with the pool
        // empty. Pins of views still alive keep refusing such a move, as they must.
        self.acquire(start, len, target, access, &Reason::Host, Held::ONE)?;
        self.pin_host_views();
        Ok(HostAccess {
            space: target,
            owed: access.writes().then_some(lease),
        })
    }

    /// Address of byte `offset` of this buffer in `space`. Only meaningful after an acquire in
    /// that space (or a resident check) succeeded.
    #[inline]
    pub(crate) fn ptr_in(&self, space: SpaceId, offset: usize) -> *mut u8 {
        self.ptrs[space.index()]
            .load(Ordering::Acquire)
            .wrapping_add(offset)
    }

    /// Makes `span` usable by an `access` in `space`: allocates the block there if needed,
    /// copies or fills what is missing, and records it. Returns whether any byte moved or was
    /// filled. On error nothing changed but possibly a block that stays for later use.
    ///
    /// The copies are made under the buffer's lock, so two calls that need the same fragment
    /// copy it once; the modelled time of a simulated link is waited out after the lock is
    /// released, so it holds up this call only and not calls on other fragments. (A concurrent
    /// reader of the same fragment may therefore start before the modelled transfer ends.)
    pub(crate) fn acquire(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
        access: Access,
        reason: &Reason,
        held: Held,
    ) -> Result<bool> {
        let (moved, landing) =
            self.acquire_planned(start, len, space, access, reason, held, false)?;
        self.land(landing);
        Ok(moved)
    }

    /// [`Self::acquire`] for reading that does not wait for its copies to land: they are
    /// recorded in flight (`data::in_flight`), and the next access in `space` waits for what
    /// is left of them. Returns when they land: a prefetch's handle.
    pub(crate) fn acquire_async(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
        reason: &Reason,
    ) -> Result<Pending> {
        let (_, landing) =
            self.acquire_planned(start, len, space, Access::Read, reason, Held::ONE, true)?;
        Ok(landing.pending)
    }

    /// Waits (no lock held) for what an acquire must wait for, then, where copies were in
    /// flight, gives their spaces' summary bits back once they have landed.
    fn land(&self, landing: Landing) {
        landing.pending.wait();
        if landing.in_flight {
            let mut inner = self.lock();
            inner.in_flight.settle(Instant::now());
        }
    }

    /// The acquire itself, under the lock: plans, copies, fills, commits; with `in_flight`,
    /// records its copies as in flight instead of having its caller wait for them.
    #[allow(clippy::too_many_arguments)]
    fn acquire_planned(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
        access: Access,
        reason: &Reason,
        held: Held,
        in_flight: bool,
    ) -> Result<(bool, Landing)> {
        // An empty range needs no bytes anywhere, and an empty buffer is never allocated.
        if len == 0 {
            return Ok((false, Landing::NONE));
        }
        self.refuse_plaintext(space, reason)?;
        let mut inner = self.lock();
        let now = self.memory.tick();
        self.stamps[space.index()].store(now, Ordering::Relaxed);
        let shift = self.shift();
        let span = FragmentSpan::of(start..start + len, shift, self.bytes);
        let need = self.frag_bytes(span.frags.clone(), shift);
        let window = if in_flight {
            self.room_ahead(&mut inner, space, &need)?
        } else {
            self.ensure_window(&mut inner, space, need.clone(), held)?
        };
        let plan = self.plan(&inner.table, start, len, space, access);
        // Bytes already on their way here (or, for a write, anywhere) are waited for.
        let mut landing = Landing {
            pending: inner.in_flight.before(space, &need, access),
            in_flight: inner.in_flight.mask != 0,
        };
        if !in_flight {
            self.settle_ahead(&mut inner, space, &need, access, shift);
        }
        if plan.is_empty() {
            if inner.sums.is_some() {
                self.check_read(&mut inner, &span, &plan, access)?;
            }
            return Ok((false, landing));
        }
        let mut pending = Pending::NONE;
        for m in &plan.moves {
            // A copy out of a space waits for the bytes to have landed there.
            let bytes = self.frag_bytes(m.frags.clone(), shift);
            landing.pending = landing.pending.and(inner.in_flight.source(m.src, &bytes));
            let src = inner.blocks[m.src.index()]
                .ok_or_else(|| missing_block(&self.memory, m.src, space))?
                .base();
            let copy = self.copy_run(
                &mut inner,
                m.src,
                space,
                src,
                window.base(),
                m.frags.clone(),
                reason,
            )?;
            if in_flight {
                self.memory
                    .record_ahead(space, Ahead::Issued, bytes.len() as u64);
                inner.in_flight.record(space, bytes, copy, true);
                landing.in_flight = true;
            }
            pending = pending.and(copy);
        }
        for run in &plan.fills {
            self.fill_run(&mut inner, space, window.base(), run.clone())?;
        }
        if inner.sums.is_some() {
            self.check_read(&mut inner, &span, &plan, access)?;
        }
        inner.table.commit_acquire(&plan);
        if !in_flight {
            // Where bytes had to come on demand is where they were needed; a copy ahead is
            // noted only once a read uses it (`settle_ahead`).
            inner.table.note_moves(&plan);
        }
        landing.pending = landing.pending.and(pending);
        drop(inner);
        Ok((true, landing))
    }

    /// What an access of bytes `start..start+len` by a device whose space is `own` (and which
    /// reaches `reach` in place) would spend moving data first, in modelled nanoseconds: the
    /// copies the acquire would plan, each over its link. Plans and changes nothing.
    pub(crate) fn transfer_ns(
        &self,
        start: usize,
        len: usize,
        own: SpaceId,
        reach: SpaceSet,
        access: Access,
    ) -> u64 {
        if self.resident_for(own, reach, access) {
            return 0;
        }
        let space = self.target_for(own, reach, access);
        let shift = self.shift();
        let plan = self.plan(&self.lock().table, start, len, space, access);
        plan.moves
            .iter()
            .map(|m| {
                let bytes = self.frag_bytes(m.frags.clone(), shift).len();
                self.memory.link_cost(m.src, space, bytes)
            })
            .sum()
    }

    /// What an access of bytes `start..start+len` in `space` must move and fill first, each
    /// fragment from its cheapest valid source over the runtime's links. Inline: every locked
    /// acquire plans, and most plans are empty.
    #[inline]
    fn plan(
        &self,
        table: &FragmentTable,
        start: usize,
        len: usize,
        space: SpaceId,
        access: Access,
    ) -> AcquirePlan {
        let shift = self.shift();
        let span = FragmentSpan::of(start..start + len, shift, self.bytes);
        table.plan_acquire(&span, space, access, |src, dst| {
            self.memory.link_cost(src, dst, 1 << shift)
        })
    }

    /// Byte range of a run of fragments, clipped to the buffer.
    pub(super) fn frag_bytes(&self, frags: Range<usize>, shift: u32) -> Range<usize> {
        (frags.start << shift)..(frags.end << shift).min(self.bytes)
    }

    /// This buffer's block in `space`, made to cover `need` (fragment-aligned bytes of the
    /// buffer) first. A space without a block gets one for the whole buffer, evicting other
    /// buffers' blocks as needed: what every run with room does. Only in an evictable space
    /// where the whole buffer does not fit does the block become a window of the buffer
    /// (`data::window`): just `need`. A window that does not cover `need` grows to the whole
    /// buffer or to the hull of itself and `need` (the valid bytes move inside the space) if
    /// that fits; otherwise it is retired as an eviction retires a block (last copies written
    /// back, the rest dropped) and a window of just `need` takes its place.
    fn ensure_window(
        &self,
        inner: &mut Locked<'_>,
        space: SpaceId,
        need: Range<usize>,
        held: Held,
    ) -> Result<Window> {
        let whole = 0..self.bytes;
        let windows = self.memory.evictable().contains(space);
        let old = match inner.blocks[space.index()] {
            Some(window) if window.covers(&need) => return Ok(window),
            Some(window) => window,
            None => {
                let window = match evict::alloc(&self.memory, space, self.bytes, self.id) {
                    Ok(block) => Window::new(block, whole),
                    Err(Error::DoesNotFit { .. }) if windows && need != whole => {
                        let block = evict::alloc(&self.memory, space, need.len(), self.id)?;
                        Window::new(block, need)
                    }
                    Err(e) => return Err(e),
                };
                self.keep_block(inner, space, window);
                return Ok(window);
            }
        };
        // The window must move or go, so no one else may hold an address into it.
        if !self.may_rewindow(inner, space, held) {
            return Err(evict::does_not_fit(&self.memory, space, need.len(), 0));
        }
        let hull = old.hull(&need);
        let grown = if hull == whole {
            vec![whole]
        } else {
            vec![whole, hull]
        };
        for bytes in grown {
            match evict::alloc(&self.memory, space, bytes.len(), self.id) {
                Ok(block) => return self.move_window(inner, space, old, Window::new(block, bytes)),
                Err(Error::DoesNotFit { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.retire(inner, space, Pressure { needed: need.len() })?;
        let window = Window::new(
            evict::alloc(&self.memory, space, need.len(), self.id)?,
            need,
        );
        self.keep_block(inner, space, window);
        Ok(window)
    }

    /// Settles the copies made ahead that an access with `access` to `need` in `space` uses
    /// or makes stale (`data::in_flight`), counting them. A use is noted in the fragments'
    /// owner histories as a copy on demand would be, since the bytes were needed there; a
    /// write that makes one stale is noted as a second write, which stops the prediction.
    fn settle_ahead(
        &self,
        inner: &mut Inner,
        space: SpaceId,
        need: &Range<usize>,
        access: Access,
        shift: u32,
    ) {
        // The table is noted as each copy settles (no vector of them collected first: that
        // was an allocation on every locked acquire that settled one).
        let Inner {
            in_flight, table, ..
        } = inner;
        in_flight.settle_ahead(space, need, access, |s, was_used, bytes| {
            let what = if was_used { Ahead::Used } else { Ahead::Wasted };
            self.memory.record_ahead(s, what, bytes.len() as u64);
            let frags = FragmentSpan::of(bytes, shift, self.bytes).frags;
            if was_used {
                table.note_use(frags, space);
            } else {
                // Written again here before anyone needed them where they were predicted to
                // go: the history says so, and predicts nothing until a read shows where.
                table.note_rewrite(frags, space);
            }
        });
    }

    /// The block a copy ahead of its use lands in: the one there if it covers `need`, else a
    /// fresh one from free room. A copy ahead never evicts, moves or cuts a block, which
    /// would trade bytes a call is about to use for bytes one may use later.
    fn room_ahead(
        &self,
        inner: &mut Locked<'_>,
        space: SpaceId,
        need: &Range<usize>,
    ) -> Result<Window> {
        let whole = 0..self.bytes;
        match inner.blocks[space.index()] {
            Some(window) if window.covers(need) => Ok(window),
            Some(_) => Err(evict::does_not_fit(&self.memory, space, need.len(), 0)),
            None => {
                let pool = self.memory.pool(space);
                let refused = |e| match e {
                    Error::PoolExhausted { .. } => {
                        evict::does_not_fit(&self.memory, space, need.len(), 0)
                    }
                    e => e,
                };
                let window = match pool.alloc(self.bytes) {
                    Ok(block) => Window::new(block, whole),
                    Err(_) if self.memory.evictable().contains(space) && *need != whole => {
                        Window::new(pool.alloc(need.len()).map_err(refused)?, need.clone())
                    }
                    Err(e) => return Err(refused(e)),
                };
                self.keep_block(inner, space, window);
                Ok(window)
            }
        }
    }

    /// Cuts this buffer's block in `space` down to the fragments of bytes `start..start+len`
    /// (the range a call's argument uses), in place, so that the call's other arguments find
    /// room: the fragments valid there outside the range are evicted first (last copies
    /// written back, the rest dropped; counted as one eviction), then the granules outside it
    /// go back to the pool. Only where no other call holds the buffer and no host view may
    /// point into the space. Returns whether anything was freed.
    pub(crate) fn trim(
        &self,
        space: SpaceId,
        start: usize,
        len: usize,
        held: Held,
    ) -> Result<bool> {
        if len == 0 || !self.memory.evictable().contains(space) {
            return Ok(false);
        }
        let mut inner = self.lock();
        let Some(window) = inner.blocks[space.index()] else {
            return Ok(false);
        };
        let shift = self.shift();
        let span = FragmentSpan::of(start..start + len, shift, self.bytes);
        let need = self.frag_bytes(span.frags.clone(), shift);
        let pool = self.memory.pool(space);
        let granule = pool.granule();
        if !window.covers(&need) {
            return Ok(false);
        }
        let keep =
            (need.start - window.origin) / granule..(need.end - window.origin).div_ceil(granule);
        if keep.len() * granule == pool.held(&window.block)
            || !self.may_rewindow(&inner, space, held)
        {
            return Ok(false);
        }
        let plan = inner.table.plan_evict_except(space, span.frags);
        let why = Pressure { needed: need.len() };
        self.evict_fragments(&mut inner, &plan, window, why)?;
        if self.is_secure() {
            // The granules going back to the pool held this buffer's bytes: wiped first.
            let held = pool.held(&window.block);
            for cut in [0..keep.start * granule, keep.end * granule..held] {
                if !cut.is_empty() {
                    self.memory.wipe(
                        space,
                        window.block.ptr().wrapping_add(cut.start),
                        cut.len(),
                    )?;
                }
            }
        }
        let origin = window.origin + keep.start * granule;
        let trimmed = Window {
            block: pool.shrink(window.block, keep),
            origin,
            start: need.start,
            end: need.end,
        };
        self.keep_block(&mut inner, space, trimmed);
        Ok(true)
    }

    /// Gives up this buffer's block in `space` as an eviction does (last copies written back,
    /// the rest dropped), for a call that holds the buffer and needs the room for `needed`
    /// bytes of another argument: the block comes back where the pool has room when the call
    /// acquires the buffer again. Only where no other call holds the buffer and no host view
    /// may point into the space. Returns whether a block went.
    pub(crate) fn give_up(&self, space: SpaceId, needed: usize, held: Held) -> Result<bool> {
        if !self.memory.evictable().contains(space) {
            return Ok(false);
        }
        let mut inner = self.lock();
        if inner.blocks[space.index()].is_none() || !self.may_rewindow(&inner, space, held) {
            return Ok(false);
        }
        self.retire(&mut inner, space, Pressure { needed })?;
        Ok(true)
    }

    /// Whether this buffer's window in `space` may move or be retired now by a path that
    /// holds `held` of its leases: no lease but those is out and no host view may point into
    /// the space. The same handshake as an evictor's (`data::lease`): the summary is withdrawn
    /// before the leases are read, so a path that takes one later takes the slow path and
    /// waits for this lock.
    fn may_rewindow(&self, inner: &Locked<'_>, space: SpaceId, held: Held) -> bool {
        inner.withdraw();
        self.leases.may_move(space, held)
    }

    /// Replaces the window `old` in `space` by `new` (which covers it), moving the bytes of
    /// every fragment valid there; on a failed move the new block is freed and nothing
    /// changed. The move stays inside the space, so it is not a transfer between spaces and
    /// is not counted as one.
    fn move_window(
        &self,
        inner: &mut Inner,
        space: SpaceId,
        old: Window,
        new: Window,
    ) -> Result<Window> {
        let shift = self.shift();
        let held = inner.table.plan_evict(space);
        for run in held.write_back.iter().chain(&held.dropped) {
            let bytes = self.frag_bytes(run.clone(), shift);
            let len = bytes.len();
            if let Err(source) = self
                .memory
                .move_bytes(space, space, old.base(), new.base(), bytes)
            {
                self.free_block(space, new.block);
                return Err(Error::from_backend(
                    During::Transfer {
                        from: self.memory.named(space),
                        to: self.memory.named(space),
                        bytes: len,
                    },
                    source,
                ));
            }
        }
        self.free_block(space, old.block);
        self.keep_block(inner, space, new);
        Ok(new)
    }

    /// Records a new block in `space`, and the buffer in that space's eviction registry.
    fn keep_block(&self, inner: &mut Inner, space: SpaceId, window: Window) {
        inner.blocks[space.index()] = Some(window);
        self.ptrs[space.index()].store(window.base(), Ordering::Release);
        self.held[space.index()].store(
            self.memory.pool(space).held(&window.block),
            Ordering::Relaxed,
        );
        if self.memory.evictable().contains(space) {
            self.memory
                .residents(space)
                .insert(self.id, self.me.clone());
        }
    }

    /// The pool bytes this buffer's block in `space` takes, 0 where it has none.
    pub(crate) fn held_in(&self, space: SpaceId) -> usize {
        self.held[space.index()].load(Ordering::Relaxed)
    }

    /// Evicts this buffer's block in `space` to make room for an allocation of
    /// `why.needed` bytes there: writes back what only the block holds, drops the rest, frees
    /// it. Returns the bytes freed, or `None` where the buffer is busy (another thread holds
    /// its lock), in use (pinned), or has no block there. A block a copy still lands in goes
    /// only once that copy has landed (waited for once, without the lock), never before. A
    /// failed write-back changes nothing.
    pub(crate) fn evict(&self, space: SpaceId, why: Pressure) -> Result<Option<usize>> {
        let mut waited = false;
        loop {
            let Some(mut inner) = self.state.try_lock().map(Locked::hold) else {
                return Ok(None);
            };
            if inner.blocks[space.index()].is_none() {
                return Ok(None);
            }
            // The handshake of `data::lease`: withdraw the summary, then look at the leases.
            // On every early return the guard republishes the table's summary unchanged.
            inner.withdraw();
            if self.pinned_in(space) {
                return Ok(None);
            }
            if !inner.in_flight.landing_into(space, Instant::now()) {
                return self.retire(&mut inner, space, why).map(Some);
            }
            // A copy still lands in the block, so it may not go yet; but no one holds it
            // either, and the copy lands at a fixed time (its link's modelled time, booked
            // already). Refusing here made an allocation fail with `DoesNotFit` only because
            // an unused prefetch (`prefetch_async`, a copy ahead) was still on its link, where
            // the same program that waited for it first succeeded. So wait for the landing
            // once, with this buffer's lock released (no copy is recorded into the block
            // while it is held, so the deadline read under it is the last), and look again
            // from the start: leases and copies taken meanwhile are seen then. A second copy
            // landing there by then means the block is in use again: passed over.
            if waited {
                return Ok(None);
            }
            let lands = inner
                .in_flight
                .before(space, &(0..self.bytes), Access::Read);
            drop(inner);
            lands.wait();
            waited = true;
        }
    }

    /// Gives up this buffer's block in `space` (the caller has made sure no one uses it):
    /// writes back what only the block holds, drops the rest, frees it, and counts that as
    /// an eviction. Returns the pool bytes freed. A failed write-back changes nothing.
    fn retire(&self, inner: &mut Inner, space: SpaceId, why: Pressure) -> Result<usize> {
        let Some(window) = inner.blocks[space.index()] else {
            return Ok(0);
        };
        let plan = inner.table.plan_evict(space);
        self.evict_fragments(inner, &plan, window, why)?;
        inner.blocks[space.index()] = None;
        self.ptrs[space.index()].store(NO_BLOCK, Ordering::Release);
        self.held[space.index()].store(0, Ordering::Relaxed);
        self.free_block(space, window.block);
        self.memory.residents(space).remove(self.id);
        Ok(self.memory.pool(space).held(&window.block))
    }

    /// Carries out and commits an eviction plan for `window`'s space: writes back the last
    /// copies, then records that the space holds none of the plan's fragments, and counts and
    /// traces it as one eviction. A failed write-back changes nothing.
    fn evict_fragments(
        &self,
        inner: &mut Inner,
        plan: &EvictPlan,
        window: Window,
        why: Pressure,
    ) -> Result<()> {
        let space = plan.space;
        let shift = self.shift();
        let bytes_of = |runs: &[Range<usize>]| -> usize {
            runs.iter()
                .map(|r| self.frag_bytes(r.clone(), shift).len())
                .sum()
        };
        let written_back = bytes_of(&plan.write_back);
        let target = if plan.write_back.is_empty() {
            None
        } else {
            let wrap = |source: Error| Error::WriteBack {
                space: self.memory.named(space),
                bytes: written_back,
                source: Box::new(source),
            };
            Some(self.write_back(inner, plan, window, why).map_err(wrap)?)
        };
        inner.table.commit_evict(plan, target);
        let memory = &self.memory;
        for run in plan.dropped.iter().chain(&plan.write_back) {
            let bytes = self.frag_bytes(run.clone(), shift);
            inner.in_flight.drop_ahead(Some(space), &bytes, |s, _, n| {
                memory.record_ahead(s, Ahead::Wasted, n.len() as u64)
            });
        }
        let dropped = bytes_of(&plan.dropped);
        self.memory.record_eviction(space, dropped, written_back);
        if self.memory.tracing() {
            trace_eviction(
                self.memory.space_name(space),
                dropped,
                written_back,
                target.map(|t| self.memory.space_name(t)),
                why.needed,
            );
        }
        Ok(())
    }

    /// Copies the fragments `plan` writes back out of `window` into the cheapest other space
    /// with room (by the copy planner's link costs; ties to the lowest id, so the host), one
    /// copy per run. A space where the buffer has a window that does not hold those
    /// fragments is passed over. Returns that space; commits nothing.
    fn write_back(
        &self,
        inner: &mut Inner,
        plan: &EvictPlan,
        window: Window,
        why: Pressure,
    ) -> Result<SpaceId> {
        let from = plan.space;
        let shift = self.shift();
        let runs = |r: &Range<usize>| self.frag_bytes(r.clone(), shift);
        let span = match (plan.write_back.first(), plan.write_back.last()) {
            (Some(first), Some(last)) => runs(first).start..runs(last).end,
            _ => 0..0,
        };
        let mut targets: Vec<SpaceId> = (0..self.memory.space_count())
            .map(|i| SpaceId(i as u8))
            .filter(|&t| t != from)
            .collect();
        targets.sort_by_key(|&t| (self.memory.link_cost(from, t, 1 << shift), t));
        let mut refused = None;
        let mut chosen = None;
        for t in targets {
            if let Some(existing) = inner.blocks[t.index()] {
                if existing.covers(&span) {
                    chosen = Some((t, existing));
                    break;
                }
                continue;
            }
            // Only room that is free now: a write-back never evicts in turn.
            match self.memory.pool(t).alloc(self.bytes) {
                Ok(fresh) => {
                    let fresh = Window::new(fresh, 0..self.bytes);
                    self.keep_block(inner, t, fresh);
                    chosen = Some((t, fresh));
                    break;
                }
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        let Some((to, dst)) = chosen else {
            return Err(refused.unwrap_or_else(|| {
                Error::Config("no other memory space with room to write back to".to_string())
            }));
        };
        let reason = Reason::WriteBack { needed: why.needed };
        let mut pending = Pending::NONE;
        for run in &plan.write_back {
            let copy = self.copy_run(
                inner,
                from,
                to,
                window.base(),
                dst.base(),
                run.clone(),
                &reason,
            )?;
            pending = pending.and(copy);
        }
        pending.wait();
        Ok(to)
    }

    /// The space an access by a device that reaches `reach` (besides its own space `own`)
    /// should bring data into: the buffer's home if the device reaches it, else its own. A
    /// buffer with no home yet goes where the runtime puts unplaced data, if the device reaches
    /// that.
    #[inline]
    pub(crate) fn target(&self, own: SpaceId, reach: SpaceSet) -> SpaceId {
        // A secure buffer is never placed where it would be ciphertext.
        let reach = SpaceSet(reach.0 & !self.sealed_spaces().0);
        match self.home.load(Ordering::Relaxed) {
            NO_HOME => match self.memory.default_home() {
                Some(home) if reach.contains(home) => home,
                _ => own,
            },
            home if reach.contains(SpaceId(home)) => SpaceId(home),
            _ => own,
        }
    }

    /// Sets the placement hint.
    pub(crate) fn set_home(&self, space: SpaceId) {
        self.home.store(space.0, Ordering::Relaxed);
    }

    /// Records a completed write by `space` over the bytes `start..start+len` (and its
    /// checksums, `by` whom, where they are on).
    pub(crate) fn mark_written(&self, start: usize, len: usize, space: SpaceId, by: WrittenBy) {
        self.record_write(start, len, space, by, false);
    }

    /// [`Self::mark_written`], and where the bytes are predicted to be needed next
    /// ([`Self::predicted_next`]), asked under the same lock: for the writes whose end sends
    /// them on ([`Self::send_to`]), a call's and a host write's. `None` where prefetching is
    /// off.
    pub(crate) fn mark_written_and_predict(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
        by: WrittenBy,
    ) -> Option<SpaceId> {
        let predict = len != 0 && self.memory().prefetches();
        self.record_write(start, len, space, by, predict)
    }

    fn record_write(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
        by: WrittenBy,
        predict: bool,
    ) -> Option<SpaceId> {
        // The first writer places a buffer that has no hint.
        let _ = self
            .home
            .compare_exchange(NO_HOME, space.0, Ordering::Relaxed, Ordering::Relaxed);
        let mut inner = self.lock();
        let span = FragmentSpan::of(start..start + len, self.shift(), self.bytes);
        inner.table.mark_written(span.frags.clone(), space);
        if inner.sums.is_some() {
            self.record_sums(&mut inner, span.frags.clone(), space, by);
        }
        predict
            .then(|| inner.table.predict_after(span.frags, space))
            .flatten()
    }

    /// Where bytes `start..start+len`, just written by `space`, are predicted to be needed
    /// next (`FragmentTable::predict_after`).
    pub(crate) fn predicted_next(
        &self,
        start: usize,
        len: usize,
        space: SpaceId,
    ) -> Option<SpaceId> {
        let inner = self.lock();
        let span = FragmentSpan::of(start..start + len, self.shift(), self.bytes);
        inner.table.predict_after(span.frags, space)
    }

    /// Starts the copy of bytes `start..start+len`, just written in `from`, to the space their
    /// owner history predicts they go next, where that copy takes time someone would otherwise
    /// wait out (a timed link): the end of a call's write (`kernel::ahead`), of a host fill
    /// and of a loop's. A copy that fails is left to the call that needs the bytes, which makes
    /// it again and reports what fails.
    pub(crate) fn send_predicted(&self, start: usize, len: usize, from: SpaceId) {
        if len == 0 || !self.memory().prefetches() {
            return;
        }
        if let Some(to) = self.predicted_next(start, len, from) {
            self.send_to(start, len, from, to);
        }
    }

    /// Starts the copy of bytes `start..start+len`, just written in `from`, to `to`, where
    /// their owner history predicts them ([`Self::send_predicted`]).
    pub(crate) fn send_to(&self, start: usize, len: usize, from: SpaceId, to: SpaceId) {
        let memory = self.memory();
        if memory.timed_link(from).is_none() && memory.timed_link(to).is_none() {
            return;
        }
        // The acquire may move windows, so it holds a lease while it runs (`data::lease`), and
        // only while it runs: the subscriber told of a failure may use the buffer.
        let sent = {
            let _lease = self.lease();
            self.acquire_async(start, len, to, &Reason::Prefetch)
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "a predicted copy failed; the call that needs it makes it");
        }
    }

    /// Records a write by `space` that failed part-way.
    pub(crate) fn mark_failed(&self, start: usize, len: usize, space: SpaceId) {
        let mut inner = self.lock();
        let span = FragmentSpan::of(start..start + len, self.shift(), self.bytes);
        inner.table.mark_failed(span.frags.clone(), space);
        if let Some(sums) = inner.sums.as_mut() {
            sums.forget(span.frags);
        }
    }

    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        inner.table.reset();
        let count = inner.table.len();
        if let Some(sums) = inner.sums.as_mut() {
            *sums = Checksums::new(count);
        }
    }

    /// Resets the fragments of bytes `start..start+len`, which must cover them whole (a
    /// mutable view's range does).
    pub(crate) fn reset_range(&self, start: usize, len: usize) {
        let mut inner = self.lock();
        let span = FragmentSpan::of(start..start + len, self.shift(), self.bytes);
        inner.table.reset_frags(span.frags.clone());
        if let Some(sums) = inner.sums.as_mut() {
            sums.forget(span.frags);
        }
    }

    pub(crate) fn fragment_state(&self, frag: usize) -> Option<FragmentState> {
        self.lock().table.get(frag)
    }

    pub(crate) fn fragment_count(&self) -> usize {
        self.lock().table.len()
    }

    /// Changes the fragment size to `1 << shift` bytes, gathering on the host first where a
    /// merge would otherwise lose data.
    pub(crate) fn refragment(&self, shift: u32) -> Result<()> {
        let old = self.shift();
        // A secure buffer's ciphertext is sealed fragment by fragment at the old size: it is
        // opened on the host, and its untrusted blocks dropped, before the size changes.
        let sealed = self.sealed_spaces();
        let ciphertext = {
            let inner = self.lock();
            sealed.iter().any(|s| inner.blocks[s.index()].is_some())
        };
        if ciphertext || (shift > old && self.lock().table.merge_needs_gather(1 << (shift - old))) {
            // The buffer is borrowed mutably: no one else holds a lease.
            self.acquire(
                0,
                self.bytes,
                SpaceId::HOST,
                Access::Read,
                &Reason::Refragment,
                Held::NONE,
            )?;
        }
        let mut inner = self.lock();
        if ciphertext {
            for space in sealed.iter() {
                // The host holds every fragment now: nothing is written back, all dropped.
                self.retire(&mut inner, space, Pressure { needed: 0 })?;
            }
            if let Some(seals) = inner.seals.as_mut() {
                seals.clear();
            }
        }
        let count = self.bytes.div_ceil(1 << shift);
        // Smaller fragments need more records, which may not be had (a huge buffer made very
        // fine): refused before anything changes (what ran above only brought the bytes to
        // the host and dropped copies the host also holds).
        let too_many = || Error::TooManyFragments {
            bytes: self.bytes,
            fragment_bytes: 1 << shift,
            fragments: count,
        };
        let table = if shift >= old {
            inner.table.merged(1 << (shift - old))
        } else {
            (inner.table)
                .split(1 << (old - shift), count)
                .ok_or_else(too_many)?
        };
        // A hash stands for a fragment of the old size: the new fragments have none until
        // written again.
        let sums = match inner.sums {
            Some(_) => Some(Checksums::try_new(count).ok_or_else(too_many)?),
            None => None,
        };
        inner.table = table;
        inner.sums = sums;
        self.frag_shift.store(shift, Ordering::Relaxed);
        Ok(())
    }

    /// Byte range of fragment `frag`, clipped to the buffer.
    pub(super) fn frag_range(&self, frag: usize) -> Range<usize> {
        self.frag_bytes(frag..frag + 1, self.shift())
    }

    /// The table's own summary, under the lock (the published one may be withdrawn).
    pub(super) fn lock_summary(&self) -> u64 {
        let inner = self.lock();
        inner.table.summary() & !inner.hidden
    }
}

/// A plan named a source that holds no block: the table and the blocks disagree, which only a
/// runtime bug can cause; reported as a failed copy rather than a panic.
fn missing_block(memory: &BufferMemorySystem, from: SpaceId, to: SpaceId) -> Error {
    Error::from_backend(
        During::Transfer {
            from: memory.named(from),
            to: memory.named(to),
            bytes: 0,
        },
        BackendError::Invalid("the source space holds no block of this buffer".to_string()),
    )
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        let mut inner = self.lock();
        let memory = &self.memory;
        inner
            .in_flight
            .drop_ahead(None, &(0..self.bytes), |s, _, n| {
                memory.record_ahead(s, Ahead::Wasted, n.len() as u64)
            });
        // A copy still on its link would write into memory the pool has handed on. No one
        // else can reach the buffer now, so waiting under its lock holds up no one.
        inner.in_flight.landing().wait();
        for (space, block) in inner.blocks.iter_mut().enumerate() {
            if let Some(window) = block.take() {
                let space = SpaceId(space as u8);
                self.memory.residents(space).remove(self.id);
                self.free_block(space, window.block);
            }
        }
    }
}

/// Where host code accesses a buffer's bytes ([`RawBuffer::host_acquire`]), and the lease that
/// a write still to be recorded holds until its record.
pub(crate) struct HostAccess<'a> {
    pub(crate) space: SpaceId,
    /// `Some` where a write there must still be recorded: held until after the record.
    pub(crate) owed: Option<Lease<'a>>,
}

impl HostAccess<'_> {
    /// Bytes used where they are valid as the access needs: nothing to record.
    fn in_place(space: SpaceId) -> Self {
        HostAccess { space, owed: None }
    }
}
