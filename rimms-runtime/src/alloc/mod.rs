//! Unit allocators: hand out runs of contiguous *units* from a pool of `capacity` units.
//!
//! A unit is whatever the pool decides it is (a fragment or granule, typically 4 KiB); the
//! pool maps units to bytes and owns alignment. The allocators here only know unit indices,
//! so the same code serves the host mmap pool, one big device allocation and the FPGA's
//! u-dma-buf alike.
//!
//! Two implementations of [`UnitAllocator`] live here:
//!
//! - [`NfAllocator`], the node–fragment allocator the runtime uses;
//! - [`BitsetAllocator`], a flat bitmap with a first-fit word scan, kept as the measured
//!   baseline (`cargo bench -p rimms-runtime --bench alloc` runs both side by side).
//!
//! # Why the NF design
//!
//! The runtime allocates in frame loops: the same few sizes, again and again, on pools that
//! may hold millions of fragments and are often nearly full. A flat bitmap scanned from unit 0
//! gets slower exactly when it matters (a full pool means a long scan over allocated words),
//! and its cost grows with the pool. NF keeps the per-call cost flat:
//!
//! - **An index of the free runs (TLSF's, beside the pool).** Every maximal run of free units
//!   sits in a list by its size class (`runs.rs`: one class per length below 16, then 16 per
//!   power of two), two bitmaps say which classes have runs, and each run's length is written
//!   at its first unit and its first unit at its last (boundary tags), so a free joins its
//!   neighbours without a search. Unlike TLSF, the tags live in arrays beside the pool, not in
//!   headers inside it: a GPU's or an FPGA's memory cannot hold them. A request takes the head
//!   of the first run of the least class whose every length fits it (good fit), and only when
//!   no such class has a run does it walk its own class's list, so a request is refused only
//!   when no free run fits it.
//! - **Each run handed out, tagged.** Its length is written at its first unit, beside the
//!   pool too. A free is valid iff it names such a run exactly (a shrink likewise), which one
//!   comparison checks: a double free, a range inside or across runs, or a wrong length is
//!   refused and changes nothing. TLSF trusts its caller here; NF, which serves a runtime whose
//!   bugs would otherwise hand one device's bytes to two buffers, does not, and pays one load.
//! - **The single units freed last, kept back.** A freed single unit is kept (up to 16) rather
//!   than filed, and the next single-unit request takes the one kept last: a frame loop that
//!   frees and allocates single units pays only the unit's run tag, not the index, and gets
//!   back a unit whose tag is likely still in cache. A request that finds no run files the kept
//!   units first and asks again, so keeping them never refuses a request. This is what the
//!   seed design's roving next-fit cursor was for, at less cost.
//!
//! NF began as the seed's node table: nodes of 512 units, each with a one-cache-line map of
//! its free units, which validated a free unit by unit and said whether a run's neighbours
//! were free. Issue 29's stops (`docs/design.md`, "NF against TLSF and the offset allocator"
//! and after) moved the search to the index above. The maps were then only the validation of
//! frees, and their passes over each range were most of what kept NF slower than TLSF on
//! random sizes. The run tags validate in O(1) and the index's own tags say whether a
//! neighbour is a filed run, so the maps went (stop 52): NF now takes less time than TLSF on
//! random sizes, as well as on single units.
//!
//! The tags cost 20 bytes per unit (0.5 % of a 4 KiB unit), written once, zeroed, when the
//! pool is made. A pool holds at most [`MAX_UNITS`] units, since the tags keep units in 32
//! bits.
//!
//! # Where NF places a run, and when it refuses
//!
//! `alloc(units)` returns `None` iff `units == 0` or no run of `units` contiguous free units
//! exists, as the bitset. Where it places a run:
//!
//! - one unit: the single unit freed last, while some are kept;
//! - otherwise: the first unit of a free run of the least size class whose every length is at
//!   least `units`, the run filed last of that class; if no run has such a class, a run of
//!   `units`' own class at least that long, the one filed last; and if none, the same once the
//!   kept units are filed. Runs are those not cut by kept units; a run is filed anew when it
//!   is cut from another or joined with its neighbours, and the parts a shrink frees are
//!   filed, never kept.
//!
//! Both allocators report [`UnitAllocator::largest_free_run`] as the true longest free run of
//! the pool, kept units included, which is also the largest request NF grants. The bitset,
//! which only knows which units are allocated, frees any range of allocated units; NF frees
//! only its runs.

mod bitset;
mod nf;
mod runs;

pub use bitset::BitsetAllocator;
pub use nf::{NfAllocator, MAX_UNITS};

use std::ops::Range;

/// Why a free was refused. A refused free changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreeError {
    /// A zero-length free: no allocation has zero units, so this is always a caller bug.
    #[error("free of zero units at unit {start}")]
    ZeroUnits {
        /// The unit the free named.
        start: usize,
    },
    /// The range `start..start + units` does not lie inside the pool.
    #[error("free of units {start}..{start}+{units} is outside the pool of {capacity} units")]
    OutOfRange {
        /// First unit of the range.
        start: usize,
        /// Length of the range.
        units: usize,
        /// Units in the pool.
        capacity: usize,
    },
    /// `unit` (the first such unit of the range) is already free: a double free, or a range
    /// that was never allocated as a whole.
    #[error("free of unit {unit}, which is not allocated")]
    NotAllocated {
        /// The lowest unit of the range that is free.
        unit: usize,
    },
    /// No run of `units` units handed out starts at `start`: nothing handed out starts there
    /// (a double free, or a range that starts inside a run or in free units), or the run there
    /// is `allocated` units long. An allocator that tags its runs ([`NfAllocator`]) refuses
    /// so; the bitset knows only which units are allocated, and says [`FreeError::NotAllocated`].
    #[error("free of units {start}..{start}+{units}, which is not a run handed out{}", run_there(*.allocated))]
    NotARun {
        /// First unit of the range.
        start: usize,
        /// Length of the range.
        units: usize,
        /// Length of the run handed out that starts at `start`, if one does.
        allocated: Option<usize>,
    },
    /// A shrink to `keep`, which is not a non-empty part of the run's `0..units`.
    #[error("shrink of the run at unit {start} ({units} units) to its units {keep:?}, which are not a non-empty part of it")]
    KeepOutside {
        /// First unit of the run.
        start: usize,
        /// Length of the run.
        units: usize,
        /// The units to keep, counted from `start`.
        keep: Range<usize>,
    },
}

/// The end of [`FreeError::NotARun`]'s message: the length of the run at its start, if any.
fn run_there(allocated: Option<usize>) -> String {
    allocated.map_or(String::new(), |n| {
        format!(" (the run there is {n} units long)")
    })
}

/// An allocator of contiguous runs of units from a fixed pool.
pub trait UnitAllocator {
    /// A pool of `capacity` units, all free.
    fn with_capacity(capacity: usize) -> Self
    where
        Self: Sized;
    /// First unit of `units` contiguous free units, now allocated; `None` if no such run
    /// exists (then nothing changed). `units == 0` returns `None`.
    fn alloc(&mut self, units: usize) -> Option<usize>;
    /// Frees a run previously returned by `alloc` (exactly that run, or what a shrink left of
    /// it). A range that is out of bounds or not fully allocated is refused with an error and
    /// changes nothing, and so is one that is not exactly such a run, where the allocator
    /// knows its runs (NF).
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError>;
    /// Frees the units of the run `start..start + units` (as for `free`) outside `keep`, a
    /// non-empty sub-range of `0..units`; the run is then `start + keep.start..start +
    /// keep.end`, where it was. Refused, changing nothing, where `free` of the run would be,
    /// or where `keep` is not such a sub-range.
    fn shrink(&mut self, start: usize, units: usize, keep: Range<usize>) -> Result<(), FreeError>;
    /// Number of units in the pool.
    fn capacity(&self) -> usize;
    /// Number of units currently free.
    fn free_units(&self) -> usize;
    /// Length of the longest free run (used to say "largest free block" in exhaustion
    /// errors). May be O(capacity).
    fn largest_free_run(&self) -> usize;
}

/// Validates a shrink's `keep` against its run; shared so both allocators refuse in the same
/// words.
fn check_keep(start: usize, units: usize, keep: &Range<usize>) -> Result<(), FreeError> {
    if keep.start < keep.end && keep.end <= units {
        return Ok(());
    }
    Err(FreeError::KeepOutside {
        start,
        units,
        keep: keep.clone(),
    })
}

/// Validates the bounds of a free; shared so both allocators refuse in the same words.
fn check_range(start: usize, units: usize, capacity: usize) -> Result<usize, FreeError> {
    if units == 0 {
        return Err(FreeError::ZeroUnits { start });
    }
    match start.checked_add(units) {
        Some(end) if end <= capacity => Ok(end),
        _ => Err(FreeError::OutOfRange {
            start,
            units,
            capacity,
        }),
    }
}
