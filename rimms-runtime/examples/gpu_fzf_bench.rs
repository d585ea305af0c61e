//! FZF (FFT → ZIP with a filter → inverse FFT; the paper's FFT-ZIP-IFFT chain) all on the
//! GPU, 2,048 points × 512 transforms per frame, in four variants:
//!
//! - **baseline**: CEDR's GPU path written against the driver, each of the three calls
//!   allocating device memory for its arguments (`cuMemAlloc`, as CEDR's `cudaMalloc`),
//!   copying its inputs in and its output out, and freeing (`cuMemFree`);
//! - **runtime baseline**: the same through the runtime in `ExecMode::Baseline` on `gpu(0)`
//!   (staging blocks from the runtime's pool instead of the driver's allocator);
//! - **tracked**: the runtime on `gpu(0)` in tracked mode: host code writes the frame, three
//!   API calls run on the device, host code reads the result; the frame goes in once, the
//!   result comes out once and the filter stays resident;
//! - **hand-written**: the same minimal transfers written directly against cudarc (its
//!   safe API: `CudaSlice`, `CudaFft`, a launch of the same kernels): the floor, so tracked
//!   over hand-written is what the runtime costs.
//!
//! Prints the median time per frame of each and the ratios. Where there is no GPU it prints
//! `no GPU: <reason>` and exits 0.
//!
//! `--chain 2fft` runs the paper's 2FFT chain instead (FFT → inverse FFT, two calls).
//!
//! `cargo run --release -p rimms-runtime --example gpu_fzf_bench -- [--frames N]
//! [--points N] [--batch N] [--chain fzf|2fft]`
//!
//! `--probe` prints instead what the backend finds (the GPUs, the driver's CUDA version, and
//! which NVRTC, cuFFT and nvJitLink files it loaded, or where it looked): the GPU kit's first
//! step.

#[cfg(not(feature = "cuda"))]
fn main() {
    println!("no GPU: rimms-runtime was built without the `cuda` feature");
}

#[cfg(feature = "cuda")]
fn main() {
    if let Err(e) = bench::run() {
        eprintln!("gpu_fzf_bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(feature = "cuda")]
mod bench {
    use cudarc::cufft::{sys::cufftType, sys::float2, CudaFft, FftDirection as CuDir};
    use cudarc::driver::{
        result, sys, CudaContext, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
    };
    use rimms_runtime::backend::cuda::{
        cuda_version, kernel_ptx, library_report, probe_detailed, Probe,
    };
    use rimms_runtime::{Complex32, Device, ExecMode, FftDirection, HeteData, Runtime, ZipOp};
    use std::error::Error;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    type Res<T> = Result<T, Box<dyn Error>>;

    struct Args {
        probe: bool,
        /// `--chain 2fft`: FFT then inverse FFT, the multiply left out (the paper's 2FFT).
        two_fft: bool,
        frames: usize,
        points: usize,
        batch: usize,
    }

    fn args() -> Res<Args> {
        let mut a = Args {
            probe: false,
            two_fft: false,
            frames: 20,
            points: 2048,
            batch: 512,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || -> Res<usize> {
                let v = it.next().ok_or(format!("{flag} needs a value"))?;
                Ok(v.parse()?)
            };
            match flag.as_str() {
                "--probe" => a.probe = true,
                "--chain" => match it.next().as_deref() {
                    Some("fzf") => a.two_fft = false,
                    Some("2fft") => a.two_fft = true,
                    other => return Err(format!("--chain takes fzf or 2fft, not {other:?}").into()),
                },
                "--frames" => a.frames = value()?.max(1),
                "--points" => a.points = value()?.max(1),
                "--batch" => a.batch = value()?.max(1),
                other => return Err(format!("unknown argument {other}").into()),
            }
        }
        Ok(a)
    }

    /// Deterministic inputs (SplitMix64).
    fn data(n: usize, seed: u64) -> Vec<Complex32> {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        (0..n).map(|_| Complex32::new(next(), next())).collect()
    }

    fn median(mut v: Vec<Duration>) -> f64 {
        v.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let n = v.len();
        if n % 2 == 1 {
            ms(v[n / 2])
        } else {
            (ms(v[n / 2 - 1]) + ms(v[n / 2])) / 2.0
        }
    }

    /// Times `frames` runs of `frame` after three warm-up runs; the median in ms.
    fn time(frames: usize, mut frame: impl FnMut() -> Res<()>) -> Res<f64> {
        for _ in 0..3 {
            frame()?;
        }
        let mut t = Vec::with_capacity(frames);
        for _ in 0..frames {
            let start = Instant::now();
            frame()?;
            t.push(start.elapsed());
        }
        Ok(median(t))
    }

    fn max_rel_diff(a: &[Complex32], b: &[Complex32]) -> f64 {
        let scale = b
            .iter()
            .map(|v| v.norm() as f64)
            .fold(0.0, f64::max)
            .max(1e-30);
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm() as f64)
            .fold(0.0, f64::max)
            / scale
    }

    pub fn run() -> Res<()> {
        let a = args()?;
        if a.probe {
            return probe();
        }
        // The runtime's verdict on GPU 0 (driver, device, NVRTC and cuFFT all usable) decides
        // for every variant, so none starts cudarc where a library it needs is missing.
        if let Err(rimms_runtime::Error::NoGpu { why }) =
            Runtime::builder().gpu(0).gpu_pool(1 << 20).build()
        {
            println!("no GPU: {why}");
            return Ok(());
        }
        let gpu_name = match probe_detailed()? {
            Probe::Found(info) => info.devices.first().map(|d| d.name.clone()),
            Probe::NoGpu(_) => None,
        }
        .unwrap_or_else(|| "GPU 0".to_string());
        let n = a.points * a.batch;
        let x = data(n, 1);
        let h = data(n, 2);

        // Baseline: three calls, each allocating, copying in and out, and freeing.
        let (baseline, y_base) = hand_written_baseline(&a, &x, &h)?;

        // Through the runtime, baseline and tracked.
        let (runtime_baseline, _) = through_runtime(&a, ExecMode::Baseline, &x, &h)?;
        let (tracked, y_tracked) = through_runtime(&a, ExecMode::Tracked, &x, &h)?;

        // Hand-written against cudarc, minimal transfers.
        let (hand, y_hand) = hand_written(&a, &x, &h)?;

        println!(
            "{} on gpu0 ({gpu_name}): {} points × {} per frame, median of {} frames",
            if a.two_fft { "2FFT" } else { "FZF" },
            a.points,
            a.batch,
            a.frames
        );
        println!(
            "{:<14} {:>10} {:>16} {:>16}",
            "variant", "median ms", "× hand-written", "× faster than baseline"
        );
        for (label, ms) in [
            ("baseline", baseline),
            ("rt baseline", runtime_baseline),
            ("tracked", tracked),
            ("hand-written", hand),
        ] {
            println!(
                "{label:<14} {ms:>10.3} {:>16.3} {:>16.2}",
                ms / hand,
                baseline / ms
            );
        }
        println!(
            "tracked vs hand-written: {:+.1} % (goal: within 5 %); tracked over baseline: \
             {:.2}x (paper: up to 2.43x)",
            (tracked / hand - 1.0) * 100.0,
            baseline / tracked
        );
        println!(
            "results agree: max |difference| / max |y|: baseline {:.2e}, hand-written {:.2e} \
             (against tracked)",
            max_rel_diff(&y_base, &y_tracked),
            max_rel_diff(&y_hand, &y_tracked)
        );
        print_calibrated_link()?;
        Ok(())
    }

    /// The GPUs, the driver and the libraries, as the backend sees them.
    fn probe() -> Res<()> {
        match probe_detailed()? {
            Probe::Found(info) => {
                println!("driver: CUDA {}", cuda_version(info.driver_version));
                for d in &info.devices {
                    println!(
                        "gpu{}: {} ({} MiB, compute {}.{})",
                        d.index,
                        d.name,
                        d.total_memory >> 20,
                        d.compute_capability.0,
                        d.compute_capability.1
                    );
                }
            }
            Probe::NoGpu(why) => println!("no GPU: {why}"),
        }
        print!("{}", library_report());
        Ok(())
    }

    /// What `calibrate_links` measures between the host and gpu0, beside the configured model
    /// the scheduler otherwise ranks by.
    fn print_calibrated_link() -> Res<()> {
        let build = |calibrate| {
            Runtime::builder()
                .gpu(0)
                .gpu_pool(64 << 20)
                .calibrate_links(calibrate)
                .build()
        };
        let (configured, measured) = (build(false)?, build(true)?);
        let space = measured.space_of(Device::Gpu(0))?;
        for (label, rt) in [("configured", &configured), ("calibrated", &measured)] {
            if let Some(link) = rt.link_model(space) {
                println!(
                    "host <-> gpu0 link, {label}: {:.2} µs + {:.2} GB/s",
                    link.latency.as_secs_f64() * 1e6,
                    link.bytes_per_second / 1e9
                );
            }
        }
        Ok(())
    }

    /// FZF through the runtime on `gpu(0)` in `mode`: host code writes the frame, three API
    /// calls, host code reads the result. Returns the median ms and the result.
    fn through_runtime(
        a: &Args,
        mode: ExecMode,
        x: &[Complex32],
        h: &[Complex32],
    ) -> Res<(f64, Vec<Complex32>)> {
        let n = a.points * a.batch;
        let gpu = Device::Gpu(0);
        let rt = Runtime::builder()
            .gpu(0)
            .gpu_pool((8 * n * std::mem::size_of::<Complex32>()).max(64 << 20))
            .mode(mode)
            .build()?;
        let mut input = HeteData::<Complex32>::alloc(&rt, n)?;
        let filter = HeteData::from_slice(&rt, h)?;
        let mut spectrum = HeteData::alloc(&rt, n)?;
        let mut product = HeteData::alloc(&rt, n)?;
        let mut output = HeteData::alloc(&rt, n)?;
        let mut y = vec![Complex32::default(); n];
        let ms = time(a.frames, || {
            input.host_write()?.copy_from_slice(x);
            rt.fft(gpu, FftDirection::Forward, a.points, &input, &mut spectrum)?;
            if a.two_fft {
                rt.fft(gpu, FftDirection::Inverse, a.points, &spectrum, &mut output)?;
            } else {
                rt.zip(gpu, ZipOp::Mul, &spectrum, &filter, &mut product)?;
                rt.fft(gpu, FftDirection::Inverse, a.points, &product, &mut output)?;
            }
            y.copy_from_slice(output.host()?);
            Ok(())
        })?;
        Ok((ms, y))
    }

    /// FZF written directly against cudarc: copy in, FFT, multiply, inverse FFT, scale by
    /// 1/N, copy out; the filter is resident. Returns the median ms and the result.
    fn hand_written(a: &Args, x: &[Complex32], h: &[Complex32]) -> Res<(f64, Vec<Complex32>)> {
        let n = a.points * a.batch;
        let to2 = |v: &[Complex32]| -> Vec<float2> {
            v.iter().map(|c| float2 { x: c.re, y: c.im }).collect()
        };
        let (frame, hh) = (to2(x), to2(h));
        let mut xh = vec![float2 { x: 0.0, y: 0.0 }; n];
        let mut yh = xh.clone();
        let mut y = vec![float2 { x: 0.0, y: 0.0 }; n];

        let ctx = CudaContext::new(0)?;
        let stream = ctx.new_stream()?;
        // The kernels as the backend compiles them, with the NVRTC it found (cudarc's own
        // compile_ptx opens NVRTC by CUDA 12's names only).
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(kernel_ptx()?))?;
        let zip = module.load_function("rimms_zip")?;
        let scale = module.load_function("rimms_scale")?;
        let plan = CudaFft::plan_1d(
            i32::try_from(a.points)?,
            cufftType::CUFFT_C2C,
            i32::try_from(a.batch)?,
            stream.clone(),
        )?;
        let mut xd: CudaSlice<float2> = stream.alloc_zeros(n)?;
        let mut sd: CudaSlice<float2> = stream.alloc_zeros(n)?;
        let mut td: CudaSlice<float2> = stream.alloc_zeros(n)?;
        let mut yd: CudaSlice<float2> = stream.alloc_zeros(n)?;
        let hd = stream.clone_htod(&hh)?;
        let n64 = n as u64;
        let (mul, inv_n, zero) = (2i32, 1.0f32 / a.points as f32, 0.0f32);
        let cfg = LaunchConfig {
            grid_dim: (n64.div_ceil(256).min(65_535) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ms = time(a.frames, || {
            // The frame is written into the buffer it is sent from, as the runtime's variants
            // write it into their input (`host_write`), and the result read out of the buffer
            // it came back to: the same host work in every variant.
            xh.copy_from_slice(&frame);
            stream.memcpy_htod(&xh, &mut xd)?;
            plan.exec_c2c(&mut xd, &mut sd, CuDir::Forward)?;
            if a.two_fft {
                plan.exec_c2c(&mut sd, &mut yd, CuDir::Inverse)?;
            } else {
                let mut z = stream.launch_builder(&zip);
                z.arg(&sd).arg(&hd).arg(&mut td).arg(&n64).arg(&mul);
                // SAFETY: rimms_zip(const float2*, const float2*, float2*, u64, int) on
                // slices of n elements.
                unsafe { z.launch(cfg) }?;
                plan.exec_c2c(&mut td, &mut yd, CuDir::Inverse)?;
            }
            let mut s = stream.launch_builder(&scale);
            s.arg(&yd).arg(&yd).arg(&n64).arg(&inv_n).arg(&zero);
            // SAFETY: rimms_scale(const float2*, float2*, u64, float, float), in place on a
            // slice of n elements.
            unsafe { s.launch(cfg) }?;
            stream.memcpy_dtoh(&yd, &mut yh)?;
            stream.synchronize()?;
            y.copy_from_slice(&yh);
            Ok(())
        })?;
        let y = y.iter().map(|v| Complex32::new(v.x, v.y)).collect();
        Ok((ms, y))
    }

    /// The device buffers of one baseline call, freed when it ends (after the device is idle,
    /// also on an error path: nothing still running may use them or write the host output).
    struct CallBuffers {
        ctx: Arc<CudaContext>,
        ptrs: Vec<sys::CUdeviceptr>,
    }

    impl CallBuffers {
        fn alloc(&mut self, elements: usize) -> Res<sys::CUdeviceptr> {
            self.ctx.bind_to_thread()?;
            // SAFETY: the context is current; the memory is written by a copy or a kernel
            // before anything reads it.
            let ptr = unsafe { result::malloc_sync((elements * 8).max(1)) }?;
            self.ptrs.push(ptr);
            Ok(ptr)
        }
    }

    impl Drop for CallBuffers {
        fn drop(&mut self) {
            if self.ctx.synchronize().is_err() {
                // The device's state is unknown: leak rather than free under running work.
                return;
            }
            for ptr in self.ptrs.drain(..) {
                // SAFETY: each pointer came from `malloc_sync` and is freed once, after the
                // device is idle.
                let _ = unsafe { result::free_sync(ptr) };
            }
        }
    }

    /// One baseline call: device memory for every input and the output, the inputs copied in,
    /// `run(inputs, output)` enqueued on `stream`, the output copied out, everything freed.
    fn baseline_call(
        ctx: &Arc<CudaContext>,
        stream: &CudaStream,
        inputs: &[&[float2]],
        output: &mut [float2],
        run: impl FnOnce(&[u64], u64) -> Res<()>,
    ) -> Res<()> {
        let mut bufs = CallBuffers {
            ctx: ctx.clone(),
            ptrs: Vec::with_capacity(inputs.len() + 1),
        };
        let mut ins = Vec::with_capacity(inputs.len());
        for input in inputs {
            let ptr = bufs.alloc(input.len())?;
            // SAFETY: `ptr` holds `input.len()` values; `input` outlives the call, and the
            // stream is idle again before it returns (`CallBuffers::drop`).
            unsafe { result::memcpy_htod_async(ptr, input, stream.cu_stream()) }?;
            ins.push(ptr);
        }
        let out = bufs.alloc(output.len())?;
        run(&ins, out)?;
        // SAFETY: `out` holds `output.len()` values; `output` is borrowed for the whole call
        // and the copy is waited for right below (or by `CallBuffers::drop` on an error).
        unsafe { result::memcpy_dtoh_async(output, out, stream.cu_stream()) }?;
        stream.synchronize()?;
        Ok(())
    }

    /// FZF as CEDR runs it on a GPU, written against the driver: each of the three calls
    /// allocates device memory for its arguments, copies its inputs in, runs, copies its
    /// output out and frees. The FFT plan is made once, as the runtime's are. Returns the
    /// median ms and the result.
    fn hand_written_baseline(
        a: &Args,
        x: &[Complex32],
        h: &[Complex32],
    ) -> Res<(f64, Vec<Complex32>)> {
        use cudarc::cufft::result as fft;
        let n = a.points * a.batch;
        let to2 = |v: &[Complex32]| -> Vec<float2> {
            v.iter().map(|c| float2 { x: c.re, y: c.im }).collect()
        };
        let (xh, hh) = (to2(x), to2(h));
        let zero = float2 { x: 0.0, y: 0.0 };
        let (mut spec, mut prod, mut yh) = (vec![zero; n], vec![zero; n], vec![zero; n]);
        let ctx = CudaContext::new(0)?;
        let stream = ctx.new_stream()?;
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(kernel_ptx()?))?;
        let zip = module.load_function("rimms_zip")?;
        let scale = module.load_function("rimms_scale")?;
        let plan = Plan(fft::plan_1d(
            i32::try_from(a.points)?,
            cufftType::CUFFT_C2C,
            i32::try_from(a.batch)?,
        )?);
        // SAFETY: a live plan and a live stream of the current context.
        unsafe { fft::set_stream(plan.0, stream.cu_stream() as _) }?;
        let n64 = n as u64;
        let cfg = LaunchConfig {
            grid_dim: (n64.div_ceil(256).min(65_535) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let exec = |input: u64, output: u64, dir: CuDir| -> Res<()> {
            // SAFETY: both buffers hold n complex values; the plan runs on `stream`.
            unsafe { fft::exec_c2c(plan.0, input as *mut _, output as *mut _, dir as i32) }?;
            Ok(())
        };
        let (mul, inv_n, im0) = (2i32, 1.0f32 / a.points as f32, 0.0f32);
        let ms = time(a.frames, || {
            baseline_call(&ctx, &stream, &[&xh], &mut spec, |i, o| {
                exec(i[0], o, CuDir::Forward)
            })?;
            if !a.two_fft {
                baseline_call(&ctx, &stream, &[&spec, &hh], &mut prod, |i, o| {
                    let mut b = stream.launch_builder(&zip);
                    b.arg(&i[0]).arg(&i[1]).arg(&o).arg(&n64).arg(&mul);
                    // SAFETY: rimms_zip(const float2*, const float2*, float2*, u64, int) on
                    // buffers of n elements.
                    unsafe { b.launch(cfg) }?;
                    Ok(())
                })?;
            }
            let last = if a.two_fft { &spec } else { &prod };
            baseline_call(&ctx, &stream, &[last], &mut yh, |i, o| {
                exec(i[0], o, CuDir::Inverse)?;
                let mut b = stream.launch_builder(&scale);
                b.arg(&o).arg(&o).arg(&n64).arg(&inv_n).arg(&im0);
                // SAFETY: rimms_scale(const float2*, float2*, u64, float, float), in place on
                // a buffer of n elements.
                unsafe { b.launch(cfg) }?;
                Ok(())
            })?;
            Ok(())
        })?;
        let y = yh.iter().map(|v| Complex32::new(v.x, v.y)).collect();
        Ok((ms, y))
    }

    /// A raw cuFFT plan, destroyed when dropped.
    struct Plan(cudarc::cufft::sys::cufftHandle);

    impl Drop for Plan {
        fn drop(&mut self) {
            // SAFETY: the handle came from `plan_1d` and is destroyed once; every execution
            // was waited for (each baseline call synchronises its stream).
            let _ = unsafe { cudarc::cufft::result::destroy(self.0) };
        }
    }
}
