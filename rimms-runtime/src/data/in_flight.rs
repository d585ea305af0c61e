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
//! A write waits for every copy of its bytes in flight, wherever it goes (the rule that a
//! write to a fragment with a copy in flight waits for it); a read waits for the copies of its
//! bytes into its own space, and a copy for those into its source.
//! On the real backends a copy completes before it returns, so nothing is ever in flight there.

use crate::hal::{Access, SpaceId};
use crate::space::Pending;
use std::ops::Range;
use std::time::Instant;

/// One copy in flight: the bytes of the buffer it brings into `space`, and when they land.
#[derive(Clone, Debug)]
struct InTransit {
    space: SpaceId,
    bytes: Range<usize>,
    lands: Instant,
}

/// A buffer's copies in flight: kept under its lock, beside its fragment table.
///
/// Each copy keeps its own byte range, so a call that reads rows whose copy has landed goes
/// ahead while later rows are still on the link: that is what lets a scope's pieces (and a
/// prediction's copies) overlap compute row by row. Byte ranges rather than fragment indices,
/// so a change of fragment size cannot make a record name other bytes.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Spaces with a copy in flight, as summary bits: the published summary leaves them out.
    pub(crate) mask: u64,
    copies: Vec<InTransit>,
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl InFlight {
    /// Records a copy of `bytes` into `space` that lands at `pending`'s deadline (nothing, for
    /// a copy that has already landed).
    pub(crate) fn record(&mut self, space: SpaceId, bytes: Range<usize>, pending: Pending) {
        if let Some(lands) = pending.deadline() {
            self.copies.push(InTransit {
                space,
                bytes,
                lands,
            });
            self.mask |= u64::from(space.bit());
        }
    }

    /// The latest landing among the copies `which` selects that overlap `bytes`.
    fn latest(&self, bytes: &Range<usize>, which: impl Fn(&InTransit) -> bool) -> Pending {
        self.copies
            .iter()
            .filter(|c| which(c) && overlaps(&c.bytes, bytes))
            .map(|c| c.lands)
            .max()
            .map_or(Pending::NONE, Pending::until)
    }

    /// What an access with `access` to `bytes` (whole fragments) in `space` must wait for
    /// first: the copies in flight into that space of those bytes, or for a write every copy
    /// of those bytes in flight, wherever it goes (its source is what the write changes).
    pub(crate) fn before(&self, space: SpaceId, bytes: &Range<usize>, access: Access) -> Pending {
        if self.mask == 0 {
            return Pending::NONE;
        }
        match access {
            Access::Read => self.latest(bytes, |c| c.space == space),
            Access::Write | Access::ReadWrite => self.latest(bytes, |_| true),
        }
    }

    /// What a copy of `bytes` out of `space` must wait for: those bytes to have landed there.
    pub(crate) fn source(&self, space: SpaceId, bytes: &Range<usize>) -> Pending {
        if self.mask == 0 {
            return Pending::NONE;
        }
        self.latest(bytes, |c| c.space == space)
    }

    /// Forgets the copies that have landed by `now`, so their spaces' bits come back once
    /// none is left; whether any is still in flight.
    pub(crate) fn settle(&mut self, now: Instant) -> bool {
        self.copies.retain(|c| c.lands > now);
        self.mask = self
            .copies
            .iter()
            .fold(0, |m, c| m | u64::from(c.space.bit()));
        self.mask != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_read_waits_for_its_bytes_in_its_space_a_write_for_its_bytes_anywhere() {
        let now = Instant::now();
        let at = |s: u64| Pending::until(now + Duration::from_secs(s));
        let (sim0, sim1) = (SpaceId(1), SpaceId(2));
        let mut f = InFlight::default();
        assert_eq!(f.before(sim0, &(0..100), Access::Write).deadline(), None);
        f.record(sim0, 0..4096, at(5));
        f.record(sim0, 4096..8192, at(2));
        f.record(sim1, 0..4096, at(1));
        f.record(sim1, 8192..12288, Pending::NONE);
        // A read of the second piece on sim0 waits for that piece alone.
        assert_eq!(
            f.before(sim0, &(4096..8192), Access::Read).deadline(),
            at(2).deadline()
        );
        assert_eq!(
            f.before(sim0, &(0..8192), Access::Read).deadline(),
            at(5).deadline()
        );
        assert_eq!(
            f.before(sim1, &(0..4096), Access::Read).deadline(),
            at(1).deadline()
        );
        // Bytes no copy brings, and the host, wait for nothing to read.
        assert_eq!(f.before(sim1, &(4096..8192), Access::Read).deadline(), None);
        assert_eq!(
            f.before(SpaceId::HOST, &(0..4096), Access::Read).deadline(),
            None
        );
        // A write waits for every copy of its bytes, into any space; not for other bytes.
        assert_eq!(
            f.before(SpaceId::HOST, &(0..4096), Access::Write)
                .deadline(),
            at(5).deadline()
        );
        assert_eq!(
            f.before(SpaceId::HOST, &(8192..9000), Access::Write)
                .deadline(),
            None
        );
        assert_eq!(f.source(sim0, &(4000..4100)).deadline(), at(5).deadline());
        assert_eq!(f.mask, u64::from(sim0.bit() | sim1.bit()));
        assert!(f.settle(now + Duration::from_secs(1)));
        assert_eq!(f.mask, u64::from(sim0.bit()));
        assert!(f.settle(now + Duration::from_secs(2)));
        assert_eq!(f.before(sim0, &(4096..8192), Access::Read).deadline(), None);
        assert!(!f.settle(now + Duration::from_secs(5)));
        assert_eq!(f.mask, 0);
        assert_eq!(f.before(sim0, &(0..4096), Access::Write).deadline(), None);
    }
}
