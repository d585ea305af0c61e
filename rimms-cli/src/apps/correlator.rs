//! Radar correlator: where in a noisy received signal does a known chirp start?
//!
//! DESIGN.md's parameters: n = 256 samples of an LFM chirp exp(iπ(B/T)t²), T = 512 µs,
//! B = 500 kHz, t = k·T/n; the received signal is the chirp delayed by `delay` samples plus
//! complex Gaussian noise of standard deviation 0.5 per component; both are zero-padded to
//! 512 and correlated in the frequency domain, corr = IFFT(FFT(received) · conj(FFT(reference))),
//! and the delay estimate is argmax |corr|. The zero padding makes the circular correlation a
//! linear one, so lag `delay` is the peak.

use super::input::{cis, Rng};
use super::native::Native;
use super::report::Run;
use super::{
    argmax, execute, pad_into, App, AppError, Frame, Mapping, Options, Pipeline, Step, Submit,
};
use rimms::backend::cpu::kernels;
use rimms::{Complex32, FftDirection, HeteData, Runtime, ZipOp};
use serde::Serialize;
use std::f64::consts::PI;

/// Samples of the chirp and of the received signal.
pub const N: usize = 256;
/// Length after zero padding, and of the FFTs.
pub const PADDED: usize = 2 * N;
/// Chirp duration, seconds.
pub const T: f64 = 512e-6;
/// Chirp bandwidth, hertz.
pub const B: f64 = 500e3;
/// Noise standard deviation per component.
pub const SIGMA: f64 = 0.5;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Delay of the chirp in the received signal, in samples (less than [`N`]).
    pub delay: usize,
    /// Seed of the noise.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params { delay: 37, seed: 1 }
    }
}

/// The correlator's input: `N` received samples and the `N`-sample reference chirp.
#[derive(Clone, Debug)]
pub struct Input {
    /// What the receiver saw.
    pub received: Vec<Complex32>,
    /// The transmitted chirp.
    pub reference: Vec<Complex32>,
}

/// The estimated delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Output {
    /// argmax |corr|, in samples.
    pub delay_samples: usize,
}

/// The reference chirp, computed in f64.
pub fn chirp() -> Vec<Complex32> {
    (0..N)
        .map(|k| {
            let t = k as f64 * T / N as f64;
            cis(PI * (B / T) * t * t)
        })
        .collect()
}

/// A received signal with the chirp at `params.delay` in seeded noise, and the truth.
pub fn generate(params: &Params) -> Result<(Input, Output), AppError> {
    if params.delay >= N {
        return Err(AppError::Param(format!(
            "the correlator's delay must be below {N} samples, got {}",
            params.delay
        )));
    }
    let reference = chirp();
    let mut rng = Rng::new(params.seed);
    let received = (0..N)
        .map(|k| {
            let (re, im) = rng.complex_gaussian(SIGMA);
            let echo = k
                .checked_sub(params.delay)
                .map_or(Complex32::new(0.0, 0.0), |j| reference[j]);
            echo + Complex32::new(re as f32, im as f32)
        })
        .collect();
    let truth = Output {
        delay_samples: params.delay,
    };
    Ok((
        Input {
            received,
            reference,
        },
        truth,
    ))
}

/// Runs the correlator.
pub fn run(input: &Input, opts: &Options) -> Result<Run<Output>, AppError> {
    if input.received.len() != N || input.reference.len() != N {
        return Err(AppError::Param(format!(
            "the correlator takes {N} received and {N} reference samples, got {} and {}",
            input.received.len(),
            input.reference.len()
        )));
    }
    execute(input, opts)
}

/// "delay 37 samples (74 µs)".
pub fn describe(output: &Output) -> String {
    format!(
        "delay {} samples ({} µs)",
        output.delay_samples,
        output.delay_samples as f64 * T / N as f64 * 1e6
    )
}

impl Pipeline for Input {
    type Output = Output;

    fn app(&self) -> App {
        App::Correlator
    }

    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        _submit: Submit,
    ) -> Result<Frame<'a, Output>, AppError> {
        let (fft, zip, aux) = (
            map.device(Step::Fft),
            map.device(Step::MulConj),
            map.device(Step::Aux),
        );
        let mut reference = HeteData::alloc(rt, PADDED)?;
        pad_into(reference.host_write()?, &self.reference);
        let mut received = HeteData::alloc(rt, PADDED)?;
        let mut rx_spectrum = HeteData::alloc(rt, PADDED)?;
        let mut ref_spectrum = HeteData::alloc(rt, PADDED)?;
        let mut product = HeteData::alloc(rt, PADDED)?;
        let mut corr = HeteData::alloc(rt, PADDED)?;
        let mut magnitude = HeteData::alloc(rt, PADDED)?;
        Ok(Box::new(move || {
            pad_into(received.host_write()?, &self.received);
            rt.fft(
                fft,
                FftDirection::Forward,
                PADDED,
                &received,
                &mut rx_spectrum,
            )?;
            rt.fft(
                fft,
                FftDirection::Forward,
                PADDED,
                &reference,
                &mut ref_spectrum,
            )?;
            rt.zip(
                zip,
                ZipOp::MulConj,
                &rx_spectrum,
                &ref_spectrum,
                &mut product,
            )?;
            rt.fft(fft, FftDirection::Inverse, PADDED, &product, &mut corr)?;
            rt.magnitude(aux, &corr, &mut magnitude)?;
            let (delay_samples, _) = argmax(magnitude.host()?);
            Ok(Output { delay_samples })
        }))
    }

    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Output>, AppError> {
        let mut reference = dev.mirror(PADDED)?;
        pad_into(reference.host_mut(), &self.reference);
        dev.upload(&mut reference);
        let mut received = dev.mirror(PADDED)?;
        let mut rx_spectrum = dev.buffer(PADDED)?;
        let mut ref_spectrum = dev.buffer(PADDED)?;
        let mut product = dev.buffer(PADDED)?;
        let mut corr = dev.buffer(PADDED)?;
        let mut magnitude = dev.mirror(PADDED)?;
        Ok(Box::new(move || {
            pad_into(received.host_mut(), &self.received);
            dev.upload(&mut received);
            dev.fft(
                FftDirection::Forward,
                PADDED,
                received.dev(),
                &mut rx_spectrum,
            )?;
            dev.fft(
                FftDirection::Forward,
                PADDED,
                reference.dev(),
                &mut ref_spectrum,
            )?;
            kernels::zip(ZipOp::MulConj, &rx_spectrum, &ref_spectrum, &mut product);
            dev.fft(FftDirection::Inverse, PADDED, &product, &mut corr)?;
            kernels::magnitude(&corr, magnitude.dev_mut());
            dev.download(&mut magnitude);
            let (delay_samples, _) = argmax(magnitude.host());
            Ok(Output { delay_samples })
        }))
    }
}
