//! A pool filled with single-unit allocations, built the cheap way for each of the crate's
//! allocators. Shared by the allocator benches.

use rimms_runtime::alloc::{BitsetAllocator, NfAllocator, UnitAllocator};

/// An allocator whose empty pool can be filled with single-unit allocations cheaply.
pub trait FillWithUnits: UnitAllocator {
    /// Allocates every unit of the empty pool of `capacity` units so that each unit `u` can
    /// then be freed alone, as `free(u, 1)`.
    fn fill_with_units(&mut self, capacity: usize);
}

impl FillWithUnits for NfAllocator {
    // NF frees only the runs it handed out, so each unit is one; from an empty pool each is
    // the head of the one free run, found in O(1).
    fn fill_with_units(&mut self, capacity: usize) {
        for unit in 0..capacity {
            assert_eq!(
                self.alloc(1),
                Some(unit),
                "an empty pool fills from its start"
            );
        }
    }
}

impl FillWithUnits for BitsetAllocator {
    // The bitset frees any range of allocated units, and its first fit from unit 0 would make
    // a fill unit by unit quadratic: one run of everything.
    fn fill_with_units(&mut self, capacity: usize) {
        assert_eq!(self.alloc(capacity), Some(0), "an empty pool fits one run");
    }
}
