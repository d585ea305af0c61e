//! Copies in flight: bytes a copy has put in a space whose modelled link time has not passed.
//!
//! A simulated link moves the bytes at once and books the time the transfer would take
//! (`space::Pending`); until now every acquire waited that time out before its call ran, so no
//! copy ever overlapped anything. An asynchronous acquire (`HeteData::prefetch_async`, and a
//! scope's prefetch of a call's inputs when the call is submitted) instead records the space as
//! *in flight* until the copy lands and returns. Meanwhile the fragments are valid in the
//! table (so a second call that needs them shares the copy and plans none) but the space's
//! "every fragment is here" bit is left out of the published summary, so no call takes the
//! lock-free path past the copy: its acquire finds the bytes there, waits for them to land
//! (outside the lock), and once they have, the bit comes back. So a copy in flight is neither
//! valid to a reader that could race it nor lost, and the fast path stays one load.
//!
//! A write waits for every copy of the buffer in flight (the rule that a write to a fragment
//! with a copy in flight waits for it); a read waits for its own space's and its sources'.
//! On the real backends a copy completes before it returns, so nothing is ever in flight there.

use crate::hal::{Access, SpaceId, MAX_SPACES};
use crate::space::Pending;
use std::time::Instant;

/// A buffer's copies in flight, per space: kept under its lock, beside its fragment table.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Spaces with a copy in flight, as summary bits: the published summary leaves them out.
    pub(crate) mask: u64,
    /// When the last copy into each space lands.
    lands: [Option<Instant>; MAX_SPACES],
}

impl InFlight {
    /// Records a copy into `space` that lands at `pending`'s deadline (nothing, for a copy
    /// that has already landed).
    pub(crate) fn record(&mut self, space: SpaceId, pending: Pending) {
        if let Some(deadline) = pending.deadline() {
            let lands = &mut self.lands[space.index()];
            *lands = Some(lands.map_or(deadline, |d| d.max(deadline)));
            self.mask |= u64::from(space.bit());
        }
    }

    /// What an access with `access` in `space` must wait for first: that space's copy in
    /// flight, or for a write every copy of the buffer in flight.
    pub(crate) fn before(&self, space: SpaceId, access: Access) -> Pending {
        if self.mask == 0 {
            return Pending::NONE;
        }
        let lands = match access {
            Access::Read => self.lands[space.index()],
            Access::Write | Access::ReadWrite => self.lands.iter().flatten().max().copied(),
        };
        lands.map_or(Pending::NONE, Pending::until)
    }

    /// What a copy out of `space` must wait for: the bytes to have landed there.
    pub(crate) fn source(&self, space: SpaceId) -> Pending {
        self.lands[space.index()].map_or(Pending::NONE, Pending::until)
    }

    /// Forgets the copies that have landed by `now`, so their spaces' bits come back; whether
    /// any is still in flight.
    pub(crate) fn settle(&mut self, now: Instant) -> bool {
        for (i, lands) in self.lands.iter_mut().enumerate() {
            if lands.is_some_and(|d| d <= now) {
                *lands = None;
                self.mask &= !(1u64 << i);
            }
        }
        self.mask != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_read_waits_for_its_space_a_write_for_every_space_and_landed_copies_clear() {
        let now = Instant::now();
        let (sim0, sim1) = (SpaceId(1), SpaceId(2));
        let mut f = InFlight::default();
        assert_eq!(f.before(sim0, Access::Write).deadline(), None);
        f.record(sim0, Pending::until(now + Duration::from_secs(5)));
        f.record(sim1, Pending::until(now + Duration::from_secs(1)));
        // A later copy into the same space moves its landing later, never earlier.
        f.record(sim0, Pending::until(now + Duration::from_secs(2)));
        f.record(sim1, Pending::NONE);
        assert_eq!(
            f.before(sim1, Access::Read).deadline(),
            Some(now + Duration::from_secs(1))
        );
        assert_eq!(f.before(SpaceId::HOST, Access::Read).deadline(), None);
        assert_eq!(
            f.before(SpaceId::HOST, Access::Write).deadline(),
            Some(now + Duration::from_secs(5))
        );
        assert_eq!(
            f.source(sim0).deadline(),
            Some(now + Duration::from_secs(5))
        );
        assert_eq!(f.mask, u64::from(sim0.bit() | sim1.bit()));
        assert!(f.settle(now + Duration::from_secs(1)));
        assert_eq!(f.mask, u64::from(sim0.bit()));
        assert!(!f.settle(now + Duration::from_secs(5)));
        assert_eq!(f.mask, 0);
        assert_eq!(f.before(sim0, Access::Write).deadline(), None);
    }
}
