//! Radar correlator: where in a noisy received signal does a known chirp start?
//!
//! docs/design.md's parameters: n = 256 samples of an LFM chirp exp(iπ(B/T)t²), T = 512 µs,
//! B = 500 kHz, t = k·T/n; the received signal is the chirp delayed by `delay` samples plus
//! complex Gaussian noise of standard deviation 0.5 per component; the reference is
//! zero-padded to 512 and the two are correlated in the frequency domain,
//! corr = IFFT(FFT(received) · conj(FFT(reference))), and the delay estimate is argmax |corr|.
//!
//! Two details make every accepted delay (0 … n − 1) come out right, and both were once wrong:
//!
//! - The receiver listens for 2n = 512 samples, one chirp plus the longest delay, so the whole
//!   echo is in the window at any delay. With only n samples, an echo at delay d keeps n − d of
//!   its samples: at d = 240 the peak is 16 high while the noise's correlation with the chirp
//!   peaks near 30, and the estimate was noise.
//! - The search covers lags 0 … n − 1 only. With the reference in the first n of 512 samples,
//!   those lags are exact linear correlations (no wrap); lags n … 2n − 1 mix in wrapped
//!   samples and mean negative delays, which no echo has (the old 509 was lag −3).

use super::input::{cis, Rng};
use super::native::Native;
use super::report::Run;
use super::{
    argmax, execute, frames, pad_into, App, AppError, Frame, Mapping, Options, Pipeline, Step,
    Submit,
};
use crate::human::{count, seconds};
use rimms::drivers::cpu::kernels;
use rimms::{Complex32, FftDirection, HeteData, Runtime, ZipOp};
use serde::Serialize;
use std::f64::consts::PI;

/// Samples of the chirp and of the received signal.
pub const N: usize = 256;
/// Length of the received signal (one chirp plus the longest delay), of the zero-padded
/// reference, and of the FFTs.
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

/// The correlator's input: `PADDED` received samples and the `N`-sample reference chirp.
#[derive(Clone, Debug)]
pub struct Input {
    /// What the receiver saw, `PADDED` samples.
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
    let received = (0..PADDED)
        .map(|k| {
            let (re, im) = rng.complex_gaussian(SIGMA);
            let echo = k
                .checked_sub(params.delay)
                .and_then(|j| reference.get(j).copied())
                .unwrap_or(Complex32::new(0.0, 0.0));
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
    if input.received.len() != PADDED || input.reference.len() != N {
        return Err(AppError::Param(format!(
            "the correlator takes {PADDED} received and {N} reference samples, got {} and {}",
            input.received.len(),
            input.reference.len()
        )));
    }
    execute(input, opts)
}

/// "delay 37 samples (74 µs)".
pub fn describe(output: &Output) -> String {
    format!(
        "delay {} ({})",
        count(output.delay_samples as u64, "sample", "samples"),
        seconds(output.delay_samples as f64 * T / N as f64)
    )
}

/// The estimated delay: the strongest of the lags that mean a delay (see the module docs).
fn peak_lag(magnitude: &[f32]) -> usize {
    argmax(&magnitude[..N.min(magnitude.len())]).0
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
        submit: Submit,
    ) -> Result<Frame<'a, Output>, AppError> {
        let (fft, zip, aux) = (
            map.device(Step::Fft),
            map.device(Step::MulConj),
            map.device(Step::Aux),
        );
        let mut reference = HeteData::alloc(rt, PADDED)?;
        pad_into(reference.host_write()?, &self.reference);
        let mut rx_spectrum = HeteData::alloc(rt, PADDED)?;
        let mut ref_spectrum = HeteData::alloc(rt, PADDED)?;
        let mut product = HeteData::alloc(rt, PADDED)?;
        let mut corr = HeteData::alloc(rt, PADDED)?;
        // A frame's ends: the samples the host writes and the |correlation| it reads.
        type Ends = (HeteData<Complex32>, HeteData<f32>);
        frames::run(
            rt,
            submit,
            || Ok((HeteData::alloc(rt, PADDED)?, HeteData::alloc(rt, PADDED)?)),
            move |(received, _): &mut Ends, ahead| {
                received.host_fill(|x| x.copy_from_slice(&self.received))?;
                ahead.send(received, fft)
            },
            move |(received, magnitude): &mut Ends| {
                let forward = FftDirection::Forward;
                rt.fft(fft, forward, PADDED, received, &mut rx_spectrum)?;
                rt.fft(fft, forward, PADDED, &reference, &mut ref_spectrum)?;
                rt.zip(
                    zip,
                    ZipOp::MulConj,
                    &rx_spectrum,
                    &ref_spectrum,
                    &mut product,
                )?;
                rt.fft(fft, FftDirection::Inverse, PADDED, &product, &mut corr)?;
                rt.magnitude(aux, &corr, magnitude)?;
                Ok(())
            },
            |(_, magnitude): &mut Ends| {
                let delay_samples = peak_lag(magnitude.host()?);
                Ok(Output { delay_samples })
            },
        )
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
            received.host_mut().copy_from_slice(&self.received);
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
            let delay_samples = peak_lag(magnitude.host());
            Ok(Output { delay_samples })
        }))
    }
}
