//! Each CPU built-in beside its direct twin on the same data: the same rustfft plan called by
//! hand for `fft`, a plain loop for the element-wise ones. Goal: every built-in within 1.10x of
//! its twin, single-threaded (`seq_*`, both run inside a one-thread rayon pool) and with
//! rayon (`par_*`, the global pool; the twins split the work with rayon as a user would).
//!
//! The data is the shape of a range–Doppler frame, 64 rows of 1,024 complex samples, already on
//! the host, so the built-in's time is its kernel plus the runtime's call overhead (shape
//! checks, the resident check, plan lookup, counters).
//!
//! `cargo bench -p rimms-runtime --bench builtins -- --sample-count 20 --min-time 0.05`

use divan::{black_box, Bencher};
use num_complex::Complex32 as C32;
use rayon::prelude::*;
use rimms_runtime::{Device, FftDirection, HeteData, Runtime, ZipOp};
use rustfft::{Fft, FftPlanner};
use std::sync::{Arc, OnceLock};

const ROWS: usize = 64;
const COLS: usize = 1024;
const LEN: usize = ROWS * COLS;

fn main() {
    divan::main();
}

/// A one-thread rayon pool: `par_*` code run inside it is sequential, for runtime and twin alike.
fn one_thread() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool")
    })
}

/// Runs `f` single-threaded (`seq`) or on the global pool.
fn threads<R: Send>(seq: bool, f: impl FnOnce() -> R + Send) -> R {
    if seq {
        one_thread().install(f)
    } else {
        f()
    }
}

fn signal() -> Vec<C32> {
    (0..LEN)
        .map(|i| {
            let t = i as f32 * 0.001;
            C32::new(t.sin(), (1.3 * t).cos())
        })
        .collect()
}

fn plan() -> Arc<dyn Fft<f32>> {
    FftPlanner::new().plan_fft_forward(COLS)
}

/// Rows per task the twins give rayon: what the built-in's FFT grain gives it (4 Ki points).
const FFT_ROWS_PER_TASK: usize = 4;
/// Elements per task of the twins' element-wise loops (the built-ins' grain).
const ELEMENTWISE_CHUNK: usize = 1 << 15;

// ---------------------------------------------------------------------------------------------
// FFT: 64 rows of 1,024 points, out of place (the input is kept), in one batched call.

fn fft_builtin(bencher: Bencher, seq: bool) {
    let rt = Runtime::new().expect("runtime");
    let x = HeteData::from_slice(&rt, &signal()).expect("x");
    let mut y = HeteData::<C32>::alloc(&rt, LEN).expect("y");
    rt.fft(Device::Cpu, FftDirection::Forward, COLS, &x, &mut y)
        .expect("warm-up");
    bencher.bench_local(|| {
        threads(seq, || {
            rt.fft(Device::Cpu, FftDirection::Forward, COLS, &x, &mut y)
                .expect("fft")
        })
    });
}

/// rustfft as a user calls it to keep the input: the immutable transform, each rayon task
/// with its own scratch buffer.
fn fft_direct(bencher: Bencher, seq: bool) {
    let plan = plan();
    let x = signal();
    let mut y = vec![C32::default(); LEN];
    let scratch_len = plan.get_immutable_scratch_len();
    bencher.bench_local(|| {
        threads(seq, || {
            y.par_chunks_mut(COLS * FFT_ROWS_PER_TASK)
                .zip(x.par_chunks(COLS * FFT_ROWS_PER_TASK))
                .for_each_init(
                    || vec![C32::default(); scratch_len],
                    |scratch, (out, input)| {
                        plan.process_immutable_with_scratch(input, out, scratch)
                    },
                );
            black_box(&mut y);
        })
    });
}

/// The twin with nothing around it: one scratch buffer made once, the whole batch in one call.
#[divan::bench]
fn seq_fft_direct_one_scratch(bencher: Bencher) {
    let plan = plan();
    let x = signal();
    let mut y = vec![C32::default(); LEN];
    let mut scratch = vec![C32::default(); plan.get_immutable_scratch_len()];
    bencher.bench_local(|| {
        plan.process_immutable_with_scratch(&x, &mut y, &mut scratch);
        black_box(&mut y);
    });
}

/// How the built-in did it before: copy the input to the output, transform in place.
#[divan::bench]
fn seq_fft_direct_copy_in_place(bencher: Bencher) {
    let plan = plan();
    let x = signal();
    let mut y = vec![C32::default(); LEN];
    let mut scratch = vec![C32::default(); plan.get_inplace_scratch_len()];
    bencher.bench_local(|| {
        y.copy_from_slice(&x);
        plan.process_with_scratch(&mut y, &mut scratch);
        black_box(&mut y);
    });
}

#[divan::bench]
fn seq_fft_builtin(bencher: Bencher) {
    fft_builtin(bencher, true);
}

#[divan::bench]
fn seq_fft_direct(bencher: Bencher) {
    fft_direct(bencher, true);
}

#[divan::bench]
fn par_fft_builtin(bencher: Bencher) {
    fft_builtin(bencher, false);
}

#[divan::bench]
fn par_fft_direct(bencher: Bencher) {
    fft_direct(bencher, false);
}

/// One FFT call per row (64 calls of 1,024 points), as CEDR's apps submit them; its twin is
/// `seq_fft_direct_one_scratch`.
#[divan::bench]
fn seq_fft_per_row_builtin(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let x = HeteData::from_slice(&rt, &signal()).expect("x");
    let mut y = HeteData::<C32>::alloc(&rt, LEN).expect("y");
    let rows_in = x.rows(COLS).expect("rows");
    let mut rows_out = y.rows_mut(COLS).expect("rows");
    bencher.bench_local(|| {
        for (r, o) in rows_in.iter().zip(rows_out.iter_mut()) {
            rt.fft(Device::Cpu, FftDirection::Forward, COLS, r, o)
                .expect("fft");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// ZIP (multiply) of two 64 × 1,024 matrices: one whole call, and one call per row.

fn zip_builtin(bencher: Bencher, seq: bool) {
    let rt = Runtime::new().expect("runtime");
    let a = HeteData::from_slice(&rt, &signal()).expect("a");
    let b = HeteData::from_slice(&rt, &signal()).expect("b");
    let mut out = HeteData::<C32>::alloc(&rt, LEN).expect("out");
    bencher.bench_local(|| {
        threads(seq, || {
            rt.zip(Device::Cpu, ZipOp::Mul, &a, &b, &mut out)
                .expect("zip")
        })
    });
}

fn zip_direct(bencher: Bencher, seq: bool) {
    let (a, b) = (signal(), signal());
    let mut out = vec![C32::default(); LEN];
    bencher.bench_local(|| {
        threads(seq, || {
            out.par_chunks_mut(ELEMENTWISE_CHUNK)
                .zip(a.par_chunks(ELEMENTWISE_CHUNK))
                .zip(b.par_chunks(ELEMENTWISE_CHUNK))
                .for_each(|((o, a), b)| {
                    for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                        *o = x * y;
                    }
                });
            black_box(&mut out);
        })
    });
}

#[divan::bench]
fn seq_zip_builtin(bencher: Bencher) {
    zip_builtin(bencher, true);
}

#[divan::bench]
fn seq_zip_direct(bencher: Bencher) {
    zip_direct(bencher, true);
}

#[divan::bench]
fn par_zip_builtin(bencher: Bencher) {
    zip_builtin(bencher, false);
}

#[divan::bench]
fn par_zip_direct(bencher: Bencher) {
    zip_direct(bencher, false);
}

/// 64 row-wise calls (the user's pipeline) against a plain loop over the same rows.
#[divan::bench]
fn seq_zip_per_row_builtin(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let a = HeteData::from_slice(&rt, &signal()).expect("a");
    let b = HeteData::from_slice(&rt, &signal()).expect("b");
    let mut out = HeteData::<C32>::alloc(&rt, LEN).expect("out");
    let (rows_a, rows_b) = (a.rows(COLS).expect("rows"), b.rows(COLS).expect("rows"));
    let mut rows_out = out.rows_mut(COLS).expect("rows");
    bencher.bench_local(|| {
        for ((a, b), o) in rows_a.iter().zip(&rows_b).zip(rows_out.iter_mut()) {
            rt.zip(Device::Cpu, ZipOp::Mul, a, b, o).expect("zip");
        }
    });
}

#[divan::bench]
fn seq_zip_per_row_direct(bencher: Bencher) {
    let (a, b) = (signal(), signal());
    let mut out = vec![C32::default(); LEN];
    bencher.bench_local(|| {
        for ((o, a), b) in out
            .chunks_exact_mut(COLS)
            .zip(a.chunks_exact(COLS))
            .zip(b.chunks_exact(COLS))
        {
            for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                *o = x * y;
            }
            black_box(&mut *o);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// magnitude and power of 65,536 samples.

/// Which real-valued built-in: `magnitude` (|x|) or `power` (|x|²).
#[derive(Clone, Copy)]
enum Real {
    Magnitude,
    Power,
}

fn real_builtin(bencher: Bencher, seq: bool, which: Real) {
    let rt = Runtime::new().expect("runtime");
    let x = HeteData::from_slice(&rt, &signal()).expect("x");
    let mut out = HeteData::<f32>::alloc(&rt, LEN).expect("out");
    bencher.bench_local(|| {
        threads(seq, || match which {
            Real::Magnitude => rt.magnitude(Device::Cpu, &x, &mut out),
            Real::Power => rt.power(Device::Cpu, &x, &mut out),
        })
        .expect("call")
    });
}

fn real_direct(bencher: Bencher, seq: bool, f: impl Fn(C32) -> f32 + Sync) {
    let x = signal();
    let mut out = vec![0.0f32; LEN];
    bencher.bench_local(|| {
        threads(seq, || {
            out.par_chunks_mut(ELEMENTWISE_CHUNK)
                .zip(x.par_chunks(ELEMENTWISE_CHUNK))
                .for_each(|(o, x)| {
                    for (o, &x) in o.iter_mut().zip(x) {
                        *o = f(x);
                    }
                });
            black_box(&mut out);
        })
    });
}

/// |x| as a plain loop computes it without overflow for any finite f32: the square sum in
/// f64, where no f32 component can overflow or underflow, then one square root.
fn abs_f64(x: C32) -> f32 {
    let (re, im) = (f64::from(x.re), f64::from(x.im));
    (re * re + im * im).sqrt() as f32
}

#[divan::bench]
fn seq_magnitude_builtin(bencher: Bencher) {
    real_builtin(bencher, true, Real::Magnitude);
}

#[divan::bench]
fn seq_magnitude_direct(bencher: Bencher) {
    real_direct(bencher, true, abs_f64);
}

/// `norm()` (libm's `hypotf`) as a user might first write it, and as the built-in did: the
/// slow way to the same value.
#[divan::bench]
fn seq_magnitude_direct_hypot(bencher: Bencher) {
    real_direct(bencher, true, |x| x.norm());
}

/// `norm_sqr().sqrt()` in f32, the fastest plain loop: overflows above ~1.8e19 and loses
/// tiny inputs, which the built-in redoes exactly, so this is the twin it is held to.
#[divan::bench]
fn seq_magnitude_direct_f32_sqrt(bencher: Bencher) {
    real_direct(bencher, true, |x| x.norm_sqr().sqrt());
}

#[divan::bench]
fn par_magnitude_builtin(bencher: Bencher) {
    real_builtin(bencher, false, Real::Magnitude);
}

#[divan::bench]
fn par_magnitude_direct(bencher: Bencher) {
    real_direct(bencher, false, abs_f64);
}

#[divan::bench]
fn seq_power_builtin(bencher: Bencher) {
    real_builtin(bencher, true, Real::Power);
}

#[divan::bench]
fn seq_power_direct(bencher: Bencher) {
    real_direct(bencher, true, |x| x.norm_sqr());
}

#[divan::bench]
fn par_power_builtin(bencher: Bencher) {
    real_builtin(bencher, false, Real::Power);
}

#[divan::bench]
fn par_power_direct(bencher: Bencher) {
    real_direct(bencher, false, |x| x.norm_sqr());
}
