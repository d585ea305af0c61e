//! NF's size-class index: which nodes may hold a free run of a given length.
//!
//! TLSF finds a fitting free block in O(1) because its free blocks sit in lists by size
//! class, and a bitmap says which lists are non-empty. NF keeps its node table and adds the
//! same for nodes: each node with room is filed under the class of its longest-run bound
//! (`NodeHeader::max_run`, at least the node's longest free run). A request of `n` units then
//! takes the lowest node of the non-empty classes whose every member's bound is at least `n`:
//! trailing-zero counts on the class bitmap and one `Levels` lookup per such class, instead of
//! a walk over the node headers from node 0. (The lowest node, not TLSF's best fit by class:
//! see [`Classes::fitting`].)
//!
//! Classes follow TLSF's two levels: the power of two of a length (its first level) and four
//! linear subdivisions of it (the second), so a class spans at most a quarter of its lengths.
//! Lengths are at most a node's 512 units, so the 37 classes fit one 64-bit word and the
//! first-level bitmap of TLSF is not needed: the non-empty classes are one word's bits.

use super::levels::Levels;

/// Lengths below this have a class each (`0..4`); above, a class is a power of two and a
/// quarter of it.
const EXACT: usize = 4;
/// Classes of lengths `1..=512`: 0..4 exactly, then four per power of two from 4 to 256, and
/// 512 alone (`class_of(512)`).
pub(super) const CLASSES: usize = 37;

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

/// Nodes filed by the class of their longest-run bound.
#[derive(Clone, Debug)]
pub(super) struct Classes {
    /// Bit `c` set iff class `c` has a node.
    nonempty: u64,
    /// The nodes of each class.
    nodes: Vec<Levels>,
}

impl Classes {
    /// An index over `nodes` nodes, all in no class.
    pub(super) fn new(nodes: usize) -> Self {
        Self {
            nonempty: 0,
            nodes: (0..CLASSES).map(|_| Levels::new(nodes, false)).collect(),
        }
    }

    /// Files `node` under the class of `bound` (`1..=512`).
    #[inline]
    pub(super) fn insert(&mut self, node: usize, bound: usize) {
        let c = class_of(bound);
        self.nodes[c].insert(node);
        self.nonempty |= 1 << c;
    }

    /// Takes `node` out of the class of `bound`, where [`Classes::insert`] filed it.
    #[inline]
    pub(super) fn remove(&mut self, node: usize, bound: usize) {
        let c = class_of(bound);
        let set = &mut self.nodes[c];
        set.remove(node);
        if set.next_set(0).is_none() {
            self.nonempty &= !(1 << c);
        }
    }

    /// Refiles `node` from the class of `old` to that of `new`, if they differ.
    #[inline]
    pub(super) fn refile(&mut self, node: usize, old: usize, new: usize) {
        if class_of(old) != class_of(new) {
            self.remove(node, old);
            self.insert(node, new);
        }
    }

    /// The lowest node of all classes whose every bound is at least `n`, if any: a node that
    /// holds a run of `n` unless its bound is loose. One lookup per non-empty class of those,
    /// found from the class bitmap, never a walk over nodes.
    ///
    /// The lowest node, not the lowest of the smallest class (TLSF's best fit): NF keeps runs
    /// inside nodes, and requests of a node or more need whole free nodes, which only packing
    /// runs towards node 0 leaves (on the fragmenting workload of `benches/alloc_rivals.rs`,
    /// best fit by class left 119 refusals where this leaves 3).
    #[inline]
    pub(super) fn fitting(&self, n: usize) -> Option<usize> {
        let mut above = self.nonempty & (u64::MAX << fitting_class(n));
        let mut lowest: Option<usize> = None;
        while above != 0 {
            let c = above.trailing_zeros() as usize;
            above &= above - 1;
            if let Some(node) = self.nodes[c].next_set(0) {
                lowest = Some(lowest.map_or(node, |l| l.min(node)));
            }
        }
        lowest
    }

    /// The first node at or after `from` in the class of `n` itself, whose bounds may be
    /// shorter or longer than `n`.
    #[inline]
    pub(super) fn in_class_of(&self, n: usize, from: usize) -> Option<usize> {
        self.nodes[class_of(n)].next_set(from)
    }

    /// Whether the class of `n` holds only lengths of at least `n`, so that
    /// [`Classes::fitting`] has already looked at it.
    #[inline]
    pub(super) fn class_fits(n: usize) -> bool {
        min_len(class_of(n)) == n
    }

    #[cfg(test)]
    pub(super) fn contains(&self, node: usize, bound: usize) -> bool {
        (0..CLASSES).all(|c| self.nodes[c].contains(node) == (c == class_of(bound)))
            && self.nonempty & (1 << class_of(bound)) != 0
    }

    #[cfg(test)]
    pub(super) fn holds_nothing(&self, node: usize) -> bool {
        self.nodes.iter().all(|set| !set.contains(node))
    }

    #[cfg(test)]
    pub(super) fn nonempty_matches(&self) -> bool {
        (0..CLASSES).all(|c| (self.nonempty >> c & 1 == 1) == self.nodes[c].next_set(0).is_some())
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
        assert_eq!(class_of(512), CLASSES - 1);
        let mut prev = 0;
        for len in 1..=512usize {
            let c = class_of(len);
            assert!(c < CLASSES, "{len}");
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
        for n in 1..=512usize {
            let want = (0..CLASSES)
                .find(|&c| (1..=512).any(|l| class_of(l) == c) && min_len(c) >= n)
                .expect("class 512 fits every n");
            assert_eq!(fitting_class(n), want, "{n}");
            assert_eq!(Classes::class_fits(n), class_of(n) == want, "{n}");
        }
    }

    #[test]
    fn fitting_takes_the_lowest_node_of_the_classes_that_fit() {
        let mut c = Classes::new(300);
        assert_eq!(c.fitting(1), None);
        c.insert(200, 40);
        c.insert(250, 40);
        c.insert(5, 512);
        c.insert(7, 20);
        assert_eq!(c.fitting(20), Some(5));
        assert_eq!(c.fitting(21), Some(5));
        assert_eq!(c.fitting(48), Some(5));
        c.remove(5, 512);
        assert_eq!(c.fitting(20), Some(7));
        assert_eq!(c.fitting(21), Some(200));
        assert_eq!(c.fitting(41), None);
        c.remove(200, 40);
        assert_eq!(c.fitting(21), Some(250));
        c.refile(250, 40, 10);
        assert_eq!(c.fitting(21), None);
        assert_eq!(c.in_class_of(10, 0), Some(250));
        assert_eq!(c.in_class_of(10, 251), None);
        assert!(c.nonempty_matches());
        assert!(c.contains(250, 10) && c.contains(7, 20) && c.holds_nothing(5));
    }
}
