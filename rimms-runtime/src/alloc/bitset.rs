//! The flat bitmap baseline and its bit-run primitives.
//!
//! [`BitsetAllocator`] is what a straightforward implementation looks like: one bit per unit
//! and a first-fit scan from unit 0. It is kept honest (the scan skips fully allocated words
//! and fully free words a word at a time, and stops as soon as a run is long enough) so that
//! the benchmark against [`super::NfAllocator`] measures the design, not a strawman.
//!
//! Convention everywhere in `alloc`: a set bit means *free*. Bits past the end of the pool are
//! kept clear, so every scan stops at the pool's end without a separate bounds check.

use super::{check_keep, check_range, FreeError, UnitAllocator};
use std::ops::Range;

/// Index of the first set bit in `from..limit`, or `limit` if there is none.
///
/// `limit` must not exceed `words.len() * 64`. Bounding the scan matters: validating a
/// one-unit free must not scan to the end of a large pool.
#[inline]
pub(super) fn next_one(words: &[u64], from: usize, limit: usize) -> usize {
    scan(words, from, limit, false)
}

/// Index of the first clear bit in `from..limit`, or `limit` if there is none.
#[inline]
pub(super) fn next_zero(words: &[u64], from: usize, limit: usize) -> usize {
    scan(words, from, limit, true)
}

#[inline(always)]
fn scan(words: &[u64], from: usize, limit: usize, invert: bool) -> usize {
    let flip = if invert { u64::MAX } else { 0 };
    if from >= limit {
        return limit;
    }
    let mut w = from / 64;
    // `from < limit <= words.len() * 64`, so `w` is in range.
    let mut x = (words[w] ^ flip) & (u64::MAX << (from % 64));
    loop {
        if x != 0 {
            return (w * 64 + x.trailing_zeros() as usize).min(limit);
        }
        w += 1;
        if w * 64 >= limit {
            return limit;
        }
        match words.get(w) {
            Some(&next) => x = next ^ flip,
            None => return limit,
        }
    }
}

/// Start of the first run of at least `n` set bits (`n >= 1`), or `Err(longest)` with the
/// length of the longest run seen, which is then the longest run of all (every run was
/// shorter than `n`, and each was measured up to its end).
///
/// Jumps run to run: a `next_one` to the start of a free run, a `next_zero` to its end, so the
/// cost is one step per run plus one per word crossed, never one per bit.
#[inline]
pub(super) fn find_run(words: &[u64], n: usize) -> Result<usize, usize> {
    let end = words.len() * 64;
    let mut p = 0;
    let mut longest = 0;
    loop {
        let s = next_one(words, p, end);
        if s >= end {
            return Err(longest);
        }
        // Only need to know whether the run reaches `s + n`; do not measure past that.
        let limit = s.saturating_add(n).min(end);
        let e = next_zero(words, s, limit);
        if e - s >= n {
            return Ok(s);
        }
        longest = longest.max(e - s);
        if e >= end {
            return Err(longest);
        }
        // Bit `e` is clear (the run ended before `limit`), so the next search moves on.
        p = e;
    }
}

/// Calls `f(word, mask)` for each word overlapped by `start..start + len` (`len >= 1`), with
/// the mask of the overlapped bits.
#[inline]
pub(super) fn for_each_mask(start: usize, len: usize, mut f: impl FnMut(usize, u64)) {
    let last_bit = start + len - 1;
    let (first, last) = (start / 64, last_bit / 64);
    // The masks of the first and last words, worked out once: the loop below then has no
    // per-word branch on where the word lies.
    let head = u64::MAX << (start % 64);
    let tail = u64::MAX >> (63 - last_bit % 64);
    if first == last {
        return f(first, head & tail);
    }
    f(first, head);
    for w in first + 1..last {
        f(w, u64::MAX);
    }
    f(last, tail);
}

/// First set bit in `start..start + len`, if any.
#[inline]
pub(super) fn first_one_in(words: &[u64], start: usize, len: usize) -> Option<usize> {
    let limit = start + len;
    let i = next_one(words, start, limit);
    (i < limit).then_some(i)
}

/// Length of the longest run of set bits across `words`, taken as one bitmap.
pub(super) fn longest_run(words: impl IntoIterator<Item = u64>) -> usize {
    let mut best = 0;
    let mut cur = 0;
    for w in words {
        if w == u64::MAX {
            cur += 64;
            continue;
        }
        let t = w.trailing_ones();
        best = best.max(cur + t as usize);
        // `t < 64`, and bit 0 of `x` is the clear bit that ended that run.
        let mut x = w >> t;
        while x != 0 {
            x >>= x.trailing_zeros();
            let ones = x.trailing_ones();
            best = best.max(ones as usize);
            // `x` was shifted right by at least one, so `ones < 64`.
            x >>= ones;
        }
        cur = w.leading_ones() as usize;
    }
    best.max(cur)
}

/// Flat bitmap, first-fit from unit 0. The measured baseline for [`super::NfAllocator`].
#[derive(Clone)]
pub struct BitsetAllocator {
    capacity: usize,
    free: usize,
    /// One bit per unit, set = free; bits at and past `capacity` stay clear.
    words: Vec<u64>,
}

impl std::fmt::Debug for BitsetAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitsetAllocator")
            .field("capacity", &self.capacity)
            .field("free_units", &self.free)
            .finish_non_exhaustive()
    }
}

impl BitsetAllocator {
    /// Refuses `start..start + units` unless it is in the pool and wholly allocated.
    #[inline]
    fn check_allocated(&self, start: usize, units: usize) -> Result<(), FreeError> {
        check_range(start, units, self.capacity)?;
        match first_one_in(&self.words, start, units) {
            Some(unit) => Err(FreeError::NotAllocated { unit }),
            None => Ok(()),
        }
    }

    /// Sets `start..start + units` (in the pool, allocated) free.
    #[inline]
    fn set_free(&mut self, start: usize, units: usize) {
        for_each_mask(start, units, |w, m| self.words[w] |= m);
        self.free += units;
    }
}

impl UnitAllocator for BitsetAllocator {
    fn with_capacity(capacity: usize) -> Self {
        let mut words = vec![u64::MAX; capacity.div_ceil(64)];
        if capacity % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last = (1u64 << (capacity % 64)) - 1;
            }
        }
        Self {
            capacity,
            free: capacity,
            words,
        }
    }

    // Inlinable like NF's hot paths, so the benchmark compares scans, not call overhead.
    #[inline]
    fn alloc(&mut self, units: usize) -> Option<usize> {
        if units == 0 || units > self.free {
            return None;
        }
        let start = find_run(&self.words, units).ok()?;
        // The run lies inside the pool: bits past `capacity` are clear.
        for_each_mask(start, units, |w, m| self.words[w] &= !m);
        self.free -= units;
        Some(start)
    }

    #[inline]
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        self.check_allocated(start, units)?;
        self.set_free(start, units);
        Ok(())
    }

    fn shrink(&mut self, start: usize, units: usize, keep: Range<usize>) -> Result<(), FreeError> {
        self.check_allocated(start, units)?;
        check_keep(start, units, &keep)?;
        for (first, len) in [(start, keep.start), (start + keep.end, units - keep.end)] {
            if len > 0 {
                self.set_free(first, len);
            }
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn free_units(&self) -> usize {
        self.free
    }

    fn largest_free_run(&self) -> usize {
        longest_run(self.words.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `for_each_mask` against setting bits one at a time: every range of up to three words
    /// that starts in the first two, so ranges inside one word, ending on a word boundary and
    /// spanning a whole middle word are all covered; each word is visited once, in order.
    #[test]
    fn masks_cover_exactly_the_range() {
        // Every start natively; under Miri, which runs this a thousand times slower, the
        // starts at and around word boundaries only.
        let starts: Vec<usize> = if cfg!(miri) {
            vec![0, 1, 62, 63, 64, 65, 127]
        } else {
            (0..128).collect()
        };
        for start in starts {
            for len in 1..=192 - start {
                let mut want = [0u64; 3];
                for i in start..start + len {
                    want[i / 64] |= 1 << (i % 64);
                }
                let (mut got, mut visited) = ([0u64; 3], Vec::new());
                for_each_mask(start, len, |w, m| {
                    got[w] |= m;
                    visited.push(w);
                });
                assert_eq!(got, want, "{start}+{len}");
                let words: Vec<usize> = (start / 64..=(start + len - 1) / 64).collect();
                assert_eq!(visited, words, "{start}+{len}");
            }
        }
    }

    /// `next_zero` against walking bit by bit, at every position of patterns whose runs start
    /// and end inside words, on word boundaries and across them.
    #[test]
    fn run_ends_match_a_walk_bit_by_bit() {
        let bit = |words: &[u64], i: usize| words[i / 64] >> (i % 64) & 1 == 1;
        let patterns: [[u64; 3]; 5] = [
            [0, u64::MAX << 3, u64::MAX],
            [u64::MAX, 0xf0f0_f0f0_f0f0_f0f0, 0],
            [1 << 63, u64::MAX, 1],
            [0, 0x0ff0, u64::MAX >> 1],
            [u64::MAX; 3],
        ];
        for words in patterns {
            for at in 0..=192 {
                let end = (at..192).find(|&i| !bit(&words, i)).unwrap_or(192);
                assert_eq!(
                    next_zero(&words, at, 192),
                    end,
                    "next_zero({words:x?}, {at})"
                );
            }
        }
    }

    /// Zero units is refused and changes nothing; the Debug form names capacity and free units.
    #[test]
    fn zero_units_are_refused_and_debug_shows_the_counts() {
        let mut a = BitsetAllocator::with_capacity(100);
        assert_eq!(a.alloc(0), None);
        assert_eq!(
            a.alloc(3),
            Some(0),
            "nothing was taken for the refused request"
        );
        assert_eq!(
            format!("{a:?}"),
            "BitsetAllocator { capacity: 100, free_units: 97, .. }"
        );
    }

    #[test]
    fn primitives() {
        // Free: 1..3 and 5..128.
        let words = [u64::MAX << 5 | 0b110, u64::MAX, 0];
        assert_eq!(next_one(&words, 0, 192), 1);
        assert_eq!(next_one(&words, 3, 192), 5);
        assert_eq!(next_one(&words, 3, 4), 4);
        assert_eq!(next_one(&words, 128, 192), 192);
        assert_eq!(next_one(&[0, 0, 1], 8, 130), 128);
        assert_eq!(next_one(&[0, 0, 1], 8, 120), 120);
        assert_eq!(next_zero(&words, 5, 192), 128);
        assert_eq!(next_zero(&words, 5, 100), 100);
        assert_eq!(find_run(&words, 2), Ok(1));
        assert_eq!(find_run(&words, 3), Ok(5));
        assert_eq!(find_run(&words, 123), Ok(5));
        assert_eq!(find_run(&words, 124), Err(123));
        assert_eq!(longest_run(words), 123);
        assert_eq!(longest_run([0b0111_1011u64]), 4);
        assert_eq!(longest_run([0b11u64 << 62, 0b111]), 5);
        assert_eq!(longest_run([0u64; 3]), 0);
        assert_eq!(longest_run([u64::MAX; 3]), 192);
    }

    #[test]
    fn capacity_not_a_multiple_of_64() {
        let mut a = BitsetAllocator::with_capacity(100);
        assert_eq!(a.largest_free_run(), 100);
        assert_eq!(a.alloc(101), None);
        assert_eq!(a.alloc(100), Some(0));
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.free(0, 100), Ok(()));
        assert_eq!(a.alloc(60), Some(0));
        assert_eq!(a.alloc(41), None);
        assert_eq!(a.alloc(40), Some(60));
        assert_eq!(a.free_units(), 0);
    }

    #[test]
    fn runs_cross_words_and_frees_are_checked() {
        let mut a = BitsetAllocator::with_capacity(256);
        assert_eq!(a.alloc(60), Some(0));
        assert_eq!(a.alloc(10), Some(60)); // crosses the word boundary at 64
        assert_eq!(a.alloc(130), Some(70)); // spans three words
        assert_eq!(a.free(60, 10), Ok(()));
        assert_eq!(a.free(60, 10), Err(FreeError::NotAllocated { unit: 60 }));
        assert_eq!(a.free(55, 10), Err(FreeError::NotAllocated { unit: 60 }));
        assert_eq!(
            a.free(250, 7),
            Err(FreeError::OutOfRange {
                start: 250,
                units: 7,
                capacity: 256
            })
        );
        assert_eq!(
            a.free(usize::MAX, 2),
            Err(FreeError::OutOfRange {
                start: usize::MAX,
                units: 2,
                capacity: 256
            })
        );
        assert_eq!(a.free(3, 0), Err(FreeError::ZeroUnits { start: 3 }));
        assert_eq!(a.free_units(), 256 - 190);
        assert_eq!(a.largest_free_run(), 56);
        assert_eq!(a.alloc(11), Some(200));
        assert_eq!(a.alloc(10), Some(60));
    }

    #[test]
    fn empty_pool() {
        let mut a = BitsetAllocator::with_capacity(0);
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.largest_free_run(), 0);
        assert!(a.free(0, 1).is_err());
    }
}
