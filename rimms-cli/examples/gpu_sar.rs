//! SAR (range-Doppler, 256 × 512) all on GPU 0, three ways in one run:
//!
//! - **baseline**: `rimms run sar --map gpu --mode baseline`, CEDR's way through the runtime:
//!   every call stages its arguments through device memory;
//! - **tracked**: the same app in `rimms` mode: the raw frame goes in once, every step runs on
//!   the device, the image comes out once;
//! - **hand-written**: the same steps written directly against cudarc with the fewest
//!   transfers and launches: the chirp's spectrum and both filters tiled once at setup, each
//!   stage one batched cuFFT or one kernel launch over the whole matrix.
//!
//! Prints the median frame of each, the ratios, and whether they agree on the brightest
//! pixel. Where there is no GPU it prints `no GPU: <reason>` and exits 0.
//!
//! `cargo run --release -p rimms-cli --example gpu_sar -- [frames]`

use cudarc::cufft::{sys::cufftType, sys::float2, CudaFft, FftDirection as CuDir};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use rimms::drivers::cuda::kernel_ptx;
use rimms::{Complex32, Error as RimmsError, Runtime};
use rimms_cli::apps::sar::{self, azimuth_filter, range_chirp, Input, Scene, NFAST, NSLOW};
use rimms_cli::apps::{Mapping, Mode, Options};
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("gpu_sar: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    if let Err(RimmsError::NoGpu { why }) = Runtime::builder().gpu(0).gpu_pool(1 << 20).build() {
        println!("no GPU: {why}");
        return Ok(());
    }
    let input = Input::simulate(&Scene::default());
    let through_runtime = |mode| -> Res<(f64, sar::Output)> {
        let run = sar::run(&input, &Options::new(mode, Mapping::Gpu).frames(frames))?;
        Ok((ms(run.median()), run.result))
    };
    let (baseline, base_out) = through_runtime(Mode::Baseline)?;
    let (tracked, tracked_out) = through_runtime(Mode::Rimms)?;
    let (hand, image) = hand_written(&input.raw, frames)?;
    let (peak_at, peak) = brightest(&image);

    println!("SAR on gpu0, {NSLOW} × {NFAST}, median of {frames} frames");
    println!(
        "{:<14} {:>10} {:>16} {:>22}",
        "variant", "median ms", "× hand-written", "× faster than baseline"
    );
    for (label, t) in [
        ("baseline", baseline),
        ("tracked", tracked),
        ("hand-written", hand),
    ] {
        println!(
            "{label:<14} {t:>10.3} {:>16.3} {:>22.2}",
            t / hand,
            baseline / t
        );
    }
    println!(
        "tracked vs hand-written: {:+.1} % (goal: within 5 %); tracked over baseline: {:.2}x",
        (tracked / hand - 1.0) * 100.0,
        baseline / tracked
    );
    let agree = base_out == tracked_out
        && peak_at == (tracked_out.peak_row, tracked_out.peak_col)
        && (peak - tracked_out.peak).abs() <= 1e-3 * tracked_out.peak.abs();
    println!(
        "brightest pixel: tracked {} at ({}, {}), baseline {} at ({}, {}), hand-written {peak} at {peak_at:?}: {}",
        tracked_out.peak,
        tracked_out.peak_row,
        tracked_out.peak_col,
        base_out.peak,
        base_out.peak_row,
        base_out.peak_col,
        if agree { "agree" } else { "DISAGREE" }
    );
    if agree {
        Ok(())
    } else {
        Err("the three variants disagree".into())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// (row, column) and magnitude of the largest value of a NSLOW × NFAST image.
fn brightest(image: &[f32]) -> ((usize, usize), f32) {
    let (i, peak) = image
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f32::MIN),
            |best, (i, v)| if v > best.1 { (i, v) } else { best },
        );
    ((i / NFAST, i % NFAST), peak)
}

fn to2(v: &[Complex32]) -> Vec<float2> {
    v.iter().map(|c| float2 { x: c.re, y: c.im }).collect()
}

/// `values` repeated `times` times: a per-row filter as a whole-matrix operand.
fn tiled(values: &[float2], times: usize) -> Vec<float2> {
    values
        .iter()
        .copied()
        .cycle()
        .take(values.len() * times)
        .collect()
}

fn elementwise(n: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(256).clamp(1, 65_535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The kernels of `KERNEL_SOURCE` this pipeline launches.
struct Kernels {
    stream: Arc<CudaStream>,
    zip: cudarc::driver::CudaFunction,
    scale: cudarc::driver::CudaFunction,
    shift: cudarc::driver::CudaFunction,
    transpose: cudarc::driver::CudaFunction,
    magnitude: cudarc::driver::CudaFunction,
}

type Buf = CudaSlice<float2>;

impl Kernels {
    /// `out = a · b` over the whole matrix.
    fn multiply(&self, a: &Buf, b: &Buf, out: &mut Buf) -> Res<()> {
        let (n, mul) = (a.len() as u64, 2i32);
        let mut l = self.stream.launch_builder(&self.zip);
        l.arg(a).arg(b).arg(out).arg(&n).arg(&mul);
        // SAFETY: rimms_zip(const float2*, const float2*, float2*, u64, int) over n values of
        // three distinct buffers of n values.
        unsafe { l.launch(elementwise(n)) }?;
        Ok(())
    }

    /// `x /= points`, in place: cuFFT leaves the inverse unscaled.
    fn unscale(&self, x: &mut Buf, points: usize) -> Res<()> {
        let (n, re, im) = (x.len() as u64, 1.0f32 / points as f32, 0.0f32);
        let mut l = self.stream.launch_builder(&self.scale);
        l.arg(&*x).arg(&*x).arg(&n).arg(&re).arg(&im);
        // SAFETY: rimms_scale(const float2*, float2*, u64, float, float), element-wise in
        // place over the n values of x.
        unsafe { l.launch(elementwise(n)) }?;
        Ok(())
    }

    /// numpy's fftshift of every row of `cols`.
    fn fftshift(&self, x: &Buf, out: &mut Buf, cols: usize) -> Res<()> {
        let (rows, cols) = ((x.len() / cols) as u64, cols as u64);
        let mut l = self.stream.launch_builder(&self.shift);
        l.arg(x).arg(out).arg(&rows).arg(&cols);
        // SAFETY: rimms_fftshift_rows(const float2*, float2*, u64, u64); both buffers hold
        // rows × cols values and are distinct.
        unsafe { l.launch(elementwise(rows * cols)) }?;
        Ok(())
    }

    /// `out` (cols × rows) = transpose of `x` (rows × cols).
    fn transpose(&self, x: &Buf, out: &mut Buf, rows: usize, cols: usize) -> Res<()> {
        let (r, c) = (rows as u32, cols as u32);
        let cfg = LaunchConfig {
            grid_dim: (c.div_ceil(32), r.div_ceil(32), 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let mut l = self.stream.launch_builder(&self.transpose);
        l.arg(x).arg(out).arg(&r).arg(&c);
        // SAFETY: rimms_transpose(const float2*, float2*, u32, u32) with the 32 × 8 block
        // geometry it is written for; distinct buffers of rows × cols values.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }

    fn magnitude(&self, x: &Buf, out: &mut CudaSlice<f32>) -> Res<()> {
        let n = x.len() as u64;
        let mut l = self.stream.launch_builder(&self.magnitude);
        l.arg(x).arg(out).arg(&n);
        // SAFETY: rimms_magnitude(const float2*, float*, u64) over n values.
        unsafe { l.launch(elementwise(n)) }?;
        Ok(())
    }
}

/// The SAR frame written against cudarc; returns the median ms and the last image.
fn hand_written(raw: &[Complex32], frames: usize) -> Res<(f64, Vec<f32>)> {
    let n = NSLOW * NFAST;
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    // The kernels as the backend compiles them, with the NVRTC it found (cudarc's own
    // compile_ptx opens NVRTC by CUDA 12's names only).
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(kernel_ptx()?))?;
    let k = Kernels {
        stream: stream.clone(),
        zip: module.load_function("rimms_zip")?,
        scale: module.load_function("rimms_scale")?,
        shift: module.load_function("rimms_fftshift_rows")?,
        transpose: module.load_function("rimms_transpose")?,
        magnitude: module.load_function("rimms_magnitude")?,
    };
    let plan = |points: usize, batch: usize| {
        CudaFft::plan_1d(
            points as i32,
            cufftType::CUFFT_C2C,
            batch as i32,
            stream.clone(),
        )
    };
    let (chirp_plan, range_plan, azimuth_plan) =
        (plan(NFAST, 1)?, plan(NFAST, NSLOW)?, plan(NSLOW, NFAST)?);

    // Setup, not timed: the chirp's spectrum, and both filters tiled over their matrices.
    let mut chirp = stream.clone_htod(&to2(&range_chirp()))?;
    let mut chirp_spectrum: Buf = stream.alloc_zeros(NFAST)?;
    chirp_plan.exec_c2c(&mut chirp, &mut chirp_spectrum, CuDir::Forward)?;
    let range_filter = stream.clone_htod(&tiled(&stream.clone_dtoh(&chirp_spectrum)?, NSLOW))?;
    let azimuth = stream.clone_htod(&tiled(&to2(&azimuth_filter()), NFAST))?;

    let raw = to2(raw);
    let mut echoes = vec![float2 { x: 0.0, y: 0.0 }; n];
    let mut input: Buf = stream.alloc_zeros(n)?;
    let mut a: Buf = stream.alloc_zeros(n)?;
    let mut b: Buf = stream.alloc_zeros(n)?;
    let mut image: CudaSlice<f32> = stream.alloc_zeros(n)?;
    let mut host_image = vec![0f32; n];
    // The host's part of a frame as the runtime's variants do it: the echoes written into the
    // buffer they are sent from (`host_fill` there), and the brightest pixel found in the
    // image read back (the app's result).
    let mut frame = || -> Res<()> {
        echoes.copy_from_slice(&raw);
        stream.memcpy_htod(&echoes, &mut input)?;
        // Range compression: FFT rows, shift, multiply by the chirp's spectrum, inverse.
        range_plan.exec_c2c(&mut input, &mut a, CuDir::Forward)?;
        k.fftshift(&a, &mut b, NFAST)?;
        k.multiply(&b, &range_filter, &mut a)?;
        range_plan.exec_c2c(&mut a, &mut b, CuDir::Inverse)?;
        k.unscale(&mut b, NFAST)?;
        // Azimuth compression on the transposed matrix.
        k.transpose(&b, &mut a, NSLOW, NFAST)?;
        azimuth_plan.exec_c2c(&mut a, &mut b, CuDir::Forward)?;
        k.fftshift(&b, &mut a, NSLOW)?;
        k.multiply(&a, &azimuth, &mut b)?;
        azimuth_plan.exec_c2c(&mut b, &mut a, CuDir::Inverse)?;
        k.unscale(&mut a, NSLOW)?;
        k.fftshift(&a, &mut b, NSLOW)?;
        k.transpose(&b, &mut a, NFAST, NSLOW)?;
        k.magnitude(&a, &mut image)?;
        stream.memcpy_dtoh(&image, &mut host_image)?;
        stream.synchronize()?;
        std::hint::black_box(brightest(&host_image));
        Ok(())
    };
    for _ in 0..3 {
        frame()?;
    }
    let mut times = Vec::with_capacity(frames);
    for _ in 0..frames.max(1) {
        let start = Instant::now();
        frame()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok((ms(times[times.len() / 2]), host_image))
}
