//! Pulse Doppler: a target's range and radial velocity from a burst of pulses (CEDR's app).
//!
//! m = 128 received pulses of n = 64 complex samples and the transmitted pulse; PRI = 1.27e-4 s.
//! Each pulse k is matched-filtered with length L = 2n = 128:
//! c = [n−1 zeros, pulse k, one zero], d = [transmitted pulse, n zeros],
//! mf_k = IFFT(FFT(c) · conj(FFT(d))) — one FFT, one ZIP and one inverse FFT per pulse, as
//! CEDR calls them. The matched-filter matrix is then transposed so that each range bin is a
//! row, every row gets a 128-point FFT across the pulses, then fftshift and |·|. The global
//! maximum at Doppler bin z, range bin x gives a = z+1, b = x+1,
//! time delay = (b − n)/(n − 1)·PRI and Doppler shift = (a − ⌊(m+1)/2⌋)/(m − 1)/PRI, with the
//! integer halving of CEDR's code.
//!
//! Generated inputs simulate a target at a chosen delay (samples) and Doppler bin: every pulse
//! carries the transmitted pulse delayed, with a phase that advances by 2π·bin/m per pulse, plus
//! complex Gaussian noise. Its matched filter peaks at range bin n−1+delay and, after the
//! shift, Doppler bin m/2+bin; what CEDR's formulas make of those bins is the expected output.

use super::input::{cis, read_complex_rows, Rng};
use super::native::Native;
use super::report::Run;
use super::{
    alloc_rows, argmax, each_row, execute, frames, pad_into, App, AppError, Frame, Mapping,
    Options, Pipeline, RowCall, Step, Submit,
};
use crate::human::{count, seconds, significant};
use rimms::drivers::cpu::kernels;
use rimms::{Complex32, FftDirection, HeteData, Runtime, ZipOp};
use serde::Serialize;
use std::f64::consts::PI;
use std::path::Path;

/// Pulses (m).
pub const M: usize = 128;
/// Samples per pulse (n).
pub const N: usize = 64;
/// Matched-filter length, 2n.
pub const L: usize = 2 * N;
/// Pulse repetition interval, seconds.
pub const PRI: f64 = 1.27e-4;
/// Samples of the generated transmitted pulse (an LFM chirp), the rest of its n being zero.
pub const GENERATED_PULSE: usize = 16;
/// Noise standard deviation per component of generated inputs.
pub const SIGMA: f64 = 0.5;

/// CEDR's file of received pulses: m lines of n complex values.
pub const PULSES_FILE: &str = "pulse_doppler_pulses.txt";
/// CEDR's file of the transmitted pulse: one line of n complex values.
pub const PULSE_FILE: &str = "pulse_doppler_pulse.txt";

/// The received pulses and the transmitted one.
#[derive(Clone, Debug)]
pub struct Input {
    /// m pulses of n samples, pulse-major.
    pub pulses: Vec<Complex32>,
    /// The transmitted pulse, n samples.
    pub pulse: Vec<Complex32>,
}

impl Input {
    /// Reads CEDR's two files from `dir`.
    pub fn load(dir: &Path) -> Result<Input, AppError> {
        Ok(Input {
            pulses: read_complex_rows(&dir.join(PULSES_FILE), M, N)?,
            pulse: read_complex_rows(&dir.join(PULSE_FILE), 1, N)?,
        })
    }
}

/// The estimate, and the bins it came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Output {
    /// (a − ⌊(m+1)/2⌋)/(m − 1)/PRI.
    pub doppler_shift_hz: f64,
    /// (b − n)/(n − 1)·PRI.
    pub time_delay_s: f64,
    /// z: the Doppler bin of the maximum, after the shift.
    #[serde(skip)]
    pub doppler_bin: usize,
    /// x: the range bin of the maximum.
    #[serde(skip)]
    pub range_bin: usize,
    /// Whether the range-Doppler map has a peak at all. A flat one (all-zero input) has its
    /// "maximum" at the first cell, which CEDR's formulas turn into a shift and a delay like
    /// any other, so the figures alone cannot tell there is nothing there.
    pub target: bool,
}

impl Output {
    /// CEDR's formulas at Doppler bin `z`, range bin `x`.
    pub fn from_bins(z: usize, x: usize) -> Output {
        let (a, b) = (z as f64 + 1.0, x as f64 + 1.0);
        // CEDR's integer halving ⌊(m+1)/2⌋, which is ⌈m/2⌉.
        let half = M.div_ceil(2) as f64;
        Output {
            doppler_shift_hz: (a - half) / (M - 1) as f64 / PRI,
            time_delay_s: (b - N as f64) / (N - 1) as f64 * PRI,
            doppler_bin: z,
            range_bin: x,
            target: true,
        }
    }
}

/// What to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Delay of the echo within a pulse, samples (at most n − [`GENERATED_PULSE`]).
    pub delay: usize,
    /// Doppler offset in bins of 1/(m·PRI), −m/2 … m/2 − 1.
    pub doppler_bin: i32,
    /// Seed of the noise.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            delay: 19,
            doppler_bin: 5,
            seed: 1,
        }
    }
}

/// The simulated target and where the app should find it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Truth {
    /// The parameters simulated.
    pub params: Params,
    /// The target's Doppler shift as simulated, bin/(m·PRI) hertz.
    pub simulated_doppler_hz: f64,
    /// CEDR's output at the target's bins (range n−1+delay, Doppler m/2+bin).
    pub expected: Output,
}

impl Truth {
    /// A line for the command's output.
    pub fn describe(&self) -> String {
        let bin = self.params.doppler_bin;
        format!(
            "truth: delay {}, Doppler {bin} {} ({} simulated), which CEDR's formulas turn into Doppler bin {}, range bin {}",
            count(self.params.delay as u64, "sample", "samples"),
            if bin.abs() == 1 { "bin" } else { "bins" },
            hertz(self.simulated_doppler_hz),
            self.expected.doppler_bin,
            self.expected.range_bin
        )
    }
}

/// What to make of the figures: they are CEDR's, whose formulas are not a calibration.
pub const NOTE: &str = "note: the shift and delay follow CEDR's formulas as CEDR computes them, \
which count bins from 1 (a = z+1, b = x+1) and divide by m−1 = 127 pulses and n−1 = 63 samples: \
a target d Doppler bins off zero reads as (d+1)/(127·PRI) Hz where its true shift is d/(128·PRI), \
and its delay as if a pulse's 64 samples spanned one PRI. Compare the bins, which locate the \
target exactly; the hertz and seconds are CEDR's output, reproduced, not a measured velocity or range.";

/// A target at `params.delay` and `params.doppler_bin` in seeded noise.
pub fn generate(params: &Params) -> Result<(Input, Truth), AppError> {
    let half = (M / 2) as i32;
    if params.delay > N - GENERATED_PULSE || !(-half..half).contains(&params.doppler_bin) {
        return Err(AppError::Param(format!(
            "pulse Doppler simulates delays of 0 … {} samples and Doppler bins of {} … {}, got {} and {}",
            N - GENERATED_PULSE,
            -half,
            half - 1,
            params.delay,
            params.doppler_bin
        )));
    }
    let Simulated {
        pulses,
        pulse,
        bins: (z, x),
    } = simulate(M, N, params)?;
    let truth = Truth {
        params: *params,
        simulated_doppler_hz: f64::from(params.doppler_bin) / (M as f64 * PRI),
        expected: Output::from_bins(z, x),
    };
    Ok((Input { pulses, pulse }, truth))
}

/// A simulated burst of any size.
#[derive(Clone, Debug)]
pub struct Simulated {
    /// `m` pulses of `n` samples, pulse-major.
    pub pulses: Vec<Complex32>,
    /// The transmitted pulse, `n` samples.
    pub pulse: Vec<Complex32>,
    /// The (Doppler, range) bins where the range-Doppler map must peak.
    pub bins: (usize, usize),
}

/// `m` pulses of `n` samples carrying a target at `params.delay` and `params.doppler_bin` in
/// seeded noise: any size, for workloads larger than CEDR's (the distributed runs).
pub fn simulate(m: usize, n: usize, params: &Params) -> Result<Simulated, AppError> {
    let half = i32::try_from(m / 2).unwrap_or(i32::MAX);
    if m < 2
        || n < GENERATED_PULSE
        || params.delay > n - GENERATED_PULSE
        || !(-half..half).contains(&params.doppler_bin)
    {
        return Err(AppError::Param(format!(
            "pulse Doppler simulates at least 2 pulses of at least {GENERATED_PULSE} samples, delays of 0 … n − {GENERATED_PULSE} samples and Doppler bins of −m/2 … m/2 − 1; got {m} pulses of {n} samples, delay {} and bin {}",
            params.delay,
            params.doppler_bin
        )));
    }
    let pulse: Vec<Complex32> = (0..n)
        .map(|j| {
            if j < GENERATED_PULSE {
                cis(PI * (j * j) as f64 / GENERATED_PULSE as f64)
            } else {
                Complex32::new(0.0, 0.0)
            }
        })
        .collect();
    let mut rng = Rng::new(params.seed);
    let mut pulses = Vec::with_capacity(m * n);
    for k in 0..m {
        let doppler = cis(2.0 * PI * f64::from(params.doppler_bin) * k as f64 / m as f64);
        for j in 0..n {
            let echo = j
                .checked_sub(params.delay)
                .map_or(Complex32::new(0.0, 0.0), |i| pulse[i] * doppler);
            let (re, im) = rng.complex_gaussian(SIGMA);
            pulses.push(echo + Complex32::new(re as f32, im as f32));
        }
    }
    // Both indices are in range: delay ≤ n − 16 and the bin offset is within ±m/2.
    let z = (half + params.doppler_bin) as usize;
    let x = n - 1 + params.delay;
    Ok(Simulated {
        pulses,
        pulse,
        bins: (z, x),
    })
}

/// Runs pulse Doppler.
pub fn run(input: &Input, opts: &Options) -> Result<Run<Output>, AppError> {
    if input.pulses.len() != M * N || input.pulse.len() != N {
        return Err(AppError::Param(format!(
            "pulse Doppler takes {M} pulses of {N} samples and a {N}-sample pulse, got {} and {} samples",
            input.pulses.len(),
            input.pulse.len()
        )));
    }
    execute(input, opts)
}

/// "Doppler shift 372 Hz, time delay 38.3 µs (Doppler bin 69, range bin 82)", or, for a
/// map without a peak, that there is no target.
pub fn describe(output: &Output) -> String {
    let figures = format!(
        "Doppler shift {}, time delay {} (Doppler bin {}, range bin {})",
        hertz(output.doppler_shift_hz),
        seconds(output.time_delay_s),
        output.doppler_bin,
        output.range_bin
    );
    if output.target {
        figures
    } else {
        format!(
            "no target: the range-Doppler map is flat, the same magnitude in every cell (is the \
             input all zeros?), so its maximum locates nothing; CEDR's formulas at its first \
             cell would read {figures}"
        )
    }
}

/// "372 Hz", "-7.874 Hz".
fn hertz(hz: f64) -> String {
    format!("{} Hz", significant(hz, 4))
}

/// Element `i` of the matrix of matched-filter inputs, one row c = [n−1 zeros, pulse, one
/// zero] per pulse: the host step that lays the received pulses out for the FFTs.
fn matched_input(pulses: &[Complex32], i: usize) -> Complex32 {
    let (k, j) = (i / L, i % L);
    match (j + 1).checked_sub(N) {
        Some(s) if s < N => pulses[k * N + s],
        _ => Complex32::new(0.0, 0.0),
    }
}

/// The result from the |spectrum| matrix, range bins as rows of m Doppler bins.
fn locate(magnitude: &[f32]) -> Output {
    let (i, peak) = argmax(magnitude);
    let floor = magnitude.iter().copied().fold(f32::INFINITY, f32::min);
    Output {
        // All NaN leaves `peak` at −∞, which is no peak either.
        target: peak > floor,
        ..Output::from_bins(i % M, i / M)
    }
}

impl Pipeline for Input {
    type Output = Output;

    fn app(&self) -> App {
        App::PulseDoppler
    }

    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        submit: Submit,
    ) -> Result<Frame<'a, Output>, AppError> {
        let (fft, zip, aux) = (
            map.device(Step::Fft),
            map.device(Step::MulConj),
            map.device(Step::Aux),
        );
        let mut d = HeteData::alloc(rt, L)?;
        pad_into(d.host_write()?, &self.pulse);
        let mut d_spectrum = HeteData::alloc(rt, L)?;
        let mut c_spectra = alloc_rows(rt, M, L)?;
        let mut products = alloc_rows(rt, M, L)?;
        let mut filtered = alloc_rows(rt, M, L)?;
        let mut by_range = alloc_rows(rt, L, M)?;
        let mut doppler = alloc_rows(rt, L, M)?;
        let mut shifted = HeteData::alloc(rt, L * M)?;
        let pulses = &self.pulses[..];
        // A frame's ends: the matched-filter inputs the host lays out, the |map| it reads.
        type Ends = (HeteData<Complex32>, HeteData<f32>);
        frames::run(
            rt,
            submit,
            || Ok((alloc_rows(rt, M, L)?, HeteData::alloc(rt, L * M)?)),
            move |(c, _): &mut Ends, ahead| {
                rimms::parallel_for!(for i in 0..M * L {
                    c[i] = matched_input(pulses, i);
                })?;
                ahead.send(c, fft)
            },
            move |(c, magnitude): &mut Ends| {
                rt.fft(fft, FftDirection::Forward, L, &d, &mut d_spectrum)?;
                // One call per pulse, as CEDR makes them.
                let forward = RowCall::Fft(fft, FftDirection::Forward, L);
                each_row(rt, submit, c, &mut c_spectra, L, forward)?;
                let filter = RowCall::Zip(zip, ZipOp::MulConj, &d_spectrum);
                each_row(rt, submit, &c_spectra, &mut products, L, filter)?;
                let inverse = RowCall::Fft(fft, FftDirection::Inverse, L);
                each_row(rt, submit, &products, &mut filtered, L, inverse)?;
                rt.transpose(aux, M, L, &filtered, &mut by_range)?;
                let doppler_fft = RowCall::Fft(fft, FftDirection::Forward, M);
                each_row(rt, submit, &by_range, &mut doppler, M, doppler_fft)?;
                rt.fftshift(aux, M, &doppler, &mut shifted)?;
                rt.magnitude(aux, &shifted, magnitude)?;
                Ok(())
            },
            |(_, magnitude): &mut Ends| Ok(locate(magnitude.host()?)),
        )
    }

    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Output>, AppError> {
        let mut d = dev.mirror(L)?;
        pad_into(d.host_mut(), &self.pulse);
        dev.upload(&mut d);
        let mut d_spectrum = dev.buffer(L)?;
        let mut c = dev.mirror(M * L)?;
        let mut c_spectra = dev.buffer(M * L)?;
        let mut products = dev.buffer(M * L)?;
        let mut filtered = dev.buffer(M * L)?;
        let mut by_range = dev.buffer(L * M)?;
        let mut doppler = dev.buffer(L * M)?;
        let mut shifted = dev.buffer(L * M)?;
        let mut magnitude = dev.mirror(L * M)?;
        Ok(Box::new(move || {
            for (i, v) in c.host_mut().iter_mut().enumerate() {
                *v = matched_input(&self.pulses, i);
            }
            dev.upload(&mut c);
            dev.fft(FftDirection::Forward, L, d.dev(), &mut d_spectrum)?;
            dev.fft(FftDirection::Forward, L, c.dev(), &mut c_spectra)?;
            for (spectrum, out) in c_spectra.chunks_exact(L).zip(products.chunks_exact_mut(L)) {
                kernels::zip(ZipOp::MulConj, spectrum, &d_spectrum, out);
            }
            dev.fft(FftDirection::Inverse, L, &products, &mut filtered)?;
            kernels::transpose(M, L, &filtered, &mut by_range);
            dev.fft(FftDirection::Forward, M, &by_range, &mut doppler)?;
            kernels::fftshift_rows(M, &doppler, &mut shifted);
            kernels::magnitude(&shifted, magnitude.dev_mut());
            dev.download(&mut magnitude);
            Ok(locate(magnitude.host()))
        }))
    }
}
