//! `parallel_for!` saxpy over 1 M f32 against hand-written rayon over plain slices. The
//! buffers are host-resident, so what is measured is the loop machinery: one summary check per
//! buffer, the bounds checks before the loop, rayon with the same chunking.
//! Goal: within 5 % of hand-written rayon.
//!
//! `cargo bench -p rimms --bench parallel_for`

use divan::{black_box, Bencher};
use rayon::prelude::*;
use rimms::{HeteData, Runtime};

const N: usize = 1 << 20;

fn main() {
    divan::main();
}

#[divan::bench]
fn saxpy_parallel_for(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let x = HeteData::from_slice(&rt, &vec![1.5f32; N]).expect("x");
    let mut y = HeteData::from_slice(&rt, &vec![0.5f32; N]).expect("y");
    let a = black_box(2.0f32);
    bencher.bench_local(|| {
        rimms::parallel_for!(for i in 0..N {
            y[i] = a * x[i] + y[i];
        })
    });
}

#[divan::bench]
fn saxpy_hand_rayon(bencher: Bencher) {
    let x = vec![1.5f32; N];
    let mut y = vec![0.5f32; N];
    let a = black_box(2.0f32);
    bencher.bench_local(|| {
        y.par_iter_mut()
            .zip(x.par_iter())
            .with_min_len(rimms::DEFAULT_FRAGMENT_BYTES / 4)
            .for_each(|(y, x)| *y += a * x);
    });
}
