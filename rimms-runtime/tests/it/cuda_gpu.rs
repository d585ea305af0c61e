//! The CUDA backend on a real GPU: every built-in API against an independent CPU reference
//! in f64 (a direct DFT for `fft`, the textbook formulas for the rest), copies, ordering
//! across streams, pool exhaustion and the plan cache.
//!
//! Every test needs a GPU and is marked so (`#[ignore = "needs a GPU"]`): a plain `cargo test`
//! lists them as ignored, and `cargo test -- --ignored` (as the GPU kit does) runs them. Run
//! where there is no GPU, each prints `skipped: no GPU (<reason>)` and passes; set
//! `RIMMS_REQUIRE_GPU=1` (as `scripts/gpu-kit.sh run` does on a GPU) to make that a failure.
#![cfg(feature = "cuda")]

use rimms_runtime::backend::cuda::{
    BaselineAlloc, CudaBackend, DevRange, GpuAlloc, GpuOp, MemoryConfig,
};
use rimms_runtime::{Complex32, Error, FftDirection, ZipOp};
use std::sync::{Arc, OnceLock};

const POOL: usize = 256 << 20;
const TOL: f64 = 1e-4;

/// The shared backend of GPU 0, or `None` after printing why the test is skipped.
fn gpu() -> Option<&'static CudaBackend> {
    static GPU: OnceLock<Result<CudaBackend, String>> = OnceLock::new();
    let opened = GPU.get_or_init(|| open(MemoryConfig::new(POOL)));
    match opened {
        Ok(b) => Some(b),
        Err(why) => {
            skip(why);
            None
        }
    }
}

fn open(config: MemoryConfig) -> Result<CudaBackend, String> {
    match CudaBackend::require(0, config) {
        Ok(b) => Ok(b),
        Err(Error::NoGpu { why }) => Err(why),
        Err(e) => panic!("a GPU is present but the backend cannot start: {e}"),
    }
}

fn skip(why: &str) {
    let required = std::env::var("RIMMS_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "RIMMS_REQUIRE_GPU is set but there is no GPU: {why}"
    );
    println!("skipped: no GPU ({why})");
}

// ---- data and references ----

/// SplitMix64: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn c32(&mut self, n: usize) -> Vec<Complex32> {
        (0..n)
            .map(|_| Complex32::new(self.unit(), self.unit()))
            .collect()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

type C64 = (f64, f64);

fn d(x: Complex32) -> C64 {
    (x.re as f64, x.im as f64)
}
fn abs(x: C64) -> f64 {
    x.0.hypot(x.1)
}
fn mul(a: C64, b: C64) -> C64 {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}
fn dist(a: Complex32, b: C64) -> f64 {
    abs((a.re as f64 - b.0, a.im as f64 - b.1))
}

/// Direct DFT of each row of `points`, in f64; the inverse is scaled by 1/points.
fn dft(x: &[Complex32], points: usize, direction: FftDirection) -> Vec<C64> {
    let sign = match direction {
        FftDirection::Forward => -1.0,
        FftDirection::Inverse => 1.0,
    };
    let twiddle: Vec<C64> = (0..points)
        .map(|t| {
            let a = sign * 2.0 * std::f64::consts::PI * t as f64 / points as f64;
            (a.cos(), a.sin())
        })
        .collect();
    let scale = match direction {
        FftDirection::Forward => 1.0,
        FftDirection::Inverse => 1.0 / points as f64,
    };
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(points) {
        for k in 0..points {
            let mut acc = (0.0, 0.0);
            for (j, &v) in row.iter().enumerate() {
                let p = mul(d(v), twiddle[(j * k) % points]);
                acc = (acc.0 + p.0, acc.1 + p.1);
            }
            out.push((acc.0 * scale, acc.1 * scale));
        }
    }
    out
}

fn to_bytes(x: &[Complex32]) -> &[u8] {
    bytemuck::cast_slice(x)
}

// ---- helpers on the device ----

struct Buf<'a> {
    gpu: &'a CudaBackend,
    block: Option<GpuAlloc>,
}

impl Buf<'_> {
    fn range(&self) -> DevRange {
        self.block
            .as_ref()
            .map(|b| b.range())
            .unwrap_or(DevRange::new(0, 0))
    }
}

impl Drop for Buf<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.gpu.memory().free(b).unwrap();
        }
    }
}

fn upload<'a>(gpu: &'a CudaBackend, x: &[Complex32]) -> Buf<'a> {
    let buf = alloc(gpu, std::mem::size_of_val(x));
    gpu.memory()
        .copy_to_device(buf.range(), to_bytes(x))
        .unwrap();
    buf
}

fn alloc(gpu: &CudaBackend, bytes: usize) -> Buf<'_> {
    Buf {
        gpu,
        block: Some(gpu.memory().alloc(bytes).unwrap()),
    }
}

fn download(gpu: &CudaBackend, r: DevRange) -> Vec<Complex32> {
    let mut out = vec![Complex32::default(); r.len / 8];
    gpu.memory()
        .copy_to_host(r, bytemuck::cast_slice_mut(&mut out))
        .unwrap();
    out
}

/// Every element within `TOL` of the reference, relative to `scale(i)`.
fn assert_close(api: &str, got: &[Complex32], want: &[C64], scale: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{api}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let s = scale(i).max(f64::MIN_POSITIVE);
        assert!(
            dist(g, w) <= TOL * s,
            "{api}[{i}]: got {g}, want ({}, {}), error {} > {TOL} × {s}",
            w.0,
            w.1,
            dist(g, w)
        );
    }
}

// ---- the APIs ----

#[test]
#[ignore = "needs a GPU"]
fn fft_matches_a_direct_dft() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(1);
    for (points, batch) in [(8, 1), (64, 3), (100, 2), (256, 4), (2048, 2)] {
        let x = rng.c32(points * batch);
        let input = upload(gpu, &x);
        for direction in [FftDirection::Forward, FftDirection::Inverse] {
            let out = alloc(gpu, x.len() * 8);
            gpu.kernels()
                .fft(input.range(), out.range(), points, batch, direction)
                .unwrap()
                .wait()
                .unwrap();
            let got = download(gpu, out.range());
            let want = dft(&x, points, direction);
            // Relative to the largest value of the row: the error of an FFT is spread over
            // the whole transform, so it is bounded norm-wise, not element-wise.
            let row_max: Vec<f64> = want
                .chunks_exact(points)
                .map(|r| r.iter().map(|&v| abs(v)).fold(0.0, f64::max))
                .collect();
            assert_close(
                &format!("fft {points}×{batch} {direction:?}"),
                &got,
                &want,
                |i| row_max[i / points],
            );
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn fft_in_place_round_trip_returns_the_input() {
    let Some(gpu) = gpu() else { return };
    let x = Rng(2).c32(2048 * 8);
    let buf = upload(gpu, &x);
    let k = gpu.kernels();
    k.fft(buf.range(), buf.range(), 2048, 8, FftDirection::Forward)
        .unwrap();
    k.fft(buf.range(), buf.range(), 2048, 8, FftDirection::Inverse)
        .unwrap();
    let got = download(gpu, buf.range());
    let want: Vec<C64> = x.iter().map(|&v| d(v)).collect();
    assert_close("fft round trip", &got, &want, |_| 1.0);
}

#[test]
#[ignore = "needs a GPU"]
fn zip_matches_the_formulas() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(3);
    for len in [1, 1000, 4099, 70_001] {
        let a = rng.c32(len);
        let mut b = rng.c32(len);
        b[0] = Complex32::new(1e-3, -2e-3); // a small divisor
        let (da, db) = (upload(gpu, &a), upload(gpu, &b));
        for op in ZipOp::ALL {
            let out = alloc(gpu, len * 8);
            gpu.kernels()
                .zip(op, da.range(), db.range(), out.range(), len)
                .unwrap();
            let got = download(gpu, out.range());
            let want: Vec<C64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| {
                    let (x, y) = (d(x), d(y));
                    match op {
                        ZipOp::Add => (x.0 + y.0, x.1 + y.1),
                        ZipOp::Sub => (x.0 - y.0, x.1 - y.1),
                        ZipOp::Mul => mul(x, y),
                        ZipOp::Div => {
                            let n = y.0 * y.0 + y.1 * y.1;
                            let p = mul(x, (y.0, -y.1));
                            (p.0 / n, p.1 / n)
                        }
                        ZipOp::MulConj => mul(x, (y.0, -y.1)),
                    }
                })
                .collect();
            // The natural scale of each operation: the error bound of one rounding of each
            // term (|a| + |b| for sums, |a|·|b| for products, |a|/|b| for quotients).
            let scale = |i: usize| {
                let (x, y) = (abs(d(a[i])), abs(d(b[i])));
                match op {
                    ZipOp::Add | ZipOp::Sub => x + y,
                    ZipOp::Mul | ZipOp::MulConj => x * y,
                    ZipOp::Div => x / y,
                }
            };
            assert_close(&format!("zip {op:?} × {len}"), &got, &want, scale);
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn zip_in_place_is_allowed() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(4);
    let (a, b) = (rng.c32(5000), rng.c32(5000));
    let (da, db) = (upload(gpu, &a), upload(gpu, &b));
    gpu.kernels()
        .zip(ZipOp::Add, da.range(), db.range(), da.range(), 5000)
        .unwrap();
    let got = download(gpu, da.range());
    let want: Vec<C64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| (d(x).0 + d(y).0, d(x).1 + d(y).1))
        .collect();
    assert_close("zip in place", &got, &want, |i| abs(d(a[i])) + abs(d(b[i])));
}

#[test]
#[ignore = "needs a GPU"]
fn conj_is_exact() {
    let Some(gpu) = gpu() else { return };
    let x = Rng(5).c32(12_345);
    let input = upload(gpu, &x);
    let out = alloc(gpu, x.len() * 8);
    gpu.kernels()
        .conj(input.range(), out.range(), x.len())
        .unwrap();
    let want: Vec<Complex32> = x.iter().map(|v| v.conj()).collect();
    assert_eq!(download(gpu, out.range()), want);
}

#[test]
#[ignore = "needs a GPU"]
fn magnitude_matches_hypot() {
    let Some(gpu) = gpu() else { return };
    let mut x = Rng(6).c32(9999);
    x[0] = Complex32::new(3e30, -4e30); // overflows re² + im² in f32
    x[1] = Complex32::new(0.0, 0.0);
    let input = upload(gpu, &x);
    let out = alloc(gpu, x.len() * 4);
    gpu.kernels()
        .magnitude(input.range(), out.range(), x.len())
        .unwrap();
    let mut got = vec![0f32; x.len()];
    gpu.memory()
        .copy_to_host(out.range(), bytemuck::cast_slice_mut(&mut got))
        .unwrap();
    for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
        let want = abs(d(v));
        assert!(
            (g as f64 - want).abs() <= TOL * want.max(f64::MIN_POSITIVE),
            "magnitude[{i}] of {v}: got {g}, want {want}"
        );
    }
}

#[test]
#[ignore = "needs a GPU"]
fn scale_multiplies_by_a_complex_factor() {
    let Some(gpu) = gpu() else { return };
    let x = Rng(7).c32(4097);
    let factor = Complex32::new(0.75, -2.5);
    let input = upload(gpu, &x);
    let out = alloc(gpu, x.len() * 8);
    gpu.kernels()
        .scale(input.range(), out.range(), x.len(), factor)
        .unwrap();
    let want: Vec<C64> = x.iter().map(|&v| mul(d(v), d(factor))).collect();
    let got = download(gpu, out.range());
    assert_close("scale", &got, &want, |i| abs(d(x[i])) * abs(d(factor)));
}

#[test]
#[ignore = "needs a GPU"]
fn fftshift_swaps_row_halves_like_numpy() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(8);
    for (rows, cols) in [(1, 5), (1, 6), (3, 7), (17, 2048), (4, 1)] {
        let x = rng.c32(rows * cols);
        let input = upload(gpu, &x);
        let out = alloc(gpu, x.len() * 8);
        gpu.kernels()
            .fftshift(input.range(), out.range(), rows, cols)
            .unwrap();
        let mut want = vec![Complex32::default(); x.len()];
        for r in 0..rows {
            for c in 0..cols {
                want[r * cols + (c + cols / 2) % cols] = x[r * cols + c];
            }
        }
        assert_eq!(download(gpu, out.range()), want, "fftshift {rows}×{cols}");
    }
    // numpy.fft.fftshift([0, 1, 2, 3, 4]) == [3, 4, 0, 1, 2]
    let x: Vec<Complex32> = (0..5).map(|i| Complex32::new(i as f32, 0.0)).collect();
    let input = upload(gpu, &x);
    let out = alloc(gpu, 40);
    gpu.kernels()
        .fftshift(input.range(), out.range(), 1, 5)
        .unwrap();
    let got: Vec<f32> = download(gpu, out.range()).iter().map(|v| v.re).collect();
    assert_eq!(got, [3.0, 4.0, 0.0, 1.0, 2.0]);
}

#[test]
#[ignore = "needs a GPU"]
fn transpose_is_exact() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(9);
    for (rows, cols) in [(1, 1), (1, 40), (33, 65), (64, 32), (100, 7), (256, 512)] {
        let x = rng.c32(rows * cols);
        let input = upload(gpu, &x);
        let out = alloc(gpu, x.len() * 8);
        gpu.kernels()
            .transpose(input.range(), out.range(), rows, cols)
            .unwrap();
        let mut want = vec![Complex32::default(); x.len()];
        for r in 0..rows {
            for c in 0..cols {
                want[c * rows + r] = x[r * cols + c];
            }
        }
        assert_eq!(download(gpu, out.range()), want, "transpose {rows}×{cols}");
    }
}

#[test]
#[ignore = "needs a GPU"]
fn gemm_matches_the_sum_of_products() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(10);
    for (m, k, n) in [
        (1, 1, 1),
        (17, 33, 9),
        (64, 64, 64),
        (3, 0, 4),
        (40, 129, 31),
    ] {
        let (a, b) = (rng.c32(m * k), rng.c32(k * n));
        let (da, db) = (upload(gpu, &a), upload(gpu, &b));
        let out = alloc(gpu, m * n * 8);
        gpu.kernels()
            .gemm(da.range(), db.range(), out.range(), m, k, n)
            .unwrap();
        let mut want = vec![(0.0, 0.0); m * n];
        let mut scale = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let t = mul(d(a[i * k + p]), d(b[p * n + j]));
                    want[i * n + j].0 += t.0;
                    want[i * n + j].1 += t.1;
                    scale[i * n + j] += abs(d(a[i * k + p])) * abs(d(b[p * n + j]));
                }
            }
        }
        let got = download(gpu, out.range());
        // Relative to Σ|a||b|, the bound of a sum of k rounded products.
        assert_close(&format!("gemm {m}×{k}·{k}×{n}"), &got, &want, |i| {
            scale[i].max(1e-30)
        });
    }
}

#[test]
#[ignore = "needs a GPU"]
fn the_generic_entry_point_runs_every_op() {
    let Some(gpu) = gpu() else { return };
    let x = Rng(11).c32(64);
    let input = upload(gpu, &x);
    let out = alloc(gpu, 64 * 8);
    for op in [
        GpuOp::Fft {
            points: 64,
            batch: 1,
            direction: FftDirection::Forward,
        },
        GpuOp::Conj { len: 64 },
        GpuOp::Magnitude { len: 64 },
        GpuOp::FftShift { rows: 8, cols: 8 },
        GpuOp::Transpose { rows: 8, cols: 8 },
        GpuOp::Scale {
            len: 64,
            factor: Complex32::new(2.0, 0.0),
        },
    ] {
        gpu.kernels()
            .run(&op, &[input.range()], out.range())
            .unwrap();
    }
    for op in [
        GpuOp::Zip {
            op: ZipOp::Mul,
            len: 64,
        },
        GpuOp::Gemm { m: 8, k: 8, n: 8 },
    ] {
        gpu.kernels()
            .run(&op, &[input.range(), input.range()], out.range())
            .unwrap();
    }
    gpu.completion().unwrap();
}

// ---- sizes, pool, plans ----

#[test]
#[ignore = "needs a GPU"]
fn bad_shapes_are_refused_before_anything_runs() {
    let Some(gpu) = gpu() else { return };
    let k = gpu.kernels();
    let a = alloc(gpu, 64 * 8);
    let b = alloc(gpu, 64 * 8);
    let shape = |r: rimms_runtime::Result<_>| match r {
        Err(Error::Shape { .. }) | Err(Error::Unsupported { .. }) => {}
        other => panic!("expected a shape error, got {other:?}"),
    };
    // Too few bytes for the sizes.
    shape(k.conj(a.range(), b.range(), 65));
    shape(k.gemm(a.range(), a.range(), b.range(), 8, 9, 8));
    // Outside the pool.
    let cap = gpu.memory().capacity();
    shape(k.conj(DevRange::new(cap - 8, 64 * 8), b.range(), 64));
    shape(k.conj(DevRange::new(usize::MAX - 4, 64 * 8), b.range(), 64));
    // Overlap where the API cannot work in place, and partial overlap anywhere.
    shape(k.transpose(a.range(), a.range(), 8, 8));
    shape(k.conj(a.range(), a.range().sub(8, 63 * 8).unwrap(), 63));
    shape(k.magnitude(a.range(), a.range(), 64));
    // Misaligned complex values.
    shape(k.conj(a.range().sub(4, 8 * 8).unwrap(), b.range(), 8));
    // FFT sizes.
    shape(k.fft(a.range(), b.range(), 0, 1, FftDirection::Forward));
    // Copies of mismatched lengths.
    assert!(gpu.memory().copy_to_device(a.range(), &[0u8; 3]).is_err());
    // None of that broke the device.
    gpu.completion().unwrap();
}

#[test]
#[ignore = "needs a GPU"]
fn pool_exhaustion_names_the_space_and_sizes() {
    let Some(_) = gpu() else { return };
    let small = open(MemoryConfig::new(1 << 20)).expect("GPU 0 opened once already");
    let mem = small.memory();
    assert_eq!(mem.capacity(), 1 << 20);
    match mem.alloc(2 << 20) {
        Err(e @ Error::PoolExhausted { .. }) => {
            let Error::PoolExhausted {
                space,
                requested,
                free,
                largest_free,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(space, "gpu0");
            assert_eq!(
                (*requested, *free, *largest_free),
                (2 << 20, 1 << 20, 1 << 20)
            );
            let shown = e.to_string();
            assert!(
                shown.contains("gpu0") && shown.contains("2097152"),
                "{shown}"
            );
        }
        other => panic!("expected exhaustion, got {other:?}"),
    }
    let whole = mem.alloc(1 << 20).unwrap();
    assert!(matches!(
        mem.alloc(1),
        Err(Error::PoolExhausted { free: 0, .. })
    ));
    mem.free(whole).unwrap();
    let again = mem.alloc(1 << 20).unwrap();
    assert_eq!(mem.usage().in_use, 1 << 20);
    mem.free(again).unwrap();
    assert_eq!(mem.usage().in_use, 0);
}

#[test]
#[ignore = "needs a GPU"]
fn fft_plans_are_cached_per_size_and_batch() {
    let Some(gpu) = gpu() else { return };
    let k = gpu.kernels();
    let p1 = k.fft_plan(512, 7).unwrap();
    let p2 = k.fft_plan(512, 7).unwrap();
    assert!(Arc::ptr_eq(&p1, &p2));
    assert_eq!(p1.handle(), p2.handle());
    let other = k.fft_plan(512, 8).unwrap();
    assert_ne!(other.handle(), p1.handle());
    // Running both directions reuses the same plan. (The cache is shared with tests running
    // alongside, so it is checked by identity, not by counting.)
    let x = alloc(gpu, 512 * 7 * 8);
    gpu.memory().fill_zero(x.range()).unwrap();
    k.fft(x.range(), x.range(), 512, 7, FftDirection::Forward)
        .unwrap();
    k.fft(x.range(), x.range(), 512, 7, FftDirection::Inverse)
        .unwrap()
        .wait()
        .unwrap();
    let after = k.fft_plan(512, 7).unwrap();
    assert!(Arc::ptr_eq(&after, &p1));
    assert_eq!(after.handle(), p1.handle());
    assert!(k.fft_plans_cached() >= 2);
}

// ---- copies and ordering ----

#[test]
#[ignore = "needs a GPU"]
fn copies_round_trip_exactly() {
    let Some(gpu) = gpu() else { return };
    let mem = gpu.memory();
    let mut rng = Rng(12);
    // Around the unit and beyond one staging chunk (4 MiB), so chunking is exercised.
    for len in [1, 7, 4095, 4096, 4097, (4 << 20) + 3, (9 << 20) + 11] {
        let data = rng.bytes(len);
        let block = alloc(gpu, len);
        let r = block.range();
        // Synchronous.
        mem.copy_to_device(r, &data).unwrap();
        let mut back = vec![0u8; len];
        mem.copy_to_host(r, &mut back).unwrap();
        assert!(back == data, "sync round trip of {len} bytes");
        // Asynchronous, both ways.
        let other = rng.bytes(len);
        let ev = mem.copy_to_device_async(r, &other).unwrap();
        let mut back = vec![0u8; len];
        let pending = mem.copy_to_host_async(r, &mut back).unwrap();
        pending.wait().unwrap();
        ev.wait().unwrap();
        assert!(back == other, "async round trip of {len} bytes");
        // Device to device.
        let copy = alloc(gpu, len);
        mem.copy_within(r, copy.range()).unwrap();
        let mut back = vec![0u8; len];
        mem.copy_to_host(copy.range(), &mut back).unwrap();
        assert!(back == other, "copy within the device of {len} bytes");
        // Zero fill.
        mem.fill_zero(copy.range()).unwrap();
        mem.copy_to_host(copy.range(), &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0), "zero fill of {len} bytes");
    }
    // A sub-range leaves its neighbours alone.
    let block = alloc(gpu, 300);
    mem.copy_to_device(block.range(), &[1u8; 300]).unwrap();
    mem.copy_to_device(block.range().sub(100, 50).unwrap(), &[2u8; 50])
        .unwrap();
    let mut back = vec![0u8; 300];
    mem.copy_to_host(block.range(), &mut back).unwrap();
    assert!(back[..100].iter().all(|&b| b == 1));
    assert!(back[100..150].iter().all(|&b| b == 2));
    assert!(back[150..].iter().all(|&b| b == 1));
}

#[test]
#[ignore = "needs a GPU"]
fn peer_copies_between_gpus() {
    let Some(gpu) = gpu() else { return };
    let count = rimms_runtime::backend::cuda::probe()
        .unwrap()
        .map_or(0, |i| i.devices.len());
    if count < 2 {
        println!("skipped: one GPU, no peer to copy to");
        return;
    }
    let other = CudaBackend::require(1, MemoryConfig::new(16 << 20)).unwrap();
    let data = Rng(13).bytes(3 << 20);
    let src = alloc(gpu, data.len());
    gpu.memory().copy_to_device(src.range(), &data).unwrap();
    let dst = other.memory().alloc(data.len()).unwrap();
    gpu.memory()
        .copy_to_peer(src.range(), other.memory(), dst.range())
        .unwrap()
        .wait()
        .unwrap();
    let mut back = vec![0u8; data.len()];
    other.memory().copy_to_host(dst.range(), &mut back).unwrap();
    assert!(back == data);
    other.memory().free(dst).unwrap();
}

/// Copies and kernels issued without waiting in between, on different streams, still see
/// each other's bytes in program order: the byte-range ordering at work.
#[test]
#[ignore = "needs a GPU"]
fn async_frames_are_ordered_by_their_bytes() {
    let Some(gpu) = gpu() else { return };
    let (points, batch, frames) = (256, 16, 12);
    let n = points * batch;
    let mem = gpu.memory();
    let mut rng = Rng(14);
    let inputs: Vec<Vec<Complex32>> = (0..frames).map(|_| rng.c32(n)).collect();
    let filter = rng.c32(n);
    let h = upload(gpu, &filter);
    let x = alloc(gpu, n * 8);
    let mut outputs = vec![vec![Complex32::default(); n]; frames];
    // One device buffer reused by every frame: each copy-in must wait for the previous
    // frame's kernels and copy-out, and each copy-out for this frame's kernels.
    for (input, output) in inputs.iter().zip(outputs.iter_mut()) {
        mem.copy_to_device_async(x.range(), to_bytes(input))
            .unwrap();
        let k = gpu.kernels();
        k.fft(x.range(), x.range(), points, batch, FftDirection::Forward)
            .unwrap();
        k.zip(ZipOp::Mul, x.range(), h.range(), x.range(), n)
            .unwrap();
        k.fft(x.range(), x.range(), points, batch, FftDirection::Inverse)
            .unwrap();
        mem.copy_to_host_async(x.range(), bytemuck::cast_slice_mut(output))
            .unwrap()
            .wait()
            .unwrap();
    }
    for (f, (input, got)) in inputs.iter().zip(&outputs).enumerate() {
        let spec = dft(input, points, FftDirection::Forward);
        let prod: Vec<Complex32> = spec
            .iter()
            .zip(&filter)
            .map(|(&s, &h)| {
                let p = mul(s, d(h));
                Complex32::new(p.0 as f32, p.1 as f32)
            })
            .collect();
        let want = dft(&prod, points, FftDirection::Inverse);
        let max = want.iter().map(|&v| abs(v)).fold(0.0, f64::max);
        assert_close(&format!("frame {f}"), got, &want, |_| max);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn baseline_gives_the_tracked_result() {
    let Some(gpu) = gpu() else { return };
    let (points, batch) = (2048, 4);
    let n = points * batch;
    let mut rng = Rng(15);
    let (x, h) = (rng.c32(n), rng.c32(n));
    // Tracked: everything stays on the device.
    let dx = upload(gpu, &x);
    let dh = upload(gpu, &h);
    let k = gpu.kernels();
    k.fft(dx.range(), dx.range(), points, batch, FftDirection::Forward)
        .unwrap();
    k.zip(ZipOp::Mul, dx.range(), dh.range(), dx.range(), n)
        .unwrap();
    k.fft(dx.range(), dx.range(), points, batch, FftDirection::Inverse)
        .unwrap();
    let tracked = download(gpu, dx.range());
    for alloc in [BaselineAlloc::Driver, BaselineAlloc::Pool] {
        let mut spec = vec![Complex32::default(); n];
        let mut prod = vec![Complex32::default(); n];
        let mut y = vec![Complex32::default(); n];
        let fwd = GpuOp::Fft {
            points,
            batch,
            direction: FftDirection::Forward,
        };
        let inv = GpuOp::Fft {
            points,
            batch,
            direction: FftDirection::Inverse,
        };
        let zip = GpuOp::Zip {
            op: ZipOp::Mul,
            len: n,
        };
        gpu.run_baseline(
            &fwd,
            &[to_bytes(&x)],
            bytemuck::cast_slice_mut(&mut spec),
            alloc,
        )
        .unwrap();
        gpu.run_baseline(
            &zip,
            &[to_bytes(&spec), to_bytes(&h)],
            bytemuck::cast_slice_mut(&mut prod),
            alloc,
        )
        .unwrap();
        gpu.run_baseline(
            &inv,
            &[to_bytes(&prod)],
            bytemuck::cast_slice_mut(&mut y),
            alloc,
        )
        .unwrap();
        let want: Vec<C64> = tracked.iter().map(|&v| d(v)).collect();
        let max = want.iter().map(|&v| abs(v)).fold(0.0, f64::max);
        assert_close(&format!("baseline {alloc:?}"), &y, &want, |_| max);
    }
}

/// Several threads put copies in, kernels, copies within and copies out on all four streams
/// at once, never waiting between calls, while another thread keeps synchronising the device:
/// every result is exactly the sequential one (doubling is exact in f32). What the ordering
/// model test in the library checks against modelled streams, on the real ones.
#[test]
#[ignore = "needs a GPU"]
fn concurrent_submissions_on_all_streams_give_sequential_results() {
    let Some(gpu) = gpu() else { return };
    const THREADS: usize = 4;
    const ROUNDS: usize = 12;
    // Over one staging chunk (4 MiB), so a copy is several transfers.
    const LEN: usize = (5 << 20) / 8 + 3;
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let syncer = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                gpu.synchronize().unwrap();
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let (x, y, z) = (
                        alloc(gpu, LEN * 8),
                        alloc(gpu, LEN * 8),
                        alloc(gpu, LEN * 8),
                    );
                    let (mem, k) = (gpu.memory(), gpu.kernels());
                    let mut rng = Rng(100 + t as u64);
                    let inputs: Vec<Vec<Complex32>> = (0..ROUNDS).map(|_| rng.c32(LEN)).collect();
                    let mut outputs = vec![vec![Complex32::default(); LEN]; ROUNDS];
                    let mut pending = Vec::new();
                    for (input, output) in inputs.iter().zip(outputs.iter_mut()) {
                        mem.copy_to_device_async(x.range(), to_bytes(input))
                            .unwrap();
                        k.scale(x.range(), y.range(), LEN, Complex32::new(2.0, 0.0))
                            .unwrap();
                        mem.copy_within(y.range(), z.range()).unwrap();
                        // The next round's kernel overwrites y while this copy-out may still
                        // read z: only the copy within orders the two.
                        pending.push(
                            mem.copy_to_host_async(z.range(), bytemuck::cast_slice_mut(output))
                                .unwrap(),
                        );
                    }
                    for p in pending {
                        p.wait().unwrap();
                    }
                    for (r, (input, got)) in inputs.iter().zip(&outputs).enumerate() {
                        let want: Vec<Complex32> = input.iter().map(|v| v * 2.0).collect();
                        assert!(
                            got == &want,
                            "thread {t}, round {r}: not the sequential result"
                        );
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        syncer.join().unwrap();
    });
}

/// GPU ordinal `n` is `Device::Gpu(n)` with the space `gpuN`, asked for alone or among all:
/// the last GPU of the machine asked for on its own keeps its ordinal.
#[test]
#[ignore = "needs a GPU"]
fn a_gpu_is_named_by_its_ordinal_whichever_way_it_is_asked_for() {
    let Some(_) = gpu() else { return };
    let count = rimms_runtime::backend::cuda::probe()
        .unwrap()
        .map_or(0, |i| i.devices.len());
    let last = count - 1;
    let alone = rimms_runtime::Runtime::builder()
        .gpu(last)
        .gpu_pool(16 << 20)
        .build()
        .unwrap();
    let gpus: Vec<_> = alone
        .devices()
        .into_iter()
        .filter(|d| matches!(d, rimms_runtime::Device::Gpu(_)))
        .collect();
    assert_eq!(gpus, [rimms_runtime::Device::Gpu(last as u8)]);
    let space = alone.space_of(gpus[0]).unwrap();
    assert_eq!(alone.space_name(space), format!("gpu{last}"));
    drop(alone);
    let all = rimms_runtime::Runtime::builder()
        .gpu_if_available()
        .gpu_pool(16 << 20)
        .build()
        .unwrap();
    for n in 0..count {
        let space = all.space_of(rimms_runtime::Device::Gpu(n as u8)).unwrap();
        assert_eq!(all.space_name(space), format!("gpu{n}"));
    }
}
