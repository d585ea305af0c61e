//! NF's index of free runs: every maximal run of free units in the pool, in TLSF's size-class
//! lists, with its length written at its first unit and its first unit at its last.
//!
//! TLSF finds a fitting free block in O(1) because its free blocks sit in lists by size class,
//! two bitmaps say which lists are non-empty, and each block's length is written at its ends
//! (boundary tags), so a free merges with its neighbours without a search. This is the same,
//! with two differences:
//!
//! - **The tags live beside the pool**, in two arrays indexed by unit, not in headers inside
//!   the memory managed: a GPU's or an FPGA's pool cannot hold the allocator's bookkeeping.
//!   Both start zeroed, and zero is "none" in every field.
//! - **The tags say where filed runs start and end, and nothing else does**: a tag is cleared
//!   when its run leaves the index, so a unit starts a filed run iff its start tag has a
//!   length, and ends one iff its end tag names a start. A free asks the tags beside it
//!   whether its neighbours are filed runs to join, in O(1) and with no map of free units.
//!
//! Classes follow TLSF's two levels: lengths below 16 have a class each, and above, each power
//! of two is cut into 16 classes, so a class spans at most a sixteenth of its lengths. A
//! request takes the first run of the least class whose every length fits it (good fit, as
//! TLSF); only when no such class has a run does it walk the list of its own class, whose runs
//! may be shorter or longer, so that a request is refused only when no free run fits it.

/// Classes per power of two, as a shift: 16.
const SUB_BITS: u32 = 4;
const SUBS: usize = 1 << SUB_BITS;
/// First levels: lengths below 16 (level 0), then one per power of two up to 2^31.
const LEVELS: usize = 32 - SUB_BITS as usize + 1;

/// The class of a run of `len` units (`1 <= len < 2^32`): its first and second level.
///
/// Without a branch on `len < 16`: on the fragmenting workload of `benches/alloc_rivals.rs`
/// that branch goes both ways, and it is taken on every allocation and free.
#[inline(always)]
fn class_of(len: usize) -> (usize, usize) {
    let f = level(len);
    // Below 16 a length is its own class (`f` is 0); above, the class is the four bits under
    // its leading one, whose place is `f + SUB_BITS - 1`.
    (f, (len >> f.saturating_sub(1)) & (SUBS - 1))
}

/// The first level of `len`: 0 below 16, then 1 for 16 to 31, 2 for 32 to 63, and so on (the
/// number of bits of `len >> SUB_BITS`).
#[inline(always)]
fn level(len: usize) -> usize {
    // The place of the leading one, with lengths below 16 placed as 15: never of zero, so
    // LLVM needs no test for it (`leading_zeros` of `len >> 4` took one on every call).
    (len | (SUBS - 1)).ilog2() as usize - (SUB_BITS as usize - 1)
}

/// The least class whose every length is at least `n` (`1 <= n < 2^32`): `n` rounded up to
/// the next class boundary (below 16 every length is a boundary).
#[inline(always)]
fn fitting_class(n: usize) -> (usize, usize) {
    class_of(n + (1 << level(n).saturating_sub(1)) - 1)
}

/// A free run's tag at its first unit: its length and its neighbours in its class's list,
/// each as a unit plus one (0: none), so that a zeroed array is a valid empty one.
#[derive(Clone, Copy, Default)]
struct StartTag {
    len: u32,
    next: u32,
    prev: u32,
}

/// The free runs of a pool of fewer than 2^32 units, by class.
#[derive(Clone)]
pub(super) struct FreeRuns {
    /// Bit `f`: some class of level `f` has a run.
    levels: u32,
    /// Per level, bit `s`: class `(f, s)` has a run.
    classes: [u32; LEVELS],
    /// The first run of each class's list, as a unit plus one (0: empty).
    first: [[u32; SUBS]; LEVELS],
    /// At each free run's first unit plus one, the form the links take (`len` 0: no run starts
    /// there); slot 0 is scratch, written where a link is 0 (none) and never read, so that
    /// linking a run to a neighbour that may not exist needs no branch. One slot past the
    /// pool's units stays zero, so that the unit after the last starts no run, with no branch.
    starts: Vec<StartTag>,
    /// At each free run's last unit plus one: its first unit plus one (0: no run ends there).
    /// Slot 0 stays 0, so that the unit before unit 0 ends no run, with no branch.
    ends: Vec<u32>,
}

impl FreeRuns {
    /// An index over `units` units (fewer than 2^32), holding no run.
    pub(super) fn new(units: usize) -> FreeRuns {
        debug_assert!(u32::try_from(units).is_ok(), "a pool of under 2^32 units");
        FreeRuns {
            levels: 0,
            classes: [0; LEVELS],
            first: [[0; SUBS]; LEVELS],
            starts: vec![StartTag::default(); units + 2],
            ends: vec![0; units + 1],
        }
    }

    /// Files the free run `start..start + len` (`len >= 1`), at the head of its class's list.
    #[inline(always)]
    pub(super) fn insert(&mut self, start: usize, len: usize) {
        let (f, s) = class_of(len);
        let next = self.first[f][s];
        // Pools have fewer than 2^32 units (`new`), so units and lengths fit a u32.
        self.starts[start + 1] = StartTag {
            len: len as u32,
            next,
            prev: 0,
        };
        // With no next run (`next == 0`) this writes the scratch slot: no branch to mispredict.
        self.starts[next as usize].prev = start as u32 + 1;
        self.first[f][s] = start as u32 + 1;
        self.classes[f] |= 1 << s;
        self.levels |= 1 << f;
        self.ends[start + len] = start as u32 + 1;
    }

    /// Takes out the free run that starts at `start` (filed by [`FreeRuns::insert`]) and
    /// returns its length.
    #[inline(always)]
    pub(super) fn remove(&mut self, start: usize) -> usize {
        let StartTag { len, next, prev } = self.starts[start + 1];
        self.clear_tags(start, len as usize);
        if prev != 0 {
            self.starts[prev as usize].next = next;
            self.starts[next as usize].prev = prev;
        } else {
            let (f, s) = class_of(len as usize);
            self.unlink_head(f, s, next);
        }
        len as usize
    }

    /// Takes out a free run of at least `n` units (`1 <= n < 2^32`) and returns its first unit
    /// and its length, or `None` if there is none: the first run of the least non-empty class
    /// whose every length fits, else the first run long enough in `n`'s own class. The first
    /// heads its list, so it is taken off with no search for its class or its neighbours.
    #[inline(always)]
    pub(super) fn take_fit(&mut self, n: usize) -> Option<(usize, usize)> {
        let Some((f, s)) = self.least_fitting_class(n) else {
            let start = self.in_own_class(n)?;
            return Some((start, self.remove(start)));
        };
        let at = self.first[f][s] as usize;
        let StartTag { len, next, .. } = self.starts[at];
        self.clear_tags(at - 1, len as usize);
        self.unlink_head(f, s, next);
        Some((at - 1, len as usize))
    }

    /// Clears the tags of the run `start..start + len`: its units no longer start or end a
    /// filed run.
    #[inline(always)]
    fn clear_tags(&mut self, start: usize, len: usize) {
        self.starts[start + 1].len = 0;
        self.ends[start + len] = 0;
    }

    /// Takes the head off class `(f, s)`'s list, `next` (a unit plus one, 0: none) its new
    /// head.
    #[inline(always)]
    fn unlink_head(&mut self, f: usize, s: usize, next: u32) {
        self.first[f][s] = next;
        // The class's bit cleared where its list is now empty, and the level's where its
        // classes are, by value: a branch on it goes both ways on mixed sizes.
        self.classes[f] &= !(u32::from(next == 0) << s);
        self.levels &= !(u32::from(self.classes[f] == 0) << f);
        // With no next run this writes the scratch slot.
        self.starts[next as usize].prev = 0;
    }

    /// The first unit of the filed run that ends just before unit `unit` (`unit <= units`),
    /// if one does.
    #[inline(always)]
    pub(super) fn run_ending_before(&self, unit: usize) -> Option<usize> {
        (self.ends[unit] as usize).checked_sub(1)
    }

    /// The length of the filed run that starts at unit `unit` (`unit <= units`), 0 if none
    /// does.
    #[inline(always)]
    pub(super) fn run_starting_at(&self, unit: usize) -> usize {
        self.starts[unit + 1].len as usize
    }

    /// The first unit of the run [`FreeRuns::take_fit`] would take, leaving it filed.
    #[cfg(test)]
    fn fit(&self, n: usize) -> Option<usize> {
        match self.least_fitting_class(n) {
            Some((f, s)) => Some(self.first[f][s] as usize - 1),
            None => self.in_own_class(n),
        }
    }

    /// The least non-empty class whose every length is at least `n` (`1 <= n < 2^32`).
    #[inline(always)]
    fn least_fitting_class(&self, n: usize) -> Option<(usize, usize)> {
        let (f, s) = fitting_class(n);
        // `f < LEVELS <= 32` and `s < 16`: the shifts are in range.
        let here = self.classes.get(f).map_or(0, |c| c & (u32::MAX << s));
        if here != 0 {
            return Some((f, here.trailing_zeros() as usize));
        }
        let above = self.levels & u32::MAX.checked_shl(f as u32 + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let f = above.trailing_zeros() as usize;
        Some((f, self.classes[f].trailing_zeros() as usize))
    }

    /// The first run of at least `n` units in the class of `n` itself, by walking its list:
    /// the classes [`FreeRuns::fit`] looks at first skip it when it also holds shorter runs.
    #[cold]
    fn in_own_class(&self, n: usize) -> Option<usize> {
        let (f, s) = class_of(n);
        let mut at = self.first[f][s];
        while at != 0 {
            let tag = self.starts[at as usize];
            if tag.len as usize >= n {
                return Some(at as usize - 1);
            }
            at = tag.next;
        }
        None
    }

    /// The length of the longest run filed (0 for none): the longest run of the highest
    /// non-empty class, found by walking that class's list.
    pub(super) fn longest(&self) -> usize {
        if self.levels == 0 {
            return 0;
        }
        let f = (u32::BITS - 1 - self.levels.leading_zeros()) as usize;
        let s = (u32::BITS - 1 - self.classes[f].leading_zeros()) as usize;
        let mut longest = 0;
        let mut at = self.first[f][s];
        while at != 0 {
            let tag = self.starts[at as usize];
            longest = longest.max(tag.len as usize);
            at = tag.next;
        }
        longest
    }

    /// Every run filed, as (first unit, length), sorted; checks every list's links, tags and
    /// bitmaps on the way.
    #[cfg(test)]
    pub(super) fn all(&self) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        for f in 0..LEVELS {
            for s in 0..SUBS {
                let mut at = self.first[f][s];
                assert_eq!(at != 0, self.classes[f] >> s & 1 == 1, "class ({f}, {s})");
                let mut prev = 0;
                while at != 0 {
                    let tag = self.starts[at as usize];
                    let (start, len) = (at as usize - 1, tag.len as usize);
                    assert_eq!(class_of(len), (f, s), "run {start} of {len} in its class");
                    assert_eq!(tag.prev, prev, "run {start}: back link");
                    assert_eq!(
                        self.run_ending_before(start + len),
                        Some(start),
                        "run {start}: end tag"
                    );
                    runs.push((start, len));
                    prev = at;
                    at = tag.next;
                }
            }
            assert_eq!(self.levels >> f & 1 == 1, self.classes[f] != 0, "level {f}");
        }
        // No tag outside the runs: a unit starts or ends a filed run iff its tag says so.
        let start_tags = self.starts[1..].iter().filter(|t| t.len != 0).count();
        let end_tags = self.ends.iter().filter(|&&e| e != 0).count();
        assert_eq!(
            (start_tags, end_tags),
            (runs.len(), runs.len()),
            "stale tags"
        );
        runs.sort_unstable();
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length lies in a class whose bounds hold it, classes grow with length, and each
    /// spans at most a sixteenth of its least length; `fitting_class(n)` is the least class
    /// of lengths all at least `n`: checked length by length against bounds worked out here.
    #[test]
    fn classes_partition_lengths_and_fitting_rounds_up() {
        // Past the first levels every level is cut alike; Miri, which runs this test too,
        // checks fewer of them.
        let top: usize = if cfg!(miri) { 700 } else { 5000 };
        let mut least = std::collections::BTreeMap::new();
        let mut prev = (0, 0);
        for len in 1..=top {
            let c = class_of(len);
            assert!(c >= prev, "{len}");
            least.entry(c).or_insert(len);
            if len >= SUBS {
                let span = len - least[&c];
                assert!(span < least[&c] / SUBS, "{len}: class {c:?} spans too much");
            } else {
                assert_eq!(c, (0, len), "lengths below 16 have a class each");
            }
            prev = c;
        }
        for n in 1..=top * 4 / 5 {
            let want = *least
                .iter()
                .find(|&(_, &l)| l >= n)
                .map(|(c, _)| c)
                .expect("a class above");
            assert_eq!(fitting_class(n), want, "{n}");
        }
        assert_eq!(class_of(u32::MAX as usize).0, LEVELS - 1);
    }

    /// Good fit by class, the own class walked only when nothing above fits, the longest run,
    /// and the tags and lists after inserts and removals.
    #[test]
    fn fit_takes_the_least_class_that_fits_then_walks_its_own() {
        let mut r = FreeRuns::new(10_000);
        assert_eq!((r.fit(1), r.longest()), (None, 0));
        // From 32 up a class holds two lengths or more: 40 and 41 share one.
        assert_eq!(class_of(40), class_of(41));
        r.insert(100, 40);
        r.insert(5000, 300);
        r.insert(200, 41);
        r.insert(3000, 1);
        assert_eq!(r.all(), [(100, 40), (200, 41), (3000, 1), (5000, 300)]);
        assert_eq!(r.fit(1), Some(3000));
        // The least class with a run above 2's: that of 40 and 41, whose head is the latest.
        assert_eq!(r.fit(2), Some(200));
        assert_eq!(r.fit(40), Some(200));
        // 41 rounds up past its own class, to the 300.
        assert_eq!(r.fit(41), Some(5000));
        assert_eq!(r.fit(300), Some(5000));
        assert_eq!(r.fit(301), None);
        assert_eq!(r.longest(), 300);
        assert_eq!(r.remove(5000), 300);
        // Nothing above: the own class is walked, and its run of 41 found.
        assert_eq!(r.fit(41), Some(200));
        assert_eq!(r.longest(), 41);
        assert_eq!(r.run_ending_before(140), Some(100));
        assert_eq!(r.run_starting_at(100), 40);
        assert_eq!(r.remove(200), 41);
        // A removed run's tags are cleared.
        assert_eq!(
            (r.run_ending_before(241), r.run_starting_at(200)),
            (None, 0)
        );
        assert_eq!(r.fit(41), None);
        assert_eq!(r.fit(40), Some(100));
        assert_eq!(r.longest(), 40);
        // A removal from the middle of a list keeps its links.
        r.insert(7000, 40);
        r.insert(8000, 41);
        assert_eq!(r.remove(7000), 40);
        assert_eq!(r.all(), [(100, 40), (3000, 1), (8000, 41)]);
        assert_eq!(r.fit(41), Some(8000));
        r.remove(3000);
        r.remove(100);
        r.remove(8000);
        assert_eq!((r.all(), r.longest(), r.fit(1)), (vec![], 0, None));
    }
}
