//! NF against the best-known free-list allocators on the same workloads: Sebastian Aaltonen's
//! O(1) offset allocator (the `offset-allocator` crate, bins of a small-float size class) and
//! TLSF (the `rlsf` crate), with the bitset baseline beside them. The two rivals are
//! benchmark-only dev-dependencies.
//!
//! `cargo bench -p rimms-runtime --bench alloc_rivals -- --sample-count 20 --min-time 0.05`
//!
//! - `pairs`: single-unit alloc + free pairs on a pool of 8,192 units at 0, 50 and 90 %
//!   occupancy (time per iteration / 4,096 = one pair).
//! - `pairs_by_pool`: the same at 50 % occupancy in pools of 1 Ki, 64 Ki and 1 Mi units.
//! - `random_sizes`: the fragmenting workload below, timed (20,000 steps on 64 Ki units).
//! - Before the timings, `main` prints the fragmenting workload: random sizes of 1 to 1,024
//!   units, allocated and freed at random around 70 % occupancy, then the largest allocation
//!   each allocator still grants (and how many requests it refused on the way).
//!
//! Every allocator runs the same driver through [`Pool`]: it fills the pool with single units,
//! frees a seeded random share, then each pair allocates one unit and frees a random live
//! allocation chosen from a precomputed index list, so the pool stays at its occupancy
//! across iterations (no clone: TLSF's state lives inside the memory it manages). The live
//! list holds 8-byte handles for every allocator, so its cache misses weigh the same.
//!
//! How each maps a unit: NF and the bitset count units; the offset allocator counts units;
//! TLSF manages real memory, so a unit is its 32-byte granule and an allocation of `u` units
//! asks for `32 u − 16` bytes (its 16-byte header fills the rest of the granules).

use divan::{black_box, Bencher};
use rimms_runtime::alloc::{BitsetAllocator, NfAllocator};
use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

fn main() {
    fragmentation_report();
    divan::main();
}

/// Pairs per iteration.
const OPS: usize = 4096;

#[path = "common/xorshift.rs"]
mod xorshift;

#[path = "common/fill.rs"]
mod fill;
use fill::FillWithUnits;
use xorshift::XorShift;

/// One allocator as the driver sees it: runs of units in, a handle out, the handle back.
trait Pool {
    type Handle: Copy;
    fn new(capacity: usize) -> Self;
    fn alloc(&mut self, units: usize) -> Option<Self::Handle>;
    fn free(&mut self, handle: Self::Handle);
    /// Every unit allocated, one handle per unit.
    fn fill_with_units(&mut self, capacity: usize) -> Vec<Self::Handle> {
        (0..capacity)
            .map(|_| self.alloc(1).expect("an empty pool takes every unit"))
            .collect()
    }
}

/// NF or the bitset; the handle is (start, units).
struct Units<A>(A);

impl<A: FillWithUnits> Pool for Units<A> {
    type Handle = (u32, u32);

    fn new(capacity: usize) -> Self {
        Units(A::with_capacity(capacity))
    }

    fn alloc(&mut self, units: usize) -> Option<(u32, u32)> {
        // Pools here are far below 4 Gi units.
        self.0.alloc(units).map(|s| (s as u32, units as u32))
    }

    fn free(&mut self, (start, units): (u32, u32)) {
        let freed = self.0.free(start as usize, units as usize);
        debug_assert!(freed.is_ok());
        black_box(freed.is_ok());
    }

    fn fill_with_units(&mut self, capacity: usize) -> Vec<(u32, u32)> {
        self.0.fill_with_units(capacity);
        (0..capacity as u32).map(|u| (u, 1)).collect()
    }
}

struct OffsetAllocator(offset_allocator::Allocator<u32>);

impl Pool for OffsetAllocator {
    type Handle = offset_allocator::Allocation<u32>;

    fn new(capacity: usize) -> Self {
        // One node per live allocation at most, plus the free regions between them.
        let max_allocs = (2 * capacity + 16) as u32;
        OffsetAllocator(offset_allocator::Allocator::with_max_allocs(
            capacity as u32,
            max_allocs,
        ))
    }

    fn alloc(&mut self, units: usize) -> Option<Self::Handle> {
        self.0.allocate(units as u32)
    }

    fn free(&mut self, handle: Self::Handle) {
        self.0.free(handle);
    }
}

/// TLSF's granule: a unit.
const TLSF_UNIT: usize = rlsf::GRANULARITY;
/// 8 Gi of 32-byte granules at most; two-level lists of 32 classes per power of two.
type Tlsf = rlsf::Tlsf<'static, u32, u32, 28, 32>;

struct TlsfPool {
    // Declared first so it is dropped before the memory it points into.
    tlsf: Tlsf,
    _memory: Box<[MaybeUninit<u8>]>,
}

impl TlsfPool {
    fn layout(units: usize) -> Layout {
        Layout::from_size_align(units * TLSF_UNIT - TLSF_UNIT / 2, TLSF_UNIT / 2)
            .expect("a valid layout")
    }
}

impl Pool for TlsfPool {
    type Handle = NonNull<u8>;

    fn new(capacity: usize) -> Self {
        // Room for alignment and TLSF's sentinel block at the end.
        let mut memory: Box<[MaybeUninit<u8>]> =
            vec![MaybeUninit::uninit(); capacity * TLSF_UNIT + 4 * TLSF_UNIT].into_boxed_slice();
        let mut tlsf = Tlsf::new();
        let block =
            NonNull::slice_from_raw_parts(NonNull::from(&mut *memory).cast::<u8>(), memory.len());
        // SAFETY: `block` is the whole of `memory`, which nothing else references while the
        // pool lives; the pool owns it and drops `tlsf` first, so TLSF never touches it after
        // it is freed; a boxed slice's memory does not move when the box does.
        unsafe { tlsf.insert_free_block_ptr(block) };
        TlsfPool {
            tlsf,
            _memory: memory,
        }
    }

    fn alloc(&mut self, units: usize) -> Option<NonNull<u8>> {
        self.tlsf.allocate(Self::layout(units))
    }

    fn free(&mut self, ptr: NonNull<u8>) {
        // SAFETY: every handle the driver frees came from `alloc` on this pool with the
        // alignment `layout` gives, and is freed once (it leaves the live list when freed).
        unsafe { self.tlsf.deallocate(ptr, TLSF_UNIT / 2) };
    }
}

/// A pool at `occupancy_pct` % of `capacity` in single units, its live handles, and the index
/// in the live list of the allocation each of the next [`OPS`] pairs frees.
fn setup<P: Pool>(capacity: usize, occupancy_pct: usize) -> (P, Vec<P::Handle>, Vec<usize>) {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ capacity as u64);
    let mut pool = P::new(capacity);
    let mut units = pool.fill_with_units(capacity);
    let to_free = capacity - capacity * occupancy_pct / 100;
    // Partial Fisher–Yates: the first `to_free` handles become a uniform random subset.
    for i in 0..to_free {
        let j = i + rng.below(capacity - i);
        units.swap(i, j);
    }
    for &h in &units[..to_free] {
        pool.free(h);
    }
    let live = units.split_off(to_free);
    // Each pair pushes one and removes one, so the list has `live.len() + 1` entries whenever
    // one is picked.
    let victims = (0..OPS).map(|_| rng.below(live.len() + 1)).collect();
    (pool, live, victims)
}

fn pairs_of<P: Pool>(bencher: Bencher, capacity: usize, occupancy_pct: usize) {
    let (mut pool, mut live, victims) = setup::<P>(capacity, occupancy_pct);
    bencher.bench_local(|| {
        for &v in &victims {
            let h = pool.alloc(1).expect("the pool is never full here");
            live.push(h);
            pool.free(live.swap_remove(v));
        }
    });
}

/// 8,192 units at 0, 50 and 90 % occupancy.
#[divan::bench(
    types = [Units<NfAllocator>, Units<BitsetAllocator>, OffsetAllocator, TlsfPool],
    args = [0, 50, 90],
)]
fn pairs<P: Pool>(bencher: Bencher, occupancy_pct: usize) {
    pairs_of::<P>(bencher, 8192, occupancy_pct);
}

/// Pools of 1 Ki, 64 Ki and 1 Mi units at 50 % occupancy.
#[divan::bench(
    types = [Units<NfAllocator>, Units<BitsetAllocator>, OffsetAllocator, TlsfPool],
    args = [1024, 65_536, 1_048_576],
)]
fn pairs_by_pool<P: Pool>(bencher: Bencher, capacity: usize) {
    pairs_of::<P>(bencher, capacity, 50);
}

/// What the fragmenting workload left: units free, refusals on the way, and the largest
/// allocation granted at the end.
struct Fragmentation {
    free_units: usize,
    refused: usize,
    largest_granted: usize,
}

/// Random sizes (log-uniform from 1 to 1,024 units, so small ones dominate but large ones
/// come), allocated while under 70 % occupancy and freed at random above it, for `steps`
/// steps; refusals are counted and skipped.
fn fragment<P: Pool>(capacity: usize, steps: usize) -> Fragmentation {
    fragment_pool(P::new(capacity), capacity, steps)
}

fn fragment_pool<P: Pool>(mut pool: P, capacity: usize, steps: usize) -> Fragmentation {
    let mut rng = XorShift(0x5E_ED0F_F4A6);
    let mut live: Vec<(P::Handle, usize)> = Vec::new();
    let (mut used, mut refused) = (0, 0);
    for _ in 0..steps {
        let grow = used * 100 < capacity * 70 && rng.below(4) != 0;
        if grow || live.is_empty() {
            let units = (1usize << rng.below(11)).min(1024);
            let units = units + rng.below(units);
            let units = units.min(1024);
            match pool.alloc(units) {
                Some(h) => {
                    live.push((h, units));
                    used += units;
                }
                None => refused += 1,
            }
        } else {
            let (h, units) = live.swap_remove(rng.below(live.len()));
            pool.free(h);
            used -= units;
        }
    }
    // The largest request granted, by bisection over sizes (a grant is freed at once).
    let (mut lo, mut hi) = (0, capacity - used);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        match pool.alloc(mid) {
            Some(h) => {
                pool.free(h);
                lo = mid;
            }
            None => hi = mid - 1,
        }
    }
    Fragmentation {
        free_units: capacity - used,
        refused,
        largest_granted: lo,
    }
}

/// The fragmenting workload timed: 20,000 steps on a fresh pool of 64 Ki units (the pool is
/// made untimed), then the bisection for the largest grant.
#[divan::bench(types = [Units<NfAllocator>, Units<BitsetAllocator>, OffsetAllocator, TlsfPool])]
fn random_sizes<P: Pool>(bencher: Bencher) {
    const CAPACITY: usize = 1 << 16;
    bencher
        .with_inputs(|| P::new(CAPACITY))
        .bench_local_values(|pool| fragment_pool(pool, CAPACITY, 20_000).largest_granted);
}

fn fragmentation_report() {
    const CAPACITY: usize = 1 << 16;
    const STEPS: usize = 200_000;
    println!(
        "fragmenting workload: {CAPACITY} units, {STEPS} steps, sizes 1..=1024, ~70 % occupancy"
    );
    println!(
        "{:<12} {:>10} {:>10} {:>16}",
        "allocator", "free", "refused", "largest granted"
    );
    let rows = [
        ("nf", fragment::<Units<NfAllocator>>(CAPACITY, STEPS)),
        (
            "bitset",
            fragment::<Units<BitsetAllocator>>(CAPACITY, STEPS),
        ),
        ("offset", fragment::<OffsetAllocator>(CAPACITY, STEPS)),
        ("tlsf", fragment::<TlsfPool>(CAPACITY, STEPS)),
    ];
    for (name, f) in rows {
        println!(
            "{name:<12} {:>10} {:>10} {:>16}",
            f.free_units, f.refused, f.largest_granted
        );
    }
    println!();
}
