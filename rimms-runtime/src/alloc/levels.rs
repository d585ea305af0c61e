//! A hierarchical bitset: the NF allocator's summary over nodes.
//!
//! Level 0 holds one bit per item; each level above holds one bit per *non-zero word* of the
//! level below, up to a level of a single word. "Next set bit at or after `i`" then costs one
//! masked trailing-zero count per level on the way up and one per level on the way down,
//! whatever the length: 64² = 4,096 items need two levels, 64³ = 262,144 need three. A flat
//! bitmap would instead scan `len / 64` words when the set bits are sparse, which is exactly
//! the nearly-full-pool case the allocator must stay fast in.

use super::bitset::next_zero;

#[derive(Clone, Debug)]
pub(super) struct Levels {
    len: usize,
    /// Level 0, one bit per item. Kept apart from the upper levels so the common case (the
    /// answer is in the word asked about) is one load, not a walk through a `Vec` of `Vec`s.
    bits: Vec<u64>,
    /// `upper[0]` has bit `j` set iff `bits[j] != 0`; `upper[k + 1]` summarises `upper[k]`
    /// the same way. The last level has one word; `upper` is empty when `bits` has at most
    /// one word. Bits past the end of each level stay clear.
    upper: Vec<Vec<u64>>,
}

/// `bits` words for `len` bits, all set or all clear.
fn level(len: usize, all_set: bool) -> Vec<u64> {
    let mut words = vec![if all_set { u64::MAX } else { 0 }; len.div_ceil(64)];
    if all_set && len % 64 != 0 {
        if let Some(last) = words.last_mut() {
            *last = (1u64 << (len % 64)) - 1;
        }
    }
    words
}

impl Levels {
    /// `len` items, all set if `all_set`, else all clear.
    pub(super) fn new(len: usize, all_set: bool) -> Self {
        let bits = level(len, all_set);
        let mut upper = Vec::new();
        let mut below = bits.len();
        while below > 1 {
            upper.push(level(below, all_set));
            below = below.div_ceil(64);
        }
        Self { len, bits, upper }
    }

    #[cfg(test)]
    pub(super) fn contains(&self, i: usize) -> bool {
        i < self.len && self.bits[i / 64] & (1u64 << (i % 64)) != 0
    }

    /// Whether no bit is set: one word, the top level's.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        let top = self.upper.last().unwrap_or(&self.bits);
        top.iter().all(|&w| w == 0)
    }

    /// Sets bit `i` (`i < len`).
    #[inline]
    pub(super) fn insert(&mut self, i: usize) {
        debug_assert!(i < self.len);
        // `i < len`, so the word is in range.
        let word = &mut self.bits[i / 64];
        let was_empty = *word == 0;
        *word |= 1u64 << (i % 64);
        // Upper levels change only when a word turns non-empty: rare, so kept out of line.
        if was_empty {
            self.propagate_insert(i / 64);
        }
    }

    #[cold]
    fn propagate_insert(&mut self, word_index: usize) {
        let mut idx = word_index;
        for level in &mut self.upper {
            // `idx` is a word index of the level below, so a bit index of this one.
            let word = &mut level[idx / 64];
            let was_empty = *word == 0;
            *word |= 1u64 << (idx % 64);
            if !was_empty {
                break;
            }
            idx /= 64;
        }
    }

    /// Clears bit `i` (`i < len`).
    #[inline]
    pub(super) fn remove(&mut self, i: usize) {
        debug_assert!(i < self.len);
        let word = &mut self.bits[i / 64];
        *word &= !(1u64 << (i % 64));
        if *word == 0 {
            self.propagate_remove(i / 64);
        }
    }

    #[cold]
    fn propagate_remove(&mut self, word_index: usize) {
        let mut idx = word_index;
        for level in &mut self.upper {
            let word = &mut level[idx / 64];
            *word &= !(1u64 << (idx % 64));
            if *word != 0 {
                break;
            }
            idx /= 64;
        }
    }

    /// The first set bit at or after `from`, if any.
    #[inline]
    pub(super) fn next_set(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        // Fast path: a set bit in `from`'s own word (the next-fit cursor usually has one).
        let masked = self.bits.get(w)? & (u64::MAX << (from % 64));
        if masked != 0 {
            return Some(w * 64 + masked.trailing_zeros() as usize);
        }
        let next = self.next_word(0, w + 1)?;
        let word = *self.bits.get(next)?;
        Some(next * 64 + word.trailing_zeros() as usize)
    }

    /// The first non-zero word at or after `from` of the level `upper[level]` summarises:
    /// the next set bit of `upper[level]`, found the same way, one level up at a time.
    #[inline(never)]
    fn next_word(&self, level: usize, from: usize) -> Option<usize> {
        // No summary above this level: it is the single top word, already looked at.
        let words = self.upper.get(level)?;
        let w = from / 64;
        let masked = words.get(w)? & (u64::MAX << (from % 64));
        if masked != 0 {
            return Some(w * 64 + masked.trailing_zeros() as usize);
        }
        let next = self.next_word(level + 1, w + 1)?;
        let word = *words.get(next)?;
        Some(next * 64 + word.trailing_zeros() as usize)
    }

    /// How many consecutive bits are set starting at `start`, counting at most `max`.
    #[inline]
    pub(super) fn run_len(&self, start: usize, max: usize) -> usize {
        let limit = start.saturating_add(max).min(self.len);
        if start < limit {
            next_zero(&self.bits, start, limit) - start
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_set_walks_levels() {
        for len in [0usize, 1, 63, 64, 65, 4095, 4096, 4097, 300_000] {
            let mut l = Levels::new(len, false);
            assert_eq!(l.next_set(0), None);
            let picks: Vec<usize> = [0, 1, 63, 64, 200, 4095, 4096, 299_999]
                .into_iter()
                .filter(|&i| i < len)
                .collect();
            assert!(l.is_empty(), "{len}");
            for &i in &picks {
                l.insert(i);
                assert!(!l.is_empty(), "{len}");
            }
            for &i in &picks {
                assert!(l.contains(i));
                assert_eq!(l.next_set(i), Some(i));
            }
            let mut at = 0;
            for &i in &picks {
                assert_eq!(l.next_set(at), Some(i));
                at = i + 1;
            }
            assert_eq!(l.next_set(at), None);
            for &i in &picks {
                l.remove(i);
            }
            assert_eq!(l.next_set(0), None);
            assert!(l.is_empty(), "{len}");
            assert!(l
                .bits
                .iter()
                .chain(l.upper.iter().flatten())
                .all(|&w| w == 0));
        }
    }

    /// All set, at lengths that fill their last word exactly and that do not: every item is
    /// there and none past the end, at every level.
    #[test]
    fn all_set_holds_exactly_the_items_at_any_length() {
        for len in [1, 63, 64, 65, 128, 4096, 4097] {
            let l = Levels::new(len, true);
            assert!((0..len).all(|i| l.contains(i)), "{len}");
            assert_eq!(l.run_len(0, usize::MAX), len, "{len}");
            assert_eq!(l.next_set(len - 1), Some(len - 1), "{len}");
            assert_eq!(l.next_set(len), None, "{len}");
        }
    }

    /// Searches that start past the first 4,096 items and find nothing in their own word go
    /// through the summary's later words, and land on the right item.
    #[test]
    fn next_set_far_into_a_large_level() {
        let mut l = Levels::new(300_000, false);
        for i in [5000, 70_000, 299_999] {
            l.insert(i);
        }
        for (from, want) in [
            (0, Some(5000)),
            (4100, Some(5000)),
            (5001, Some(70_000)),
            (70_001, Some(299_999)),
        ] {
            assert_eq!(l.next_set(from), want, "from {from}");
        }
    }

    #[test]
    fn all_set_and_runs() {
        let mut l = Levels::new(130, true);
        assert_eq!(l.next_set(129), Some(129));
        assert_eq!(l.next_set(130), None);
        assert_eq!(l.run_len(0, 500), 130);
        assert_eq!(l.run_len(120, 5), 5);
        l.remove(64);
        assert_eq!(l.run_len(0, 500), 64);
        assert_eq!(l.run_len(64, 3), 0);
        assert_eq!(l.next_set(64), Some(65));
        for i in 65..130 {
            l.remove(i);
        }
        assert_eq!(l.next_set(64), None);
        assert_eq!(l.upper[0][0], 1);
    }
}
