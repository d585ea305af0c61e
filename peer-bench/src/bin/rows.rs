//! RIMMS against StarPU on one node, where only the runtimes' per-call overhead differs: a row
//! pipeline (an FFT of every row, then every row times a fixed filter row) at 128 × 128 and
//! 1024 × 1024, one call per row per stage, and a task of three one-element arguments (R, R,
//! W) with an empty body; each as plain Rust, RIMMS and StarPU 1.3, interleaved in one run.
//!
//! `cargo run --release --manifest-path peer-bench/Cargo.toml --bin rows [-- FRAMES TASKS]`
//!
//! Why this shape: a user who wants per-row tasks on a CPU picks RIMMS or StarPU; the question
//! is what each charges per call. So the kernels are the same Rust functions everywhere (one
//! rustfft plan per row length, a plain complex product), StarPU's codelets calling them
//! through function pointers (`c/rows.c`); RIMMS runs its own CPU built-ins, which use the same
//! rustfft transform. RIMMS is written both ways its users write rows: calls on row views in a
//! scope (`s.fft`, `s.zip`; the scope merges them into one call per stage) and direct calls
//! one row at a time (`rt.fft`, `rt.zip`). StarPU registers every row as a vector and inserts
//! one task per row per stage, then waits for all. The configurations take turns frame by frame
//! (batch by batch for the task), each round starting at the next one, so that a slow spell of
//! a shared machine hits them alike; the first round is untimed; a cell is the median.
//!
//! Every runtime's output is checked against the plain loop's, and the plain loop's against a
//! naive DFT on a few rows: a mismatch fails the run. Workers: one CPU worker each unless the
//! environment says otherwise (`STARPU_NCPU`, `RAYON_NUM_THREADS`), so that on a small shared
//! machine the figures are overhead, not parallelism. Debian's StarPU is built with
//! `STARPU_NON_BLOCKING_DRIVERS`: its idle workers poll instead of sleeping, which would take a
//! core from the other configurations on a 2-core machine, so they are paused outside StarPU's
//! turns (`starpu_pause`, as StarPU's manual advises for a program that uses it for a part of
//! its run) and woken, untimed, before each; the run reports the setting. StarPU writes its
//! calibration files under `STARPU_HOME`, set to a scratch folder removed at the end.

use rimms_runtime::{Complex32, Device, FftDirection, HeteData, KernelArg, Runtime, ZipOp};
use rustfft::{Fft, FftPlanner};
use std::cell::RefCell;
use std::ffi::{c_int, c_uint, c_void};
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// The row lengths (and row counts: the matrices are square).
const SIZES: [usize; 2] = [128, 1024];

/// Mirrors `struct rows_kernels` in `c/rows.c`: what StarPU's codelets call.
#[repr(C)]
struct RowKernels {
    fft: extern "C" fn(*const c_void, *const Complex32, *mut Complex32, c_uint),
    mul: extern "C" fn(*const Complex32, *const Complex32, *mut Complex32, c_uint),
    plan: *const c_void,
}

#[repr(C)]
struct Pipeline {
    _opaque: [u8; 0],
}

#[repr(C)]
struct Args3 {
    _opaque: [u8; 0],
}

extern "C" {
    fn rows_starpu_init() -> c_int;
    fn rows_starpu_shutdown();
    fn rows_starpu_resume() -> c_int;
    fn starpu_pause();
    fn starpu_resume();
    fn rows_starpu_workers_spin() -> c_int;
    fn rows_pipeline_new(
        input: *mut Complex32,
        mid: *mut Complex32,
        out: *mut Complex32,
        filter: *mut Complex32,
        rows: c_int,
        cols: c_int,
        kernels: *const RowKernels,
    ) -> *mut Pipeline;
    fn rows_pipeline_frame(p: *mut Pipeline) -> c_int;
    fn rows_pipeline_free(p: *mut Pipeline);
    fn rows_args3_new() -> *mut Args3;
    fn rows_args3_run(a: *mut Args3, tasks: c_int) -> c_int;
    fn rows_args3_free(a: *mut Args3);
}

/// The forward transform of one row length, shared by the plain loop and StarPU's codelets.
struct RowFft {
    plan: Arc<dyn Fft<f32>>,
}

thread_local! {
    /// Each thread's FFT scratch, grown once: no allocation per row.
    static SCRATCH: RefCell<Vec<Complex32>> = const { RefCell::new(Vec::new()) };
}

impl RowFft {
    fn new(points: usize) -> RowFft {
        RowFft {
            plan: FftPlanner::new().plan_fft_forward(points),
        }
    }

    /// `output = FFT(input)`, `input` untouched (rustfft's immutable transform, as RIMMS's CPU
    /// FFT calls it).
    fn run(&self, input: &[Complex32], output: &mut [Complex32]) {
        SCRATCH.with_borrow_mut(|scratch| {
            scratch.resize(self.plan.get_immutable_scratch_len(), Complex32::default());
            self.plan
                .process_immutable_with_scratch(input, output, scratch);
        });
    }
}

/// `out = a · b`, element by element.
fn mul_row(a: &[Complex32], b: &[Complex32], out: &mut [Complex32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x * y;
    }
}

extern "C" fn fft_row_c(
    plan: *const c_void,
    input: *const Complex32,
    out: *mut Complex32,
    n: c_uint,
) {
    // SAFETY: `plan` is the `RowFft` that `StarpuPipeline` points its kernels at, alive until
    // the pipeline is freed; StarPU hands this codelet two registered rows of `n` elements
    // each, which no other task touches while it runs (R input, W output).
    let (plan, input, out) = unsafe {
        (
            &*plan.cast::<RowFft>(),
            std::slice::from_raw_parts(input, n as usize),
            std::slice::from_raw_parts_mut(out, n as usize),
        )
    };
    plan.run(input, out);
}

extern "C" fn mul_row_c(a: *const Complex32, b: *const Complex32, out: *mut Complex32, n: c_uint) {
    // SAFETY: StarPU hands this codelet three registered vectors of `n` elements, the last in
    // W mode, so no other task reads or writes it meanwhile and it overlaps neither input.
    let (a, b, out) = unsafe {
        (
            std::slice::from_raw_parts(a, n as usize),
            std::slice::from_raw_parts(b, n as usize),
            std::slice::from_raw_parts_mut(out, n as usize),
        )
    };
    mul_row(a, b, out);
}

/// One size's data: the input, the filter row, and the plain loop's output as the reference.
struct Case {
    n: usize,
    input: Vec<Complex32>,
    filter: Vec<Complex32>,
    fft: RowFft,
}

impl Case {
    fn new(n: usize) -> Case {
        let input = (0..n * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                Complex32::new(
                    ((r * 7 + c * 3) % 17) as f32 - 8.0,
                    ((r + c * 5) % 11) as f32 - 5.0,
                )
            })
            .collect();
        let filter = (0..n)
            .map(|c| {
                let t = c as f32 / n as f32;
                Complex32::new(0.5 - 0.5 * (std::f32::consts::TAU * t).cos(), t)
            })
            .collect();
        Case {
            n,
            input,
            filter,
            fft: RowFft::new(n),
        }
    }

    /// The plain loop: every row's FFT into `mid`, then every row's product into `out`.
    fn plain(&self, mid: &mut [Complex32], out: &mut [Complex32]) {
        for (row, m) in self
            .input
            .chunks_exact(self.n)
            .zip(mid.chunks_exact_mut(self.n))
        {
            self.fft.run(row, m);
        }
        for (m, o) in mid.chunks_exact(self.n).zip(out.chunks_exact_mut(self.n)) {
            mul_row(m, &self.filter, o);
        }
    }
}

/// An n × n matrix whose rows separate calls may write: fragments no larger than a row (as
/// `rimms-cli`'s `alloc_rows`; rows of 4 KiB or more keep the default).
fn alloc_rows(rt: &Runtime, n: usize) -> rimms_runtime::Result<HeteData<Complex32>> {
    let mut m = HeteData::alloc(rt, n * n)?;
    let row_bytes = n * std::mem::size_of::<Complex32>();
    if row_bytes < m.fragment_bytes() {
        m.fragment(row_bytes)?;
    }
    Ok(m)
}

/// RIMMS's buffers for one size.
struct RimmsData {
    input: HeteData<Complex32>,
    filter: HeteData<Complex32>,
    mid: HeteData<Complex32>,
    out: HeteData<Complex32>,
}

impl RimmsData {
    fn new(rt: &Runtime, case: &Case) -> rimms_runtime::Result<RimmsData> {
        Ok(RimmsData {
            input: HeteData::from_slice(rt, &case.input)?,
            filter: HeteData::from_slice(rt, &case.filter)?,
            mid: alloc_rows(rt, case.n)?,
            out: alloc_rows(rt, case.n)?,
        })
    }

    /// One call per row on row views, submitted to a scope per stage.
    fn scoped(&mut self, rt: &Runtime, n: usize) -> rimms_runtime::Result<()> {
        let rows_in = self.input.rows(n)?;
        let mut rows_mid = self.mid.rows_mut(n)?;
        rt.scope(|s| {
            for (row, m) in rows_in.iter().zip(rows_mid.iter_mut()) {
                s.fft(Device::Cpu, FftDirection::Forward, n, row, m)?;
            }
            Ok::<(), rimms_runtime::Error>(())
        })??;
        drop(rows_mid);
        let rows_mid = self.mid.rows(n)?;
        let mut rows_out = self.out.rows_mut(n)?;
        let filter = &self.filter;
        rt.scope(|s| {
            for (m, o) in rows_mid.iter().zip(rows_out.iter_mut()) {
                s.zip(Device::Cpu, ZipOp::Mul, m, filter, o)?;
            }
            Ok(())
        })?
    }

    /// One direct call per row, stage by stage.
    fn direct(&mut self, rt: &Runtime, n: usize) -> rimms_runtime::Result<()> {
        let rows_in = self.input.rows(n)?;
        for (row, m) in rows_in.iter().zip(self.mid.rows_mut(n)?.iter_mut()) {
            rt.fft(Device::Cpu, FftDirection::Forward, n, row, m)?;
        }
        let rows_mid = self.mid.rows(n)?;
        for (m, o) in rows_mid.iter().zip(self.out.rows_mut(n)?.iter_mut()) {
            rt.zip(Device::Cpu, ZipOp::Mul, m, &self.filter, o)?;
        }
        Ok(())
    }
}

/// StarPU's registration of one size's matrices, row by row. The buffers are StarPU's while
/// it lives; `finish` unregisters them (bringing them home) and gives back the output.
struct StarpuPipeline {
    handle: *mut Pipeline,
    // Read by StarPU's codelets through the pointer it was given: boxed for a stable address.
    _kernels: Box<RowKernels>,
    buffers: [Vec<Complex32>; 4],
}

impl StarpuPipeline {
    fn new(case: &Case) -> Result<StarpuPipeline, String> {
        let zeros = vec![Complex32::default(); case.input.len()];
        let mut buffers = [
            case.input.clone(),
            zeros.clone(),
            zeros,
            case.filter.clone(),
        ];
        let kernels = Box::new(RowKernels {
            fft: fft_row_c,
            mul: mul_row_c,
            plan: std::ptr::from_ref(&case.fft).cast(),
        });
        let [input, mid, out, filter] = &mut buffers;
        let n = c_int::try_from(case.n).map_err(|e| e.to_string())?;
        // SAFETY: the four buffers hold n × n (the filter n) elements and are neither moved
        // (a Vec's heap block stays put when the Vec moves) nor touched from Rust until
        // `finish` unregisters them; `kernels` is boxed for a stable address and `case.fft`,
        // which it points at, outlives this pipeline (`run_pipeline` drops it first).
        let handle = unsafe {
            rows_pipeline_new(
                input.as_mut_ptr(),
                mid.as_mut_ptr(),
                out.as_mut_ptr(),
                filter.as_mut_ptr(),
                n,
                n,
                &*kernels,
            )
        };
        if handle.is_null() {
            return Err("StarPU: out of memory registering the rows".into());
        }
        Ok(StarpuPipeline {
            handle,
            _kernels: kernels,
            buffers,
        })
    }

    fn frame(&mut self) -> Result<(), String> {
        // SAFETY: `handle` is live (freed only by `free`, from `finish` and `drop`).
        match unsafe { rows_pipeline_frame(self.handle) } {
            0 => Ok(()),
            err => Err(format!("starpu_task_insert failed: {err}")),
        }
    }

    /// Unregisters the rows and returns the output of the last frame.
    fn finish(mut self) -> Vec<Complex32> {
        self.free();
        std::mem::take(&mut self.buffers[2])
    }

    fn free(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: `handle` is live and freed once (nulled here); once unregistered StarPU
            // holds no pointer into the buffers or the kernels, which drop after this.
            unsafe { rows_pipeline_free(self.handle) };
            self.handle = std::ptr::null_mut();
        }
    }
}

impl Drop for StarpuPipeline {
    fn drop(&mut self) {
        self.free();
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `configs` in turns for `rounds` timed rounds after one untimed: each one's median in
/// seconds, divided by `per_round`. Each configuration times itself (see `timed`), so that
/// what it does around its turn (StarPU's resume and pause) stays out of its time.
fn interleave(
    rounds: usize,
    per_round: f64,
    configs: &mut [&mut dyn FnMut() -> Result<f64, String>],
) -> Result<Vec<f64>, String> {
    let mut times = vec![Vec::with_capacity(rounds); configs.len()];
    for round in 0..=rounds {
        for k in 0..configs.len() {
            let which = (round + k) % configs.len();
            let seconds = configs[which]()?;
            if round > 0 {
                times[which].push(seconds / per_round);
            }
        }
    }
    Ok(times.iter_mut().map(|t| median(t)).collect())
}

/// The seconds `f` takes.
fn timed(f: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed().as_secs_f64())
}

/// Runs `f` with StarPU's workers polling, untimed around it: between its turns they are
/// paused, as StarPU's manual advises for a program that uses it for a part of its run, so
/// that their polling does not take a core from the other configurations.
fn starpu_turn(f: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    // SAFETY: plain C; StarPU is initialised and its workers paused (by `run`, or by the
    // previous turn).
    if unsafe { rows_starpu_resume() } != 0 {
        return Err("StarPU: the wake-up task was refused".into());
    }
    let seconds = timed(f);
    // SAFETY: as above; the workers were resumed just before.
    unsafe { starpu_pause() };
    seconds
}

/// The naive DFT of `row`, in f64: the plain loop's independent reference.
fn naive_dft(row: &[Complex32]) -> Vec<(f64, f64)> {
    let n = row.len();
    (0..n)
        .map(|k| {
            row.iter().enumerate().fold((0.0, 0.0), |(re, im), (j, x)| {
                let angle = -std::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
                let (s, c) = angle.sin_cos();
                let (xr, xi) = (f64::from(x.re), f64::from(x.im));
                (re + xr * c - xi * s, im + xr * s + xi * c)
            })
        })
        .collect()
}

/// The largest distance between `got` and `want`, relative to `want`'s largest magnitude.
fn relative_error(got: &[Complex32], want: &[Complex32]) -> f32 {
    let scale = want
        .iter()
        .map(|x| x.norm())
        .fold(f32::MIN_POSITIVE, f32::max);
    if got.len() != want.len() {
        return f32::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).norm())
        // Unlike f32::max, a NaN wins: a NaN output must fail the check.
        .fold(
            0.0,
            |worst, d| if d.is_nan() || d > worst { d } else { worst },
        )
        / scale
}

/// The plain output against a naive DFT times the filter, on the first and last rows.
fn check_plain(case: &Case, out: &[Complex32]) -> Result<(), String> {
    let n = case.n;
    for r in [0, n - 1] {
        let want: Vec<Complex32> = naive_dft(&case.input[r * n..(r + 1) * n])
            .iter()
            .zip(&case.filter)
            .map(|(&(re, im), f)| Complex32::new(re as f32, im as f32) * f)
            .collect();
        let err = relative_error(&out[r * n..(r + 1) * n], &want);
        if err.is_nan() || err >= 1e-4 {
            return Err(format!(
                "{n} × {n}: the plain loop's row {r} is off the naive DFT by {err:.1e}"
            ));
        }
    }
    Ok(())
}

fn run_pipeline(rt: &Runtime, n: usize, frames: usize) -> Result<[f64; 4], String> {
    let case = Case::new(n);
    let (mut mid, mut plain_out) = (
        vec![Complex32::default(); n * n],
        vec![Complex32::default(); n * n],
    );
    let mut rimms = RimmsData::new(rt, &case).map_err(|e| e.to_string())?;
    let mut rimms_direct = RimmsData::new(rt, &case).map_err(|e| e.to_string())?;
    let mut starpu = StarpuPipeline::new(&case)?;
    let rimms_err = |e: rimms_runtime::Error| e.to_string();
    let times = interleave(
        frames,
        1.0,
        &mut [
            &mut || {
                timed(|| {
                    case.plain(&mut mid, &mut plain_out);
                    black_box(&plain_out);
                    Ok(())
                })
            },
            &mut || timed(|| rimms.scoped(rt, n).map_err(rimms_err)),
            &mut || timed(|| rimms_direct.direct(rt, n).map_err(rimms_err)),
            &mut || starpu_turn(|| starpu.frame()),
        ],
    )?;
    let starpu_out = starpu.finish();
    check_plain(&case, &plain_out)?;
    for (name, out) in [
        ("RIMMS scope", rimms.out.to_vec().map_err(rimms_err)?),
        (
            "RIMMS direct",
            rimms_direct.out.to_vec().map_err(rimms_err)?,
        ),
        ("StarPU", starpu_out),
    ] {
        let err = relative_error(&out, &plain_out);
        if err.is_nan() || err >= 1e-5 {
            return Err(format!(
                "{n} × {n}: {name}'s output is off the plain loop's by {err:.1e}"
            ));
        }
    }
    Ok([times[0], times[1], times[2], times[3]])
}

#[inline(never)]
fn empty_task(a: &[Complex32], b: &[Complex32], c: &mut [Complex32]) {
    black_box((a, b, c));
}

fn run_args3(rt: &Runtime, batches: usize, tasks: usize) -> Result<[f64; 3], String> {
    static EMPTY: rimms_runtime::ApiDecl = rimms_runtime::ApiDecl::new("empty");
    let rimms_err = |e: rimms_runtime::Error| e.to_string();
    let one = || HeteData::from_slice(rt, &[Complex32::new(1.0, 0.0)]).map_err(rimms_err);
    let (a, b, mut c) = (one()?, one()?, one()?);
    let (pa, pb, mut pc) = (
        [Complex32::new(1.0, 0.0)],
        [Complex32::new(1.0, 0.0)],
        [Complex32::default()],
    );
    // SAFETY: plain C; the handles are freed by `rows_args3_free` below.
    let starpu = unsafe { rows_args3_new() };
    if starpu.is_null() {
        return Err("StarPU: out of memory registering three elements".into());
    }
    let count = c_int::try_from(tasks).map_err(|e| e.to_string())?;
    let times = interleave(
        batches,
        tasks as f64,
        &mut [
            &mut || {
                timed(|| {
                    let task =
                        black_box(empty_task as fn(&[Complex32], &[Complex32], &mut [Complex32]));
                    for _ in 0..tasks {
                        task(&pa, &pb, &mut pc);
                    }
                    Ok(())
                })
            },
            &mut || {
                timed(|| {
                    for _ in 0..tasks {
                        rt.launch_host(
                            Device::Cpu,
                            &EMPTY,
                            [
                                KernelArg::read("a", &a),
                                KernelArg::read("b", &b),
                                KernelArg::write::<Complex32>("c", &mut c),
                            ],
                            |args| {
                                black_box(args);
                                Ok(())
                            },
                        )
                        .map_err(rimms_err)?;
                    }
                    Ok(())
                })
            },
            &mut || {
                // SAFETY: `starpu` is live until the free below.
                starpu_turn(|| match unsafe { rows_args3_run(starpu, count) } {
                    0 => Ok(()),
                    err => Err(format!("starpu_task_insert failed: {err}")),
                })
            },
        ],
    );
    // SAFETY: live, freed once.
    unsafe { rows_args3_free(starpu) };
    let times = times?;
    Ok([times[0], times[1], times[2]])
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Prints one table: each configuration's median, its ratio to plain, and StarPU's to it.
fn print_rows(unit: &str, scale: f64, names: &[&str], times: &[f64]) {
    let (plain, starpu) = (times[0], times[times.len() - 1]);
    println!(
        "  {:<14} {:>12} {:>9} {:>10}",
        "", "median", "÷ plain", "StarPU ÷"
    );
    for (name, t) in names.iter().zip(times) {
        println!(
            "  {name:<14} {:>9.2} {unit} {:>8.2}x {:>9.2}x",
            t * scale,
            t / plain,
            starpu / t
        );
    }
}

/// Sets `key` to `value` unless the environment already does; returns what it is.
fn default_env(key: &str, value: &str) -> String {
    match std::env::var(key) {
        Ok(v) => v,
        Err(_) => {
            std::env::set_var(key, value);
            value.to_string()
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let frames: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50);
    let tasks: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    // Before any thread starts (rayon's pool, StarPU's workers) reads the environment.
    let ncpu = default_env("STARPU_NCPU", "1");
    let rayon = default_env("RAYON_NUM_THREADS", "1");
    default_env("STARPU_NCUDA", "0");
    default_env("STARPU_NOPENCL", "0");
    default_env("STARPU_SILENT", "1");
    // StarPU writes its calibration (bus, performance models) under STARPU_HOME.
    let home = std::env::temp_dir().join(format!("rimms-rows-starpu-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&home) {
        eprintln!("cannot make a STARPU_HOME at {}: {e}", home.display());
        return ExitCode::FAILURE;
    }
    std::env::set_var("STARPU_HOME", &home);
    let result = run(frames, tasks, &ncpu, &rayon);
    let _ = std::fs::remove_dir_all(&home);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
    }
}

fn run(frames: usize, tasks: usize, ncpu: &str, rayon: &str) -> Result<(), String> {
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    // SAFETY: plain C, once, before any other StarPU call; shut down below.
    let workers = unsafe { rows_starpu_init() };
    if workers < 0 {
        return Err("StarPU did not start".into());
    }
    // SAFETY: plain C reading a compile-time setting, then pausing the workers until the
    // first StarPU turn (`starpu_turn`).
    let spin = unsafe {
        starpu_pause();
        rows_starpu_workers_spin() != 0
    };
    println!(
        "StarPU 1.3: {workers} CPU worker(s) (STARPU_NCPU={ncpu}), idle workers {}, paused outside StarPU's turns; RIMMS: RAYON_NUM_THREADS={rayon}; load before: {}",
        if spin { "spin (STARPU_NON_BLOCKING_DRIVERS)" } else { "sleep" },
        load()
    );
    let result = (|| {
        for n in SIZES {
            let times = run_pipeline(&rt, n, frames)?;
            println!("{n} × {n} row pipeline (FFT of every row, then × a filter row), one call per row per stage, median of {frames} frames:");
            print_rows(
                "µs",
                1e6,
                &["plain", "RIMMS scope", "RIMMS direct", "StarPU"],
                &times,
            );
        }
        let times = run_args3(&rt, frames, tasks)?;
        println!("a task of 3 one-element arguments (R, R, W), empty body, median of {frames} batches of {tasks}, per task:");
        print_rows("ns", 1e9, &["plain call", "RIMMS direct", "StarPU"], &times);
        Ok(())
    })();
    // SAFETY: every handle was unregistered above (pipelines and arguments free their own);
    // the workers, paused between turns, resume to shut down.
    unsafe {
        starpu_resume();
        rows_starpu_shutdown();
    }
    println!("load after: {}", load());
    result
}
