//! The node–fragment (NF) allocator. The design and its refusal rule are described in the
//! [module documentation](super).

use super::bitset::{first_one_in, for_each_mask, for_each_mask_while, longest_run};
use super::runs::FreeRuns;
use super::{check_range, FreeError, UnitAllocator};

/// Units per node: one 64-byte cache line of free bits.
const NODE_UNITS: usize = 512;
const NODE_WORDS: usize = NODE_UNITS / 64;

/// The most units a pool may have: the run index keeps units and lengths in 32 bits.
pub const MAX_UNITS: usize = u32::MAX as usize;

/// Single units freed and kept back from the run index for the next single-unit requests.
/// Few, so that what they keep apart is little: with 16, the fragmenting workload of
/// `benches/alloc_rivals.rs` still grants a larger run at its end than TLSF does (with 64 or
/// more it granted far less, the kept units cutting the runs they would have joined).
const KEPT: usize = 16;

/// A node's free map, set = free. Aligned to a cache line so that a node's whole map is one
/// line and no two nodes share one.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct NodeMap([u64; NODE_WORDS]);

/// NF: node maps for which units are free, an index of the free runs, and the single units
/// freed last.
#[derive(Clone)]
pub struct NfAllocator {
    capacity: usize,
    /// Units free, the kept ones included.
    free: usize,
    /// Set = free and filed in `runs`; bits past `capacity` stay clear. A kept unit's bit is
    /// clear, as if allocated, so that no run is filed through it.
    maps: Vec<NodeMap>,
    /// Every maximal run of set bits in `maps`.
    runs: FreeRuns,
    /// Single units freed and not yet filed, the last freed last: a single-unit request takes
    /// the last one back (`kept[..kept_len]`).
    kept: [u32; KEPT],
    kept_len: usize,
    /// Set for each kept unit, so that freeing one again is refused.
    kept_bits: Vec<u64>,
}

impl std::fmt::Debug for NfAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfAllocator")
            .field("capacity", &self.capacity)
            .field("free_units", &self.free)
            .field("nodes", &self.maps.len())
            .field("kept", &self.kept_len)
            .finish_non_exhaustive()
    }
}

impl NfAllocator {
    // Inline across crates too: called, they cost a single-unit free a fifth of its
    // instructions (`benches/alloc_rivals.rs` is such a caller).
    #[inline(always)]
    fn words(&self) -> &[u64] {
        bytemuck::cast_slice(&self.maps)
    }

    #[inline(always)]
    fn words_mut(&mut self) -> &mut [u64] {
        bytemuck::cast_slice_mut(&mut self.maps)
    }

    #[inline(always)]
    fn is_filed_free(&self, unit: usize) -> bool {
        self.words()[unit / 64] >> (unit % 64) & 1 == 1
    }

    /// Allocates `units` units of the free run that starts at `start` (at least that long):
    /// its head, filing the rest.
    #[inline(always)]
    fn take(&mut self, start: usize, units: usize) {
        let len = self.runs.remove(start);
        if len > units {
            self.runs.insert(start + units, len - units);
        }
        let words = self.words_mut();
        for_each_mask(start, units, |w, m| words[w] &= !m);
        self.free -= units;
    }

    /// Files `start..start + units` (allocated or kept until now, and counted free already)
    /// as free, joined with the free runs on either side.
    #[inline(always)]
    fn release(&mut self, start: usize, units: usize) {
        let words = self.words_mut();
        for_each_mask(start, units, |w, m| words[w] |= m);
        self.file_joined(start, units);
    }

    /// Files `start..start + units`, set free in the maps already, as a run joined with the
    /// free runs on either side (whose bits lie outside it, so setting it first changes
    /// nothing here).
    #[inline(always)]
    fn file_joined(&mut self, start: usize, units: usize) {
        let end = start + units;
        let mut first = start;
        if start > 0 && self.is_filed_free(start - 1) {
            first = self.runs.start_of_run_ending_at(start - 1);
            self.runs.remove(first);
        }
        let mut last_end = end;
        if end < self.capacity && self.is_filed_free(end) {
            last_end = end + self.runs.remove(end);
        }
        self.runs.insert(first, last_end - first);
    }

    /// A run of `units` found only once the kept single units are filed: they are, and the
    /// index asked again, so that a request is refused only when no run fits it.
    #[cold]
    #[inline(never)]
    fn fit_after_filing_kept(&mut self, units: usize) -> Option<usize> {
        if self.kept_len == 0 {
            return None;
        }
        while let Some(unit) = self.take_kept() {
            self.release(unit, 1);
        }
        self.runs.fit(units)
    }

    /// The single unit kept last, no longer kept (still counted free).
    #[inline(always)]
    fn take_kept(&mut self) -> Option<usize> {
        self.kept_len = self.kept_len.checked_sub(1)?;
        let unit = self.kept[self.kept_len] as usize;
        self.kept_bits[unit / 64] &= !(1 << (unit % 64));
        Some(unit)
    }

    /// A request that no kept unit serves, out of line so that the single-unit fast path in
    /// [`UnitAllocator::alloc`] stays a few instructions with no frame to set up.
    #[inline(never)]
    fn alloc_run(&mut self, units: usize) -> Option<usize> {
        if units == 0 || units > self.free {
            return None;
        }
        let start = match self.runs.fit(units) {
            Some(start) => start,
            None => self.fit_after_filing_kept(units)?,
        };
        self.take(start, units);
        Some(start)
    }

    /// A free in range that is not kept back (more than one unit, or no room to keep it),
    /// out of line for the same reason as [`NfAllocator::alloc_run`].
    #[inline(never)]
    fn free_run(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        // Checked and set in one pass over the words: a word is set only when every unit of
        // the range in it is allocated (neither filed nor kept).
        let kept = &self.kept_bits;
        let words: &mut [u64] = bytemuck::cast_slice_mut(&mut self.maps);
        let refused_at = for_each_mask_while(start, units, |w, m| {
            let allocated = (words[w] | kept[w]) & m == 0;
            if allocated {
                words[w] |= m;
            }
            allocated
        });
        if let Some(word) = refused_at {
            return Err(self.refuse_free(start, units, word));
        }
        self.free += units;
        self.file_joined(start, units);
        Ok(())
    }

    /// Undoes what [`NfAllocator::free_run`] set before the word at which it found a unit of
    /// `start..start + units` not allocated, and names the first such unit. The words before
    /// that one passed the check, so the range's bits in them were clear: clearing them again
    /// leaves the maps as they were.
    #[cold]
    #[inline(never)]
    fn refuse_free(&mut self, start: usize, units: usize, word: usize) -> FreeError {
        let words = self.words_mut();
        for_each_mask(start, units, |w, m| {
            if w < word {
                words[w] &= !m;
            }
        });
        // The word refused holds such a unit, so one is found.
        let unit = self.first_not_allocated(start, units).unwrap_or(start);
        FreeError::NotAllocated { unit }
    }

    /// The first unit of `start..start + units` that is not allocated (free in the maps, or
    /// kept), if any. Out of line: only a refused free needs the unit.
    #[cold]
    #[inline(never)]
    fn first_not_allocated(&self, start: usize, units: usize) -> Option<usize> {
        let filed = first_one_in(self.words(), start, units);
        let kept = first_one_in(&self.kept_bits, start, units);
        filed.into_iter().chain(kept).min()
    }
}

impl UnitAllocator for NfAllocator {
    /// A pool of `capacity` units, at most [`MAX_UNITS`]: a larger one is cut to that.
    fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.min(MAX_UNITS);
        let nodes = capacity.div_ceil(NODE_UNITS);
        let mut a = Self {
            capacity,
            free: capacity,
            maps: vec![NodeMap::default(); nodes],
            runs: FreeRuns::new(capacity),
            kept: [0; KEPT],
            kept_len: 0,
            kept_bits: vec![0; nodes * NODE_WORDS],
        };
        if capacity > 0 {
            let words = a.words_mut();
            for_each_mask(0, capacity, |w, m| words[w] |= m);
            a.runs.insert(0, capacity);
        }
        a
    }

    #[inline]
    fn alloc(&mut self, units: usize) -> Option<usize> {
        if units == 1 {
            // The single unit freed last: its node's map is likely still in cache.
            if let Some(unit) = self.take_kept() {
                self.free -= 1;
                return Some(unit);
            }
        }
        self.alloc_run(units)
    }

    #[inline]
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        check_range(start, units, self.capacity)?;
        if units != 1 || self.kept_len == KEPT {
            return self.free_run(start, units);
        }
        let (w, bit) = (start / 64, 1 << (start % 64));
        if (self.words()[w] | self.kept_bits[w]) & bit != 0 {
            return Err(FreeError::NotAllocated { unit: start });
        }
        self.free += 1;
        // `start < capacity <= MAX_UNITS`: it fits a u32.
        self.kept[self.kept_len] = start as u32;
        self.kept_len += 1;
        self.kept_bits[w] |= bit;
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn free_units(&self) -> usize {
        self.free
    }

    fn largest_free_run(&self) -> usize {
        if self.kept_len == 0 {
            return self.runs.longest();
        }
        // Kept units may join filed runs: the maps and the kept units laid end to end are the
        // pool's bitmap of free units.
        longest_run(self.words().iter().zip(&self.kept_bits).map(|(f, k)| f | k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the run index against a scan of the maps, and the kept units and counts.
    fn check(a: &NfAllocator) {
        let words = a.words();
        // Read off the words directly: Miri runs these checks after every step of the
        // property test, and a bit through `is_filed_free` costs it a cast of every map.
        let filed_free = |unit: usize| words[unit / 64] >> (unit % 64) & 1 == 1;
        let kept = &a.kept[..a.kept_len];
        for &unit in kept {
            let unit = unit as usize;
            assert!(unit < a.capacity, "kept unit {unit} in the pool");
            assert!(!filed_free(unit), "kept unit {unit} not filed");
            assert_eq!(a.kept_bits[unit / 64] >> (unit % 64) & 1, 1, "{unit}");
        }
        let kept_bits: u32 = a.kept_bits.iter().map(|w| w.count_ones()).sum();
        assert_eq!(kept_bits as usize, a.kept_len, "one bit per kept unit");
        for unit in a.capacity..words.len() * 64 {
            assert!(!filed_free(unit), "unit {unit} past the end is never free");
        }
        let filed: u32 = words.iter().map(|w| w.count_ones()).sum();
        assert_eq!(filed as usize + a.kept_len, a.free, "free units");
        // Every maximal run of filed units, as (first unit, length), found bit by bit.
        let mut scanned = Vec::new();
        let mut unit = 0;
        while unit < a.capacity {
            let len = (unit..a.capacity).take_while(|&u| filed_free(u)).count();
            if len > 0 {
                scanned.push((unit, len));
            }
            unit += len.max(1);
        }
        assert_eq!(a.runs.all(), scanned, "the run index against a scan");
    }

    #[test]
    fn node_map_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<NodeMap>(), 64);
        assert_eq!(std::mem::align_of::<NodeMap>(), 64);
    }

    /// A free joins the free runs on either side into one run, across node boundaries too.
    #[test]
    fn a_free_joins_its_free_neighbours_into_one_run() {
        let mut a = NfAllocator::with_capacity(2048);
        // An empty pool hands out the head of its one run each time.
        let [x, y, z, w] = [100, 100, 100, 400].map(|n| a.alloc(n).expect("fits"));
        assert_eq!([x, y, z, w], [0, 100, 200, 300]);
        a.free(x, 100).expect("free");
        a.free(z, 100).expect("free");
        assert_eq!(a.runs.all(), [(0, 100), (200, 100), (700, 1348)]);
        // Between two free runs: one run of three.
        a.free(y, 100).expect("free");
        assert_eq!(a.runs.all(), [(0, 300), (700, 1348)]);
        check(&a);
        // 300..700 crosses the boundary at 512: the whole pool is one run again.
        a.free(w, 400).expect("free");
        assert_eq!(a.runs.all(), [(0, 2048)]);
        check(&a);
    }

    /// A request takes the run of the least class that fits it (good fit), not the lowest
    /// run: a short run that fits is used before a long one below it.
    #[test]
    fn a_request_takes_the_least_class_that_fits() {
        let mut a = NfAllocator::with_capacity(4096);
        let grants = [300, 10, 40, 10].map(|n| a.alloc(n).expect("fits"));
        assert_eq!(grants, [0, 300, 310, 350]);
        a.free(0, 300).expect("free");
        a.free(310, 40).expect("free");
        assert_eq!(a.alloc(30), Some(310));
        // What is left of the 40 (10 units) is too short: the 300 is next.
        assert_eq!(a.alloc(30), Some(0));
        check(&a);
    }

    /// Single units freed last come back first, up to [`KEPT`] of them; past that they go to
    /// the index; a kept unit freed again is refused; and a request that fits only with the
    /// kept units joined to their neighbours gets them.
    #[test]
    fn single_units_freed_last_come_back_first_and_join_runs_when_needed() {
        let mut a = NfAllocator::with_capacity(64);
        let units: Vec<usize> = (0..64).map(|_| a.alloc(1).expect("fits")).collect();
        assert_eq!(units, (0..64).collect::<Vec<_>>());
        for unit in 0..=KEPT {
            a.free(unit, 1).expect("free");
        }
        // The first `KEPT` are kept, the next one is filed.
        assert_eq!((a.kept_len, a.runs.all()), (KEPT, vec![(KEPT, 1)]));
        assert_eq!(a.free(3, 1), Err(FreeError::NotAllocated { unit: 3 }));
        assert_eq!(a.free(20, 4), Ok(()));
        assert_eq!(a.free(17, 6), Err(FreeError::NotAllocated { unit: 20 }));
        assert_eq!(a.free(2, 30), Err(FreeError::NotAllocated { unit: 2 }));
        check(&a);
        assert_eq!(a.alloc(1), Some(KEPT - 1));
        assert_eq!(a.alloc(1), Some(KEPT - 2));
        a.free(KEPT - 2, 1).expect("free");
        a.free(KEPT - 1, 1).expect("free");
        // 0..=KEPT is free, but as kept units and one filed: 17 units fit only once the kept
        // ones are filed, and then at 0.
        assert_eq!(a.alloc(KEPT + 1), Some(0));
        assert_eq!(a.kept_len, 0);
        check(&a);
        assert_eq!(a.free_units(), 4);
        assert_eq!(a.alloc(5), None, "20..24 is the only free run");
        assert_eq!(a.alloc(4), Some(20));
        check(&a);
    }

    /// The longest free run counts kept units with the filed runs beside them.
    #[test]
    fn the_longest_run_counts_kept_units() {
        let mut a = NfAllocator::with_capacity(100);
        assert_eq!(a.alloc(100), Some(0));
        a.free(50, 10).expect("free");
        assert_eq!(a.largest_free_run(), 10);
        // A kept unit on each side: 12 contiguous free units, 10 of them filed.
        a.free(49, 1).expect("free");
        a.free(60, 1).expect("free");
        assert_eq!(a.kept_len, 2);
        assert_eq!(a.largest_free_run(), 12);
        assert_eq!(a.alloc(12), Some(49));
        check(&a);
    }

    #[test]
    fn debug_shows_capacity_free_units_nodes_and_kept_units() {
        let mut a = NfAllocator::with_capacity(700);
        assert_eq!(a.alloc(10), Some(0));
        a.free(3, 1).expect("free");
        assert_eq!(
            format!("{a:?}"),
            "NfAllocator { capacity: 700, free_units: 691, nodes: 2, kept: 1, .. }"
        );
    }

    #[test]
    fn capacity_not_a_multiple_of_512() {
        let mut a = NfAllocator::with_capacity(700);
        check(&a);
        assert_eq!(a.largest_free_run(), 700);
        assert_eq!(a.alloc(701), None);
        assert_eq!(a.alloc(600), Some(0));
        check(&a);
        assert_eq!(a.free_units(), 100);
        // The rest of the partial last node stays usable, and nothing past it.
        assert_eq!(a.alloc(100), Some(600));
        assert_eq!(a.alloc(1), None);
        check(&a);
        assert_eq!(a.free(0, 600), Ok(()));
        assert_eq!(a.free(600, 100), Ok(()));
        check(&a);
        assert_eq!(a.largest_free_run(), 700);
        assert_eq!(a.alloc(700), Some(0));
    }

    #[test]
    fn exact_fill_then_reuse() {
        for cap in [1, 511, 512, 513, 1024, 1500] {
            let mut a = NfAllocator::with_capacity(cap);
            let got: Vec<usize> = (0..cap).map_while(|_| a.alloc(1)).collect();
            assert_eq!(got.len(), cap);
            assert_eq!(a.alloc(1), None);
            assert_eq!(a.free_units(), 0);
            assert_eq!(a.largest_free_run(), 0);
            check(&a);
            for u in got {
                a.free(u, 1).unwrap();
            }
            check(&a);
            assert_eq!(a.alloc(cap), Some(0));
            assert_eq!(a.free_units(), 0);
            a.free(0, cap).unwrap();
            assert_eq!(a.largest_free_run(), cap);
        }
    }

    #[test]
    fn runs_of_513_span_two_nodes() {
        let mut a = NfAllocator::with_capacity(2048);
        assert_eq!(a.alloc(513), Some(0));
        assert_eq!(a.alloc(1024), Some(513));
        assert_eq!(a.alloc(512), None);
        assert_eq!(a.alloc(511), Some(1537));
        assert_eq!(a.free_units(), 0);
        check(&a);
        a.free(0, 513).unwrap();
        check(&a);
        assert_eq!(a.free(0, 513), Err(FreeError::NotAllocated { unit: 0 }));
        assert_eq!(a.alloc(513), Some(0));
    }

    #[test]
    fn runs_cross_words_inside_a_node() {
        let mut a = NfAllocator::with_capacity(512);
        assert_eq!(a.alloc(60), Some(0));
        assert_eq!(a.alloc(10), Some(60));
        assert_eq!(a.alloc(200), Some(70));
        check(&a);
        a.free(60, 10).unwrap();
        assert_eq!(a.free(55, 10), Err(FreeError::NotAllocated { unit: 60 }));
        // 60..70 (10 units) is too short for 11; 270..512 is next.
        assert_eq!(a.alloc(11), Some(270));
        assert_eq!(a.alloc(10), Some(60));
        check(&a);
    }

    #[test]
    fn invalid_frees_change_nothing() {
        let mut a = NfAllocator::with_capacity(1100);
        let x = a.alloc(600).unwrap();
        // The head of what is left, right after `x`.
        let y = a.alloc(3).unwrap();
        assert_eq!((x, y), (0, 600));
        assert_eq!(
            a.free(x + 590, 20),
            Err(FreeError::NotAllocated { unit: 603 })
        );
        assert_eq!(
            a.free(1099, 2),
            Err(FreeError::OutOfRange {
                start: 1099,
                units: 2,
                capacity: 1100
            })
        );
        assert_eq!(a.free(5, 0), Err(FreeError::ZeroUnits { start: 5 }));
        assert_eq!(a.free(1099, 1), Err(FreeError::NotAllocated { unit: 1099 }));
        assert_eq!(a.free_units(), 1100 - 603);
        check(&a);
        a.free(y, 3).unwrap();
        a.free(x, 600).unwrap();
        assert_eq!(a.free_units(), 1100);
        check(&a);
    }

    /// A free refused at a later word than its first (its head allocated, a unit further on
    /// free) leaves the words it checked first as they were: nothing of the head is filed,
    /// counted or handed out twice.
    #[test]
    fn a_free_refused_words_into_its_range_changes_nothing() {
        let mut a = NfAllocator::with_capacity(1024);
        assert_eq!(a.alloc(300), Some(0));
        a.free(150, 10).expect("free");
        for (start, units, unit) in [(0, 300, 150), (10, 290, 150), (64, 100, 150)] {
            assert_eq!(
                a.free(start, units),
                Err(FreeError::NotAllocated { unit }),
                "{start}+{units}"
            );
            assert_eq!(a.free_units(), 1024 - 290);
            check(&a);
        }
        // 0..150 is still allocated: freeing it works, and it joins the 10 units beside it
        // into the run a request for 160 gets; then it frees once more, and only once.
        assert_eq!(a.free(0, 150), Ok(()));
        check(&a);
        assert_eq!(a.alloc(160), Some(0));
        assert_eq!(a.free(0, 150), Ok(()));
        assert_eq!(a.free(0, 150), Err(FreeError::NotAllocated { unit: 0 }));
        check(&a);
    }

    /// Frees of one unit at and just past the pool's end, for pools whose last node is whole
    /// and pools whose last node is partial (there the node's map has bits past the end, which
    /// must never become free). Expected results follow from the bounds alone.
    #[test]
    fn boundary_frees_at_the_pool_end() {
        for cap in [1, 200, 511, 512, 513, 700, 1024, 1100, 1536] {
            let out_of_range = |start, units| {
                Err(FreeError::OutOfRange {
                    start,
                    units,
                    capacity: cap,
                })
            };
            let mut a = NfAllocator::with_capacity(cap);
            // All free: the last unit is not allocated, the ones past the end do not exist.
            assert_eq!(
                a.free(cap - 1, 1),
                Err(FreeError::NotAllocated { unit: cap - 1 }),
                "cap {cap}"
            );
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 1), out_of_range(cap + 1, 1), "cap {cap}");
            assert_eq!(a.free(cap - 1, 2), out_of_range(cap - 1, 2), "cap {cap}");
            assert_eq!(a.free(cap, 2), out_of_range(cap, 2), "cap {cap}");
            assert_eq!(a.free_units(), cap, "cap {cap}");
            check(&a);

            // Full: the last unit frees, the ones past it still do not exist, and no refused
            // free left a unit behind that a later alloc could hand out.
            assert_eq!(a.alloc(cap), Some(0), "cap {cap}");
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 1), out_of_range(cap + 1, 1), "cap {cap}");
            // Multi-unit frees take their own path: past the end, and straddling it.
            assert_eq!(a.free(cap + 1, 2), out_of_range(cap + 1, 2), "cap {cap}");
            assert_eq!(a.free(cap - 1, 2), out_of_range(cap - 1, 2), "cap {cap}");
            assert_eq!(
                a.alloc(1),
                None,
                "cap {cap}: a unit past the end was handed out"
            );
            assert_eq!(a.free_units(), 0, "cap {cap}");
            assert_eq!(a.free(cap - 1, 1), Ok(()), "cap {cap}");
            assert_eq!(a.free_units(), 1, "cap {cap}");
            assert_eq!(a.alloc(1), Some(cap - 1), "cap {cap}");
            assert_eq!(a.alloc(1), None, "cap {cap}");
            check(&a);
            assert_eq!(a.free(0, cap), Ok(()), "cap {cap}");
            assert_eq!(a.largest_free_run(), cap, "cap {cap}");
            check(&a);
        }
    }

    /// Past 512 nodes a node index and a unit index overlap in range, so single-unit frees
    /// that confused them would land in the wrong node instead of failing a bounds check.
    #[test]
    #[cfg_attr(miri, ignore = "a pool of 600 nodes is slow under Miri")]
    fn single_unit_frees_in_a_pool_of_more_than_512_nodes() {
        let cap = 600 * NODE_UNITS;
        let mut a = NfAllocator::with_capacity(cap);
        let units: Vec<usize> = (0..3).map(|_| a.alloc(1).unwrap()).collect();
        assert_eq!(units, [0, 1, 2]);
        assert_eq!(a.free(1, 1), Ok(()));
        assert_eq!(a.free(1, 1), Err(FreeError::NotAllocated { unit: 1 }));
        assert_eq!(a.free_units(), cap - 2);
        check(&a);
        // The unit freed last is the one handed out next.
        assert_eq!(a.alloc(1), Some(1));
        assert_eq!(a.free(2, 1), Ok(()));
        assert_eq!(a.free(0, 1), Ok(()));
        assert_eq!(a.free(1, 1), Ok(()));
        assert_eq!(a.free_units(), cap);
        check(&a);
    }

    #[test]
    fn empty_pool() {
        let mut a = NfAllocator::with_capacity(0);
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.alloc(2), None);
        assert_eq!(a.alloc(600), None);
        assert_eq!(a.largest_free_run(), 0);
        assert!(a.free(0, 1).is_err());
    }

    /// The run index under random programs of allocs and frees against a plain model (one
    /// bool per unit): every grant lies in the pool, is free in the model and is disjoint from
    /// every live grant; every refusal is one the model agrees no run fits; and after each
    /// step `check` compares the index with a scan of the maps. Single units are drawn often,
    /// since they are kept back from the index and filed when a request needs them, and so
    /// are sizes that cut and join runs inside nodes and across their boundaries.
    mod run_index {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            Alloc(usize),
            /// Free the live grant at this index, modulo the number live.
            Free(usize),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                3 => Just(Step::Alloc(1)),
                3 => (2..=40usize).prop_map(Step::Alloc),
                2 => (2..NODE_UNITS).prop_map(Step::Alloc),
                1 => (NODE_UNITS..=3 * NODE_UNITS).prop_map(Step::Alloc),
                6 => any::<usize>().prop_map(Step::Free),
            ]
        }

        fn cases() -> u32 {
            std::env::var("RIMMS_PROPTEST_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if cfg!(miri) { 4 } else { 400 })
        }

        fn config() -> ProptestConfig {
            let mut config = ProptestConfig::with_cases(cases());
            if cfg!(miri) {
                // Miri's isolation has no files to keep failing cases in.
                config.failure_persistence = None;
            }
            config
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn grants_are_disjoint_in_bounds_and_the_index_matches_a_scan(
                cap in prop_oneof![1..=3000usize, (1..=6usize).prop_map(|k| k * NODE_UNITS)],
                steps in prop::collection::vec(step(), 1..120),
            ) {
                let mut a = NfAllocator::with_capacity(cap);
                let mut free = vec![true; cap];
                let mut live: Vec<(usize, usize)> = Vec::new();
                for step in steps {
                    match step {
                        Step::Alloc(n) => match a.alloc(n) {
                            Some(start) => {
                                prop_assert!(start + n <= cap, "{start}+{n} past {cap}");
                                prop_assert!(
                                    free[start..start + n].iter().all(|&f| f),
                                    "{start}+{n} overlaps a live grant"
                                );
                                free[start..start + n].fill(false);
                                live.push((start, n));
                            }
                            None => {
                                let fits = free
                                    .split(|&f| !f)
                                    .any(|run| run.len() >= n);
                                prop_assert!(!fits, "refused {n} units that fit");
                            }
                        },
                        Step::Free(i) if !live.is_empty() => {
                            let (start, n) = live.swap_remove(i % live.len());
                            prop_assert_eq!(a.free(start, n), Ok(()));
                            free[start..start + n].fill(true);
                        }
                        Step::Free(_) => {}
                    }
                    prop_assert_eq!(a.free_units(), free.iter().filter(|&&f| f).count());
                    check(&a);
                }
            }
        }
    }
}
