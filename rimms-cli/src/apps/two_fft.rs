//! 2FFT: an FFT then an inverse FFT of the same data, batched over rows — the simplest chain
//! of the RIMMS paper, where all a runtime can save is the copy of the spectrum between the
//! two calls. FZF is the same chain with a filter multiply in the middle, so both are this one
//! piece of code ([`Input`] with or without a filter).

use super::native::Native;
use super::report::{Checksum, Run};
use super::{execute, frames, App, AppError, Frame, Mapping, Options, Pipeline, Step, Submit};
use rimms::{Complex32, FftDirection, HeteData, Runtime, ZipOp};

/// Sizes of the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// FFT size, a power of two (the paper measures 256 … 2,048).
    pub points: usize,
    /// Rows per frame (the batch).
    pub rows: usize,
}

impl Default for Params {
    /// 64 rows of 2,048 points: 1 MiB of complex f32 per buffer.
    fn default() -> Self {
        Params {
            points: 2048,
            rows: 64,
        }
    }
}

/// The data of an FFT chain: the frame input and, for FZF, the filter.
#[derive(Clone, Debug)]
pub struct Input {
    pub(crate) params: Params,
    pub(crate) x: Vec<Complex32>,
    pub(crate) filter: Option<Vec<Complex32>>,
}

impl Input {
    /// The 2FFT input for `params`: a deterministic test signal.
    pub fn generate(params: Params) -> Input {
        Input {
            params,
            x: signal(params.points * params.rows, 0),
            filter: None,
        }
    }
}

/// Deterministic values in [-0.5, 0.5) that repeat only after 1,009 elements, distinct per
/// `salt`: what a sensor might hand over, cheap to make.
pub(crate) fn signal(len: usize, salt: usize) -> Vec<Complex32> {
    (0..len)
        .map(|i| {
            let k = (i * 7 + salt * 31) % 1009;
            Complex32::new(
                k as f32 / 1009.0 - 0.5,
                ((k * 3) % 101) as f32 / 101.0 - 0.5,
            )
        })
        .collect()
}

/// Σ|y| in f64.
pub(crate) fn checksum(y: &[Complex32]) -> Checksum {
    Checksum {
        checksum: y.iter().map(|v| f64::from(v.norm())).sum(),
    }
}

/// Runs the chain (2FFT, or FZF when the input has a filter).
pub fn run(input: &Input, opts: &Options) -> Result<Run<Checksum>, AppError> {
    let Params { points, rows } = input.params;
    let len = points.checked_mul(rows).filter(|&l| l > 0);
    let fits = |v: &Vec<Complex32>| Some(v.len()) == len;
    if !points.is_power_of_two() || !fits(&input.x) || !input.filter.as_ref().is_none_or(fits) {
        return Err(AppError::Param(format!(
            "an FFT chain needs a power-of-two size and {rows} rows of {points} points in each buffer"
        )));
    }
    execute(input, opts)
}

impl Pipeline for Input {
    type Output = Checksum;

    fn app(&self) -> App {
        if self.filter.is_some() {
            App::Fzf
        } else {
            App::TwoFft
        }
    }

    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        submit: Submit,
    ) -> Result<Frame<'a, Checksum>, AppError> {
        let (fft, zip) = (map.device(Step::Fft), map.device(Step::Zip));
        let points = self.params.points;
        let len = self.x.len();
        let mut filter = match &self.filter {
            Some(f) => Some((HeteData::from_slice(rt, f)?, HeteData::alloc(rt, len)?)),
            None => None,
        };
        let mut spectrum = HeteData::alloc(rt, len)?;
        // A frame's ends: the input the host writes and the result it reads.
        type Ends = (HeteData<Complex32>, HeteData<Complex32>);
        frames::run(
            rt,
            submit,
            || Ok((HeteData::alloc(rt, len)?, HeteData::alloc(rt, len)?)),
            move |(x, _): &mut Ends, ahead| {
                x.host_fill(|x| x.copy_from_slice(&self.x))?;
                ahead.send(x, fft)
            },
            move |(x, y): &mut Ends| {
                rt.fft(fft, FftDirection::Forward, points, x, &mut spectrum)?;
                let last = match &mut filter {
                    Some((f, filtered)) => {
                        rt.zip(zip, ZipOp::Mul, &spectrum, &*f, filtered)?;
                        &*filtered
                    }
                    None => &spectrum,
                };
                rt.fft(fft, FftDirection::Inverse, points, last, y)?;
                Ok(())
            },
            |(_, y): &mut Ends| Ok(checksum(y.host()?)),
        )
    }

    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Checksum>, AppError> {
        let points = self.params.points;
        let len = self.x.len();
        let mut filter = match &self.filter {
            Some(f) => {
                let mut m = dev.mirror(len)?;
                m.host_mut().copy_from_slice(f);
                dev.upload(&mut m);
                Some((m, dev.buffer(len)?))
            }
            None => None,
        };
        let mut x = dev.mirror(len)?;
        let mut spectrum = dev.buffer(len)?;
        let mut y = dev.mirror(len)?;
        Ok(Box::new(move || {
            x.host_mut().copy_from_slice(&self.x);
            dev.upload(&mut x);
            dev.fft(FftDirection::Forward, points, x.dev(), &mut spectrum)?;
            let last: &[Complex32] = match &mut filter {
                Some((f, filtered)) => {
                    dev.zip(ZipOp::Mul, &spectrum, f.dev(), filtered)?;
                    filtered
                }
                None => &spectrum,
            };
            dev.fft(FftDirection::Inverse, points, last, y.dev_mut())?;
            dev.download(&mut y);
            Ok(checksum(y.host()))
        }))
    }
}
