//! The applications of docs/design.md as library code: the three small chains the RIMMS paper
//! measures (2FFT, FZF, zip3x) and three radar applications (correlator, pulse Doppler, SAR
//! range-Doppler).
//!
//! Each app is ordinary Rust written once against the runtime's API: allocate buffers, call
//! kernels on the device the [`Mapping`] names for each step, read the result on the host. The
//! `baseline` and `rimms` modes run that same code on a runtime built in the matching
//! [`rimms::ExecMode`], so the only difference between them is what the runtime does with the
//! data; `native` is a hand-written version of the same computation with plain vectors and
//! explicit minimal copies, the floor both are compared with.
//!
//! Inputs are generated with a known truth (seeded), or read from CEDR's files. Every run
//! reports the last frame's result, the frame times, the bytes per link and the allocations
//! ([`Run`]); the `rimms` command prints them.

pub mod correlator;
pub mod distributed;
mod error;
pub mod expected;
pub mod frames;
pub mod fzf;
pub mod input;
pub mod mapping;
mod native;
pub mod pulse_doppler;
pub mod report;
pub mod sar;
pub mod two_fft;
pub mod zip3x;

pub use error::{AppError, Place};
pub use mapping::{Mapping, Sched, Step};
pub use report::{Checksum, Eviction, Link, Prefetched, Run};

use native::Native;
use rimms::drivers::vclock;
use rimms::{
    Complex32, CostTable, ExecMode, FftDirection, HeteData, HeteSlice, HeteSliceMut, Policy,
    Runtime, SimConfig, Target, ZipOp,
};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum App {
    /// FFT then inverse FFT.
    #[value(name = "2fft")]
    TwoFft,
    /// FFT, multiply by a filter, inverse FFT.
    Fzf,
    /// Two independent multiplies, then the sum of their results.
    Zip3x,
    /// Radar correlator: the delay of a chirp in noise.
    Correlator,
    /// Pulse Doppler: a target's range and Doppler shift from 128 pulses.
    PulseDoppler,
    /// SAR image formation, range-Doppler algorithm.
    Sar,
}

impl App {
    /// Every app.
    pub const ALL: [App; 6] = [
        App::TwoFft,
        App::Fzf,
        App::Zip3x,
        App::Correlator,
        App::PulseDoppler,
        App::Sar,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            App::TwoFft => "2fft",
            App::Fzf => "fzf",
            App::Zip3x => "zip3x",
            App::Correlator => "correlator",
            App::PulseDoppler => "pulse-doppler",
            App::Sar => "sar",
        }
    }
}

/// How an app's data is managed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// CEDR's behaviour: every call on a device copies its inputs in and its outputs out.
    Baseline,
    /// RIMMS: data moves only when a kernel in another memory needs it.
    Rimms,
    /// Hand-written code with the fewest copies for the mapping: the floor.
    Native,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Baseline, Mode::Rimms, Mode::Native];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Baseline => "baseline",
            Mode::Rimms => "rimms",
            Mode::Native => "native",
        }
    }
}

/// How an app submits the calls of a step that do not depend on each other (one per row of
/// a matrix, as CEDR's apps issue them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Submit {
    /// One after another, each call returning when it is done.
    Sequential,
    /// All at once in a `Runtime::scope`: they run concurrently on the devices' queues.
    #[default]
    Scoped,
    /// Scoped, and frames two at a time on two sets of frame buffers: while a frame computes,
    /// the host writes the next frame's input and sends it, and reads the frame before's
    /// result, so copies hide behind compute across frames (`frames`). A frame then returns
    /// the result of the frame before it.
    DoubleBuffered,
}

impl Submit {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Submit::Sequential => "sequential",
            Submit::Scoped => "scoped",
            Submit::DoubleBuffered => "double-buffered",
        }
    }
}

/// The most frames one run (or one bench cell) may ask for: a million frames of the smallest
/// app is minutes of work and 16 MB of frame times, and a bound checked up front turns a
/// mistyped `--frames` into an error instead of an allocation failure hours later.
pub const MAX_FRAMES: usize = 1_000_000;

/// Checks a frame count before anything runs.
pub fn check_frames(frames: usize) -> Result<usize, AppError> {
    if (1..=MAX_FRAMES).contains(&frames) {
        Ok(frames)
    } else {
        Err(AppError::Param(format!(
            "--frames takes 1 … {MAX_FRAMES}, got {frames}"
        )))
    }
}

/// How to run an app.
#[derive(Clone, Debug)]
pub struct Options {
    /// Baseline, rimms or native.
    pub mode: Mode,
    /// Where each step runs.
    pub mapping: Mapping,
    /// Frames to run (at least 1); the result is the last frame's.
    pub frames: usize,
    /// The simulated card of the `sim` mapping (and both cards of `auto`).
    pub sim: SimConfig,
    /// How independent calls are submitted.
    pub submit: Submit,
    /// How the `auto` mapping's calls are placed.
    pub policy: Policy,
    /// The expected kernel times that placement works from.
    pub costs: CostTable,
    /// SAR's azimuth filter: CEDR's (the default) or the focusing one.
    pub sar_azimuth: sar::Azimuth,
    /// Pool sizes by space name (`--pool sim0=2MiB`), for running under memory pressure.
    pub pools: Vec<(String, usize)>,
    /// Whether the runtime merges calls submitted to a scope over following rows into one
    /// device call (`RuntimeBuilder::merge_calls`; on by default, and never in baseline mode).
    pub merge: bool,
    /// Whether copies start ahead of the calls that need them (`RuntimeBuilder::prefetch`;
    /// on by default, and never in baseline mode).
    pub prefetch: bool,
    /// Where the runtime writes its Chrome / Perfetto timeline (`RuntimeBuilder::trace_file`);
    /// `None` leaves it to `RIMMS_TRACE_FILE`.
    pub trace_file: Option<PathBuf>,
    /// Moved on once per frame (warm-up frames too) of the first of interleaved runs, and to
    /// the end of the run where its time budget stops it early (`crate::progress`).
    pub progress: Option<indicatif::ProgressBar>,
}

impl Options {
    /// One frame in `mode` on `mapping`, with a default (unthrottled) simulated card.
    pub fn new(mode: Mode, mapping: Mapping) -> Options {
        Options {
            mode,
            mapping,
            frames: 1,
            sim: SimConfig::default(),
            submit: Submit::default(),
            policy: Policy::default(),
            costs: CostTable::default(),
            sar_azimuth: sar::Azimuth::default(),
            pools: Vec::new(),
            merge: true,
            prefetch: true,
            trace_file: None,
            progress: None,
        }
    }

    /// The same options with `frames` frames.
    pub fn frames(mut self, frames: usize) -> Options {
        self.frames = frames;
        self
    }
}

/// Where an app's input comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Generated with a known truth.
    Generated(Scenario),
    /// Read from CEDR's files in this folder.
    Cedr(PathBuf),
}

/// The knobs of the generated inputs; `None` takes the app's default.
#[derive(Clone, Debug, Default)]
pub struct Scenario {
    /// Seed of the noise.
    pub seed: u64,
    /// Injected delay in samples (correlator, pulse Doppler).
    pub delay: Option<usize>,
    /// Doppler bin offset of the target, −64 … 63 (pulse Doppler).
    pub doppler_bin: Option<i32>,
}

/// A run and, for a generated input, what the result should be.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The run.
    pub run: Run<AppResult>,
    /// A line describing the result.
    pub result_line: String,
    /// A line describing the truth the input was generated with, if it was.
    pub truth_line: Option<String>,
    /// What a reader should make of the figures, where they need it.
    pub note: Option<&'static str>,
}

/// Any app's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AppResult {
    /// 2FFT, FZF, zip3x.
    Chain(Checksum),
    /// The radar correlator.
    Correlator(correlator::Output),
    /// Pulse Doppler.
    PulseDoppler(pulse_doppler::Output),
    /// SAR.
    Sar(sar::Output),
}

/// Runs `app` on input from `source` with `opts`.
pub fn run(app: App, source: &Source, opts: &Options) -> Result<Outcome, AppError> {
    let scenario = match source {
        Source::Generated(s) => Some(s),
        Source::Cedr(_) => None,
    };
    let no_files = |app: App| {
        AppError::Unsupported(format!(
            "{} generates its own input; CEDR files exist only for pulse-doppler and sar",
            app.name()
        ))
    };
    let knobs_unused =
        |what: &str| AppError::Unsupported(format!("{} takes no {what}", app.name()));
    if opts.sar_azimuth != sar::Azimuth::default() && app != App::Sar {
        return Err(knobs_unused("azimuth filter (--azimuth is SAR's)"));
    }
    if let Some(s) = scenario {
        if s.delay.is_some() && !matches!(app, App::Correlator | App::PulseDoppler) {
            return Err(knobs_unused("delay"));
        }
        if s.doppler_bin.is_some() && app != App::PulseDoppler {
            return Err(knobs_unused("Doppler bin"));
        }
    }
    match (app, source) {
        (App::TwoFft | App::Fzf | App::Zip3x | App::Correlator, Source::Cedr(_)) => {
            Err(no_files(app))
        }
        (App::TwoFft | App::Fzf, _) => {
            let params = two_fft::Params::default();
            let (input, what) = if app == App::Fzf {
                (
                    fzf::generate(params),
                    "filtered (FFT, multiply, inverse FFT)",
                )
            } else {
                (two_fft::Input::generate(params), "FFT then inverse FFT")
            };
            let what = format!("{what} of {} rows × {} points", params.rows, params.points);
            chain(
                two_fft::run(&input, opts)?,
                &what,
                expected::fft_chain(&input),
            )
        }
        (App::Zip3x, _) => {
            let input = zip3x::Input::generate(zip3x::LEN);
            let what = format!("a·b + c·d over {} elements", zip3x::LEN);
            chain(zip3x::run(&input, opts)?, &what, expected::zip3x(&input))
        }
        (App::Correlator, Source::Generated(s)) => {
            let params = correlator::Params {
                delay: s.delay.unwrap_or(correlator::Params::default().delay),
                seed: s.seed,
            };
            let (input, truth) = correlator::generate(&params)?;
            let run = correlator::run(&input, opts)?;
            Ok(Outcome {
                result_line: correlator::describe(&run.result),
                truth_line: Some(format!("truth: {}", correlator::describe(&truth))),
                note: None,
                run: run.map(AppResult::Correlator),
            })
        }
        (App::PulseDoppler, _) => {
            let (input, truth) = match source {
                Source::Cedr(dir) => (pulse_doppler::Input::load(dir)?, None),
                Source::Generated(s) => {
                    let defaults = pulse_doppler::Params::default();
                    let params = pulse_doppler::Params {
                        delay: s.delay.unwrap_or(defaults.delay),
                        doppler_bin: s.doppler_bin.unwrap_or(defaults.doppler_bin),
                        seed: s.seed,
                    };
                    let (input, truth) = pulse_doppler::generate(&params)?;
                    (input, Some(truth))
                }
            };
            let run = pulse_doppler::run(&input, opts)?;
            Ok(Outcome {
                result_line: pulse_doppler::describe(&run.result),
                truth_line: truth.map(|t| t.describe()),
                // It tells how to read a target's figures; without one there are none to read.
                note: run.result.target.then_some(pulse_doppler::NOTE),
                run: run.map(AppResult::PulseDoppler),
            })
        }
        (App::Sar, _) => {
            let (input, truth) = match source {
                Source::Cedr(dir) => (sar::Input::load(dir)?, None),
                Source::Generated(_) => {
                    let scene = sar::Scene::default();
                    (sar::Input::simulate(&scene), Some(scene))
                }
            };
            let input = input.with_azimuth(opts.sar_azimuth);
            let run = sar::run(&input, opts)?;
            Ok(Outcome {
                result_line: sar::describe(&run.result),
                truth_line: truth.map(|scene| scene.describe()),
                note: Some(match opts.sar_azimuth {
                    sar::Azimuth::Cedr => sar::NOTE,
                    sar::Azimuth::Focused => sar::FOCUSED_NOTE,
                }),
                run: run.map(AppResult::Sar),
            })
        }
    }
}

fn chain(run: Run<Checksum>, what: &str, expected: f64) -> Result<Outcome, AppError> {
    let (result_line, truth_line) = expected::describe(what, run.result.checksum, expected);
    Ok(Outcome {
        result_line,
        truth_line: Some(truth_line),
        note: None,
        run: run.map(AppResult::Chain),
    })
}

/// One frame of an app, set up and ready to run again and again.
pub(crate) type Frame<'a, R> = Box<dyn FnMut() -> Result<R, AppError> + 'a>;

/// An app's computation in its two forms: on the runtime (baseline and rimms run this same
/// code) and hand-written native. Each sets up its buffers and returns the frame to repeat.
pub(crate) trait Pipeline {
    /// What a frame computes.
    type Output;
    /// Which app this is.
    fn app(&self) -> App;
    /// The frame on a runtime, every step on the device `map` names for it, independent calls
    /// submitted as `submit` says.
    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        submit: Submit,
    ) -> Result<Frame<'a, Self::Output>, AppError>;
    /// The frame as hand-written code on `dev`.
    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Self::Output>, AppError>;
}

/// Runs `opts.frames` frames of `pipeline` in `opts.mode`, timing each, and collects the
/// figures of the whole run (setup included: constants uploaded once are part of the cost).
pub(crate) fn execute<P: Pipeline>(
    pipeline: &P,
    opts: &Options,
) -> Result<Run<P::Output>, AppError> {
    if opts.mode == Mode::Native && !opts.pools.is_empty() {
        return Err(AppError::Unsupported(
            "--pool sizes the runtime's pools; native mode has no runtime (use --mode rimms or baseline)".to_string(),
        ));
    }
    let mut runs = execute_interleaved(pipeline, std::slice::from_ref(opts), 0, None)?;
    runs.pop()
        .ok_or_else(|| AppError::Param("no run was asked for".to_string()))
}

/// Where one run of [`execute_interleaved`] computes: hand-written code's device, or a runtime.
enum Setup {
    Native(Box<Native>),
    Managed(Runtime),
}

/// Runs `warmup` untimed frames and then `frames` timed ones of `pipeline` in every one of
/// `runs` (modes, mappings, merging on or off), interleaved frame by frame — frame i of every
/// run before frame i + 1 of any, starting with a different run each frame — so that a
/// machine's slow spell weighs on every run alike and per-frame ratios compare like with
/// like. Every run must ask for the same number of frames. With a `budget`, the timed rounds
/// stop early once they have taken that long and at least [`MIN_FRAMES`] are done (every run
/// then has the same, smaller number of frames). Bytes and allocations are those of the whole
/// run: setup, warm-up and timed frames.
pub(crate) fn execute_interleaved<P: Pipeline>(
    pipeline: &P,
    runs: &[Options],
    warmup: usize,
    budget: Option<Duration>,
) -> Result<Vec<Run<P::Output>>, AppError> {
    let Some(first) = runs.first() else {
        return Ok(Vec::new());
    };
    let frames = check_frames(first.frames)?;
    if runs.iter().any(|o| o.frames != frames) {
        return Err(AppError::Param(
            "interleaved runs must have the same number of frames".to_string(),
        ));
    }
    let setups = runs
        .iter()
        .map(|opts| match opts.mode {
            Mode::Native if opts.mapping == Mapping::Auto => Err(AppError::Unsupported(
                "native mode on auto: hand-written code has no scheduler; it exists for the cpu, sim, fpga and fpga-cpu mappings".to_string(),
            )),
            Mode::Native if opts.mapping == Mapping::Gpu => Err(AppError::Unsupported(
                "native mode on gpu: the hand-written cudarc versions are examples of their own, FZF (`cargo run --release -p rimms-runtime --example gpu_fzf_bench`) and SAR (`cargo run --release -p rimms-cli --example gpu_sar`)".to_string(),
            )),
            Mode::Native => Ok(Setup::Native(Box::new(Native::new(opts.mapping, &opts.sim)?))),
            Mode::Baseline | Mode::Rimms => {
                let exec = if opts.mode == Mode::Baseline {
                    ExecMode::Baseline
                } else {
                    ExecMode::Tracked
                };
                Ok(Setup::Managed(opts.mapping.runtime(exec, opts)?))
            }
        })
        .collect::<Result<Vec<_>, AppError>>()?;
    let mut bodies = setups
        .iter()
        .zip(runs)
        .map(|(setup, opts)| match setup {
            Setup::Native(dev) => pipeline.native(dev),
            Setup::Managed(rt) => pipeline.managed(rt, opts.mapping, opts.submit),
        })
        .collect::<Result<Vec<_>, AppError>>()?;
    let n = bodies.len();
    let mut times: Vec<Vec<Duration>> = (0..n).map(|_| Vec::new()).collect();
    let mut modelled = vec![[Duration::ZERO; vclock::TERMS]; n];
    let mut results: Vec<Option<P::Output>> = (0..n).map(|_| None).collect();
    let mut timed_since = None;
    for i in 0..warmup + frames {
        // Returning drops the runtimes, which remove their files; a signal's default
        // action would have left them.
        if crate::interrupt::requested().is_some() {
            return Err(AppError::Interrupted);
        }
        if i == warmup {
            timed_since = Some(Instant::now());
        }
        let spent = timed_since.map_or(Duration::ZERO, |t| t.elapsed());
        if i >= warmup + MIN_FRAMES && budget.is_some_and(|b| spent > b) {
            if let Some(bar) = &first.progress {
                bar.inc((warmup + frames - i) as u64);
            }
            break;
        }
        for j in 0..n {
            let k = (i + j) % n;
            // Under an FPGA timing model a frame's time is the host's own work plus the
            // modelled FPGA time (the virtual clock); otherwise the two readings are equal and
            // this is the wall time.
            let clock = vclock::read();
            let start = Instant::now();
            let result = bodies[k]()?;
            let wall = start.elapsed();
            let end = vclock::read();
            let elapsed = clock.frame_time(end, wall);
            if i >= warmup {
                times[k].push(elapsed);
                for (sum, d) in modelled[k].iter_mut().zip(clock.terms_until(end)) {
                    *sum += d;
                }
            }
            results[k] = Some(result);
        }
        if let Some(bar) = &first.progress {
            bar.inc(1);
        }
    }
    drop(bodies);
    let mut out = Vec::with_capacity(n);
    for ((((setup, opts), frame_times), result), modelled) in setups
        .iter()
        .zip(runs)
        .zip(times)
        .zip(results)
        .zip(modelled)
    {
        let (links, allocations, evictions, merge_retries, prefetches) = match setup {
            Setup::Native(dev) => (dev.links(), dev.allocations(), Vec::new(), 0, Vec::new()),
            Setup::Managed(rt) => {
                let stats = rt.stats();
                let links = stats
                    .links
                    .iter()
                    .map(|l| Link {
                        from: l.from.clone(),
                        to: l.to.clone(),
                        copies: l.copies,
                        bytes: l.bytes,
                    })
                    .collect();
                let evictions = stats
                    .spaces
                    .iter()
                    .filter(|s| s.evictions > 0)
                    .map(|s| Eviction {
                        space: s.name.clone(),
                        evictions: s.evictions,
                        dropped_bytes: s.dropped_bytes,
                        written_back_bytes: s.written_back_bytes,
                    })
                    .collect();
                let allocations = stats.spaces.iter().map(|s| s.allocations).sum();
                let retries = stats.apis.iter().map(|a| a.merge_retries).sum();
                let prefetches = stats
                    .spaces
                    .iter()
                    .filter(|s| s.prefetched_bytes > 0)
                    .map(|s| Prefetched {
                        space: s.name.clone(),
                        bytes: s.prefetched_bytes,
                        used_bytes: s.prefetch_used_bytes,
                        wasted_bytes: s.prefetch_wasted_bytes,
                    })
                    .collect();
                (links, allocations, evictions, retries, prefetches)
            }
        };
        let result =
            result.ok_or_else(|| AppError::Param("--frames must be at least 1".to_string()))?;
        out.push(Run {
            app: pipeline.app(),
            mode: opts.mode,
            mapping: opts.mapping,
            frame_times,
            links,
            allocations,
            evictions,
            modelled,
            merge_retries,
            prefetches,
            result,
        });
    }
    Ok(out)
}

/// The fewest timed frames an interleaved run with a time budget stops at.
pub const MIN_FRAMES: usize = 5;

/// Runs `app` on generated input (the default scenario) in every one of `runs`, interleaved
/// frame by frame after `warmup` untimed frames, stopping early past `budget` (see
/// [`execute_interleaved`]): what `rimms bench` measures.
pub fn run_interleaved(
    app: App,
    runs: &[Options],
    warmup: usize,
    budget: Option<Duration>,
) -> Result<Vec<Run<AppResult>>, AppError> {
    fn all<R>(runs: Vec<Run<R>>, f: impl Fn(R) -> AppResult) -> Vec<Run<AppResult>> {
        runs.into_iter().map(|r| r.map(&f)).collect()
    }
    Ok(match app {
        App::TwoFft => {
            let input = two_fft::Input::generate(two_fft::Params::default());
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::Chain,
            )
        }
        App::Fzf => {
            let input = fzf::generate(fzf::Params::default());
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::Chain,
            )
        }
        App::Zip3x => {
            let input = zip3x::Input::generate(zip3x::LEN);
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::Chain,
            )
        }
        App::Correlator => {
            let (input, _) = correlator::generate(&correlator::Params::default())?;
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::Correlator,
            )
        }
        App::PulseDoppler => {
            let (input, _) = pulse_doppler::generate(&pulse_doppler::Params::default())?;
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::PulseDoppler,
            )
        }
        App::Sar => {
            let input = sar::Input::simulate(&sar::Scene::default());
            all(
                execute_interleaved(&input, runs, warmup, budget)?,
                AppResult::Sar,
            )
        }
    })
}

/// A `rows` × `row_len` complex matrix whose rows can be written by separate kernel calls:
/// its fragments are no larger than a row (rows of 4 KiB or more keep the default).
pub(crate) fn alloc_rows(
    rt: &Runtime,
    rows: usize,
    row_len: usize,
) -> rimms::Result<HeteData<Complex32>> {
    let mut m = HeteData::alloc(rt, rows * row_len)?;
    let row_bytes = row_len * std::mem::size_of::<Complex32>();
    if row_bytes < m.fragment_bytes() {
        m.fragment(row_bytes)?;
    }
    Ok(m)
}

/// The call a row-by-row stage makes on each row: `fft(input row, output row)` or
/// `zip(input row, shared operand, output row)`.
#[derive(Clone, Copy)]
pub(crate) enum RowCall<'b> {
    /// An FFT of the row (direction, points).
    Fft(Target, FftDirection, usize),
    /// `out = row op b`, the same `b` for every row.
    Zip(Target, ZipOp, &'b HeteData<Complex32>),
}

impl RowCall<'_> {
    fn target(self) -> Target {
        match self {
            RowCall::Fft(target, ..) | RowCall::Zip(target, ..) => target,
        }
    }

    /// The call, made now.
    fn run(
        self,
        rt: &Runtime,
        row: &HeteSlice<'_, Complex32>,
        out: &mut HeteSliceMut<'_, Complex32>,
    ) -> rimms::Result<()> {
        match self {
            RowCall::Fft(device, dir, points) => rt.fft(device, dir, points, row, out),
            RowCall::Zip(device, op, b) => rt.zip(device, op, row, b, out),
        }
    }
}

/// Makes `call` on every row of `row_len` elements of `input` and `output`: the
/// one-call-per-row formulation of CEDR's applications, which this keeps. `Submit::Sequential`
/// makes the calls one after another; `Submit::Scoped` submits them to a scope, which runs
/// them on the devices' queues and merges calls over following rows into batched device calls
/// where the runtime merges (`RuntimeBuilder::merge_calls`; with merging off they travel a
/// few rows per job). Calls placed by the scheduler (`Target::Auto`) cannot be held: they go
/// to the CPU's workers a few rows per job and are placed as they run.
pub(crate) fn each_row(
    rt: &Runtime,
    submit: Submit,
    input: &HeteData<Complex32>,
    output: &mut HeteData<Complex32>,
    row_len: usize,
    call: RowCall<'_>,
) -> rimms::Result<()> {
    debug_assert_eq!(input.len(), output.len(), "each_row: shapes differ");
    let run = |rows: &mut [(&HeteSlice<'_, Complex32>, &mut HeteSliceMut<'_, Complex32>)]| {
        rows.iter_mut()
            .try_for_each(|(src, dst)| call.run(rt, src, dst))
    };
    match (submit, call.target()) {
        (Submit::Sequential, _) => {
            let (rows_in, mut rows_out) = (input.rows(row_len)?, output.rows_mut(row_len)?);
            let mut pairs: Vec<_> = rows_in.iter().zip(rows_out.iter_mut()).collect();
            run(&mut pairs)
        }
        // The rows go straight into the scope, each view made as its call is submitted and
        // handed over by value: no vector of views built per stage and frame. The call is
        // matched once, not per row, so that its fields are not read again through the
        // closure's captures after each row call's lock.
        (Submit::Scoped | Submit::DoubleBuffered, Target::On(device)) => rt.scope(|s| {
            let mut pairs = input
                .iter_rows(row_len)?
                .zip(output.iter_rows_mut(row_len)?);
            match call {
                RowCall::Fft(_, dir, points) => {
                    pairs.try_for_each(|(row, out)| s.fft(device, dir, points, row, out))
                }
                RowCall::Zip(_, op, b) => {
                    pairs.try_for_each(|(row, out)| s.zip(device, op, row, b, out))
                }
            }
        })?,
        (Submit::Scoped | Submit::DoubleBuffered, Target::Auto) => {
            let (rows_in, mut rows_out) = (input.rows(row_len)?, output.rows_mut(row_len)?);
            let mut pairs: Vec<_> = rows_in.iter().zip(rows_out.iter_mut()).collect();
            let jobs = 4 * std::thread::available_parallelism().map_or(1, |n| n.get());
            let per_job = pairs.len().div_ceil(jobs).max(1);
            rt.scope(|s| {
                for rows in pairs.chunks_mut(per_job) {
                    let run = &run;
                    s.spawn(move |_| run(rows));
                }
            })
        }
    }
}

/// The index of the first largest value (NaN never wins), and the value.
pub(crate) fn argmax(values: &[f32]) -> (usize, f32) {
    values
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 {
                (i, v)
            } else {
                best
            }
        })
}

/// `dst[..src.len()] = src`, the rest zero: the zero padding of the radar apps.
pub(crate) fn pad_into(dst: &mut [Complex32], src: &[Complex32]) {
    let (head, tail) = dst.split_at_mut(src.len().min(dst.len()));
    head.copy_from_slice(&src[..head.len()]);
    tail.fill(Complex32::new(0.0, 0.0));
}
