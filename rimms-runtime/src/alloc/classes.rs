//! NF's run index: every free run inside a node, filed by size class, so that a multi-unit
//! request finds a fitting run from a few numbers kept per class instead of searching nodes.
//!
//! TLSF finds a fitting free block in O(1) because its free blocks sit in lists by size
//! class, a bitmap says which lists are non-empty, and each block's length is written at its
//! ends (boundary tags) so a free can merge with its neighbours without a search. NF keeps
//! its node table and adds the same for the free runs inside nodes:
//!
//! - **Boundary tags are the node's map.** A run's ends are where its bits meet a clear bit,
//!   and a trailing- or leading-zero count on one word finds them (`bitset::next_zero`,
//!   `bitset::run_start`), so NF needs no tag array beside the map it already keeps: the map
//!   is one cache line per node, which the take or free touches anyway.
//! - **Runs by class.** Each free run of `2..512` units that lies inside one node, from a
//!   clear bit (or the node's start) to a clear bit (or the node's end), is filed under the
//!   class of its length, as one bit at its first unit in that class's [`Levels`] over the
//!   pool's units. A class's set is ordered by address, and its lowest run is kept beside
//!   it (after a removal the next one is a `Levels::next_set`: O(1) in practice, like
//!   popping a TLSF list, but deterministic and packing runs towards unit 0).
//! - **Not filed:** runs of one unit (no multi-unit request fits them; single units have the
//!   cursor) and whole free nodes (512 units; the node table's `whole` summary has them).
//!   Leaving whole nodes out is also what keeps them whole: a request below a node takes a
//!   filed run when one fits, and breaks a whole node only when none does.
//!
//! Classes follow TLSF's two levels: the power of two of a length and four linear
//! subdivisions of it, so a class spans at most a quarter of its lengths. Lengths are below a
//! node's 512 units, so there are only 36 classes: the non-empty ones are one word's bits,
//! without TLSF's first-level bitmap, and first fit takes the least of their lowest runs.

use super::levels::Levels;

/// Lengths below this have a class each (`0..4`); above, a class is a power of two and a
/// quarter of it.
const EXACT: usize = 4;
/// Classes of the filed lengths `2..=511`: `0..4` exactly (0 and 1 stay empty), then four per
/// power of two from 4 to 256 (`class_of(511) == 35`).
pub(super) const CLASSES: usize = 36;
/// The shortest run filed: a single unit serves no multi-unit request.
const SHORTEST: usize = 2;
/// Runs of this length or more are whole nodes, which the node table tracks instead.
const LONGEST_EXCLUSIVE: usize = 512;

/// The class of a run of `len` units, `1 <= len <= 512`.
#[inline]
pub(super) fn class_of(len: usize) -> usize {
    if len < EXACT {
        return len;
    }
    // `len >= 4`, so its power of two `fl >= 2`.
    let fl = (usize::BITS - 1 - len.leading_zeros()) as usize;
    fl * 4 + ((len >> (fl - 2)) & 3)
}

/// The shortest length in class `c`: every run filed under `c` is at least this long.
#[inline]
pub(super) fn min_len(c: usize) -> usize {
    if c < EXACT {
        c
    } else {
        (4 + c % 4) << (c / 4 - 2)
    }
}

/// The smallest class whose every length is at least `n` (`1 <= n <= 512`).
#[inline]
fn fitting_class(n: usize) -> usize {
    let c = class_of(n);
    c + usize::from(min_len(c) < n)
}

/// Whether a run of `len` units is filed in the index.
#[inline]
fn filed(len: usize) -> bool {
    (SHORTEST..LONGEST_EXCLUSIVE).contains(&len)
}

/// Free runs inside nodes, by the class of their length, each as the bit of its first unit.
#[derive(Clone, Debug)]
pub(super) struct Runs {
    /// The first unit of each class's lowest run, `usize::MAX` for an empty class: first fit
    /// reads these instead of asking each class's set, which was most of its cost.
    lowest: [usize; CLASSES],
    /// Bit `c` set iff class `c` has a run: first fit visits only those.
    nonempty: u64,
    /// The first units of the runs of each class.
    starts: Vec<Levels>,
}

impl Runs {
    /// An index over a pool of `units` units, holding no run.
    pub(super) fn new(units: usize) -> Self {
        Self {
            lowest: [usize::MAX; CLASSES],
            nonempty: 0,
            // Classes 0 and 1 hold no filed length: no room for them.
            starts: (0..CLASSES)
                .map(|c| Levels::new(if c < SHORTEST { 0 } else { units }, false))
                .collect(),
        }
    }

    /// Files the run `start..start + len` (a maximal free run inside one node); a length the
    /// index does not file (one unit, a whole node) is ignored, so callers need not test it.
    #[inline(always)]
    pub(super) fn insert(&mut self, start: usize, len: usize) {
        if filed(len) {
            let c = class_of(len);
            self.starts[c].insert(start);
            self.lowest[c] = self.lowest[c].min(start);
            self.nonempty |= 1 << c;
        }
    }

    /// Takes out the run `start..start + len`, filed by [`Runs::insert`]; ignores lengths the
    /// index does not file, as `insert` does.
    #[inline(always)]
    pub(super) fn remove(&mut self, start: usize, len: usize) {
        if filed(len) {
            let c = class_of(len);
            self.starts[c].remove(start);
            if self.lowest[c] == start {
                self.set_lowest(c, start);
            }
        }
    }

    /// The run `old_start..old_start + old_len` becomes `new_start..new_start + new_len`
    /// (`new_start >= old_start`, and no other filed run starts in `old_start..new_start`: a
    /// run that loses its head or grows at its tail). When both lengths share a class, the
    /// class's lowest run follows the move without a search, and a run that only grew stays
    /// as it is; otherwise this is a removal and an insertion.
    #[inline(always)]
    pub(super) fn replace(
        &mut self,
        old_start: usize,
        old_len: usize,
        new_start: usize,
        new_len: usize,
    ) {
        let c = class_of(old_len);
        if filed(old_len) && filed(new_len) && c == class_of(new_len) {
            if old_start != new_start {
                self.starts[c].remove(old_start);
                self.starts[c].insert(new_start);
                // No run of the class starts between the two, so the moved run stays lowest.
                if self.lowest[c] == old_start {
                    self.lowest[c] = new_start;
                }
            }
            return;
        }
        self.remove(old_start, old_len);
        self.insert(new_start, new_len);
    }

    /// Class `c`'s lowest run is gone: the next is its first at or after `from`. Out of
    /// line: it searches the class's set, which the common removals do not need.
    #[inline(never)]
    fn set_lowest(&mut self, c: usize, from: usize) {
        match self.starts[c].next_set(from) {
            Some(start) => self.lowest[c] = start,
            None => {
                self.lowest[c] = usize::MAX;
                self.nonempty &= !(1 << c);
            }
        }
    }

    /// The first unit of the lowest filed run that is surely at least `n` units long
    /// (`2 <= n < 512`): the lowest run of all classes whose every length reaches `n`. The
    /// lowest run of each class is kept beside its set, so this is a minimum over the
    /// non-empty classes' numbers, found from a bitmap of them, with no search.
    ///
    /// First fit by address, not TLSF's good fit (the lowest run of the smallest such class):
    /// NF keeps runs inside nodes, and requests of a node or more need whole free nodes or runs
    /// across node boundaries, which packing runs towards unit 0 leaves at the end of the pool.
    /// On the fragmenting workload of `benches/alloc_rivals.rs`, good fit by class refused 683
    /// requests and first fit 3 (TLSF refuses none there, since its blocks have no node
    /// boundaries to respect).
    #[inline]
    pub(super) fn first_fit(&self, n: usize) -> Option<usize> {
        // `fitting_class(n) <= 36`: the shift is in range.
        let mut classes = self.nonempty & (u64::MAX << fitting_class(n));
        let mut lowest = usize::MAX;
        while classes != 0 {
            lowest = lowest.min(self.lowest[classes.trailing_zeros() as usize]);
            classes &= classes - 1;
        }
        (lowest != usize::MAX).then_some(lowest)
    }

    /// The first run at or after unit `from` in the class of `n` itself, whose runs may be
    /// shorter or longer than `n`: [`Runs::first_fit`] skips that class when it starts below
    /// `n`, so a caller that must not refuse what fits looks there by measuring each run.
    #[inline]
    pub(super) fn in_class_of(&self, n: usize, from: usize) -> Option<usize> {
        self.starts.get(class_of(n))?.next_set(from)
    }

    /// Whether the class of `n` holds only lengths of at least `n`, so that
    /// [`Runs::first_fit`] has already looked at it.
    #[inline]
    pub(super) fn class_fits(n: usize) -> bool {
        min_len(class_of(n)) == n
    }

    /// Every filed run, as (first unit, class), by class and then by address.
    #[cfg(test)]
    pub(super) fn all(&self) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        for (c, set) in self.starts.iter().enumerate() {
            let mut from = 0;
            while let Some(s) = set.next_set(from) {
                runs.push((s, c));
                from = s + 1;
            }
            assert_eq!(
                runs.iter()
                    .find(|&&(_, k)| k == c)
                    .map_or(usize::MAX, |&(s, _)| s),
                self.lowest[c],
                "class {c}: lowest run"
            );
            assert_eq!(
                self.nonempty >> c & 1 == 1,
                self.lowest[c] != usize::MAX,
                "class {c}: non-empty bit"
            );
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length lies in its class, classes grow with length, and a class spans at most a
    /// quarter of its least length (TLSF's four subdivisions): checked against the bounds
    /// worked out length by length.
    #[test]
    fn classes_partition_lengths_in_order() {
        assert_eq!(class_of(1), 1);
        assert_eq!(class_of(511), CLASSES - 1);
        assert_eq!(class_of(512), CLASSES);
        let mut prev = 0;
        for len in 1..=512usize {
            let c = class_of(len);
            assert!(c <= CLASSES, "{len}");
            assert!(c >= prev, "{len}");
            assert!(
                min_len(c) <= len,
                "{len}: class {c} starts at {}",
                min_len(c)
            );
            if c != prev {
                assert_eq!(min_len(c), len, "class {c} starts at {len}");
            }
            // The next class starts above `len` and at most a quarter of the class later.
            if len < 512 {
                assert!(len - min_len(c) < (min_len(c) / 4).max(1), "{len}");
            }
            prev = c;
        }
    }

    #[test]
    fn fitting_class_is_the_least_class_of_lengths_at_least_n() {
        // The classes some length falls in, worked out once (Miri runs this test too).
        let mut has_lengths = [false; CLASSES + 1];
        for l in 1..=512usize {
            has_lengths[class_of(l)] = true;
        }
        for n in 1..=512usize {
            let want = (0..=CLASSES)
                .find(|&c| has_lengths[c] && min_len(c) >= n)
                .expect("class 512 fits every n");
            assert_eq!(fitting_class(n), want, "{n}");
            assert_eq!(Runs::class_fits(n), class_of(n) == want, "{n}");
        }
    }

    /// The lowest run of the classes that surely fit wins, whatever its class; a run whose
    /// class also holds shorter lengths is left to `in_class_of`; runs of one unit and whole
    /// nodes are never filed.
    #[test]
    fn first_fit_takes_the_lowest_run_of_the_classes_that_fit() {
        let mut r = Runs::new(3000);
        assert_eq!(r.first_fit(2), None);
        r.insert(2000, 40);
        r.insert(2500, 40);
        r.insert(5, 300);
        r.insert(700, 20);
        r.insert(900, 1);
        r.insert(1024, 512);
        assert_eq!(r.first_fit(2), Some(5));
        assert_eq!(r.first_fit(41), Some(5));
        // 300 lies in the class that starts at 256, so first fit finds it for 256 at most,
        // and a request of 300 finds it by its own class.
        assert_eq!(r.first_fit(256), Some(5));
        assert_eq!(r.first_fit(257), None);
        assert_eq!(r.in_class_of(300, 0), Some(5));
        assert_eq!(r.first_fit(511), None);
        r.remove(5, 300);
        assert_eq!(r.first_fit(2), Some(700));
        assert_eq!(r.first_fit(20), Some(700));
        // 20 lies in the class that starts at 20, 21 needs the class of 40.
        assert_eq!(r.first_fit(21), Some(2000));
        assert_eq!(r.first_fit(41), None);
        r.remove(2000, 40);
        assert_eq!(r.first_fit(21), Some(2500));
        r.remove(2500, 40);
        r.insert(2500, 10);
        // 10 and 11 share a class that starts at 10: a request of 11 skips it in first fit.
        assert_eq!(r.first_fit(11), Some(700));
        assert_eq!(r.in_class_of(11, 0), Some(2500));
        assert_eq!(r.in_class_of(11, 2501), None);
        r.remove(900, 1);
        r.remove(1024, 512);
        assert_eq!(r.all(), [(2500, class_of(10)), (700, class_of(20))]);
        r.remove(700, 20);
        r.remove(2500, 10);
        assert_eq!(r.all(), []);
        assert_eq!(r.first_fit(2), None);
    }
}
