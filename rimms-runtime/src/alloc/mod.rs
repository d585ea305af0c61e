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
//!   exactly one 64-byte cache line (`#[repr(C, align(64))]`). Finding or checking a run
//!   inside a node touches one line, and nodes never share a line, so a node is the natural
//!   unit of both search and of per-node bookkeeping. The per-node header (free count, the
//!   node's length, which map words have a free unit, whether its filed runs are stale)
//!   lives in a separate dense array of 6-byte entries: the last resort reads headers of
//!   many nodes but the maps of few, so keeping headers apart packs ten of them in a line
//!   instead of one. (Owner or LRU fields the design mentions would go
//!   there too, without touching the maps.)
//! - **A summary level.** Two hierarchical bitsets over the nodes ("has room", "fully free"),
//!   each with upper levels of one bit per non-zero word below. Finding the next node with
//!   room, or the next fully free node, is a trailing-zero count per level: two levels cover
//!   4,096 nodes (2 M units), three cover 262,144 nodes (128 M units), so the lookup is O(1)
//!   in practice and never walks the node array.
//! - **A roving next-fit cursor for single units.** A single unit comes from the node of the
//!   last allocation while it has room. In a frame loop that allocates and frees the same
//!   sizes, that node usually has room for the next one, so its header answers without the
//!   summary and its map is already in cache.
//! - **An index of free runs by size class (what TLSF has).** Every free run of `2..512`
//!   units inside a node is filed under the class of its length (`classes.rs`: TLSF's power
//!   of two and four linear subdivisions of it; the 36 classes fit one word), as one bit at
//!   its first unit in that class's `Levels` over the pool's units, with each class's lowest
//!   run kept beside it. The node's map serves as TLSF's boundary tags: a run's ends are a
//!   trailing- or leading-zero count away, so no tag array is kept. A request of `2..512`
//!   units takes the lowest of: the lowest run of the classes whose every length fits (a
//!   minimum over at most 36 numbers), the lowest whole free node, and the first run of the
//!   request's own class that is long enough (measured, and only below the others). That
//!   is first fit by address, found without walking nodes or searching maps run by run.
//!   Lowest address, not TLSF's good fit: NF keeps runs inside nodes, and requests of a node
//!   or more need whole free nodes or runs across node boundaries, which packing towards
//!   unit 0 leaves (`benches/alloc_rivals.rs`, fragmenting workload: good fit by class
//!   refused 683 requests, this none, like TLSF).
//!   What it does not buy yet is speed on that workload. The search is cheap, and the take
//!   and free around it are leaner than they were (a take starts at a run head whose length
//!   the search measured, and moves the run in place when its rest stays in its class; a
//!   free inside one node checks and sets its bits a word mask at a time; a stale node
//!   refiles only the runs near its changed bits), but each is still a few `Levels` updates,
//!   map scans for the run ends and a minimum over the classes, where TLSF unlinks and links
//!   a list node. Callgrind, `random_sizes` (the report's 200,000 steps plus one timed run of
//!   20,000), `alloc` + `free`: NF 131.2 M instructions (184.8 M before the trimmed take and
//!   free, 145.8 M before `bitset::for_each_mask` stopped branching per word), TLSF
//!   17.0 M, the offset allocator 47.6 M. Per multi-unit request NF spends a few hundred
//!   instructions each taking, finding (about 115 of them the minimum over classes) and
//!   freeing a run, spread over the classes' sparse `Levels`, the map scans for run ends
//!   and the per-word masks, so it stays about 7.7x TLSF's instructions (issue 29).
//! - **Single units do not refile runs.** They change one bit and mark the node *stale*
//!   (once, until a multi-unit request refiles it), keeping a copy of the map as the index
//!   knew it, so a frame loop of single-unit pairs pays nothing for the index: refiling on
//!   every pair made those pairs three to six times slower. The next multi-unit request
//!   refiles only the runs that touch a bit that changed since (a run whose bits and
//!   bounding clear bits did not change is the same run), not the whole node as it did
//!   before (unfiling every class the node had held and rescanning its map).
//!
//! Per request size: one unit takes the lowest free unit of the cursor's node (or of the
//! next node with room, from the summary), found with a trailing-zero count of the header's
//! word mask and one of the word. `2..512` units take a run inside one node from the run
//! index as above, after refiling stale nodes. `512` or more units look for the first run of
//! fully free nodes in the "fully free" summary. A free validates the whole range first (in
//! bounds, every unit allocated), then sets bits, updates counts and refiles the runs it
//! joins (a free inside one node, the common case, with one mask per word for both), touching the summaries only when a node becomes empty, non-empty, fully free or no
//! longer fully free. If neither search finds a run, a last resort looks for the first run
//! across node boundaries: a free tail, fully free nodes, a free head, read from the headers
//! and the edge words of partly used nodes; so a request that fits anywhere is granted.
//!
//! The run index costs memory beside the maps: 36 bits per unit in the classes' sets (4.5
//! bytes per unit, 0.1 % of a 4 KiB unit), allocated zeroed, so the pages of classes that
//! never hold a run are never touched, and one bit per unit for the stale nodes' copies of
//! their maps.
//!
//! A single-unit alloc + free pair is about a hundred instructions whatever the pool size,
//! with no allocation and no loop over nodes; the benchmark's `per_op` group shows it flat
//! from 1 Ki to 1 Mi units, while the bitset's grows with the pool and its occupancy.
//!
//! # Where NF places a run, and when it refuses
//!
//! NF refuses exactly when the bitset does: `alloc(units)` returns `None` iff `units == 0` or
//! no run of `units` contiguous free units exists. Where it places a run:
//!
//! - `1 <= units < 512`: inside one node whenever some node holds `units` contiguous free
//!   units inside itself (for more than one unit, at the lowest such run that the run index
//!   offers: see above);
//! - `units >= 512`: from a node boundary over whole free nodes whenever there is a node `s`
//!   with `s * 512 + units <= capacity` such that the `ceil(units / 512)` nodes `s, s + 1, ...`
//!   are all fully free (every unit of each, up to `capacity`, free), at the first such `s`.
//!   It marks exactly `units` units, so the tail of its last node stays usable by smaller
//!   requests;
//! - otherwise (the *node rule* above finds nothing): at the first run of `units` free units
//!   in the pool, which then crosses node boundaries.
//!
//! Before the last resort and first fit for runs, NF refused the third case outright and
//! placed runs next fit: on a random-size workload at 70 % occupancy it refused over a
//! quarter of the requests, where the bitset, TLSF and the offset allocator refused none
//! (`cargo bench -p rimms-runtime --bench alloc_rivals` prints that workload). Both
//! allocators report [`UnitAllocator::largest_free_run`] as the true longest free run of the
//! pool, which is now also the largest request NF grants.

mod bitset;
mod classes;
mod levels;
mod nf;

pub use bitset::BitsetAllocator;
pub use nf::NfAllocator;

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
