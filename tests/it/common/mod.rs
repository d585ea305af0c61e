//! Independent references for the integration tests: a naive DFT in f64 and seeded signals.
#![allow(dead_code)]

use rimms::Complex32;

mod liveness;
pub mod programs_model;
mod tolerance;
pub use liveness::finishes;
pub use tolerance::assert_close;

/// Seeded values in [-1, 1) from a xorshift, so tests need no RNG crate.
pub fn signal(len: usize, seed: u64) -> Vec<Complex32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    (0..len)
        .map(|_| Complex32::new(next() as f32, next() as f32))
        .collect()
}

/// Direct O(n²) DFT of every row of `n` points, in f64; inverse scaled by 1/n.
pub fn dft_rows(x: &[Complex32], n: usize, inverse: bool) -> Vec<(f64, f64)> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        for k in 0..n {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, v) in row.iter().enumerate() {
                let angle = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                let (s, c) = angle.sin_cos();
                re += v.re as f64 * c - v.im as f64 * s;
                im += v.re as f64 * s + v.im as f64 * c;
            }
            out.push((re * scale, im * scale));
        }
    }
    out
}

pub fn to_f64(x: &[Complex32]) -> Vec<(f64, f64)> {
    x.iter().map(|v| (v.re as f64, v.im as f64)).collect()
}

pub fn to_c32(x: &[(f64, f64)]) -> Vec<Complex32> {
    x.iter()
        .map(|&(re, im)| Complex32::new(re as f32, im as f32))
        .collect()
}

/// The FZF chain of DESIGN.md in f64 with direct DFTs: rows of `n` points of
/// `signal(len, 2)`, multiplied by `signal(len, 3)`, transformed back.
pub fn fzf_reference(len: usize, n: usize) -> Vec<(f64, f64)> {
    let spectrum = dft_rows(&signal(len, 2), n, false);
    let filter = to_f64(&signal(len, 3));
    let product: Vec<(f64, f64)> = spectrum
        .iter()
        .zip(&filter)
        .map(|(&(a, b), &(c, d))| (a * c - b * d, a * d + b * c))
        .collect();
    dft_rows(&to_c32(&product), n, true)
}

/// FZF through the runtime on `signal(len, 2)` with the filter `signal(len, 3)`: FFT on
/// `devices[0]`, ZIP on `devices[1]`, inverse FFT on `devices[2]`; returns the result.
pub fn fzf(
    rt: &rimms::Runtime,
    devices: [rimms::Device; 3],
    len: usize,
    n: usize,
) -> Vec<Complex32> {
    use rimms::{FftDirection, HeteData, ZipOp};
    let x = HeteData::from_slice(rt, &signal(len, 2)).expect("x");
    let filter = HeteData::from_slice(rt, &signal(len, 3)).expect("filter");
    let (mut spectrum, mut product, mut y) = (
        HeteData::alloc(rt, len).expect("alloc"),
        HeteData::alloc(rt, len).expect("alloc"),
        HeteData::alloc(rt, len).expect("alloc"),
    );
    rt.fft(devices[0], FftDirection::Forward, n, &x, &mut spectrum)
        .expect("fft");
    rt.zip(devices[1], ZipOp::Mul, &spectrum, &filter, &mut product)
        .expect("zip");
    rt.fft(devices[2], FftDirection::Inverse, n, &product, &mut y)
        .expect("ifft");
    y.to_vec().expect("host")
}

/// A runtime with the CPU and two default sim devices.
pub fn cpu_and_two_sims() -> rimms::Runtime {
    rimms::Runtime::builder()
        .sim(rimms::SimConfig::default())
        .sim(rimms::SimConfig::default())
        .build()
        .expect("runtime")
}
