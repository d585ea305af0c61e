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

/// One copy in flight, or made ahead of its use and not used yet: the bytes of the buffer it
/// brought into `space`, and when they land.
#[derive(Debug)]
struct InTransit {
    space: SpaceId,
    bytes: Range<usize>,
    lands: Instant,
    /// Made ahead of the call that needs it (a prefetch, a scope's copy at submission, a
    /// prediction): kept after it lands until a read in its space uses its bytes (used) or a
    /// write or an eviction makes them stale first (wasted).
    ahead: bool,
}

/// A buffer's copies in flight, and its copies made ahead and not used yet: kept under its
/// lock, beside its fragment table.
///
/// Each copy keeps its own byte range, so a call that reads rows whose copy has landed goes
/// ahead while later rows are still on the link: that is what lets a scope's pieces (and a
/// prediction's copies) overlap compute row by row. Byte ranges rather than fragment indices,
/// so a change of fragment size cannot make a record name other bytes.
///
/// A copy made ahead keeps its space's bit out of the summary until it is used, so that the
/// access that uses it takes the locked path and is counted; that costs one locked acquire
/// per copy made ahead, which made a copy anyway.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Spaces with a copy in flight or made ahead and unused, as summary bits: the published
    /// summary leaves them out.
    pub(crate) mask: u64,
    copies: Vec<InTransit>,
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl InFlight {
    /// Records a copy of `bytes` into `space` that lands at `pending`'s deadline: a copy
    /// `ahead` of its use is recorded even if it has landed (for its count), any other only
    /// while in flight.
    pub(crate) fn record(
        &mut self,
        space: SpaceId,
        bytes: Range<usize>,
        pending: Pending,
        ahead: bool,
    ) {
        let lands = match (pending.deadline(), ahead) {
            (Some(lands), _) => lands,
            (None, true) => Instant::now(),
            (None, false) => return,
        };
        self.copies.push(InTransit {
            space,
            bytes,
            lands,
            ahead,
        });
        self.mask |= u64::from(space.bit());
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

    /// Settles the copies made ahead that an access with `access` to `bytes` in `space` uses
    /// (a read there) or makes stale (a write anywhere, which leaves only its own copy
    /// valid): `count(space, used, bytes)` gets each one's overlap with `bytes` (a byte
    /// range), which is then no longer a copy ahead, only a copy in flight until it lands.
    /// Call it under the lock that computed what the access waits for (`before`).
    pub(crate) fn settle_ahead(
        &mut self,
        space: SpaceId,
        bytes: &Range<usize>,
        access: Access,
        count: impl FnMut(SpaceId, bool, Range<usize>),
    ) {
        if self.mask == 0 {
            return;
        }
        self.take(bytes, count, |c| {
            if c.space == space && access != Access::Write {
                Some(true)
            } else {
                access.writes().then_some(false)
            }
        });
    }

    /// Counts as wasted the copies made ahead into `space` (every space, for `None`) that
    /// overlap `bytes`: the block there is going or cut (or the buffer is). `count` gets each
    /// as [`Self::settle_ahead`]'s does; what is still on its link stays in flight.
    pub(crate) fn drop_ahead(
        &mut self,
        space: Option<SpaceId>,
        bytes: &Range<usize>,
        count: impl FnMut(SpaceId, bool, Range<usize>),
    ) {
        if self.mask == 0 {
            return;
        }
        self.take(bytes, count, |c| {
            space.is_none_or(|s| s == c.space).then_some(false)
        });
    }

    /// Takes the overlap with `bytes` of every copy made ahead for which `used` says whether
    /// it was used (`Some(true)`) or wasted (`Some(false)`), counting it and keeping it as a
    /// plain copy in flight; what lies outside `bytes` stays a copy ahead.
    fn take(
        &mut self,
        bytes: &Range<usize>,
        mut count: impl FnMut(SpaceId, bool, Range<usize>),
        used: impl Fn(&InTransit) -> Option<bool>,
    ) {
        // In place: a call settles its copies ahead on every locked acquire, and a new
        // vector each time was an allocation and a free per argument of every call. The pieces
        // left outside `bytes` go to the end, past the ones looked at (the order of the
        // records means nothing).
        for i in 0..self.copies.len() {
            let c = &mut self.copies[i];
            let verdict = (c.ahead && overlaps(&c.bytes, bytes))
                .then(|| used(c))
                .flatten();
            let Some(used) = verdict else {
                continue;
            };
            let whole = c.bytes.clone();
            let (start, end) = (whole.start.max(bytes.start), whole.end.min(bytes.end));
            count(c.space, used, start..end);
            // Counted, but still on its link until it lands: kept as a plain copy in flight,
            // which `settle` forgets then. Forgotten now, its space's bit would come back
            // into the summary at once, and a call on the fast path would pass the copy.
            c.bytes = start..end;
            c.ahead = false;
            let (space, lands) = (c.space, c.lands);
            for rest in [whole.start..start, end..whole.end] {
                if !rest.is_empty() {
                    self.copies.push(InTransit {
                        space,
                        bytes: rest,
                        lands,
                        ahead: true,
                    });
                }
            }
        }
        self.remask();
    }

    /// Forgets the copies not made ahead that have landed by `now`, so their spaces' bits come
    /// back once nothing else keeps them out; whether any copy is still kept.
    pub(crate) fn settle(&mut self, now: Instant) -> bool {
        self.copies.retain(|c| c.ahead || c.lands > now);
        self.remask();
        self.mask != 0
    }

    /// Whether a copy into `space` is still on its link at `now`: its block there may be
    /// neither freed nor moved until it lands (a copy engine would write into whatever took
    /// the memory).
    pub(crate) fn landing_into(&self, space: SpaceId, now: Instant) -> bool {
        self.copies
            .iter()
            .any(|c| c.space == space && c.lands > now)
    }

    /// When every copy recorded has landed: what freeing the buffer waits for.
    pub(crate) fn landing(&self) -> Pending {
        self.latest(&(0..usize::MAX), |_| true)
    }

    fn remask(&mut self) {
        self.mask = self
            .copies
            .iter()
            .fold(0, |m, c| m | u64::from(c.space.bit()));
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
        f.record(sim0, 0..4096, at(5), false);
        f.record(sim0, 4096..8192, at(2), false);
        f.record(sim1, 0..4096, at(1), false);
        f.record(sim1, 8192..12288, Pending::NONE, false);
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

    #[test]
    fn a_copy_ahead_used_or_dropped_before_it_lands_stays_in_flight_until_it_lands() {
        let now = Instant::now();
        let (sim0, sim1) = (SpaceId(1), SpaceId(2));
        let lands = now + Duration::from_secs(5);
        let mut f = InFlight::default();
        f.record(sim0, 0..4096, Pending::until(lands), true);
        f.record(sim1, 0..4096, Pending::until(lands), true);
        let mut counted = Vec::new();
        f.settle_ahead(sim0, &(0..4096), Access::Read, |s, used, b| {
            counted.push((s, used, b))
        });
        f.drop_ahead(Some(sim1), &(0..4096), |s, used, b| {
            counted.push((s, used, b))
        });
        assert_eq!(
            counted,
            [(sim0, true, 0..4096), (sim1, false, 0..4096)],
            "each counted once, when used or dropped"
        );
        // Still on their links: the fast path stays off both spaces, a read there still
        // waits, and neither block may go.
        assert_eq!(f.mask, u64::from(sim0.bit() | sim1.bit()));
        assert_eq!(
            f.before(sim0, &(0..4096), Access::Read).deadline(),
            Some(lands)
        );
        assert!(f.landing_into(sim1, now));
        assert_eq!(f.landing().deadline(), Some(lands));
        // Counted already: neither is counted again.
        f.drop_ahead(None, &(0..4096), |s, used, b| counted.push((s, used, b)));
        assert_eq!(counted.len(), 2);
        assert!(!f.settle(lands));
        assert!(!f.landing_into(sim1, now));
        assert_eq!(f.mask, 0);
    }
}
