//! Leases: the one rule every path that uses a buffer's blocks honours before an eviction,
//! a retire, a trim or a window move may touch them.
//!
//! A path *holds a lease* on a buffer from before its first lock-free check of the buffer's
//! state until after its last mark (or failure record). While any lease other than its own is
//! out, no path moves, shrinks, retires or evicts any of the buffer's blocks, and no eviction
//! writes bytes back into it. The holders are: kernel calls (`kernel::dispatch`, one per
//! argument that may be used in an evictable space), host views and host loops while their
//! write is unrecorded (`RawBuffer::host_acquire`), `prefetch`, a baseline call's staging,
//! merged groups (they are kernel calls) and the window moves a call itself makes (which count
//! the one lease of the argument they move for as their own, [`Held`]).
//!
//! Host views into an evictable host-mapped space hand out slices whose end the runtime cannot
//! see, so they set a sticky per-space bit instead, cleared when the buffer is next borrowed
//! mutably (which proves every such view is gone).
//!
//! # Why a holder that never locks cannot lose its block
//!
//! A mover holds the buffer's lock and then (1) publishes a summary under which nothing is
//! resident (`Locked::withdraw`, SeqCst) and (2) loads the leases (SeqCst); it moves only if
//! no lease but its own is out. A holder does (a) take its lease, then (b) load the summary.
//! All four are SeqCst, so they fall in one total order: if (a) comes before (2), the mover
//! sees the lease and leaves the block; otherwise (1) comes before (a) and so before (b), and
//! the holder reads the withdrawn summary or one published after the move, neither of which
//! says resident: it takes the slow path, waits for the lock, and finds the block where the
//! move left it. The loom models in `data::lease_loom` check this on the real [`Leases`] word
//! and the real summary lock (with `coherence::sync::handshake_fence` standing in, under loom
//! only, for the total order loom does not model for SeqCst accesses).

use crate::coherence::sync::{handshake_fence, AtomicU64, Ordering};
use crate::hal::SpaceId;

/// The low half counts leases; bit `HOST_VIEWS_SHIFT + s` says a host view may point into
/// space `s`.
const LEASES_MASK: u64 = u32::MAX as u64;
const HOST_VIEWS_SHIFT: u32 = 32;

/// A buffer's lease word.
pub(crate) struct Leases(AtomicU64);

/// Whether the path asking to move a buffer's blocks holds a lease itself, which it may then
/// count as its own: a move is allowed only when every lease out is that one. A path holds
/// one lease per pointer it keeps into the buffer's blocks, so the count is never more than
/// one: a kernel call with two arguments on one buffer holds two leases, and moving the window
/// for one argument would leave the other's pointer behind, so neither counts the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held(u32);

impl Held {
    /// The caller holds no lease: it must have the buffer mutably borrowed, or move nothing.
    pub(crate) const NONE: Held = Held(0);
    /// The caller holds exactly one lease (a [`Lease`], or a kernel call argument's pin) and
    /// keeps it until after its marks.
    pub(crate) const ONE: Held = Held(1);
}

impl Leases {
    pub(crate) fn new() -> Leases {
        Leases(AtomicU64::new(0))
    }

    /// Takes a lease: SeqCst, since it comes before the holder's lock-free summary check (the
    /// holder's half of the handshake).
    #[inline(always)]
    pub(crate) fn take(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        handshake_fence();
    }

    /// Gives a lease back, after the holder's last mark.
    #[inline(always)]
    pub(crate) fn give_back(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Host views may point into the evictable spaces `spaces` (a `SpaceSet` word) until
    /// [`Self::end_host_views`]. SeqCst before the summary check, as a lease.
    pub(crate) fn pin_host_views(&self, spaces: u16) {
        if spaces != 0 {
            self.0
                .fetch_or(u64::from(spaces) << HOST_VIEWS_SHIFT, Ordering::SeqCst);
            handshake_fence();
        }
    }

    /// The buffer is borrowed mutably, so no host view of it is alive.
    pub(crate) fn end_host_views(&self) {
        self.0.fetch_and(LEASES_MASK, Ordering::Relaxed);
    }

    /// Whether a path that holds `held` of the leases may move, shrink or retire the buffer's
    /// block in `space` (or evict it: an evictor holds none): no lease but its own is out and
    /// no host view may point into the space. The mover holds the buffer's lock and has
    /// withdrawn its summary first (the mover's half of the handshake).
    pub(crate) fn may_move(&self, space: SpaceId, held: Held) -> bool {
        let word = self.0.load(Ordering::SeqCst);
        word & LEASES_MASK <= u64::from(held.0)
            && word >> HOST_VIEWS_SHIFT & u64::from(space.bit()) == 0
    }
}

/// One lease, given back when this goes: what a path that is not a kernel call holds while it
/// uses a buffer (see the module doc).
#[must_use = "a lease protects only while it is held"]
pub(crate) struct Lease<'a>(&'a Leases);

impl<'a> Lease<'a> {
    /// Takes a lease on `leases`' buffer.
    pub(crate) fn take(leases: &'a Leases) -> Lease<'a> {
        leases.take();
        Lease(leases)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A move is allowed exactly when every lease out is the mover's own and no host view
    /// points into the space; host views into another space do not matter.
    #[test]
    fn a_move_counts_leases_per_holder_and_host_views_per_space() {
        let (sim0, sim1) = (SpaceId(1), SpaceId(2));
        let leases = Leases::new();
        assert!(leases.may_move(sim0, Held::NONE));
        leases.take();
        assert!(!leases.may_move(sim0, Held::NONE), "another's lease");
        assert!(leases.may_move(sim0, Held::ONE), "the mover's own lease");
        leases.take();
        assert!(!leases.may_move(sim0, Held::ONE), "one lease is another's");
        leases.give_back();
        leases.give_back();
        leases.pin_host_views(sim1.bit());
        assert!(leases.may_move(sim0, Held::NONE));
        assert!(!leases.may_move(sim1, Held::ONE), "a host view in sim1");
        leases.end_host_views();
        assert!(leases.may_move(sim1, Held::NONE));
    }
}
