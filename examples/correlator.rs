//! Radar correlator (docs/design.md): where in a noisy received signal does a known chirp start?
//!
//! The reference is an LFM chirp exp(iπ(B/T)t²) of n = 256 samples; the received signal is
//! that chirp delayed by 37 samples in complex Gaussian noise (σ = 0.5 per component). Both
//! are zero-padded to 512 and correlated in the frequency domain on a simulated card,
//! corr = IFFT(FFT(received) · conj(FFT(reference))); the delay is argmax |corr|. Only the
//! two signals go to the card and the 512 magnitudes come back.
//!
//! `cargo run --release --example correlator`

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, ZipOp};
use std::f64::consts::PI;
use std::process::ExitCode;

const N: usize = 256;
const PADDED: usize = 2 * N;
const T: f64 = 512e-6; // chirp duration, s
const B: f64 = 500e3; // chirp bandwidth, Hz
const DELAY: usize = 37; // samples
const SIGMA: f64 = 0.5;

/// Sample `k` of the reference chirp.
fn chirp(k: usize) -> Complex32 {
    let t = k as f64 * T / N as f64;
    let phase = PI * (B / T) * t * t;
    Complex32::new(phase.cos() as f32, phase.sin() as f32)
}

/// Seeded complex Gaussian noise: xorshift64* and Box–Muller.
fn noise(len: usize, mut seed: u64) -> Vec<Complex32> {
    let mut uniform = move || {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        ((seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) + 1) as f64 / (1u64 << 53) as f64
    };
    (0..len)
        .map(|_| {
            let radius = SIGMA * (-2.0 * uniform().ln()).sqrt();
            let angle = 2.0 * PI * uniform();
            Complex32::new((radius * angle.cos()) as f32, (radius * angle.sin()) as f32)
        })
        .collect()
}

fn main() -> rimms::Result<ExitCode> {
    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let card = Device::Sim(0);
    let zero = Complex32::new(0.0, 0.0);

    // As long as the loop below, which indexes it (only the first N samples are used).
    let noise = noise(PADDED, 0x5eed);
    let mut reference = HeteData::alloc(&rt, PADDED)?;
    let mut received = HeteData::alloc(&rt, PADDED)?;
    rimms::parallel_for!(for i in 0..PADDED {
        reference[i] = if i < N { chirp(i) } else { zero };
        received[i] = match i {
            _ if i < DELAY => noise[i],
            _ if i < N => chirp(i - DELAY) + noise[i],
            _ => zero,
        };
    })?;

    let mut rx_spectrum = HeteData::alloc(&rt, PADDED)?;
    let mut ref_spectrum = HeteData::alloc(&rt, PADDED)?;
    let mut product = HeteData::alloc(&rt, PADDED)?;
    let mut corr = HeteData::alloc(&rt, PADDED)?;
    let mut magnitude = HeteData::<f32>::alloc(&rt, PADDED)?;
    let forward = FftDirection::Forward;
    rt.fft(card, forward, PADDED, &received, &mut rx_spectrum)?;
    rt.fft(card, forward, PADDED, &reference, &mut ref_spectrum)?;
    rt.zip(
        card,
        ZipOp::MulConj,
        &rx_spectrum,
        &ref_spectrum,
        &mut product,
    )?;
    rt.fft(card, FftDirection::Inverse, PADDED, &product, &mut corr)?;
    rt.magnitude(card, &corr, &mut magnitude)?;

    let (found, peak) =
        magnitude
            .host()?
            .iter()
            .enumerate()
            .fold(
                (0, f32::MIN),
                |best, (i, &m)| if m > best.1 { (i, m) } else { best },
            );
    println!(
        "correlation peak {peak:.2} at lag {found} samples ({:.1} µs); injected {DELAY}",
        found as f64 * T / N as f64 * 1e6
    );
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }

    if found != DELAY {
        eprintln!("correlator: found a delay of {found} samples, the signal was delayed {DELAY}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
