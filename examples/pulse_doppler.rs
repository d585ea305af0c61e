//! Pulse Doppler (docs/design.md, CEDR's application): a target's range and radial velocity from
//! m = 128 pulses of n = 64 samples, on a simulated card.
//!
//! The input is simulated here: a 16-sample chirp echoed 19 samples late, its phase advancing
//! by 2π·5/m from pulse to pulse (Doppler bin +5), in Gaussian noise. Each pulse is matched-
//! filtered with length L = 2n: c = [n−1 zeros, pulse, one zero], d = [transmitted pulse,
//! n zeros], IFFT(FFT(c) · conj(FFT(d))); the matrix is transposed so that each range bin is a
//! row, each row gets an m-point FFT across the pulses, then fftshift and |·|. The maximum
//! must sit at range bin n−1+19 and Doppler bin m/2+5. The whole chain stays on the card:
//! the pulses go in, the magnitudes come out.
//!
//! `cargo run --release --example pulse_doppler`

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, ZipOp};
use std::f64::consts::PI;
use std::process::ExitCode;

const M: usize = 128; // pulses
const N: usize = 64; // samples per pulse
const L: usize = 2 * N; // matched-filter length
const PRI: f64 = 1.27e-4; // s
const PULSE: usize = 16; // samples of the transmitted chirp
const DELAY: usize = 19; // samples
const DOPPLER_BIN: usize = 5;

fn cis(phase: f64) -> Complex32 {
    Complex32::new(phase.cos() as f32, phase.sin() as f32)
}

/// The transmitted pulse: a chirp, then zeros.
fn transmitted(j: usize) -> Complex32 {
    if j < PULSE {
        cis(PI * (j * j) as f64 / PULSE as f64)
    } else {
        Complex32::new(0.0, 0.0)
    }
}

/// Pulse `k`, sample `j` of the echo (without noise).
fn echo(k: usize, j: usize) -> Complex32 {
    match j.checked_sub(DELAY) {
        Some(i) => transmitted(i) * cis(2.0 * PI * (DOPPLER_BIN * k) as f64 / M as f64),
        None => Complex32::new(0.0, 0.0),
    }
}

/// Deterministic noise in [−0.25, 0.25) per component (a hash of the index).
fn noise(i: usize) -> Complex32 {
    let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let part = |x: u64| (x % 1000) as f32 / 2000.0 - 0.25;
    Complex32::new(part(h >> 20), part(h >> 40))
}

fn main() -> rimms::Result<ExitCode> {
    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let card = Device::Sim(0);
    let zero = Complex32::new(0.0, 0.0);

    // The matched filter's inputs, laid out on the host: d, and one row c per pulse.
    let mut d = HeteData::alloc(&rt, L)?;
    let mut c = HeteData::alloc(&rt, M * L)?;
    rimms::parallel_for!(for i in 0..L {
        d[i] = if i < N { transmitted(i) } else { zero };
    })?;
    rimms::parallel_for!(for i in 0..M * L {
        c[i] = match (i % L + 1).checked_sub(N) {
            Some(j) if j < N => echo(i / L, j) + noise(i),
            _ => zero,
        };
    })?;

    let mut d_spectrum = HeteData::alloc(&rt, L)?;
    let mut c_spectra = HeteData::alloc(&rt, M * L)?;
    let mut products = HeteData::alloc(&rt, M * L)?;
    products.fragment(L * std::mem::size_of::<Complex32>())?; // one row a fragment
    rt.fft(card, FftDirection::Forward, L, &d, &mut d_spectrum)?;
    rt.fft(card, FftDirection::Forward, L, &c, &mut c_spectra)?; // every row
    for (row, mut out) in c_spectra.rows(L)?.iter().zip(products.rows_mut(L)?) {
        rt.zip(card, ZipOp::MulConj, row, &d_spectrum, &mut out)?;
    }
    let mut filtered = HeteData::alloc(&rt, M * L)?;
    rt.fft(card, FftDirection::Inverse, L, &products, &mut filtered)?;

    // Range bins as rows, a Doppler FFT across the pulses of each.
    let mut by_range = HeteData::alloc(&rt, L * M)?;
    let mut doppler = HeteData::alloc(&rt, L * M)?;
    let mut shifted = HeteData::alloc(&rt, L * M)?;
    let mut magnitude = HeteData::<f32>::alloc(&rt, L * M)?;
    rt.transpose(card, M, L, &filtered, &mut by_range)?;
    rt.fft(card, FftDirection::Forward, M, &by_range, &mut doppler)?;
    rt.fftshift(card, M, &doppler, &mut shifted)?;
    rt.magnitude(card, &shifted, &mut magnitude)?;

    let (i, _) = magnitude
        .host()?
        .iter()
        .enumerate()
        .fold(
            (0, f32::MIN),
            |best, (i, &m)| if m > best.1 { (i, m) } else { best },
        );
    let (doppler_bin, range_bin) = (i % M, i / M);
    // CEDR's formulas, with a = z + 1, b = x + 1 and its integer halving of m + 1.
    let (a, b) = ((doppler_bin + 1) as f64, (range_bin + 1) as f64);
    let shift_hz = (a - M.div_ceil(2) as f64) / (M - 1) as f64 / PRI;
    let delay_s = (b - N as f64) / (N - 1) as f64 * PRI;
    println!(
        "target at range bin {range_bin}, Doppler bin {doppler_bin}: \
         time delay {delay_s:.4e} s, Doppler shift {shift_hz:.3} Hz"
    );
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }

    let want = (N - 1 + DELAY, M / 2 + DOPPLER_BIN);
    if (range_bin, doppler_bin) != want {
        eprintln!(
            "pulse_doppler: found range bin {range_bin}, Doppler bin {doppler_bin}; simulated {want:?}"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
