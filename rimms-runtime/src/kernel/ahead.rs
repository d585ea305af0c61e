//! Copies ahead of the calls that need them: a held group's inputs when it is handed over
//! (and a merged group that runs as its rows land), and a written output's predicted next
//! copy.
//!
//! Both start copies that take time on a link which the caller would otherwise wait out (a
//! simulated one): an asynchronous acquire (`data::in_flight`) makes the copy and leaves the
//! waiting to the call that needs the bytes, which waits only for its own bytes. Values never
//! depend on them: a copy ahead is an acquire like any other, and one that proves useless
//! costs its bytes, which are counted.
//!
//! # Pieces
//!
//! A scope holds a device's calls until one arrives that does not continue them (`merge`);
//! the group then goes to the device's queue, where it may wait behind work already there.
//! Where the device's copies take time that a caller would wait out (a simulated link), the
//! group's inputs start moving at that moment, as StarPU prefetches a task's data when the
//! task is scheduled rather than when it starts: each piece's inputs are one asynchronous
//! acquire (`data::in_flight`), so the link carries them one after another while the device
//! works through what is ahead of the group. A merged group then runs as a few merged calls
//! over consecutive members instead of one, each waiting only for its own rows: the first
//! starts once its rows have landed while the link carries the next piece's. A group whose
//! calls run one by one (merging off) overlaps the same way, call by call. A group whose
//! output is predicted to leave over the link (see Prediction) runs in pieces for the same
//! reason at its other end: each piece's output starts out as soon as it is written, while
//! the next piece computes, so the copy out of the last piece is all a reader waits for.
//!
//! Why a copy may start at submission: a scope call borrows its views until the scope ends,
//! and views that exist at once never share a fragment with a written one (mutable views split
//! on fragment boundaries), so nothing can write the bytes a held group reads before the group
//! has run. The copy is an acquire like any other (planned, copied and committed under the
//! buffer's lock, with a lease held while it runs); only the waiting is left to the call that
//! needs the bytes. A copy that fails changes nothing, and the call that needs the bytes then
//! makes it again and reports what fails.
//!
//! How many pieces: enough that the first piece's rows land soon, few enough that each piece's
//! copies take at least [`LATENCIES`] link latencies (the latency is paid per copy), at most
//! [`MAX_PIECES`], and at least two calls each, so the merged calls stay few.
//!
//! # Direct calls
//!
//! A row-wise built-in called on the handle (`Runtime::fft`, `zip`, …) on a device behind a
//! timed link has nothing queued ahead of it, but its own work can still hide its copies:
//! where an input must cross the link, or the output is predicted to, the call is cut into
//! equal parts (at most 16, each passing the built-in's shape check, each written part on
//! fragment boundaries) and run as the group a scope would hold for them, in pieces as
//! above. The parts are views the call already holds, disjoint where written, and the group
//! runs before the call returns, so the borrows that made the call safe cover it. Only where
//! the copies are long against the link's latency: a ZIP of a few thousand elements has too
//! little work to hide them behind, and pieces would only add latencies.
//!
//! # Prediction
//!
//! A frame loop makes the same calls in the same order every frame, so where a buffer's bytes
//! went after their last write is where they will go after this one: each fragment keeps the
//! last four spaces that wrote it or copied it in (RIMMS's owner history,
//! `coherence::FragmentTable::predict_after`). Once a call has written an output and its
//! marks are made, the copy to the predicted space starts at once, overlapping whatever the
//! program does until the call (or host view) that needs the bytes, which then waits only for
//! what is left of it. A wrong prediction costs one copy, never a value: the bytes it brought
//! are valid copies, dropped or overwritten like any other.

use super::builtins::ScopeCall;
use super::merge::{self, Group, Joins, MergeRule, Part, Span};
use super::KernelArg;
use crate::coherence::Access;
use crate::hal::{Device, Result, SpaceId, Target};
use crate::machine::{DeviceEntry, Runtime, Shared};
use crate::space::LinkModel;
use crate::stats::Reason;
use std::ops::Range;

/// The most merged calls one group is cut into.
pub(crate) const MAX_PIECES: usize = 8;

/// Each piece's copies take at least this many link latencies, so latency adds at most a
/// quarter to the copies' time.
const LATENCIES: u64 = 4;

/// The most members a direct call is cut into: enough for [`MAX_PIECES`] pieces of two.
const DIRECT_MEMBERS: usize = 2 * MAX_PIECES;

/// The members (call indices) of piece `k` of `pieces` over `calls` calls.
pub(crate) fn members(k: usize, pieces: usize, calls: usize) -> Range<usize> {
    k * calls / pieces..(k + 1) * calls / pieces
}

/// Starts the copies of a held group's inputs into the device at `position`, piece by piece,
/// where its copies take time and prefetching is on; returns the pieces the group runs in
/// (1: as one call, or as its members one by one, with nothing started ahead). Outputs the
/// owner history predicts will leave over the link count toward the pieces too: each piece's
/// output then starts out while the next piece computes. `merged` holds the joins of the
/// rule the group runs under as one merged call, `None` when its calls run one by one (then
/// every call is its own piece). `first` are the group's first call's arguments (every
/// member's lie on their buffers, with their accesses and hints) and `span(k, i)` member
/// `k`'s range on argument `i`'s buffer, for `calls` members.
pub(crate) fn start_pieces(
    shared: &Shared,
    position: usize,
    merged: Option<&[Joins]>,
    first: &[KernelArg<'_>],
    calls: usize,
    span: impl Fn(usize, usize) -> Span,
) -> usize {
    let arity = first.len();
    if !shared.prefetches() || calls == 0 {
        return 1;
    }
    let entry = &shared.device_entries()[position];
    let Some(link) = shared.memory().timed_link(entry.space()) else {
        return 1;
    };
    let reads = || (0..arity).filter(|&i| first[i].access == Access::Read);
    let Some(joins) = merged else {
        for k in 0..calls {
            for i in reads() {
                let span = span(k, i);
                copy_ahead(entry, &first[i], span.start..span.start + span.len);
            }
        }
        return calls;
    };
    let union = |i: usize, piece: &Range<usize>| {
        let (first, last) = (span(piece.start, i), span(piece.end - 1, i));
        first.start..last.start + last.len
    };
    let whole = 0..calls;
    let copy_ns: u64 = reads()
        .filter(|&i| joins[i] == Joins::Concat)
        .map(|i| {
            let bytes = union(i, &whole);
            first[i].raw.transfer_ns(
                bytes.start,
                bytes.len(),
                entry.space(),
                entry.reaches(),
                Access::Read,
            )
        })
        .sum();
    // Outputs predicted to leave over the link go piece by piece too, each as soon as its
    // piece has written it (`copy_predicted`), so the link carries them while later pieces
    // compute.
    let copy_out_ns: u64 = (0..arity)
        .filter(|&i| first[i].access.writes() && joins[i] == Joins::Concat)
        .filter_map(|i| {
            let bytes = union(i, &whole);
            first[i]
                .raw
                .predicted_next(bytes.start, bytes.len(), entry.space())?;
            Some(link.cost_ns(bytes.len()))
        })
        .sum();
    let latency = link.latency_ns().max(1);
    let most = MAX_PIECES.min(calls / 2).max(1);
    let pieces = usize::try_from((copy_ns + copy_out_ns) / latency.saturating_mul(LATENCIES))
        .unwrap_or(most)
        .clamp(1, most);
    for k in 0..pieces {
        let piece = members(k, pieces, calls);
        for i in reads() {
            // A `Same` argument is one view for every member: it moves with the first piece.
            match joins[i] {
                Joins::Concat => copy_ahead(entry, &first[i], union(i, &piece)),
                Joins::Same if k == 0 => copy_ahead(entry, &first[i], union(i, &(0..1))),
                Joins::Same => {}
            }
        }
    }
    pieces
}

/// Where a direct call on `device` with arguments `parts` may be cut into parts: the device's
/// position, if copies ahead and merging are on, the device sits behind a link whose copies
/// take time (a simulated one), and all the call's bytes together would be long enough to
/// hide behind its pieces (its `DeviceEntry::cuts_from`, [`least_bytes_to_cut`] of that
/// link). Asked before the call is taken apart, so that other calls, the short ones of a
/// frame included, run as they came: through the API's dispatch, not a merge rule's.
#[inline]
pub(crate) fn cuts_calls_on(shared: &Shared, device: Device, parts: &[Part]) -> Option<usize> {
    if !shared.prefetches() || !shared.merges_calls() {
        return None;
    }
    let position = shared.position(device).ok()?;
    let entry = &shared.device_entries()[position];
    let bytes = parts
        .iter()
        .fold(0, |all: usize, p| all.saturating_add(p.len));
    // The short calls of a frame stop here, on one comparison; a device without a timed
    // link has no threshold.
    (bytes >= entry.cuts_from()?).then_some(position)
}

/// The least bytes a call must move over `link`, if any, for [`long_enough_to_cut`] to hold:
/// worked out once per device when the runtime is built (`DeviceEntry::cuts_from`), so a
/// direct call on a sim device compares its bytes with it, at submission and again for the
/// bytes that cross (`direct_group`), instead of working the link's cost out in floating
/// point. A search, not the inverse formula, so that the two agree to
/// the byte: the test holds of every count from this one up, the cost growing with the bytes.
pub(crate) fn least_bytes_to_cut(link: &LinkModel) -> Option<usize> {
    if !long_enough_to_cut(link, usize::MAX) {
        return None;
    }
    if long_enough_to_cut(link, 0) {
        return Some(0);
    }
    // The test holds at `hi` and not at `lo`, so the least count where it holds is in
    // `lo + 1..=hi`.
    let (mut lo, mut hi) = (0, usize::MAX);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if long_enough_to_cut(link, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Whether copies of `bytes` over `link` are long enough to hide behind a cut call: nothing
/// runs ahead of a direct call, so its copies can hide only behind its own work, which is
/// short where they are (a ZIP of a few thousand elements); so only where they take every
/// piece [`LATENCIES`] latencies twice over.
fn long_enough_to_cut(link: &LinkModel, bytes: usize) -> bool {
    let worth = LATENCIES * 2 * MAX_PIECES as u64;
    link.cost_ns(bytes) >= link.latency_ns().saturating_mul(worth)
}

/// Runs a row-wise built-in's direct call on the device at `position` (where
/// [`cuts_calls_on`] says it may be cut), `plain` being its plain merge rule (the call as it
/// came). Where an input must cross the device's link, or the output is predicted to, the
/// call runs as the group a scope would hold for its rows, cut into equal parts (see "Direct
/// calls" in the module docs); otherwise whole. The caller has asked its shape check.
#[cold]
#[inline(never)]
pub(crate) fn run_direct<'a, const N: usize, B: ScopeCall<'a, N>>(
    rt: &Runtime,
    position: usize,
    plain: &MergeRule,
    call: B,
) -> Result<()> {
    let shared = rt.shared();
    let entry = &shared.device_entries()[position];
    let (params, args) = (call.params(), call.args());
    match direct_group::<N, B>(shared, entry, position, params, &args) {
        Some(group) => group.run(rt, true),
        None => merge::run_whole(rt, entry.device(), plain, params, args),
    }
}

/// The group [`run_direct`] runs a call as, if it is worth cutting and cuts cleanly: every
/// `Concat` argument into equal parts that pass the built-in's shape check, each written one
/// on fragment boundaries (a part that wrote some of a fragment would copy the rest in
/// first). A fragment holds whole elements, so the written parts do, and the read ones,
/// which a row-wise built-in reads element for element, do too.
fn direct_group<'a, const N: usize, B: ScopeCall<'a, N>>(
    shared: &Shared,
    entry: &DeviceEntry,
    position: usize,
    params: merge::Params,
    args: &[KernelArg<'a>; N],
) -> Option<Group<'a>> {
    let space = entry.space();
    // Read-write arguments run unmerged in a group; a foreign buffer is the whole call's
    // error to report.
    let plain = args
        .iter()
        .all(|a| a.access != Access::ReadWrite && a.raw.belongs_to(shared.memory()));
    if !plain {
        return None;
    }
    // Only what crosses counts here: `cuts_calls_on` found all the bytes long enough, but
    // some of them may be resident already (a look at each one's fragments and owner history).
    let crossing: usize = (args.iter())
        .filter(|a| match a.access {
            Access::Read => !a.raw.resident_for(space, entry.reaches(), Access::Read),
            _ => a.len > 0 && a.raw.predicted_next(a.start, a.len, space).is_some(),
        })
        .map(|a| a.len)
        .sum();
    if entry.cuts_from().is_none_or(|from| crossing < from) {
        return None;
    }
    let joins = B::rules().first()?.joins;
    let cuts = |members: usize| {
        args.iter().zip(joins).all(|(a, joins)| {
            let part = a.len / members;
            let frag = a.raw.fragment_bytes().max(1);
            *joins == Joins::Same
                || (a.len % members == 0
                    && (!a.access.writes() || (a.start % frag == 0 && part % frag == 0)))
        })
    };
    let target = Target::On(entry.device());
    (2..=DIRECT_MEMBERS)
        .rev()
        .filter(|&members| cuts(members))
        .find_map(|members| {
            let group = Group::split(entry, position, B::rules(), params, args, members)?;
            group
                .check_first(|first| B::check_args(target, params, first))
                .then_some(group)
        })
}

/// Starts the copy of each written argument that `next` gives a place for (where its owner
/// history predicts it goes next, `dispatch::record_writes`) there, where that copy takes time
/// (see the module's "Prediction"); called once the call's writes are marked.
#[cold]
#[inline(never)]
pub(crate) fn copy_predicted<const N: usize>(
    args: &[KernelArg<'_>; N],
    spaces: &[SpaceId; N],
    next: &[Option<SpaceId>; N],
) {
    for ((a, &from), &to) in args.iter().zip(spaces).zip(next) {
        if let Some(to) = to {
            a.raw.send_to(a.start, a.len, from, to);
        }
    }
}

/// Starts bringing `bytes` of `a`'s buffer to where a call on `entry` would read them,
/// unless they are there already; a copy that fails is left to the call to make again.
fn copy_ahead(entry: &DeviceEntry, a: &KernelArg<'_>, bytes: Range<usize>) {
    // A placement hint names the space itself; the call acquires it there as it runs.
    if a.at.is_some() || bytes.is_empty() {
        return;
    }
    let (own, reach) = (entry.space(), entry.reaches());
    if a.raw.resident_for(own, reach, Access::Read) {
        return;
    }
    let space = a.raw.target_for(own, reach, Access::Read);
    // The acquire may move windows, so it holds a lease while it runs (`data::lease`), and
    // only while it runs: the subscriber told of a failure may use the buffer.
    let sent = {
        let _lease = a.raw.lease();
        a.raw
            .acquire_async(bytes.start, bytes.len(), space, &Reason::Prefetch)
    };
    if let Err(error) = sent {
        tracing::debug!(%error, "a copy ahead of its call failed; the call makes it again");
    }
}

#[cfg(test)]
mod tests {
    use super::{cuts_calls_on, least_bytes_to_cut, long_enough_to_cut, members, Part};
    use crate::backend::sim::SimConfig;
    use crate::coherence::Access;
    use crate::hal::Device;
    use crate::{LinkModel, Runtime};
    use std::time::Duration;

    /// A direct call on a sim card behind a timed link is taken to be cut exactly where the
    /// bytes of all its arguments pass the link's cost test, a byte either side of the
    /// device's threshold included; on the CPU, whose copies take no time, never.
    #[test]
    fn a_direct_call_is_cut_exactly_where_its_bytes_pass_the_cost_test() {
        let link = LinkModel {
            latency: Duration::from_micros(10),
            bytes_per_second: 20e6,
        };
        let rt = Runtime::builder()
            .sim(SimConfig {
                link,
                simulate_link: true,
                ..SimConfig::default()
            })
            .prefetch(true)
            .build()
            .expect("runtime");
        let shared = rt.shared();
        let from = least_bytes_to_cut(&link).expect("a slow link cuts long calls");
        let part = |len| Part {
            raw: std::ptr::null(),
            start: 0,
            len,
            access: Access::Read,
            at: None,
        };
        for bytes in [0, 1, from / 2, from - 1, from, from + 1, 2 * from] {
            let parts = [part(bytes / 2), part(bytes - bytes / 2)];
            let cut = cuts_calls_on(shared, Device::Sim(0), &parts);
            assert_eq!(
                cut.is_some(),
                long_enough_to_cut(&link, bytes),
                "{bytes} bytes, the threshold {from}"
            );
            if let Some(position) = cut {
                let entry = &shared.device_entries()[position];
                assert_eq!(entry.device(), Device::Sim(0));
                assert_eq!(entry.cuts_from(), Some(from), "the threshold is its link's");
            }
        }
        assert_eq!(cuts_calls_on(shared, Device::Cpu, &[part(2 * from)]), None);
    }

    /// The threshold a device keeps is where the link's cost test turns: it holds there and
    /// above, not just below, for links from a slow one to one with no latency at all.
    #[test]
    fn the_least_bytes_to_cut_are_where_the_cost_test_turns() {
        for (latency_ns, bytes_per_second) in [
            (1_000, 1e9),
            (2_500, 12.5e9),
            (1, 3.0),
            (40_000, 1e6),
            (0, 1e9),
            (1_000, 0.0),
        ] {
            let link = LinkModel {
                latency: Duration::from_nanos(latency_ns),
                bytes_per_second,
            };
            match least_bytes_to_cut(&link) {
                Some(from) => {
                    assert!(long_enough_to_cut(&link, from), "{link:?} at {from}");
                    for bytes in [from.saturating_add(1), from.saturating_mul(2), usize::MAX] {
                        assert!(long_enough_to_cut(&link, bytes), "{link:?} at {bytes}");
                    }
                    if from > 0 {
                        assert!(!long_enough_to_cut(&link, from - 1), "{link:?} at {from}");
                    }
                }
                None => {
                    for bytes in [0, 1 << 20, 1 << 40, usize::MAX] {
                        assert!(!long_enough_to_cut(&link, bytes), "{link:?} at {bytes}");
                    }
                }
            }
        }
    }

    #[test]
    fn pieces_cover_every_call_once_in_order() {
        for calls in 1..40 {
            for pieces in 1..=calls.min(8) {
                let all: Vec<usize> = (0..pieces)
                    .flat_map(|k| members(k, pieces, calls))
                    .collect();
                assert_eq!(
                    all,
                    (0..calls).collect::<Vec<_>>(),
                    "{calls} calls, {pieces} pieces"
                );
                assert!((0..pieces).all(|k| !members(k, pieces, calls).is_empty()));
            }
        }
    }
}
