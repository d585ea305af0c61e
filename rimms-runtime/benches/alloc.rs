//! NF allocator against the flat bitset baseline.
//!
//! Run with `cargo bench -p rimms-runtime --bench alloc`.
//!
//! Every benchmark iteration is [`OPS`] single-unit alloc + free pairs on a pool pre-filled
//! in a fragmented way (allocate everything, then free a seeded pseudo-random subset), so
//! occupancy stays constant while it runs. The throughput column counts one item per pair:
//! the time per alloc + free pair is `1 / (item/s)`, or the iteration time divided by 8,192.
//!
//! - `churn`: a pool of 8,192 units (4 KiB fragments of a 32 MiB pool) at 0 %, 50 % and 90 %
//!   occupancy.
//! - `per_op`: pools of 1 Ki, 64 Ki and 1 Mi units at 50 % occupancy, to see how the cost of
//!   a pair grows with the pool.
//!
//! Only the pairs are timed. The pre-filled pool is built once per case and cloned as each
//! iteration's input, untimed. The unit freed by each pair (a pseudo-random live one) is
//! worked out in advance by replaying the same pairs on a copy, which gives the same results
//! because the allocators are deterministic; the timed loop then reads the victims in order,
//! doing no RNG work and no random access to a live list (which at 1 Mi units would be an
//! 8 MiB table and add cache misses that are not the allocator's).

use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use rimms_runtime::alloc::{BitsetAllocator, NfAllocator};

/// Alloc + free pairs per iteration.
const OPS: usize = 8192;

fn main() {
    divan::main();
}

#[path = "common/xorshift.rs"]
mod xorshift;
use xorshift::XorShift;

#[path = "common/fill.rs"]
mod fill;
use fill::FillWithUnits;

/// A pool of `capacity` units with `occupancy_pct` % of them allocated as single units at
/// scattered positions, the live units, and the unit each of the next [`OPS`] pairs frees.
fn setup<A: FillWithUnits + Clone>(capacity: usize, occupancy_pct: usize) -> (A, Vec<usize>) {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ capacity as u64);
    let mut a = A::with_capacity(capacity);
    a.fill_with_units(capacity);
    let mut units: Vec<usize> = (0..capacity).collect();
    let to_free = capacity - capacity * occupancy_pct / 100;
    // Partial Fisher–Yates: the first `to_free` entries become a uniform random subset.
    for i in 0..to_free {
        let j = i + rng.below(capacity - i);
        units.swap(i, j);
    }
    for &u in &units[..to_free] {
        a.free(u, 1).expect("unit is allocated");
    }
    let mut live = units.split_off(to_free);

    let mut replay = a.clone();
    let mut victims = Vec::with_capacity(OPS);
    for _ in 0..OPS {
        let got = replay.alloc(1).expect("the pool is never full here");
        live.push(got);
        let v = live.swap_remove(rng.below(live.len()));
        replay.free(v, 1).expect("victim is live");
        victims.push(v);
    }
    (a, victims)
}

fn run<A: FillWithUnits + Clone>(bencher: Bencher, capacity: usize, occupancy_pct: usize) {
    let (pool, victims) = setup::<A>(capacity, occupancy_pct);
    bencher
        .counter(ItemsCount::new(OPS))
        .with_inputs(|| pool.clone())
        .bench_local_refs(|a| {
            for &v in &victims {
                black_box(a.alloc(1));
                // Only the outcome, as a caller would branch on it: black-boxing the whole
                // `Result` would time a store-forwarding stall of the harness, not the free.
                black_box(a.free(v, 1).is_ok());
            }
        });
}

/// 8,192 units (32 MiB of 4 KiB fragments) at 0, 50 and 90 % occupancy.
#[divan::bench(types = [NfAllocator, BitsetAllocator], args = [0, 50, 90])]
fn churn<A: FillWithUnits + Clone>(bencher: Bencher, occupancy_pct: usize) {
    run::<A>(bencher, 8192, occupancy_pct);
}

/// Pools of 1 Ki, 64 Ki and 1 Mi units at 50 % occupancy.
#[divan::bench(types = [NfAllocator, BitsetAllocator], args = [1024, 65_536, 1_048_576])]
fn per_op<A: FillWithUnits + Clone>(bencher: Bencher, capacity: usize) {
    run::<A>(bencher, capacity, 50);
}
