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
//! - **Cache-line nodes.** Units are grouped in nodes of 512; a node's free map is 512 bits,
//!   exactly one 64-byte cache line (`#[repr(C, align(64))]`). The maps say which units are
//!   free: a free is validated against them (every unit of the range allocated, or nothing
//!   changes), and a free run's neighbours are free or not by one bit each.
//! - **An index of the free runs (TLSF's, beside the pool).** Every maximal run of free units,
//!   across node boundaries, sits in a list by its size class (`runs.rs`: one class per length
//!   below 16, then 16 per power of two), two bitmaps say which classes have runs, and each
//!   run's length is written at its first unit and its first unit at its last (boundary tags),
//!   so a free joins its neighbours without a search. Unlike TLSF, the tags live in arrays
//!   beside the pool, not in headers inside it: a GPU's or an FPGA's memory cannot hold them.
//!   A request takes the head of the first run of the least class whose every length fits it
//!   (good fit), and only when no such class has a run does it walk its own class's list, so
//!   a request is refused only when no free run fits it.
//! - **The single units freed last, kept back.** A freed single unit is kept (up to 16) rather
//!   than filed, and the next single-unit request takes the one kept last: a frame loop that
//!   frees and allocates single units pays neither the index nor its tags, and gets back a
//!   unit whose node is likely still in cache. A request that finds no run files the kept
//!   units first and asks again, so keeping them never refuses a request. This is what the
//!   seed design's roving next-fit cursor was for, at less cost: with the cursor, a pair
//!   marked its node and paid for it in the next multi-unit request.
//!
//! Before the index, NF kept runs inside nodes, found them first fit by address through a
//! class index of its own over the units (36 sparse bitsets), and took requests of a node or
//! more from whole free nodes; that took 7.7 times TLSF's instructions on random sizes
//! (`docs/design.md`, "NF against TLSF"). The index above takes half the time there (750
//! against 1,550 µs on this machine), and fragments less than TLSF; single units cost about
//! what they did (faster on an empty pool, up to 12 % slower on a large one).
//!
//! The index costs 16 bytes per unit beside the maps (the tags: 0.4 % of a 4 KiB unit),
//! written once, zeroed, when the pool is made. A pool holds at most [`MAX_UNITS`] units,
//! since the tags keep units in 32 bits.
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
//!   is cut from another or joined with its neighbours.
//!
//! Both allocators report [`UnitAllocator::largest_free_run`] as the true longest free run of
//! the pool, kept units included, which is also the largest request NF grants.

mod bitset;
mod nf;
mod runs;

pub use bitset::BitsetAllocator;
pub use nf::{NfAllocator, MAX_UNITS};

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
    /// Frees a run previously returned by `alloc` (exactly that run). A range that is out of
    /// bounds or not fully allocated is refused with an error and changes nothing.
    fn free(&mut self, start: usize, units: usize) -> Result<(), FreeError>;
    /// Number of units in the pool.
    fn capacity(&self) -> usize;
    /// Number of units currently free.
    fn free_units(&self) -> usize;
    /// Length of the longest free run (used to say "largest free block" in exhaustion
    /// errors). May be O(capacity).
    fn largest_free_run(&self) -> usize;
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
