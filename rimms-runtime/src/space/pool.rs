//! A space's pool: its region carved into granules by the NF allocator, plus the use figures
//! that `Runtime::stats` reports.

use super::region::Region;
use super::SpaceName;
use crate::alloc::{NfAllocator, UnitAllocator, MAX_UNITS};
use crate::hal::{Error, Result};
use std::sync::Mutex;

/// A run of granules handed out by a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    first: usize,
    granules: usize,
    ptr: *mut u8,
}

// SAFETY: a block is an address into a pool region that outlives it; moving the address between
// threads is harmless, and access is governed by the buffer that owns the block.
unsafe impl Send for Block {}
// SAFETY: as for `Send`: a shared block is only its address.
unsafe impl Sync for Block {}

impl Block {
    /// The first byte: a host pointer with its region's provenance, or a device address.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

#[derive(Default, Clone, Copy)]
pub(crate) struct PoolUse {
    pub in_use: usize,
    pub high_water: usize,
    pub allocations: u64,
    pub frees: u64,
}

pub(crate) struct Pool {
    name: SpaceName,
    region: Region,
    granule: usize,
    /// Granules handed out from the start of the region: all of it, or fewer where the pool
    /// was limited (`RuntimeBuilder::pool`).
    granules: usize,
    state: Mutex<(NfAllocator, PoolUse)>,
}

impl Pool {
    pub(crate) fn new(name: &SpaceName, bytes: usize, granule: usize) -> Result<Pool> {
        let granules = Self::granules(name, bytes, granule)?;
        Self::over(name, Region::reserve(name, granules * granule)?, granule)
    }

    /// A pool over memory a backend mapped, or over device memory; its base must be granule
    /// aligned.
    pub(crate) fn over_backend(name: &SpaceName, region: Region, granule: usize) -> Result<Pool> {
        if region.base().addr() % granule != 0 {
            return Err(Error::Config(format!(
                "memory of space {name} is not aligned to the {granule}-byte pool granule"
            )));
        }
        Self::granules(name, region.len(), granule)?;
        Self::over(name, region, granule)
    }

    fn granules(name: &SpaceName, bytes: usize, granule: usize) -> Result<usize> {
        match bytes / granule {
            0 => Err(Error::Config(format!(
                "pool of space {name} must hold at least one granule of {granule} bytes, got {bytes} bytes"
            ))),
            granules if granules > MAX_UNITS => Err(Error::Config(format!(
                "pool of space {name} would hold {granules} granules of {granule} bytes, more than the {MAX_UNITS} a pool can index: use a larger granule"
            ))),
            granules => Ok(granules),
        }
    }

    fn over(name: &SpaceName, region: Region, granule: usize) -> Result<Pool> {
        let granules = region.len() / granule;
        Ok(Pool {
            name: name.clone(),
            region,
            granule,
            granules,
            state: Mutex::new((NfAllocator::with_capacity(granules), PoolUse::default())),
        })
    }

    pub(crate) fn capacity(&self) -> usize {
        self.granules * self.granule
    }

    /// The same pool cut down to its first `bytes` (whole granules), for a space whose memory
    /// is given (a u-dma-buf, a device's reservation) but whose use is to be limited.
    pub(crate) fn limited(self, bytes: usize) -> Result<Pool> {
        let granules = Self::granules(&self.name, bytes, self.granule)?;
        if granules > self.granules {
            // A backend's memory (a u-dma-buf, a device's) has the size it has: a larger pool
            // would be a promise nothing keeps.
            return Err(Error::Config(format!(
                "a pool of {bytes} bytes for space {}, whose memory holds {} bytes: give it at most that",
                self.name,
                self.granules * self.granule
            )));
        }
        Ok(Pool {
            state: Mutex::new((NfAllocator::with_capacity(granules), PoolUse::default())),
            granules,
            ..self
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (NfAllocator, PoolUse)> {
        // A panic while holding this lock cannot leave the allocator half-updated: every update
        // is validated before it changes anything. So a poisoned lock is safe to reuse.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The space the pool belongs to.
    pub(crate) fn name(&self) -> &SpaceName {
        &self.name
    }

    /// A block of at least `bytes`; exhaustion names the space, the request and what is free.
    pub(crate) fn alloc(&self, bytes: usize) -> Result<Block> {
        let granules = bytes.div_ceil(self.granule).max(1);
        let mut guard = self.lock();
        let (alloc, usage) = &mut *guard;
        let Some(first) = alloc.alloc(granules) else {
            return Err(Error::PoolExhausted {
                space: self.name.clone(),
                requested: granules * self.granule,
                free: alloc.free_units() * self.granule,
                largest_free: alloc.largest_free_run() * self.granule,
            });
        };
        usage.in_use += granules * self.granule;
        usage.high_water = usage.high_water.max(usage.in_use);
        usage.allocations += 1;
        // The allocator hands out runs inside the region, so the offset stays inside it; a
        // wrapping offset keeps a host pointer's provenance and is also right for a device
        // address, which is not a pointer into any allocation of this process.
        let ptr = self.region.base().wrapping_add(first * self.granule);
        Ok(Block {
            first,
            granules,
            ptr,
        })
    }

    pub(crate) fn free(&self, block: Block) {
        let mut guard = self.lock();
        let (alloc, usage) = &mut *guard;
        // Blocks only come from `alloc` of this pool and are freed once (their owner is dropped),
        // so a refusal here would be a runtime bug; it is logged rather than turned into a panic.
        match alloc.free(block.first, block.granules) {
            Ok(()) => {
                usage.in_use -= block.granules * self.granule;
                usage.frees += 1;
            }
            Err(e) => tracing::error!(space = %self.name, error = %e, "pool refused a free"),
        }
    }

    /// The pool bytes `block` takes.
    pub(crate) fn held(&self, block: &Block) -> usize {
        block.granules * self.granule
    }

    /// `block` cut down to its granules `keep` (a non-empty sub-range of them), the others
    /// given back: the kept bytes stay where they are. Still one allocation for the counts.
    pub(crate) fn shrink(&self, block: Block, keep: std::ops::Range<usize>) -> Block {
        let mut guard = self.lock();
        let (alloc, usage) = &mut *guard;
        // A block this pool handed out, cut down once per cut: as in `free`, a refusal would
        // be a runtime bug, logged rather than turned into a panic.
        match alloc.shrink(block.first, block.granules, keep.clone()) {
            Ok(()) => usage.in_use -= (block.granules - keep.len()) * self.granule,
            Err(e) => tracing::error!(space = %self.name, error = %e, "pool refused a shrink"),
        }
        Block {
            first: block.first + keep.start,
            granules: keep.len(),
            ptr: block.ptr.wrapping_add(keep.start * self.granule),
        }
    }

    pub(crate) fn granule(&self) -> usize {
        self.granule
    }

    /// The bytes free now and the longest free run.
    pub(crate) fn free_bytes(&self) -> (usize, usize) {
        let guard = self.lock();
        (
            guard.0.free_units() * self.granule,
            guard.0.largest_free_run() * self.granule,
        )
    }

    pub(crate) fn usage(&self) -> PoolUse {
        self.lock().1
    }

    pub(crate) fn reset_high_water(&self) {
        let mut guard = self.lock();
        guard.1.high_water = guard.1.in_use;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::SpaceId;

    /// A pool of more granules than NF's tags can index is refused before anything is
    /// reserved, naming the space and the granules; one of exactly as many is not (its
    /// reservation may still fail, on a machine without that much address space).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_pool_of_more_granules_than_nf_indexes_is_a_config_error() {
        let name = SpaceName::new(SpaceId(1), "big");
        let too_many = (MAX_UNITS + 1) * 4096;
        match Pool::new(&name, too_many, 4096) {
            Err(Error::Config(message)) => {
                assert!(message.contains("space big"), "{message}");
                assert!(message.contains(&format!("{}", MAX_UNITS + 1)), "{message}");
            }
            Err(other) => panic!("a config error, not {other}"),
            Ok(_) => panic!("a pool of {} granules was made", MAX_UNITS + 1),
        }
        assert!(Pool::granules(&name, MAX_UNITS * 4096, 4096).is_ok());
    }
}
