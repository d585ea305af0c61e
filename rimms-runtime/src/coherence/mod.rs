//! The coherence protocol: per fragment, which spaces hold the newest bytes.
//!
//! This module is the whole state machine, kept in one place the way StarPU keeps its
//! datawizard: it decides what must move and records what moved, and it never touches memory or
//! a backend. The caller (the buffer layer) asks for a plan, carries out the copies and fills
//! the plan lists, and only then commits it, so a copy that fails leaves the state as it was.
//!
//! Per fragment the state is a valid set, an owner (the space that wrote last) and a zero mark.
//! The zero mark means "the contents are all zeros": a space that needs the bytes gets them by
//! a fill in that space, never by a transfer, and the mark survives reads so every space can
//! fill its own. Read copies stay valid (MSI), so data read on a device and then on the host
//! is not copied to the device again.
//!
//! A per-buffer summary word makes the common case cheap: the spaces where *every* fragment is
//! valid, the spaces where *any* fragment is valid, and whether any fragment carries the zero
//! mark. A read of a resident buffer is then one load, one AND and one branch; a write to a
//! buffer held only by the writer's space is one load, one compare and one branch.

#[cfg(all(test, loom))]
mod loom_model;
mod published;
pub(crate) mod sync;
#[cfg(test)]
mod tests;

pub(crate) use published::{Locked, Published, WithTable};

pub use crate::hal::Access;
use crate::hal::{SpaceId, SpaceSet, MAX_SPACES};
use smallvec::SmallVec;
use std::ops::Range;

/// The coherence state of one fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentState {
    /// Spaces holding the newest bytes.
    pub valid: SpaceSet,
    /// The space that wrote last (or first materialised a zero fragment); `None` for a
    /// fragment that was never touched since allocation or reset.
    pub owner: Option<SpaceId>,
    /// The contents are all zeros: fresh or reset data.
    pub zero: bool,
}

impl FragmentState {
    const FRESH: FragmentState = FragmentState {
        valid: SpaceSet::EMPTY,
        owner: None,
        zero: true,
    };
}

const ANY_SHIFT: u32 = MAX_SPACES as u32;
const ZERO_BIT: u64 = 1 << (2 * MAX_SPACES);

/// A summary under which no access anywhere is resident: an evictor publishes it before it
/// checks a buffer's pins, so a call that pins after that check cannot take the fast path
/// into the block being evicted (see `data::evict`). Only [`resident`] reads a published
/// summary, and with no space holding every fragment it says no to every access.
pub(crate) const WITHDRAWN: u64 = 0;

/// Whether an access of `access` mode by `space` needs no work at all, judged from a buffer
/// summary alone. This is the lock-free fast path: when it says yes, nothing moves and no
/// state changes, whatever part of the buffer the access covers.
#[inline(always)]
pub(crate) fn resident(summary: u64, space: SpaceId, access: Access) -> bool {
    let bit = u64::from(space.bit());
    match access {
        // Every fragment is valid in `space`.
        Access::Read => summary & bit != 0,
        // Every fragment is valid in `space` and nowhere else, and none is marked zero: a write
        // leaves that state exactly as it is.
        Access::ReadWrite | Access::Write => summary == bit | bit << ANY_SHIFT,
    }
}

/// Which fragments a byte range touches, and whether its first and last fragments are only
/// partly covered (a partial write of a fragment must keep the bytes it does not write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FragmentSpan {
    pub frags: Range<usize>,
    pub first_partial: bool,
    pub last_partial: bool,
}

impl FragmentSpan {
    /// The span of `bytes` (inside a buffer of `buffer_bytes`) with fragments of `1 << shift`
    /// bytes. The buffer's last fragment may be short; covering up to the buffer's end covers
    /// it fully. An empty range spans no fragment.
    pub(crate) fn of(bytes: Range<usize>, shift: u32, buffer_bytes: usize) -> FragmentSpan {
        let frag = 1usize << shift;
        let first = bytes.start >> shift;
        if bytes.is_empty() {
            return FragmentSpan {
                frags: first..first,
                first_partial: false,
                last_partial: false,
            };
        }
        let last = (bytes.end - 1) >> shift;
        FragmentSpan {
            frags: first..last + 1,
            first_partial: bytes.start & (frag - 1) != 0,
            last_partial: bytes.end < ((last + 1) << shift).min(buffer_bytes),
        }
    }

    fn is_partial(&self, frag: usize) -> bool {
        (frag == self.frags.start && self.first_partial)
            || (frag + 1 == self.frags.end && self.last_partial)
    }
}

/// A run of contiguous fragments to copy from one space: one copy, however many fragments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    pub src: SpaceId,
    pub frags: Range<usize>,
}

/// What an acquire must do before its access can run in `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AcquirePlan {
    pub dst: SpaceId,
    /// Nearly always one run: inline, so a plan allocates nothing (it is made for every
    /// argument of a call that takes the locked path).
    pub moves: SmallVec<[Move; 2]>,
    /// Runs of zero-marked fragments to fill with zeros in `dst`.
    pub fills: SmallVec<[Range<usize>; 1]>,
}

impl AcquirePlan {
    pub(crate) fn is_empty(&self) -> bool {
        self.moves.is_empty() && self.fills.is_empty()
    }
}

/// What evicting one buffer's block in `space` must do: write back the fragments only it
/// holds, drop the rest. Carried out by the buffer layer, then committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EvictPlan {
    pub space: SpaceId,
    /// Runs of fragments whose last valid copy is in `space`: copied out before the block goes.
    pub write_back: Vec<Range<usize>>,
    /// Runs of fragments valid in `space` and elsewhere too (or zero-marked): dropped free.
    pub dropped: Vec<Range<usize>>,
}

/// The fragment table of one buffer, with per-space counts that keep the summary exact without
/// rescanning the table.
#[derive(Clone, Debug)]
pub(crate) struct FragmentTable {
    frags: Vec<FragmentState>,
    valid_count: [u32; MAX_SPACES],
    /// Bit `s` set iff `valid_count[s] > 0`: the summary looks only at these spaces (a buffer
    /// lives in two or three of the sixteen), and it is asked on every change of the table.
    held: u64,
    /// Bit `s` set iff `valid_count[s]` is every fragment: kept as the counts change, so that
    /// the summary, published each time the buffer's lock is given back, reads it whole.
    full: u64,
    zero_count: usize,
    /// Per fragment, the last four spaces that wrote it or had to copy it in: RIMMS's 16-bit
    /// owner history, newest in the low nibble, each space as its id + 1 (0: none yet; a 16th
    /// space is not recorded). It is what [`Self::predict_after`] reads.
    history: Vec<u16>,
}

/// One owner history's newest space, as stored (id + 1).
fn history_entry(space: SpaceId) -> Option<u16> {
    let id = u16::from(space.0);
    (id + 1 < 16).then_some(id + 1)
}

impl FragmentTable {
    /// `count` fresh fragments: zero, valid nowhere.
    pub(crate) fn new(count: usize) -> FragmentTable {
        FragmentTable {
            frags: vec![FragmentState::FRESH; count],
            valid_count: [0; MAX_SPACES],
            held: 0,
            full: 0,
            zero_count: count,
            history: vec![0; count],
        }
    }

    /// [`Self::new`], or `None` where this process cannot allocate `count` records: the
    /// length of a buffer is user input, and a huge one in small fragments must be an error,
    /// not an abort on a failed allocation.
    pub(crate) fn try_new(count: usize) -> Option<FragmentTable> {
        Some(FragmentTable {
            frags: filled(count, FragmentState::FRESH)?,
            valid_count: [0; MAX_SPACES],
            held: 0,
            full: 0,
            zero_count: count,
            history: filled(count, 0)?,
        })
    }

    /// Notes in `frags`' owner histories that `space` wrote them or copied them in (a use
    /// that repeats the newest entry is not noted again).
    pub(crate) fn note_use(&mut self, frags: Range<usize>, space: SpaceId) {
        let Some(entry) = history_entry(space) else {
            return;
        };
        // Without a branch, so that the compiler may do eight histories at a time: a call's
        // write or copy notes every fragment it covered.
        for h in &mut self.history[frags] {
            let noted = (*h << 4) | entry;
            *h = if *h & 0xF == entry { *h } else { noted };
        }
    }

    /// Notes that `space` wrote `frags` again before the copy its history predicted was used:
    /// entered even where `space` is the newest entry, so that the history predicts nothing
    /// after `space` until a read elsewhere shows where the bytes go.
    pub(crate) fn note_rewrite(&mut self, frags: Range<usize>, space: SpaceId) {
        let Some(entry) = history_entry(space) else {
            return;
        };
        for h in &mut self.history[frags] {
            *h = (*h << 4) | entry;
        }
    }

    /// Where `frags`, just written by `space`, are predicted to be needed next: in each one's
    /// owner history, the space that came right after `space`'s previous write or copy. Only
    /// when every fragment agrees, and never `space` itself; `None` where the history does
    /// not say.
    pub(crate) fn predict_after(&self, frags: Range<usize>, space: SpaceId) -> Option<SpaceId> {
        let entry = history_entry(space)?;
        let next = |h: u16| {
            // Entry 0 is this write; look for the one before it.
            (1..4)
                .find(|&i| (h >> (4 * i)) & 0xF == entry)
                .map(|i| (h >> (4 * (i - 1))) & 0xF)
                .filter(|&n| n != 0 && n != entry)
        };
        let mut hs = self.history.get(frags)?.iter();
        let first_history = *hs.next()?;
        let first = next(first_history)?;
        // The fragments of a buffer that moves as one share one history: equal to the
        // first's, a fragment agrees without its search.
        hs.all(|&h| h == first_history || next(h) == Some(first))
            .then(|| SpaceId((first - 1) as u8))
    }

    pub(crate) fn len(&self) -> usize {
        self.frags.len()
    }

    pub(crate) fn get(&self, frag: usize) -> Option<FragmentState> {
        self.frags.get(frag).copied()
    }

    /// The summary word that [`resident`] reads.
    pub(crate) fn summary(&self) -> u64 {
        if self.frags.is_empty() {
            // An empty buffer is valid everywhere.
            return (1 << MAX_SPACES) - 1;
        }
        let mut word = (self.held << ANY_SHIFT) | self.full;
        if self.zero_count > 0 {
            word |= ZERO_BIT;
        }
        word
    }

    fn set(&mut self, frag: usize, new: FragmentState) {
        self.count_change(self.frags[frag], new, 1);
        self.frags[frag] = new;
    }

    /// [`Self::set`] of every fragment of `frags` to one state. Neighbours mostly share their
    /// state, so the counts change once per run of equal old states rather than once per
    /// fragment: a call's write marks every fragment it covered (8 of 4 KiB in a 32 KiB
    /// buffer), and per fragment the walks over the two space sets cost about 55 instructions.
    fn set_all(&mut self, frags: Range<usize>, new: FragmentState) {
        if frags.is_empty() {
            // As the loop over no fragment did: an empty span may start past the last one.
            return;
        }
        let mut at = frags.start;
        while at < frags.end {
            let old = self.frags[at];
            let run = self.frags[at..frags.end]
                .iter()
                .take(u32::MAX as usize)
                .take_while(|&&s| s == old)
                .count();
            // At most `u32::MAX`, taken above: the per-space counts are `u32`.
            self.count_change(old, new, run as u32);
            at += run;
        }
        self.frags[frags].fill(new);
    }

    /// Updates the per-space and zero counts for `n` fragments going from `old` to `new`.
    fn count_change(&mut self, old: FragmentState, new: FragmentState, n: u32) {
        let (gone, came) = (old.valid.0 & !new.valid.0, new.valid.0 & !old.valid.0);
        self.full &= !u64::from(gone);
        for space in SpaceSet(gone).iter() {
            let count = &mut self.valid_count[space.index()];
            *count -= n;
            if *count == 0 {
                self.held &= !(1 << space.index());
            }
        }
        for space in SpaceSet(came).iter() {
            self.valid_count[space.index()] += n;
            self.held |= 1 << space.index();
            self.note_if_full(space);
        }
        let n = n as usize;
        self.zero_count = self.zero_count + n * usize::from(new.zero) - n * usize::from(old.zero);
    }

    /// What must move or be filled so that `access` over `span` can run in `dst`. `cost(src,
    /// dst)` ranks sources. Among equally cheap sources, a run being built keeps its source, and
    /// a new run starts from the source that holds the most of the fragments that follow (then
    /// the lowest space id): bytes one source can serve come in one copy.
    pub(crate) fn plan_acquire(
        &self,
        span: &FragmentSpan,
        dst: SpaceId,
        access: Access,
        cost: impl Fn(SpaceId, SpaceId) -> u64,
    ) -> AcquirePlan {
        let mut plan = AcquirePlan {
            dst,
            moves: SmallVec::new(),
            fills: SmallVec::new(),
        };
        if self.full & (1 << dst.index()) != 0 {
            // Every fragment is valid in `dst` already: nothing to move or fill, found
            // without looking at each (an acquire takes the locked path for other reasons
            // too, a copy ahead to settle or a summary bit held back).
            return plan;
        }
        if access == Access::Write {
            // A write needs bytes only in the fragments it covers in part, its first and its
            // last: the rest it overwrites whole. Only those two are looked at, where walking
            // the span cost a frame of the pulse-Doppler app on a sim card about 30 K
            // instructions for whole-buffer writes that needed nothing.
            let (first, end) = (span.frags.start, span.frags.end);
            if first >= end {
                // An empty span touches no fragment, whatever its partial flags say.
                return plan;
            }
            let edges = [first, end - 1];
            let edges = if first == end - 1 {
                &edges[..1]
            } else {
                &edges[..]
            };
            for &frag in edges.iter().filter(|&&frag| span.is_partial(frag)) {
                self.plan_fragment(span, frag, access, &mut plan, &cost);
            }
        } else if let Some(src) = self.sole_holder().filter(|_| !span.frags.is_empty()) {
            // Every fragment is valid in `src` alone and none is zero-marked: one copy of
            // the span, as the walk below would find it fragment by fragment (a read of a
            // large buffer that lives in one place is hundreds of them).
            plan.moves.push(Move {
                src,
                frags: span.frags.clone(),
            });
        } else {
            for frag in span.frags.clone() {
                self.plan_fragment(span, frag, access, &mut plan, &cost);
            }
        }
        plan
    }

    /// The one space that holds every fragment, where no other space holds any and none is
    /// zero-marked: then each fragment is valid there and only there.
    fn sole_holder(&self) -> Option<SpaceId> {
        let one = self.held.is_power_of_two() && self.full == self.held && self.zero_count == 0;
        // `held` has one bit, below `MAX_SPACES`, so the index fits a `u8`.
        one.then(|| SpaceId(self.held.trailing_zeros() as u8))
    }

    /// Adds to `plan` what fragment `frag`, whose bytes the access needs, must move or fill.
    #[inline(always)]
    fn plan_fragment(
        &self,
        span: &FragmentSpan,
        frag: usize,
        access: Access,
        plan: &mut AcquirePlan,
        cost: &impl Fn(SpaceId, SpaceId) -> u64,
    ) {
        let dst = plan.dst;
        let state = self.frags[frag];
        if state.valid.contains(dst) {
            return;
        }
        if state.zero || state.valid.is_empty() {
            // A non-zero fragment is always valid somewhere; filling is the only safe
            // reading of a table that broke that rule.
            debug_assert!(state.zero, "fragment {frag} is valid nowhere but not zero");
            match plan.fills.last_mut() {
                Some(run) if run.end == frag => run.end += 1,
                _ => plan.fills.push(frag..frag + 1),
            }
            return;
        }
        // One source is the common case and needs no ranking, which asks the links'
        // costs (about 100 instructions each, per fragment).
        let src = match state.valid.iter().next() {
            Some(only) if state.valid.len() == 1 => only,
            _ => self.ranked_source(span, access, frag, dst, plan, cost),
        };
        match plan.moves.last_mut() {
            Some(m) if m.src == src && m.frags.end == frag => m.frags.end += 1,
            _ => plan.moves.push(Move {
                src,
                frags: frag..frag + 1,
            }),
        }
    }

    /// The source of `frag`, valid in several spaces, that [`FragmentTable::plan_acquire`]
    /// copies from: the cheapest; on a tie, the source of the run being built (one copy, not
    /// two), else the one that holds the longest run of what follows.
    fn ranked_source(
        &self,
        span: &FragmentSpan,
        access: Access,
        frag: usize,
        dst: SpaceId,
        plan: &AcquirePlan,
        cost: &impl Fn(SpaceId, SpaceId) -> u64,
    ) -> SpaceId {
        let state = self.frags[frag];
        let cheapest = cheapest_source(state.valid, dst, cost);
        match plan.moves.last() {
            Some(m)
                if m.frags.end == frag
                    && m.src != cheapest
                    && state.valid.contains(m.src)
                    && cost(m.src, dst) <= cost(cheapest, dst) =>
            {
                m.src
            }
            Some(m) if m.frags.end == frag && m.src == cheapest => cheapest,
            _ => self.longest_tied_run(span, access, frag, dst, cheapest, cost),
        }
    }

    /// Among the sources of `frag` as cheap as `cheapest`, the one that holds the longest run of
    /// the fragments from `frag` on that the access must copy (ties: the lowest space id). Only
    /// looks ahead where sources tie, so it never picks a dearer one.
    fn longest_tied_run(
        &self,
        span: &FragmentSpan,
        access: Access,
        frag: usize,
        dst: SpaceId,
        cheapest: SpaceId,
        cost: &impl Fn(SpaceId, SpaceId) -> u64,
    ) -> SpaceId {
        let best = cost(cheapest, dst);
        let mut tied = self.frags[frag]
            .valid
            .iter()
            .filter(|&s| cost(s, dst) == best);
        let (Some(first), Some(_)) = (tied.next(), tied.next()) else {
            return cheapest;
        };
        let run = |src: SpaceId| {
            (frag..span.frags.end)
                .take_while(|&f| {
                    let state = self.frags[f];
                    let copied = (access != Access::Write || span.is_partial(f))
                        && !state.valid.contains(dst)
                        && !state.zero;
                    copied && state.valid.contains(src)
                })
                .count()
        };
        let mut chosen = (run(first), first);
        for src in self.frags[frag]
            .valid
            .iter()
            .filter(|&s| cost(s, dst) == best)
        {
            let length = run(src);
            if length > chosen.0 {
                chosen = (length, src);
            }
        }
        chosen.1
    }

    /// Records that the plan was carried out: its fragments are now valid in its space too.
    ///
    /// What [`Self::set`] would do per fragment, with the count kept once per plan: each
    /// fragment only gains `dst` (no space loses it, the zero marks stay), so only `dst`'s
    /// count and bit change.
    pub(crate) fn commit_acquire(&mut self, plan: &AcquirePlan) {
        let dst = plan.dst;
        let runs = plan.moves.iter().map(|m| m.frags.clone());
        let mut came = 0;
        for frag in runs.chain(plan.fills.iter().cloned()).flatten() {
            let state = &mut self.frags[frag];
            came += u32::from(!state.valid.contains(dst));
            state.valid = state.valid.with(dst);
            state.owner.get_or_insert(dst);
        }
        self.valid_count[dst.index()] += came;
        if came > 0 {
            self.held |= 1 << dst.index();
            self.note_if_full(dst);
        }
    }

    /// Sets `space`'s bit in `full` if every fragment is now valid there (the table's
    /// fragment count is its length, which a table never changes: refragmenting makes a new
    /// one).
    fn note_if_full(&mut self, space: SpaceId) {
        if self.valid_count[space.index()] as usize == self.frags.len() {
            self.full |= 1 << space.index();
        }
    }

    /// Notes in the owner histories that `plan`'s copies brought their fragments to its space
    /// on demand (a copy made ahead of its use is noted only when a read uses it).
    pub(crate) fn note_moves(&mut self, plan: &AcquirePlan) {
        for m in &plan.moves {
            self.note_use(m.frags.clone(), plan.dst);
        }
    }

    /// Records a write by `space` over `frags`: it alone now holds the newest bytes.
    pub(crate) fn mark_written(&mut self, frags: Range<usize>, space: SpaceId) {
        self.note_use(frags.clone(), space);
        self.set_all(
            frags,
            FragmentState {
                valid: SpaceSet::only(space),
                owner: Some(space),
                zero: false,
            },
        );
    }

    /// Records that a write by `space` over `frags` failed part-way: its copy can no longer be
    /// trusted where another valid copy exists (or the zero mark can recreate it). Where
    /// `space` held the only copy, that copy is all there is and stays.
    pub(crate) fn mark_failed(&mut self, frags: Range<usize>, space: SpaceId) {
        for frag in frags {
            let mut state = self.frags[frag];
            let others = SpaceSet(state.valid.0 & !space.bit());
            if !others.is_empty() || state.zero {
                state.valid = others;
                self.set(frag, state);
            }
        }
    }

    /// What dropping `space`'s copy of the buffer must do first: fragments whose only valid
    /// copy is there (and that the zero mark cannot recreate) are written back, in runs of
    /// neighbours (one copy each); every other fragment valid there is dropped for free.
    pub(crate) fn plan_evict(&self, space: SpaceId) -> EvictPlan {
        self.plan_evict_except(space, 0..0)
    }

    /// [`Self::plan_evict`] for the fragments outside `keep` only: what cutting `space`'s
    /// block down to `keep` must do first.
    pub(crate) fn plan_evict_except(&self, space: SpaceId, keep: Range<usize>) -> EvictPlan {
        let mut plan = EvictPlan {
            space,
            write_back: Vec::new(),
            dropped: Vec::new(),
        };
        for (frag, state) in self.frags.iter().enumerate() {
            if !state.valid.contains(space) || keep.contains(&frag) {
                continue;
            }
            let last_copy = state.valid == SpaceSet::only(space) && !state.zero;
            let runs = if last_copy {
                &mut plan.write_back
            } else {
                &mut plan.dropped
            };
            match runs.last_mut() {
                Some(run) if run.end == frag => run.end += 1,
                _ => runs.push(frag..frag + 1),
            }
        }
        plan
    }

    /// Records that the plan was carried out: `space` holds nothing any more, and the
    /// written-back fragments are valid in `target` (which a plan with write-backs needs).
    pub(crate) fn commit_evict(&mut self, plan: &EvictPlan, target: Option<SpaceId>) {
        let space = plan.space;
        let written = plan.write_back.iter().cloned().flatten();
        for frag in plan.dropped.iter().cloned().flatten().chain(written) {
            let mut state = self.frags[frag];
            state.valid = SpaceSet(state.valid.0 & !space.bit());
            if let Some(target) = target.filter(|_| state.valid.is_empty() && !state.zero) {
                state.valid = state.valid.with(target);
            }
            if state.owner == Some(space) {
                state.owner = state.valid.iter().next().or(state.owner);
            }
            self.set(frag, state);
        }
    }

    /// `hete_Reset`: every fragment becomes zero and valid nowhere; no byte moves.
    pub(crate) fn reset(&mut self) {
        // Where the bytes went is still where they will go: the history stays.
        let history = std::mem::take(&mut self.history);
        *self = FragmentTable::new(self.frags.len());
        self.history = history;
    }

    /// `hete_Reset` of `frags` only: they become zero and valid nowhere; no byte moves.
    pub(crate) fn reset_frags(&mut self, frags: Range<usize>) {
        self.set_all(frags, FragmentState::FRESH);
    }

    /// Whether merging groups of `factor` fragments would lose track of data: a group whose
    /// fragments share no valid space and are not all zero has to be gathered somewhere first.
    pub(crate) fn merge_needs_gather(&self, factor: usize) -> bool {
        self.frags.chunks(factor).any(|group| {
            let common = group.iter().fold(u16::MAX, |acc, f| acc & f.valid.0);
            common == 0 && !group.iter().all(|f| f.zero)
        })
    }

    /// The table for fragments `factor` times larger (`factor` a power of two). Call only when
    /// [`Self::merge_needs_gather`] is false.
    pub(crate) fn merged(&self, factor: usize) -> FragmentTable {
        let groups = self.frags.chunks(factor);
        let mut table = FragmentTable::new(groups.len());
        for (i, group) in groups.enumerate() {
            let valid = SpaceSet(group.iter().fold(u16::MAX, |acc, f| acc & f.valid.0));
            let zero = group.iter().all(|f| f.zero);
            let owner = group[0]
                .owner
                .filter(|o| group.iter().all(|f| f.owner == Some(*o)));
            let owner = owner.or_else(|| valid.iter().next());
            table.set(i, FragmentState { valid, owner, zero });
        }
        table
    }

    /// The table for fragments `factor` times smaller, `count` of them: each inherits the
    /// state of the fragment it was part of. `None` where the records cannot be allocated
    /// ([`Self::try_new`]).
    pub(crate) fn split(&self, factor: usize, count: usize) -> Option<FragmentTable> {
        let mut table = FragmentTable::try_new(count)?;
        for i in 0..count {
            table.set(i, self.frags[i / factor]);
        }
        Some(table)
    }
}

/// `count` copies of `value`, or `None` where they cannot be allocated.
pub(crate) fn filled<T: Clone>(count: usize, value: T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(count).ok()?;
    v.resize(count, value);
    Some(v)
}

fn cheapest_source(
    valid: SpaceSet,
    dst: SpaceId,
    cost: &impl Fn(SpaceId, SpaceId) -> u64,
) -> SpaceId {
    let mut best: Option<(u64, SpaceId)> = None;
    for src in valid.iter() {
        let c = cost(src, dst);
        if best.is_none_or(|(b, _)| c < b) {
            best = Some((c, src));
        }
    }
    // `valid` is non-empty (the caller checked), so a best source exists.
    best.map_or(SpaceId::HOST, |(_, s)| s)
}
