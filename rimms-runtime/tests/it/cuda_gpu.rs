//! The CUDA backend on a real GPU, through the runtime: the FFT against a direct DFT in f64,
//! copies larger than the pinned staging buffers, frames that reuse one buffer, calls from
//! several threads at once, peer copies between GPUs, and the GPUs' names. (Every built-in
//! against the CPU, exact byte counts, zero fills, exhaustion and the baseline mode are the
//! facade's card tests, `tests/it/gpu.rs`.)
//!
//! Every test needs a GPU and is marked so (`#[ignore = "needs a GPU"]`): a plain `cargo test`
//! lists them as ignored, and `cargo test -- --ignored` (as the GPU kit does) runs them. Run
//! where there is no GPU, each prints `skipped: no GPU (<reason>)` and passes; set
//! `RIMMS_REQUIRE_GPU=1` (as `scripts/gpu-kit.sh run` does on a GPU) to make that a failure.
#![cfg(feature = "cuda")]

use rimms_runtime::{Complex32, Device, Error, FftDirection, HeteData, Runtime, ZipOp};

const TOL: f64 = 1e-4;
const GPU: Device = Device::Gpu(0);

/// A runtime with GPU 0 and a pool of `pool` bytes there, or `None` after printing why the
/// test is skipped.
fn gpu(pool: usize) -> Option<Runtime> {
    match Runtime::builder().gpu(0).gpu_pool(pool).build() {
        Ok(rt) => Some(rt),
        Err(Error::NoGpu { why }) => {
            skip(&why);
            None
        }
        Err(e) => panic!("a GPU is present but the runtime cannot use it: {e}"),
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

#[test]
#[ignore = "needs a GPU"]
fn fft_matches_a_direct_dft() {
    let Some(rt) = gpu(64 << 20) else { return };
    let mut rng = Rng(1);
    for (points, batch) in [(8, 1), (64, 3), (128, 2), (256, 4), (2048, 2)] {
        let x = rng.c32(points * batch);
        let input = HeteData::from_slice(&rt, &x).unwrap();
        for direction in [FftDirection::Forward, FftDirection::Inverse] {
            let mut out = HeteData::alloc(&rt, x.len()).unwrap();
            rt.fft(GPU, direction, points, &input, &mut out).unwrap();
            let want = dft(&x, points, direction);
            // Relative to the largest value of the row: the error of an FFT is spread over
            // the whole transform, so it is bounded norm-wise, not element-wise.
            let row_max: Vec<f64> = want
                .chunks_exact(points)
                .map(|r| r.iter().map(|&v| abs(v)).fold(0.0, f64::max))
                .collect();
            assert_close(
                &format!("fft {points}×{batch} {direction:?}"),
                out.host().unwrap(),
                &want,
                |i| row_max[i / points],
            );
        }
    }
    // The FFT API takes powers of two on every device (cuFFT would take 100 points; the
    // API's other devices would not): refused before anything moves or changes.
    let input = HeteData::from_slice(&rt, &rng.c32(200)).unwrap();
    let mut out = HeteData::from_slice(&rt, &[Complex32::new(7.0, 0.0); 200]).unwrap();
    let err = rt
        .fft(GPU, FftDirection::Forward, 100, &input, &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(out
        .host()
        .unwrap()
        .iter()
        .all(|&v| v == Complex32::new(7.0, 0.0)));
}

#[test]
#[ignore = "needs a GPU"]
fn fft_in_place_round_trip_returns_the_input() {
    let Some(rt) = gpu(16 << 20) else { return };
    let x = Rng(2).c32(2048 * 8);
    let mut data = HeteData::from_slice(&rt, &x).unwrap();
    rt.fft_in_place(GPU, FftDirection::Forward, 2048, &mut data)
        .unwrap();
    rt.fft_in_place(GPU, FftDirection::Inverse, 2048, &mut data)
        .unwrap();
    let want: Vec<C64> = x.iter().map(|&v| d(v)).collect();
    assert_close("fft round trip", data.host().unwrap(), &want, |_| 1.0);
}

/// A copy in larger than the four 4 MiB staging buffers together reuses them, each only
/// after its transfer is done; doubling is exact in f32, so the bytes must match exactly.
#[test]
#[ignore = "needs a GPU"]
fn copies_larger_than_the_staging_buffers_round_trip_exactly() {
    const LEN: usize = (21 << 20) / 8 + 3;
    let Some(rt) = gpu(64 << 20) else { return };
    let mut rng = Rng(3);
    let mut x = HeteData::alloc(&rt, LEN).unwrap();
    for round in 0..3 {
        let input = rng.c32(LEN);
        x.host_write().unwrap().copy_from_slice(&input);
        rt.scale(GPU, Complex32::new(2.0, 0.0), &mut x).unwrap();
        let want: Vec<Complex32> = input.iter().map(|v| v * 2.0).collect();
        assert!(x.host().unwrap() == want.as_slice(), "round {round}");
    }
}

/// FZF frames through one set of buffers: each frame's copy in must land before its FFT, and
/// its result must be read before the next frame overwrites it.
#[test]
#[ignore = "needs a GPU"]
fn frames_reusing_one_buffer_each_give_their_own_result() {
    let (points, batch, frames) = (256, 16, 12);
    let n = points * batch;
    let Some(rt) = gpu(16 << 20) else { return };
    let mut rng = Rng(14);
    let filter = rng.c32(n);
    let h = HeteData::from_slice(&rt, &filter).unwrap();
    let mut x = HeteData::alloc(&rt, n).unwrap();
    let mut y = HeteData::alloc(&rt, n).unwrap();
    for f in 0..frames {
        let input = rng.c32(n);
        x.host_write().unwrap().copy_from_slice(&input);
        rt.fft_in_place(GPU, FftDirection::Forward, points, &mut x)
            .unwrap();
        rt.zip(GPU, ZipOp::Mul, &x, &h, &mut y).unwrap();
        rt.fft_in_place(GPU, FftDirection::Inverse, points, &mut y)
            .unwrap();
        let spec = dft(&input, points, FftDirection::Forward);
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
        assert_close(&format!("frame {f}"), y.host().unwrap(), &want, |_| max);
    }
}

/// Several threads call on the one GPU at once, each with buffers of its own over one
/// staging chunk: every result is exactly the sequential one (doubling is exact in f32).
#[test]
#[ignore = "needs a GPU"]
fn calls_from_several_threads_give_sequential_results() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 8;
    const LEN: usize = (5 << 20) / 8 + 3;
    let Some(rt) = gpu(128 << 20) else { return };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let rt = rt.clone();
            s.spawn(move || {
                let mut rng = Rng(100 + t as u64);
                let mut x = HeteData::alloc(&rt, LEN).unwrap();
                let mut y = HeteData::alloc(&rt, LEN).unwrap();
                for r in 0..ROUNDS {
                    let input = rng.c32(LEN);
                    x.host_write().unwrap().copy_from_slice(&input);
                    rt.scale(GPU, Complex32::new(2.0, 0.0), &mut x).unwrap();
                    rt.conj(GPU, &x, &mut y).unwrap();
                    let want: Vec<Complex32> = input.iter().map(|v| (v * 2.0).conj()).collect();
                    assert!(
                        y.host().unwrap() == want.as_slice(),
                        "thread {t}, round {r}: not the sequential result"
                    );
                }
            });
        }
    });
}

/// Data written on one GPU and read by a call on another goes over a peer copy (or through
/// the host where the pair has no peer access): the bytes arrive exactly.
#[test]
#[ignore = "needs a GPU"]
fn peer_copies_between_gpus() {
    let Some(_) = gpu(16 << 20) else { return };
    let count = rimms_runtime::backend::cuda::probe()
        .unwrap()
        .map_or(0, |i| i.devices.len());
    if count < 2 {
        println!("skipped: one GPU, no peer to copy to");
        return;
    }
    let rt = Runtime::builder()
        .gpu(0)
        .gpu(1)
        .gpu_pool(64 << 20)
        .build()
        .unwrap();
    let input = Rng(13).c32((3 << 20) / 8 + 1);
    let mut x = HeteData::from_slice(&rt, &input).unwrap();
    let mut y = HeteData::alloc(&rt, input.len()).unwrap();
    rt.scale(Device::Gpu(0), Complex32::new(2.0, 0.0), &mut x)
        .unwrap();
    rt.conj(Device::Gpu(1), &x, &mut y).unwrap();
    let want: Vec<Complex32> = input.iter().map(|v| (v * 2.0).conj()).collect();
    assert!(y.host().unwrap() == want.as_slice());
}

/// GPU ordinal `n` is `Device::Gpu(n)` with the space `gpuN`, asked for alone or among all:
/// the last GPU of the machine asked for on its own keeps its ordinal.
#[test]
#[ignore = "needs a GPU"]
fn a_gpu_is_named_by_its_ordinal_whichever_way_it_is_asked_for() {
    let Some(_) = gpu(16 << 20) else { return };
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
