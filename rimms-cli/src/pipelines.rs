//! The DESIGN.md pipelines the benchmark runs, written as a user would: allocate once, call
//! kernels on a device, read the result on the host. The same code runs in tracked and baseline
//! mode; only the runtime differs.

use rimms::{Complex32, Device, FftDirection, HeteData, Result, Runtime, ZipOp};
use std::time::{Duration, Instant};

/// A pipeline of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum App {
    /// FFT then inverse FFT.
    TwoFft,
    /// FFT, multiply by a filter, inverse FFT.
    Fzf,
    /// Two independent multiplies, then the sum of their results.
    Zip3x,
}

impl App {
    pub const ALL: [App; 3] = [App::TwoFft, App::Fzf, App::Zip3x];

    pub fn name(self) -> &'static str {
        match self {
            App::TwoFft => "2fft",
            App::Fzf => "fzf",
            App::Zip3x => "zip3x",
        }
    }
}

/// FFT size and rows per frame for the FFT pipelines; elements for zip3x.
pub const POINTS: usize = 2048;
pub const ROWS: usize = 64;
pub const ZIP_LEN: usize = 4096;

/// New input for frame `frame`: what a sensor would hand over.
fn frame_input(len: usize, frame: usize, salt: usize) -> impl Iterator<Item = Complex32> {
    (0..len).map(move |i| {
        let k = (i * 7 + frame * 13 + salt * 31) % 1009;
        Complex32::new(
            k as f32 / 1009.0 - 0.5,
            ((k * 3) % 101) as f32 / 101.0 - 0.5,
        )
    })
}

fn fill(x: &mut HeteData<Complex32>, frame: usize, salt: usize) -> Result<()> {
    let len = x.len();
    for (dst, v) in x
        .host_write()?
        .iter_mut()
        .zip(frame_input(len, frame, salt))
    {
        *dst = v;
    }
    Ok(())
}

/// Runs `frames` frames of `app` on `device`; returns each frame's time and a checksum of the
/// last output (so the modes can be checked against each other).
pub fn run(rt: &Runtime, app: App, device: Device, frames: usize) -> Result<(Vec<Duration>, f64)> {
    let mut times = Vec::with_capacity(frames);
    let mut checksum = 0.0;
    match app {
        App::TwoFft | App::Fzf => {
            let len = POINTS * ROWS;
            let mut x = HeteData::alloc(rt, len)?;
            let mut filter = HeteData::alloc(rt, len)?;
            fill(&mut filter, 0, 99)?;
            let mut spectrum = HeteData::alloc(rt, len)?;
            let mut filtered = HeteData::alloc(rt, len)?;
            let mut y = HeteData::alloc(rt, len)?;
            for frame in 0..frames {
                let start = Instant::now();
                fill(&mut x, frame, 0)?;
                rt.fft(device, FftDirection::Forward, POINTS, &x, &mut spectrum)?;
                let last = if app == App::Fzf {
                    rt.zip(device, ZipOp::Mul, &spectrum, &filter, &mut filtered)?;
                    &filtered
                } else {
                    &spectrum
                };
                rt.fft(device, FftDirection::Inverse, POINTS, last, &mut y)?;
                checksum = y.host()?.iter().map(|v| f64::from(v.norm())).sum();
                times.push(start.elapsed());
            }
        }
        App::Zip3x => {
            let mut inputs = Vec::new();
            for _ in 0..4 {
                inputs.push(HeteData::alloc(rt, ZIP_LEN)?);
            }
            let mut p = HeteData::alloc(rt, ZIP_LEN)?;
            let mut q = HeteData::alloc(rt, ZIP_LEN)?;
            let mut r = HeteData::alloc(rt, ZIP_LEN)?;
            for frame in 0..frames {
                let start = Instant::now();
                for (salt, x) in inputs.iter_mut().enumerate() {
                    fill(x, frame, salt)?;
                }
                rt.zip(device, ZipOp::Mul, &inputs[0], &inputs[1], &mut p)?;
                rt.zip(device, ZipOp::Mul, &inputs[2], &inputs[3], &mut q)?;
                rt.zip(device, ZipOp::Add, &p, &q, &mut r)?;
                checksum = r.host()?.iter().map(|v| f64::from(v.norm())).sum();
                times.push(start.elapsed());
            }
        }
    }
    Ok((times, checksum))
}

/// Bytes per frame that must cross between host and device when the pipeline runs on a
/// device with its own memory: the fresh inputs in, the result out (the filter crosses once).
pub fn minimum_bytes(app: App, frames: usize) -> u64 {
    let c = std::mem::size_of::<Complex32>() as u64;
    match app {
        App::TwoFft => 2 * (POINTS * ROWS) as u64 * c * frames as u64,
        App::Fzf => (2 * frames as u64 + 1) * (POINTS * ROWS) as u64 * c,
        App::Zip3x => 5 * ZIP_LEN as u64 * c * frames as u64,
    }
}
