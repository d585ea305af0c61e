//! The node–fragment (NF) allocator. The design and its refusal rule are described in the
//! [module documentation](super).

use super::runs::FreeRuns;
use super::{check_keep, check_range, FreeError, UnitAllocator};
use std::ops::Range;

/// The most units a pool may have: the run index and the tags keep units and lengths in 32
/// bits.
pub const MAX_UNITS: usize = u32::MAX as usize;

/// Single units freed and kept back from the run index for the next single-unit requests.
/// Few, so that what they keep apart is little: with 16, the fragmenting workload of
/// `benches/alloc_rivals.rs` still grants a larger run at its end than TLSF does (with 64 or
/// more it granted far less, the kept units cutting the runs they would have joined).
const KEPT: usize = 16;

/// NF: the runs handed out, tagged, an index of the free runs, and the single units freed
/// last.
#[derive(Clone)]
pub struct NfAllocator {
    capacity: usize,
    /// Units free, the kept ones included.
    free: usize,
    /// At the first unit of each run handed out (and not freed), its length; 0 at every other
    /// unit. A free or a shrink is valid iff it names such a run exactly.
    held: Vec<u32>,
    /// Every maximal run of free units that are not kept.
    runs: FreeRuns,
    /// Single units freed and not yet filed, the last freed last: a single-unit request takes
    /// the last one back (`kept[..kept_len]`).
    kept: [u32; KEPT],
    kept_len: usize,
}

impl std::fmt::Debug for NfAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfAllocator")
            .field("capacity", &self.capacity)
            .field("free_units", &self.free)
            .field("kept", &self.kept_len)
            .finish_non_exhaustive()
    }
}

impl NfAllocator {
    /// Hands out the head `units` of the run `start..start + len` (at least that long), just
    /// taken out of the index, filing the rest.
    #[inline(always)]
    fn take(&mut self, start: usize, len: usize, units: usize) {
        if len > units {
            self.runs.insert(start + units, len - units);
        }
        // `units <= len <= MAX_UNITS`: it fits a u32.
        self.held[start] = units as u32;
        self.free -= units;
    }

    /// Files `start..start + units` (free, neither kept nor filed) as a run joined with the
    /// filed runs on either side.
    #[inline(always)]
    fn file_joined(&mut self, start: usize, units: usize) {
        let end = start + units;
        let mut first = start;
        if let Some(before) = self.runs.run_ending_before(start) {
            self.runs.remove(before);
            first = before;
        }
        let after = self.runs.run_starting_at(end);
        if after != 0 {
            self.runs.remove(end);
        }
        self.runs.insert(first, end + after - first);
    }

    /// A run of `units` found only once the kept single units are filed: they are, and the
    /// index asked again, so that a request is refused only when no run fits it.
    #[cold]
    #[inline(never)]
    fn fit_after_filing_kept(&mut self, units: usize) -> Option<(usize, usize)> {
        if self.kept_len == 0 {
            return None;
        }
        while let Some(unit) = self.take_kept() {
            self.file_joined(unit, 1);
        }
        self.runs.take_fit(units)
    }

    /// The single unit kept last, no longer kept (still counted free).
    #[inline(always)]
    fn take_kept(&mut self) -> Option<usize> {
        self.kept_len = self.kept_len.checked_sub(1)?;
        Some(self.kept[self.kept_len] as usize)
    }

    /// A request that no kept unit serves, out of line so that the single-unit fast path in
    /// [`UnitAllocator::alloc`] stays a few instructions with no frame to set up.
    #[inline(never)]
    fn alloc_run(&mut self, units: usize) -> Option<usize> {
        if units == 0 || units > self.free {
            return None;
        }
        let (start, len) = match self.runs.take_fit(units) {
            Some(run) => run,
            None => self.fit_after_filing_kept(units)?,
        };
        self.take(start, len, units);
        Some(start)
    }

    /// Whether `start..start + units` is a run handed out: its first unit's tag says so.
    /// Zero units never are (0 is no run's length), nor a range past the pool (`start` has no
    /// tag, and a run in the pool ends in it).
    #[inline(always)]
    fn is_run(&self, start: usize, units: usize) -> bool {
        self.held
            .get(start)
            .is_some_and(|&len| len as usize == units)
            && units != 0
    }

    /// Why a free or shrink of `start..start + units`, which [`NfAllocator::is_run`] refused,
    /// is refused: out of line, as only a caller's mistake gets here.
    #[cold]
    #[inline(never)]
    fn not_a_run(&self, start: usize, units: usize) -> FreeError {
        if let Err(e) = check_range(start, units, self.capacity) {
            return e;
        }
        // In range, so `start < capacity`, the tags' length.
        let allocated = Some(self.held[start] as usize).filter(|&len| len != 0);
        FreeError::NotARun {
            start,
            units,
            allocated,
        }
    }

    /// Files a run freed that is not kept back (more than one unit, or no room to keep it),
    /// out of line for the same reason as [`NfAllocator::alloc_run`].
    #[inline(never)]
    fn free_run(&mut self, start: usize, units: usize) {
        self.file_joined(start, units);
    }
}

impl UnitAllocator for NfAllocator {
    /// A pool of `capacity` units, at most [`MAX_UNITS`]: a larger one is cut to that.
    fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.min(MAX_UNITS);
        let mut a = Self {
            capacity,
            free: capacity,
            held: vec![0; capacity],
            runs: FreeRuns::new(capacity),
            kept: [0; KEPT],
            kept_len: 0,
        };
        if capacity > 0 {
            a.runs.insert(0, capacity);
        }
        a
    }

    #[inline]
    fn alloc(&mut self, units: usize) -> Option<usize> {
        if units == 1 {
            // The single unit freed last: its tags are likely still in cache.
            if let Some(unit) = self.take_kept() {
                self.held[unit] = 1;
                self.free -= 1;
                return Some(unit);
            }
        }
        self.alloc_run(units)
    }

    #[inline]
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError> {
        if !self.is_run(start, units) {
            return Err(self.not_a_run(start, units));
        }
        self.held[start] = 0;
        self.free += units;
        if units != 1 || self.kept_len == KEPT {
            self.free_run(start, units);
            return Ok(());
        }
        // `start < capacity <= MAX_UNITS`: it fits a u32.
        self.kept[self.kept_len] = start as u32;
        self.kept_len += 1;
        Ok(())
    }

    fn shrink(&mut self, start: usize, units: usize, keep: Range<usize>) -> Result<(), FreeError> {
        if !self.is_run(start, units) {
            return Err(self.not_a_run(start, units));
        }
        check_keep(start, units, &keep)?;
        self.held[start] = 0;
        // `keep.len() <= units`, a run's length: it fits a u32.
        self.held[start + keep.start] = keep.len() as u32;
        self.free += units - keep.len();
        // The parts freed lie beside the run kept, which is not filed: each joins only the
        // filed run on its other side.
        if keep.start > 0 {
            self.file_joined(start, keep.start);
        }
        if keep.end < units {
            self.file_joined(start + keep.end, units - keep.end);
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
        let filed = self.runs.longest();
        let kept = &self.kept[..self.kept_len];
        // Kept units cut the runs they lie between: the free runs through them are the kept
        // units and the filed runs beside them, laid end to end. Each part is a kept unit
        // with the filed runs that end just before it and start just after it.
        let mut parts: Vec<(usize, usize)> = kept
            .iter()
            .map(|&unit| {
                let unit = unit as usize;
                let first = self.runs.run_ending_before(unit).unwrap_or(unit);
                (first, unit + 1 + self.runs.run_starting_at(unit + 1))
            })
            .collect();
        parts.sort_unstable();
        // In start order, a part that starts at or before the end of the run so far extends it.
        let (mut longest, mut run) = (filed, (0, 0));
        for (start, end) in parts {
            if start > run.1 {
                run = (start, end);
            } else {
                run.1 = run.1.max(end);
            }
            longest = longest.max(run.1 - run.0);
        }
        longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the allocator's state against what it must be, worked out from its parts
    /// independently: the runs handed out (by their tags), the kept units and the filed runs
    /// partition the pool; no two filed runs touch (each is maximal among the units not kept);
    /// the index's lists and tags are whole (`FreeRuns::all`); and the free count is the
    /// filed and kept units.
    fn check(a: &NfAllocator) {
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum Unit {
            Unseen,
            Held,
            Kept,
            Filed,
        }
        let mut units = vec![Unit::Unseen; a.capacity];
        let mut claim = |start: usize, len: usize, what: Unit| {
            assert!(
                start + len <= a.capacity,
                "{what:?} {start}+{len} past the pool"
            );
            for u in &mut units[start..start + len] {
                assert_eq!(*u, Unit::Unseen, "{what:?} {start}+{len} overlaps");
                *u = what;
            }
        };
        // Read off by index: Miri runs these checks after every step of the property test.
        for (start, &len) in a.held.iter().enumerate() {
            if len != 0 {
                claim(start, len as usize, Unit::Held);
            }
        }
        for &unit in &a.kept[..a.kept_len] {
            claim(unit as usize, 1, Unit::Kept);
        }
        let runs = a.runs.all();
        for &(start, len) in &runs {
            claim(start, len, Unit::Filed);
        }
        assert!(!units.contains(&Unit::Unseen), "every unit accounted for");
        for pair in runs.windows(2) {
            assert!(
                pair[0].0 + pair[0].1 < pair[1].0,
                "filed runs {pair:?} touch"
            );
        }
        let filed: usize = runs.iter().map(|&(_, len)| len).sum();
        assert_eq!(filed + a.kept_len, a.free, "free units");
    }

    /// A free joins the filed runs on either side into one run.
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
        let not_a_run = |start, units, allocated| {
            Err(FreeError::NotARun {
                start,
                units,
                allocated,
            })
        };
        assert_eq!(a.free(3, 1), not_a_run(3, 1, None));
        for unit in 20..24 {
            assert_eq!(a.free(unit, 1), Ok(()));
        }
        // Filed one by one, joined into one run.
        assert_eq!(a.runs.all(), [(KEPT, 1), (20, 4)]);
        assert_eq!(a.free(17, 6), not_a_run(17, 6, Some(1)));
        assert_eq!(a.free(2, 30), not_a_run(2, 30, None));
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

    /// The longest free run counts kept units with the filed runs beside them, on both sides
    /// and through a filed run between two kept units.
    #[test]
    fn the_longest_run_counts_kept_units() {
        let mut a = NfAllocator::with_capacity(100);
        let grants = [49, 1, 10, 1, 5, 1, 33].map(|n| a.alloc(n).expect("fits"));
        assert_eq!(grants, [0, 49, 50, 60, 61, 66, 67]);
        a.free(50, 10).expect("free");
        assert_eq!(a.largest_free_run(), 10);
        // A kept unit on each side: 12 contiguous free units, 10 of them filed.
        a.free(49, 1).expect("free");
        a.free(60, 1).expect("free");
        assert_eq!(a.kept_len, 2);
        assert_eq!(a.largest_free_run(), 12);
        // Then 5 filed and one more kept past the second: 49..67, 18 units.
        a.free(61, 5).expect("free");
        a.free(66, 1).expect("free");
        assert_eq!(a.largest_free_run(), 18);
        check(&a);
        assert_eq!(a.alloc(18), Some(49));
        check(&a);
    }

    #[test]
    fn debug_shows_capacity_free_units_and_kept_units() {
        let mut a = NfAllocator::with_capacity(700);
        assert_eq!(a.alloc(9), Some(0));
        assert_eq!(a.alloc(1), Some(9));
        a.free(9, 1).expect("free");
        assert_eq!(
            format!("{a:?}"),
            "NfAllocator { capacity: 700, free_units: 691, kept: 1, .. }"
        );
    }

    #[test]
    fn the_last_run_ends_at_the_pool_end() {
        let mut a = NfAllocator::with_capacity(700);
        check(&a);
        assert_eq!(a.largest_free_run(), 700);
        assert_eq!(a.alloc(701), None);
        assert_eq!(a.alloc(600), Some(0));
        check(&a);
        assert_eq!(a.free_units(), 100);
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

    /// A free must name a run handed out exactly: its first unit and its length. Anything
    /// else is refused, naming the run that starts there if one does, and changes nothing.
    #[test]
    fn invalid_frees_change_nothing() {
        let mut a = NfAllocator::with_capacity(1100);
        let x = a.alloc(600).unwrap();
        // The head of what is left, right after `x`.
        let y = a.alloc(3).unwrap();
        assert_eq!((x, y), (0, 600));
        let not_a_run = |start, units, allocated| {
            Err(FreeError::NotARun {
                start,
                units,
                allocated,
            })
        };
        // Inside a run, across two, shorter or longer than the run, and in free units.
        assert_eq!(a.free(x + 590, 20), not_a_run(590, 20, None));
        assert_eq!(a.free(x, 603), not_a_run(0, 603, Some(600)));
        assert_eq!(a.free(x, 599), not_a_run(0, 599, Some(600)));
        assert_eq!(a.free(y, 4), not_a_run(600, 4, Some(3)));
        let said = |e: Result<(), FreeError>| e.map_err(|e| e.to_string()).unwrap_err();
        assert_eq!(
            said(a.free(y, 4)),
            "free of units 600..600+4, which is not a run handed out (the run there is 3 units long)"
        );
        assert_eq!(
            said(a.free(y + 1, 2)),
            "free of units 601..601+2, which is not a run handed out"
        );
        assert_eq!(a.free(1099, 1), not_a_run(1099, 1, None));
        assert_eq!(
            a.free(1099, 2),
            Err(FreeError::OutOfRange {
                start: 1099,
                units: 2,
                capacity: 1100
            })
        );
        assert_eq!(a.free(x, 0), Err(FreeError::ZeroUnits { start: 0 }));
        assert_eq!(a.free(5, 0), Err(FreeError::ZeroUnits { start: 5 }));
        assert_eq!(a.free_units(), 1100 - 603);
        check(&a);
        a.free(y, 3).unwrap();
        assert_eq!(a.free(y, 3), not_a_run(600, 3, None), "freed twice");
        a.free(x, 600).unwrap();
        assert_eq!(a.free_units(), 1100);
        check(&a);
    }

    /// A shrink frees the parts of a run outside what it keeps, each joined with the filed
    /// run beside it; the part kept is then the run, freed or shrunk as such, and the old run
    /// is no longer one. A shrink refused changes nothing.
    #[test]
    fn a_shrink_frees_the_parts_outside_keep() {
        let mut a = NfAllocator::with_capacity(1000);
        let [x, y, z] = [100, 300, 100].map(|n| a.alloc(n).expect("fits"));
        assert_eq!([x, y, z], [0, 100, 400]);
        a.free(x, 100).expect("free");
        let keep_outside = |keep| {
            Err(FreeError::KeepOutside {
                start: 100,
                units: 300,
                keep,
            })
        };
        assert_eq!(a.shrink(y, 300, 5..5), keep_outside(5..5));
        assert_eq!(
            a.shrink(y, 300, 5..5).unwrap_err().to_string(),
            "shrink of the run at unit 100 (300 units) to its units 5..5, which are not a non-empty part of it"
        );
        assert_eq!(a.shrink(y, 300, 5..301), keep_outside(5..301));
        assert_eq!(
            a.shrink(y, 299, 5..6),
            Err(FreeError::NotARun {
                start: 100,
                units: 299,
                allocated: Some(300)
            })
        );
        assert_eq!(a.free_units(), 600);
        check(&a);
        // Keep 150..350: 100..150 joins the free 0..100, 350..400 stays apart (400 is held).
        assert_eq!(a.shrink(y, 300, 50..250), Ok(()));
        assert_eq!(a.free_units(), 700);
        assert_eq!(a.runs.all(), [(0, 150), (350, 50), (500, 500)]);
        check(&a);
        assert!(a.free(y, 300).is_err(), "the old run is gone");
        // The tail only, then the head only, then the rest freed.
        assert_eq!(a.shrink(150, 200, 0..199), Ok(()));
        assert_eq!(a.runs.all(), [(0, 150), (349, 51), (500, 500)]);
        assert_eq!(a.shrink(150, 199, 1..199), Ok(()));
        assert_eq!(a.runs.all(), [(0, 151), (349, 51), (500, 500)]);
        check(&a);
        assert_eq!(a.free(151, 198), Ok(()));
        a.free(z, 100).expect("free");
        assert_eq!(a.runs.all(), [(0, 1000)]);
        check(&a);
    }

    /// Frees of one unit at and just past the pool's end: out of range past it, not a run
    /// where none was handed out, and the pool's last unit handed out and freed as any other.
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
            assert_eq!(
                a.free(cap - 1, 1),
                Err(FreeError::NotARun {
                    start: cap - 1,
                    units: 1,
                    allocated: None
                }),
                "cap {cap}"
            );
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 1), out_of_range(cap + 1, 1), "cap {cap}");
            assert_eq!(a.free(cap - 1, 2), out_of_range(cap - 1, 2), "cap {cap}");
            assert_eq!(a.free(cap, 2), out_of_range(cap, 2), "cap {cap}");
            assert_eq!(a.free_units(), cap, "cap {cap}");
            check(&a);

            assert_eq!(a.alloc(cap), Some(0), "cap {cap}");
            assert_eq!(a.free(cap, 1), out_of_range(cap, 1), "cap {cap}");
            assert_eq!(a.free(cap + 1, 2), out_of_range(cap + 1, 2), "cap {cap}");
            assert_eq!(a.free(0, cap + 1), out_of_range(0, cap + 1), "cap {cap}");
            assert_eq!(a.alloc(1), None, "cap {cap}");
            if cap > 1 {
                // The last unit alone freed, handed out and freed again.
                assert_eq!(a.shrink(0, cap, 0..cap - 1), Ok(()), "cap {cap}");
                assert_eq!(a.free_units(), 1, "cap {cap}");
                assert_eq!(a.alloc(1), Some(cap - 1), "cap {cap}");
                assert_eq!(a.alloc(1), None, "cap {cap}");
                check(&a);
                assert_eq!(a.free(cap - 1, 1), Ok(()), "cap {cap}");
                assert_eq!(a.free(0, cap - 1), Ok(()), "cap {cap}");
            } else {
                assert_eq!(a.free(0, 1), Ok(()), "cap {cap}");
            }
            assert_eq!(a.largest_free_run(), cap, "cap {cap}");
            check(&a);
        }
    }

    /// Single-unit frees in a pool far larger than any run: the tags are per unit.
    #[test]
    #[cfg_attr(miri, ignore = "a pool of 300 Ki units is slow under Miri")]
    fn single_unit_frees_in_a_large_pool() {
        let cap = 600 * 512;
        let mut a = NfAllocator::with_capacity(cap);
        let units: Vec<usize> = (0..3).map(|_| a.alloc(1).unwrap()).collect();
        assert_eq!(units, [0, 1, 2]);
        assert_eq!(a.free(1, 1), Ok(()));
        assert_eq!(
            a.free(1, 1),
            Err(FreeError::NotARun {
                start: 1,
                units: 1,
                allocated: None
            })
        );
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
        check(&a);
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.alloc(2), None);
        assert_eq!(a.alloc(600), None);
        assert_eq!(a.largest_free_run(), 0);
        assert!(a.free(0, 1).is_err());
        assert!(a.shrink(0, 1, 0..1).is_err());
    }

    /// The allocator under random programs of allocs, frees and shrinks against a plain model
    /// (one bool per unit): every grant lies in the pool, is free in the model and is disjoint
    /// from every live grant; every refusal is one the model agrees no run fits; and after
    /// each step `check` accounts for every unit. Single units are drawn often, since they are
    /// kept back from the index and filed when a request needs them.
    mod run_index {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            Alloc(usize),
            /// Free the live grant at this index, modulo the number live.
            Free(usize),
            /// Shrink the live grant at this index to the part between these two fractions
            /// (in 1/256ths of its length; skipped where that part is empty).
            Shrink(usize, u8, u8),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                3 => Just(Step::Alloc(1)),
                3 => (2..=40usize).prop_map(Step::Alloc),
                2 => (2..512usize).prop_map(Step::Alloc),
                1 => (512..=1536usize).prop_map(Step::Alloc),
                6 => any::<usize>().prop_map(Step::Free),
                2 => (any::<usize>(), any::<u8>(), any::<u8>())
                    .prop_map(|(i, a, b)| Step::Shrink(i, a, b)),
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
            #[cfg_attr(
                miri,
                ignore = "each step's checks walk the pool unit by unit: minutes under Miri, \
                          where the unit tests above run NF's paths"
            )]
            fn grants_are_disjoint_in_bounds_and_every_unit_is_accounted_for(
                cap in prop_oneof![1..=3000usize, (1..=6usize).prop_map(|k| k * 512)],
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
                        Step::Shrink(i, from, to) if !live.is_empty() => {
                            let k = i % live.len();
                            let (start, n) = live[k];
                            let cut = |f: u8| n * usize::from(f) / 256;
                            let keep = cut(from.min(to))..cut(from.max(to)).max(1);
                            if keep.is_empty() {
                                continue;
                            }
                            prop_assert_eq!(a.shrink(start, n, keep.clone()), Ok(()));
                            free[start..start + keep.start].fill(true);
                            free[start + keep.end..start + n].fill(true);
                            live[k] = (start + keep.start, keep.len());
                        }
                        Step::Free(_) | Step::Shrink(..) => {}
                    }
                    prop_assert_eq!(a.free_units(), free.iter().filter(|&&f| f).count());
                    let longest = free.split(|&f| !f).map(<[bool]>::len).max().unwrap_or(0);
                    prop_assert_eq!(a.largest_free_run(), longest);
                    check(&a);
                }
            }
        }
    }
}
