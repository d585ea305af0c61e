//! A range–Doppler map with 2-D cell-averaging CFAR, from a generated scene with three known
//! targets, on the device mapping of your choice; prints the detections next to the truth
//! and the bytes each link carried.
//!
//! `cargo run --release --example range_doppler_cfar [cpu|sim|fpga]`
//!
//! The chain, all through the public API:
//!
//! 1. **Pulse compression**: an FFT of every pulse, a broadcast ZIP with the conjugate of the
//!    (Hann-weighted) chirp's spectrum (`zip_rows`, `ZipOp::MulConj`), an inverse FFT.
//! 2. **Corner turn**: `transpose`, so that each range cell's pulses are a row.
//! 3. **Doppler processing**: a Hann window over every row (`window`), an FFT of every row.
//! 4. **Power**: `power`, |x|².
//! 5. **CFAR**: in `parallel_for!(collect …)`: a cell is a detection where its power exceeds
//!    `ALPHA` times the mean of its training cells and is the largest of its neighbours.
//!
//! On `fpga` the FFTs run on the emulated board's FFT cores and the rest on the CPU, with
//! buffers in the u-dma-buf both use in place (`zero_copy`); the FPGA's ZIP core has no
//! `MulConj` (`rimms devices`), so the broadcast ZIP stays on the CPU.

use rimms::{Complex32, Device, FftDirection, FpgaSource, HeteData, Runtime, SimConfig, ZipOp};
use std::f32::consts::PI;

/// Range samples per pulse (fast time) and the FFT size of pulse compression.
const SAMPLES: usize = 512;
/// Pulses per frame (slow time), the Doppler FFT size.
const PULSES: usize = 32;
/// Chirp length in samples.
const CHIRP: usize = 64;
/// The known targets: (range cell, Doppler bin, amplitude).
const TARGETS: [(usize, usize, f32); 3] = [(100, 5, 1.0), (300, 20, 0.5), (420, 9, 2.0)];

/// CFAR: guard and training cells on each side, in range and in Doppler, and the threshold
/// factor over the training mean (15 dB).
const GUARD: usize = 2;
const TRAIN: usize = 4;
const ALPHA: f32 = 31.6;

/// Where each step runs.
struct Mapping {
    fft: Device,
    ifft: Device,
    other: Device,
}

fn hann(n: usize) -> Vec<f32> {
    (0..n)
        .map(|j| 0.5 - 0.5 * (2.0 * PI * j as f32 / n as f32).cos())
        .collect()
}

fn chirp() -> Vec<Complex32> {
    (0..CHIRP)
        .map(|t| Complex32::from_polar(1.0, PI * (t * t) as f32 / CHIRP as f32))
        .collect()
}

/// Echoes of every target (the chirp delayed by its range, turned by its Doppler phase from
/// pulse to pulse) in uniform noise, pulse after pulse.
fn scene() -> Vec<Complex32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let tx = chirp();
    let mut echoes = vec![Complex32::default(); PULSES * SAMPLES];
    for p in 0..PULSES {
        for (s, e) in echoes[p * SAMPLES..(p + 1) * SAMPLES]
            .iter_mut()
            .enumerate()
        {
            *e = Complex32::new(noise(), noise()) * 0.6;
            for &(range, doppler, amplitude) in &TARGETS {
                if (range..range + CHIRP).contains(&s) {
                    let phase = 2.0 * PI * (doppler * p) as f32 / PULSES as f32;
                    *e += tx[s - range] * Complex32::from_polar(amplitude, phase);
                }
            }
        }
    }
    echoes
}

/// Whether cell `c` of the range × Doppler power map (`SAMPLES` rows of `PULSES`) passes the
/// 2-D cell-averaging CFAR and is the peak of its 3 × 3 neighbourhood. Training cells wrap
/// around in Doppler (the FFT is circular) and stop at the ends of the range axis.
fn detection(power: &[f32], c: usize) -> bool {
    let (r, d) = ((c / PULSES) as isize, (c % PULSES) as isize);
    let at = |dr: isize, dd: isize| -> Option<f32> {
        let rr = r + dr;
        let dd = (d + dd).rem_euclid(PULSES as isize);
        (0..SAMPLES as isize)
            .contains(&rr)
            .then(|| power[rr as usize * PULSES + dd as usize])
    };
    let reach = (GUARD + TRAIN) as isize;
    let (mut sum, mut cells) = (0.0f32, 0usize);
    for dr in -reach..=reach {
        for dd in -reach..=reach {
            if dr.abs() > GUARD as isize || dd.abs() > GUARD as isize {
                if let Some(p) = at(dr, dd) {
                    sum += p;
                    cells += 1;
                }
            }
        }
    }
    let here = power[c];
    let peak = (-1..=1).all(|dr| (-1..=1).all(|dd| at(dr, dd).is_none_or(|p| p <= here)));
    peak && cells > 0 && here > ALPHA * sum / cells as f32
}

fn main() -> rimms::Result<()> {
    let map = std::env::args().nth(1).unwrap_or_else(|| "cpu".to_string());
    let (rt, mapping) = match map.as_str() {
        "cpu" => (
            Runtime::builder().build()?,
            Mapping {
                fft: Device::Cpu,
                ifft: Device::Cpu,
                other: Device::Cpu,
            },
        ),
        "sim" => (
            Runtime::builder().sim(SimConfig::default()).build()?,
            Mapping {
                fft: Device::Sim(0),
                ifft: Device::Sim(0),
                other: Device::Sim(0),
            },
        ),
        "fpga" => (
            Runtime::builder()
                .fpga(FpgaSource::Emulated(FpgaSource::default_layout()))
                .zero_copy(true)
                .build()?,
            Mapping {
                fft: Device::Fpga(0),
                ifft: Device::Fpga(1),
                other: Device::Cpu,
            },
        ),
        other => {
            return Err(rimms::Error::Config(format!(
                "unknown mapping `{other}`: expected cpu, sim or fpga"
            )))
        }
    };
    let len = PULSES * SAMPLES;

    // The matched filter's spectrum: the Hann-weighted chirp (lower range sidelobes), zero
    // padded to a pulse, transformed once.
    let mut reference = vec![Complex32::default(); SAMPLES];
    for ((r, c), w) in reference.iter_mut().zip(chirp()).zip(hann(CHIRP)) {
        *r = c * w;
    }
    let reference = HeteData::from_slice(&rt, &reference)?;
    let mut filter = HeteData::<Complex32>::alloc(&rt, SAMPLES)?;
    rt.fft(
        mapping.fft,
        FftDirection::Forward,
        SAMPLES,
        &reference,
        &mut filter,
    )?;
    let doppler_window = HeteData::from_slice(&rt, &hann(PULSES))?;

    let echoes = HeteData::from_slice(&rt, &scene())?;
    let (mut spectra, mut correlated, mut compressed) = (
        HeteData::<Complex32>::alloc(&rt, len)?,
        HeteData::<Complex32>::alloc(&rt, len)?,
        HeteData::<Complex32>::alloc(&rt, len)?,
    );
    let (mut turned, mut windowed, mut doppler) = (
        HeteData::<Complex32>::alloc(&rt, len)?,
        HeteData::<Complex32>::alloc(&rt, len)?,
        HeteData::<Complex32>::alloc(&rt, len)?,
    );
    let mut power = HeteData::<f32>::alloc(&rt, len)?;

    rt.fft(
        mapping.fft,
        FftDirection::Forward,
        SAMPLES,
        &echoes,
        &mut spectra,
    )?;
    rt.zip_rows(
        mapping.other,
        ZipOp::MulConj,
        &spectra,
        &filter,
        &mut correlated,
    )?;
    rt.fft(
        mapping.ifft,
        FftDirection::Inverse,
        SAMPLES,
        &correlated,
        &mut compressed,
    )?;
    rt.transpose(mapping.other, PULSES, SAMPLES, &compressed, &mut turned)?;
    rt.window(mapping.other, &turned, &doppler_window, &mut windowed)?;
    rt.fft(
        mapping.fft,
        FftDirection::Forward,
        PULSES,
        &windowed,
        &mut doppler,
    )?;
    rt.power(mapping.other, &doppler, &mut power)?;

    let cells = power.len();
    let found: Vec<(usize, usize)> = rimms::parallel_for!(collect for c in 0..cells {
        if power[c] <= 0.0 || !detection(&power, c) {
            continue;
        }
        (c / PULSES, c % PULSES)
    })?;

    let truth: Vec<(usize, usize)> = TARGETS.iter().map(|&(r, d, _)| (r, d)).collect();
    println!("range-Doppler CFAR on `{map}`: {SAMPLES} range cells x {PULSES} pulses");
    println!("  detections (range, Doppler): {found:?}");
    println!("  targets    (range, Doppler): {truth:?}");
    println!(
        "  {}",
        if found == truth {
            "all targets found, no false alarms"
        } else {
            "MISMATCH"
        }
    );
    println!("bytes per link:");
    let stats = rt.stats();
    if stats.links.is_empty() {
        println!("  none: everything ran where its data was");
    }
    for l in &stats.links {
        println!(
            "  {:>9} -> {:<9} {:>9} bytes in {} copies",
            l.from, l.to, l.bytes, l.copies
        );
    }
    if found != truth {
        return Err(rimms::Error::Config(
            "the detections do not match the scene".into(),
        ));
    }
    Ok(())
}
