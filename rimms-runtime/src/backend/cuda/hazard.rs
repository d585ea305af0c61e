//! Which earlier GPU work a new operation has to wait for.
//!
//! The backend runs copies and kernels on four streams (compute, host→device, device→host,
//! device→device) so that a copy can overlap a kernel. Work on one stream runs in order; work
//! on two streams runs in any order unless one waits for an event of the other. Waiting for
//! everything on every other stream would be correct and would throw the overlap away, so this
//! tracker keeps, for each piece of work still pending, the byte ranges of the pool it reads
//! and writes, and a new operation waits only for work that touches the same bytes in a
//! conflicting way (read after write, write after read, write after write).
//!
//! It is plain data, generic over the completion token, so its rules are tested here on any
//! machine; the backend instantiates it with CUDA events.
//!
//! Two facts keep the list short and the answers small:
//! - work on one lane (stream) completes in order, so per other lane only the *latest*
//!   conflicting entry matters: waiting for it covers every earlier one on that lane;
//! - finished work needs no waiting, so entries whose token says "done" are dropped
//!   ([`Hazards::retire`]), and so is everything recorded on a lane before that lane was
//!   synchronised ([`Hazards::retire_synchronized`]). Only work *known* to be finished goes:
//!   an entry dropped while still running would let later work overtake it.

/// A byte range `[start, end)` of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// `len` bytes from `start` (saturating: a span never wraps around).
    pub(crate) fn at(start: usize, len: usize) -> Span {
        Span {
            start,
            end: start.saturating_add(len),
        }
    }

    /// Whether the two spans share a byte (empty spans share none).
    pub(crate) fn overlaps(self, other: Span) -> bool {
        self.start < self.end
            && other.start < other.end
            && self.start < other.end
            && other.start < self.end
    }
}

fn any_overlap(a: &[Span], b: &[Span]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.overlaps(*y)))
}

/// One piece of work that may still be running.
#[derive(Debug)]
struct Pending<E> {
    /// Order of recording: entries with a smaller number were recorded earlier.
    seq: u64,
    lane: usize,
    reads: Vec<Span>,
    writes: Vec<Span>,
    done: E,
}

/// The pending work of one device, by byte range.
#[derive(Debug)]
pub(crate) struct Hazards<E> {
    pending: Vec<Pending<E>>,
    next_seq: u64,
}

impl<E: Clone> Hazards<E> {
    /// No pending work.
    pub(crate) fn new() -> Self {
        Hazards {
            pending: Vec::new(),
            next_seq: 0,
        }
    }

    /// The tokens that an operation on `lane` reading `reads` and writing `writes` must wait
    /// for: per other lane, the latest pending entry that conflicts with it. Entries on the
    /// same lane are ordered by the stream itself.
    pub(crate) fn waits_for(&self, lane: usize, reads: &[Span], writes: &[Span]) -> Vec<E> {
        let mut lanes_seen: Vec<usize> = Vec::new();
        let mut out = Vec::new();
        for p in self.pending.iter().rev() {
            if p.lane == lane || lanes_seen.contains(&p.lane) {
                continue;
            }
            let conflict = any_overlap(writes, &p.reads)
                || any_overlap(writes, &p.writes)
                || any_overlap(reads, &p.writes);
            if conflict {
                lanes_seen.push(p.lane);
                out.push(p.done.clone());
            }
        }
        out
    }

    /// Records an operation that has been enqueued on `lane` and completes with `done`.
    pub(crate) fn record(&mut self, lane: usize, reads: &[Span], writes: &[Span], done: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push(Pending {
            seq,
            lane,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            done,
        });
    }

    /// Drops every entry whose token `is_done` says has completed.
    pub(crate) fn retire(&mut self, mut is_done: impl FnMut(&E) -> bool) {
        self.pending.retain(|p| !is_done(&p.done));
    }

    /// A mark of the present: every entry recorded so far is older than it. Synchronising a
    /// lane after taking the mark finishes the lane's entries older than the mark, and only
    /// those ([`retire_synchronized`](Self::retire_synchronized)).
    pub(crate) fn mark(&self) -> u64 {
        self.next_seq
    }

    /// Drops the entries on the lanes `synced` accepts that were recorded before `mark`: they
    /// were on those lanes' streams when the streams were synchronised, so they are done.
    /// Entries recorded since (by another thread, while the streams were being waited for)
    /// may still be running and stay.
    pub(crate) fn retire_synchronized(&mut self, mark: u64, synced: impl Fn(usize) -> bool) {
        self.pending.retain(|p| p.seq >= mark || !synced(p.lane));
    }

    /// Entries still pending.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPUTE: usize = 0;
    const H2D: usize = 1;
    const D2H: usize = 2;

    fn s(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    #[test]
    fn spans_overlap_only_when_they_share_a_byte() {
        assert!(s(0, 10).overlaps(s(9, 20)));
        assert!(!s(0, 10).overlaps(s(10, 20)));
        assert!(
            !s(5, 5).overlaps(s(0, 10)),
            "an empty span overlaps nothing"
        );
        assert_eq!(Span::at(usize::MAX - 1, 10).end, usize::MAX);
    }

    #[test]
    fn read_after_write_on_another_lane_waits() {
        let mut h = Hazards::new();
        h.record(H2D, &[], &[s(0, 100)], "copy-in");
        assert_eq!(
            h.waits_for(COMPUTE, &[s(50, 60)], &[s(1000, 1100)]),
            ["copy-in"]
        );
        // Disjoint bytes: no wait, so the kernel can overlap the copy.
        assert!(h
            .waits_for(COMPUTE, &[s(100, 200)], &[s(200, 300)])
            .is_empty());
    }

    #[test]
    fn write_after_read_and_write_after_write_wait() {
        let mut h = Hazards::new();
        h.record(D2H, &[s(0, 100)], &[], "copy-out");
        assert_eq!(h.waits_for(H2D, &[], &[s(0, 1)]), ["copy-out"], "WAR");
        assert!(h.waits_for(COMPUTE, &[s(0, 100)], &[]).is_empty(), "RAR");
        h.record(COMPUTE, &[], &[s(200, 300)], "kernel");
        assert_eq!(h.waits_for(H2D, &[], &[s(250, 260)]), ["kernel"], "WAW");
    }

    #[test]
    fn same_lane_needs_no_event() {
        let mut h = Hazards::new();
        h.record(COMPUTE, &[], &[s(0, 100)], "k1");
        assert!(h.waits_for(COMPUTE, &[s(0, 100)], &[s(0, 100)]).is_empty());
    }

    #[test]
    fn only_the_latest_conflict_per_lane_is_returned() {
        let mut h = Hazards::new();
        h.record(H2D, &[], &[s(0, 10)], "a");
        h.record(H2D, &[], &[s(10, 20)], "b");
        h.record(H2D, &[], &[s(100, 110)], "c");
        h.record(D2H, &[s(0, 20)], &[], "d");
        // Writing 0..20 conflicts with a, b (H2D writes) and d (D2H read): one per lane, latest.
        let mut got = h.waits_for(COMPUTE, &[], &[s(0, 20)]);
        got.sort();
        assert_eq!(got, ["b", "d"]);
    }

    #[test]
    fn retired_work_is_forgotten() {
        let mut h = Hazards::new();
        h.record(H2D, &[], &[s(0, 10)], 1);
        h.record(H2D, &[], &[s(0, 10)], 2);
        h.retire(|&t| t == 1);
        assert_eq!(h.len(), 1);
        assert_eq!(h.waits_for(COMPUTE, &[s(0, 10)], &[]), [2]);
        h.retire(|_| true);
        assert!(h.waits_for(COMPUTE, &[s(0, 10)], &[]).is_empty());
    }

    #[test]
    fn synchronising_retires_only_what_was_recorded_before_on_those_lanes() {
        let mut h = Hazards::new();
        h.record(H2D, &[], &[s(0, 10)], "before");
        h.record(99, &[s(0, 10)], &[], "peer");
        let mark = h.mark();
        h.record(H2D, &[], &[s(0, 10)], "meanwhile");
        h.retire_synchronized(mark, |lane| lane < 4);
        // The entry recorded after the mark and the one on another device's stream stay.
        assert_eq!(h.len(), 2);
        assert_eq!(h.waits_for(COMPUTE, &[s(0, 10)], &[]), ["meanwhile"]);
        assert_eq!(h.waits_for(H2D, &[], &[s(0, 10)]), ["peer"]);
    }
}
