//! The frame-loop reuse pattern against allocating each frame's buffers anew.
//!
//! A radar pipeline processes one frame after another with buffers of the same shapes. The
//! RIMMS way is to allocate them once and `reset()` them at the start of every frame: the
//! blocks stay where they are in every space, and the zero mark makes the old contents
//! unreadable without touching a byte. Allocating and freeing per frame instead pays a pool
//! allocation in every space the frame uses, and a free of each. Both variants here do the same
//! frame (three 2,048-sample buffers, each written on a sim device, one read back), so the
//! difference is the allocation cost alone.
//!
//! `cargo bench -p rimms --bench frame_reuse`

use divan::{black_box, Bencher};
use rimms::{Complex32, Device, HeteData, Runtime, SimConfig};

const SAMPLES: usize = 2048;

fn main() {
    divan::main();
}

#[rimms::kernel(device = sim)]
fn fill(value: f32, #[out] y: &mut [Complex32]) {
    y.fill(Complex32::new(value, 0.0));
}

fn runtime() -> Runtime {
    Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime")
}

/// The frame's work once its buffers exist: each written on sim0, the last read back.
fn frame(rt: &Runtime, bufs: &mut [HeteData<Complex32>; 3]) -> f32 {
    for (k, b) in bufs.iter_mut().enumerate() {
        fill(rt, k as f32, b).expect("fill on sim0");
    }
    bufs[2].host().expect("read back")[0].re
}

#[divan::bench]
fn alloc_and_free_per_frame(bencher: Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        let mut bufs: [HeteData<Complex32>; 3] =
            std::array::from_fn(|_| HeteData::alloc(&rt, SAMPLES).expect("alloc"));
        black_box(frame(&rt, &mut bufs))
    });
}

#[divan::bench]
fn reset_per_frame(bencher: Bencher) {
    let rt = runtime();
    let mut bufs: [HeteData<Complex32>; 3] =
        std::array::from_fn(|_| HeteData::alloc(&rt, SAMPLES).expect("alloc"));
    bencher.bench_local(|| {
        for b in &mut bufs {
            b.reset();
        }
        black_box(frame(&rt, &mut bufs))
    });
}

/// The pool traffic alone: what `reset_per_frame` saves per frame.
#[divan::bench]
fn alloc_free_only(bencher: Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        let bufs: [HeteData<Complex32>; 3] =
            std::array::from_fn(|_| HeteData::alloc(&rt, SAMPLES).expect("alloc"));
        for b in &bufs {
            b.prefetch(Device::Sim(0)).expect("a block on sim0");
        }
        black_box(bufs)
    });
}
