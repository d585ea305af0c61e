//! SAR image formation with the range-Doppler algorithm (docs/design.md, CEDR's formulation) on a
//! simulated card: 256 pulses of 512 fast-time samples from one point scatterer, simulated
//! here, and the brightest pixel of the image must fall at the scatterer's range.
//!
//! Per docs/design.md: G = FFT(g); every row: FFT, fftshift, ×G, IFFT; transpose; every row (now
//! 512 of 256): FFT, fftshift, ×H, IFFT, fftshift; transpose back; |·|. The FFTs take the
//! whole matrix at once (a batch of rows); the multiplies go row by row. In this formulation
//! the fftshift before ×G delays the compressed pulse by 1/(2·Kr·dt²) samples, so the range
//! column to expect is the echo's centre plus that; its azimuth filter does not focus a
//! broadside scatterer, so the row is not checked. Only the raw data goes to the card and the
//! image comes back.
//!
//! `cargo run --release --example sar`

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, ZipOp};
use std::f64::consts::PI;
use std::process::ExitCode;

const NSLOW: usize = 256;
const NFAST: usize = 512;
const C: f64 = 3e8;
const V: f64 = 150.0;
const XMAX: f64 = 50.0; // flight path 0 … 50 m
const YC: f64 = 10_000.0;
const Y0: f64 = 500.0;
const TR: f64 = 2.5e-6;
const KR: f64 = 2e13;
const H: f64 = 5000.0;
const LAMBDA: f64 = 0.0566;
const TARGET: (f64, f64) = (20.0, 10_120.0); // along track, ground range, m

fn cis(phase: f64) -> Complex32 {
    Complex32::new(phase.cos() as f32, phase.sin() as f32)
}

fn main() -> rimms::Result<ExitCode> {
    let rmin = (YC - Y0).hypot(H);
    let rmax = (YC + Y0).hypot(H);
    let span = 2.0 * rmax / C + TR - 2.0 * rmin / C;
    let dt = span / (NFAST - 1) as f64;
    let tr = |j: usize| j as f64 * dt;
    let ta = |i: usize| i as f64 * XMAX / V / (NSLOW - 1) as f64;
    let ka = 2.0 * V * V / LAMBDA / YC.hypot(H);
    let zero = Complex32::new(0.0, 0.0);

    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let card = Device::Sim(0);
    let mut g = HeteData::alloc(&rt, NFAST)?;
    let mut h = HeteData::alloc(&rt, NSLOW)?;
    let mut raw = HeteData::alloc(&rt, NSLOW * NFAST)?;
    rimms::parallel_for!(for j in 0..NFAST {
        g[j] = if tr(j).abs() < TR / 2.0 {
            cis(-PI * KR * tr(j) * tr(j))
        } else {
            zero
        };
    })?;
    rimms::parallel_for!(for i in 0..NSLOW {
        h[i] = if ta(i).abs() < TR / 2.0 * XMAX / V / span {
            cis(PI * ka * ta(i) * ta(i))
        } else {
            zero
        };
    })?;
    // The echo of one point scatterer: per pulse, the chirp centred at its two-way delay,
    // with the phase of its exact slant range.
    rimms::parallel_for!(for k in 0..NSLOW * NFAST {
        let r = (V * ta(k / NFAST) - TARGET.0).hypot(TARGET.1.hypot(H));
        let t = tr(k % NFAST) - (2.0 * (r - rmin) / C + TR / 2.0);
        raw[k] = if t.abs() < TR / 2.0 {
            cis(PI * KR * t * t - 4.0 * PI * r / LAMBDA)
        } else {
            zero
        };
    })?;

    // Two work matrices used in turn, fragments no larger than a 256-sample row.
    let mut a = HeteData::alloc(&rt, NSLOW * NFAST)?;
    let mut b = HeteData::alloc(&rt, NSLOW * NFAST)?;
    a.fragment(NSLOW * std::mem::size_of::<Complex32>())?;
    b.fragment(NSLOW * std::mem::size_of::<Complex32>())?;
    let mut g_spectrum = HeteData::alloc(&rt, NFAST)?;
    let (forward, inverse) = (FftDirection::Forward, FftDirection::Inverse);

    rt.fft(card, forward, NFAST, &g, &mut g_spectrum)?;
    // Range compression.
    rt.fft(card, forward, NFAST, &raw, &mut a)?;
    rt.fftshift(card, NFAST, &a, &mut b)?;
    for (row, mut out) in b.rows(NFAST)?.iter().zip(a.rows_mut(NFAST)?) {
        rt.zip(card, ZipOp::Mul, row, &g_spectrum, &mut out)?;
    }
    rt.fft(card, inverse, NFAST, &a, &mut b)?;
    // Azimuth compression, one range bin a row.
    rt.transpose(card, NSLOW, NFAST, &b, &mut a)?;
    rt.fft(card, forward, NSLOW, &a, &mut b)?;
    rt.fftshift(card, NSLOW, &b, &mut a)?;
    for (row, mut out) in a.rows(NSLOW)?.iter().zip(b.rows_mut(NSLOW)?) {
        rt.zip(card, ZipOp::Mul, row, &h, &mut out)?;
    }
    rt.fft(card, inverse, NSLOW, &b, &mut a)?;
    rt.fftshift(card, NSLOW, &a, &mut b)?;
    rt.transpose(card, NFAST, NSLOW, &b, &mut a)?;
    let mut image = HeteData::<f32>::alloc(&rt, NSLOW * NFAST)?;
    rt.magnitude(card, &a, &mut image)?;

    let (i, peak) = image
        .host()?
        .iter()
        .enumerate()
        .fold(
            (0, f32::MIN),
            |best, (i, &m)| if m > best.1 { (i, m) } else { best },
        );
    let (row, col) = (i / NFAST, i % NFAST);
    let tau = 2.0 * (TARGET.1.hypot(H) - rmin) / C + TR / 2.0;
    let want_col = (tau / dt + 1.0 / (2.0 * KR * dt * dt)).round() as usize;
    println!("brightest pixel {peak:.2} at row {row}, column {col}; the scatterer's range is column {want_col}");
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }

    if col.abs_diff(want_col) > 1 {
        eprintln!("sar: the brightest pixel is in column {col}, the scatterer at {want_col}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
