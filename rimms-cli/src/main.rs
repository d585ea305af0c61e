//! The `rimms` command: run an application, or benchmark them on the devices this machine has.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
use clap::{Parser, Subcommand};
use rimms::{LinkModel, SimConfig};
use rimms_cli::apps::{
    self, App, AppError, AppResult, Mapping, Mode, Options, Scenario, Sched, Source, Submit,
};
use rimms_cli::human::count;
use rimms_cli::out_file::OutFile;
use rimms_cli::output::{self, complain, Failure};
use rimms_cli::{bench, memstat};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--fpga-timing`: the name of a timing model the emulator has.
fn fpga_timing_arg(text: &str) -> Result<String, String> {
    match rimms::drivers::fpga::TimingModel::by_name(text) {
        Some(_) => Ok(text.to_string()),
        None => Err(format!(
            "no timing model named {text:?} (known: {})",
            rimms::drivers::fpga::TimingModel::NAMES
        )),
    }
}

/// `--frames`: a count in 1 … MAX_FRAMES, refused before anything runs.
fn frames_arg(text: &str) -> Result<usize, String> {
    let range = format!("a whole number of frames, 1 … {}", apps::MAX_FRAMES);
    match text.parse::<usize>() {
        Ok(frames) if apps::check_frames(frames).is_ok() => Ok(frames),
        _ => Err(range),
    }
}

/// A whole number given as an option, or the range it allows in the error (for a negative
/// number too, which clap would otherwise take for an unknown option).
fn whole_arg<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse::<T>().map_err(|_| {
        let max = std::any::type_name::<T>();
        format!("a whole number from 0 up to {max}::MAX")
    })
}

/// `--watch SECONDS`: a positive, finite number of seconds.
fn seconds_arg(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("a number of seconds above 0, such as 1 or 0.5".to_string()),
    }
}

/// `--sim-link GB/S`: a bandwidth within what a runtime accepts of a link (`LinkModel`'s
/// 1 kB/s to 10 TB/s).
fn link_arg(text: &str) -> Result<f64, String> {
    let lowest = LinkModel::MIN_BYTES_PER_SECOND / 1e9;
    let highest = LinkModel::MAX_BYTES_PER_SECOND / 1e9;
    match text.parse::<f64>() {
        Ok(g) if (lowest.max(0.001)..=highest).contains(&g) => Ok(g),
        _ => Err(format!(
            "a bandwidth in GB/s from 0.001 to {highest}, such as 12 (PCIe 4) or 1"
        )),
    }
}

/// `--pool SPACE=SIZE`: a space name and a size such as `2MiB`, `512KiB` or `65536`.
fn pool_arg(text: &str) -> Result<(String, usize), String> {
    let (space, size) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not SPACE=SIZE (for example sim0=2MiB)"))?;
    if space.is_empty() {
        return Err(format!("{text:?} names no space (for example sim0=2MiB)"));
    }
    Ok((space.to_string(), size_arg(size)?))
}

/// A byte count: a whole number with an optional unit B, KiB, MiB or GiB (also K, M, G).
fn size_arg(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" | "k" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        other => {
            return Err(format!(
                "{other:?} in {text:?} is not a size unit: use B, KiB, MiB or GiB"
            ))
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            format!("{text:?} is not a size: a positive whole number and a unit, as 2MiB")
        })
}

/// `rimms bench --help`'s closing words: examples and the table's legend.
fn bench_after_help() -> String {
    format!(
        "{BENCH_EXAMPLES}\n\nWhat the table says:\n{}",
        rimms_cli::legend::legend(rimms_cli::legend::View::Help)
    )
}

// Each subcommand's help ends with examples, every one a command that runs as written (the
// newcomer test runs them all): a line `  COMMAND  what it does`, `&` for one that keeps
// running while the next lines use it (`$!`, its process id).

const RUN_EXAMPLES: &str = "Examples:
  rimms run fzf --map sim                          FZF on a simulated PCIe card, RIMMS tracking data
  rimms run fzf --map sim --mode baseline          the same, copying at every call as CEDR does
  rimms run correlator --delay 200                 find a chirp delayed by 200 samples in noise
  rimms run sar --azimuth focused --out image.txt  a focused SAR image, one row a line
  rimms run sar --map sim --pool sim0=4MiB         under memory pressure, evictions summed up
  rimms run pulse-doppler --ranks 2 --json         across 2 ranks (threads), as JSON";

const BENCH_EXAMPLES: &str = "Examples:
  rimms bench --app fzf --frames 5                 fzf on every mapping, 5 timed frames per cell
  rimms bench --app zip3x --frames 3 --wide        every column (the default fits 100 columns)
  rimms bench --app zip3x --frames 3 --plot bench.svg   the table, and charts of it as SVG
  rimms bench --app correlator --frames 3 --json   the figures as JSON
  rimms bench --ranks 1,2 --frames 2 --size 256x256     pulse-doppler and sar across ranks";

const DEVICES_EXAMPLES: &str = "Examples:
  rimms devices                                    the devices here and what each runs";

const FPGA_EMU_EXAMPLES: &str = "Examples:
  rimms fpga-emu --dir board --seconds 600 &       an emulated board in ./board, for 10 minutes
  RIMMS_FPGA_BOARD=board/board.toml rimms run fzf --map fpga --frames 3
                                                   another process drives it
  touch board/stop                                 stops it";

const MEMSTAT_EXAMPLES: &str = "Examples:
  RIMMS_STATS_PAGE=1 rimms run fzf --frames 1000 &     a run of seconds that publishes its figures
  rimms memstat --pid $!                           its memory spaces and links now
  rimms memstat --pid $! --watch 1                 again every second, until the run ends";

const COMPLETIONS_EXAMPLES: &str = "Examples:
  rimms completions bash > rimms.bash              then `source rimms.bash`, or copy it to
                                                   /usr/share/bash-completion/completions/rimms
  rimms completions zsh > _rimms                   for a folder on zsh's $fpath";

const MAN_EXAMPLES: &str = "Examples:
  rimms man > rimms.1                              then `man ./rimms.1`";

#[derive(Parser)]
#[command(
    name = "rimms",
    version,
    // Wrapped to the terminal, and no wider than this on a wide one.
    max_term_width = 100,
    about = "RIMMS: runtime-integrated memory management for heterogeneous machines",
    after_help = "Examples:
  rimms run fzf --map sim                      FZF on a simulated PCIe card, RIMMS tracking its data
  rimms run fzf --map sim --mode baseline      the same, copying at every call as CEDR does
  rimms run correlator --delay 200             find a chirp delayed by 200 samples in noise
  rimms run sar --map auto --json              SAR with every call placed by the scheduler, as JSON
  rimms bench --app sar --frames 20 --plot bench.svg
  rimms devices                                what each device runs: APIs, FFT sizes, ZIP ops
  rimms completions bash > ~/.local/share/bash-completion/completions/rimms
  RIMMS_TRACE_FILE=trace.json rimms run pulse-doppler --map fpga   (open trace.json in ui.perfetto.dev)
  RIMMS_STATS_PAGE=1 rimms run fzf --frames 100000 & rimms memstat --pid $! --watch 1

`rimms <command> --help` tells more about each command."
)]
struct Cli {
    /// Print only errors (no warnings, no summary of transfers on stderr). `RUST_LOG` overrides.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// More detail on stderr: once for each transfer and eviction, twice for debugging, three
    /// times for everything. `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one application and print its result (next to the truth for generated input).
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Run the register-level FPGA emulator as a process of its own, for another process to
    /// drive through `RIMMS_FPGA_BOARD=<dir>/board.toml`.
    #[command(after_help = FPGA_EMU_EXAMPLES)]
    FpgaEmu {
        /// Folder for the emulated device, sysfs and register files.
        #[arg(long)]
        dir: PathBuf,
        /// An emulator layout (TOML); default: 2 FFT + 2 ZIP cores, a 64 MiB u-dma-buf.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Stop after this many seconds (default: when `<dir>/stop` appears).
        #[arg(long, allow_negative_numbers = true, value_parser = whole_arg::<u64>)]
        seconds: Option<u64>,
        /// Under a layout's timing model, wait modelled time out in wall time (each transfer
        /// completes no sooner than modelled, and the driver waits out modelled register
        /// times); by default it is counted per core and logged at the end, not spent.
        #[arg(long)]
        real_time: bool,
    },
    /// Apps on every mapping available here: baseline (CEDR), rimms (merging calls and not) and
    /// native, interleaved frame by frame.
    #[command(after_help = bench_after_help())]
    Bench {
        /// Timed frames per cell (median, fastest and slowest are reported; the modes of a row
        /// run interleaved, after 2 untimed warm-up frames each), 1 … 1000000.
        #[arg(long, default_value_t = 20, value_parser = frames_arg, allow_negative_numbers = true)]
        frames: usize,
        /// Only these apps (default: all six, the radar apps included).
        #[arg(long, value_enum)]
        app: Vec<App>,
        /// Print one JSON array instead of the table.
        #[arg(long)]
        json: bool,
        /// Every column of the table: native, unmerged and no-prefetch times, fastest–slowest, vs native,
        /// the minimum and allocations (the default table fits 100 columns).
        #[arg(long, conflicts_with = "json")]
        wide: bool,
        /// Also draw the speedups and bytes moved as bar charts into this SVG file (checked
        /// before the bench runs).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Run the FPGA emulator with a timing model (`zcu102`: modelled DMA, core, register,
        /// cache-maintenance and host-copy times on a virtual clock; `zcu102-uncached`: the same
        /// with the u-dma-buf mapped uncached, as CEDR maps it) and label its rows as
        /// modelled; the same as setting
        /// RIMMS_FPGA_TIMING. Ignored, with a note, where RIMMS_FPGA_BOARD names a real board.
        #[arg(long, value_name = "MODEL", value_parser = fpga_timing_arg)]
        fpga_timing: Option<String>,
        /// Instead: pulse-doppler and sar across these rank counts (1,2,4), as a table of frame
        /// time, speedup and bytes per peer against the analytic minimum; under mpirun where
        /// it is installed and this build has MPI, else ranks as threads.
        #[arg(long, value_name = "N,N,…", value_delimiter = ',', value_parser = whole_arg::<usize>)]
        ranks: Vec<usize>,
        /// With --ranks: generated input of pulses × samples (default 1024x2048 for
        /// pulse-doppler, 2048x2048 for sar).
        #[arg(long, value_name = "PULSESxSAMPLES", value_parser = shape_arg)]
        size: Option<(usize, usize)>,
        /// With --ranks: how the rows are spread over the ranks (block-rows, the default;
        /// block-cyclic:ROWS; on-rank:RANK).
        #[arg(long, value_name = "DIST", value_parser = dist_arg)]
        dist: Option<rimms_dist::Distribution>,
        /// With --ranks: a strong-scaling model for 10 GbE and 100 Gb/s InfiniBand from
        /// in-process ranks (the frame's CPU time shared among the ranks, plus the busiest
        /// rank's bytes and messages on the link), e.g. --ranks 1,2,4,8,16.
        #[arg(long)]
        modelled: bool,
    },
    /// What each device can run: its APIs, FFT sizes and ZIP operations. Lists the CPU, a
    /// simulated card, the FPGA (the board RIMMS_FPGA_BOARD names, else the emulator) and
    /// GPU 0 where there is one.
    #[command(after_help = DEVICES_EXAMPLES)]
    Devices,
    /// Live per-space and per-link figures of a running program, from the stats page its
    /// runtime publishes when started with RIMMS_STATS_PAGE=1.
    #[command(after_help = MEMSTAT_EXAMPLES)]
    Memstat {
        /// The program's process id.
        #[arg(long, required_unless_present = "page", allow_negative_numbers = true, value_parser = whole_arg::<u32>)]
        pid: Option<u32>,
        /// Read the page at this path instead (one given to `RuntimeBuilder::stats_page`).
        #[arg(long, conflicts_with = "pid")]
        page: Option<PathBuf>,
        /// Print again every SECONDS until the program ends.
        #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = seconds_arg)]
        watch: Option<f64>,
    },
    /// Print a completion script for SHELL (e.g. `rimms completions bash >
    /// /etc/bash_completion.d/rimms`).
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (`rimms man > rimms.1; man ./rimms.1`).
    #[command(after_help = MAN_EXAMPLES)]
    Man,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The application.
    #[arg(value_enum)]
    app: App,
    /// baseline (copy at every call, as CEDR), rimms (tracked) or native (hand-written).
    #[arg(long, value_enum, default_value = "rimms")]
    mode: Mode,
    /// Where the steps run; `sim` is a simulated card behind a modelled PCIe link, `auto` lets
    /// the scheduler place every call on the CPU or one of two such cards.
    #[arg(long, value_enum, default_value = "cpu")]
    map: Mapping,
    /// How `--map auto` places calls.
    #[arg(long, value_enum, default_value = "data-aware-eft")]
    sched: Sched,
    /// How calls that do not depend on each other (one per row) are submitted.
    #[arg(long, value_enum, default_value = "scoped")]
    submit: Submit,
    /// Frames to run, 1 … 1000000; the median frame time is reported.
    #[arg(long, default_value_t = 10, value_parser = frames_arg, allow_negative_numbers = true)]
    frames: usize,
    /// Read CEDR's input files from this folder instead of generating input.
    #[arg(long)]
    input: Option<PathBuf>,
    /// SAR: write the magnitude image here as text, one row a line.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Seed of the generated noise.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole_arg::<u64>)]
    seed: u64,
    /// Generated input: the injected delay in samples (correlator, pulse-doppler).
    #[arg(long, allow_negative_numbers = true, value_parser = whole_arg::<usize>)]
    delay: Option<usize>,
    /// Generated input: the target's Doppler bin offset, -64 … 63 (pulse-doppler).
    #[arg(long, allow_negative_numbers = true)]
    doppler_bin: Option<i32>,
    /// SAR's azimuth filter: CEDR's as specified (rows do not focus) or a matched filter
    /// under which point targets focus at their row.
    #[arg(long, value_enum, default_value = "cedr")]
    azimuth: rimms_cli::apps::sar::Azimuth,
    /// Sets a memory space's pool, as SPACE=SIZE (sim0=4MiB on --map sim, udmabuf0=4MiB on
    /// --map fpga, host=64MiB); repeatable. A full device pool evicts its least recently used
    /// blocks, so this runs any app under memory pressure, summed up in one line of the
    /// output. Every app runs in 4MiB; a pool too small says each app's smallest.
    #[arg(long, value_name = "SPACE=SIZE", value_parser = pool_arg)]
    pool: Vec<(String, usize)>,
    /// Keep every row's call its own device call: do not merge calls over following rows
    /// into one batched call (rimms mode; baseline never merges).
    #[arg(long)]
    no_merge: bool,
    /// Start no copy ahead of the call that needs it: a scope's inputs move when their call
    /// runs, and a merged call waits for all of them (rimms mode; values and bytes moved are
    /// the same, only the overlap of copies with compute goes).
    #[arg(long)]
    no_prefetch: bool,
    /// The simulated card's link bandwidth in GB/s (--map sim and auto; default 12, a
    /// PCIe 4 link), from 0.001 to 10000: a slower link makes copies matter.
    #[arg(long, value_name = "GB/S", value_parser = link_arg)]
    sim_link: Option<f64>,
    /// Run pulse-doppler or sar across this many ranks, as threads of this process (each
    /// with its own runtime), 1 … 64. Under `mpirun` the ranks are its processes instead
    /// (a build with the feature `mpi`), and this may be left out.
    #[arg(long, allow_negative_numbers = true, value_parser = whole_arg::<usize>)]
    ranks: Option<usize>,
    /// Generated input across ranks: pulses × samples (pulse-doppler: 1024x4096; sar:
    /// 2048x2048); default CEDR's sizes.
    #[arg(long, value_name = "PULSESxSAMPLES", value_parser = shape_arg)]
    size: Option<(usize, usize)>,
    /// Across ranks: how the rows are spread: block-rows (the default), block-cyclic:ROWS or
    /// on-rank:RANK. The corner turns move each rank's rows to the ranks that own their
    /// columns, whatever the spread.
    #[arg(long, value_name = "DIST", value_parser = dist_arg)]
    dist: Option<rimms_dist::Distribution>,
}

/// `--dist`: a distribution whose rows have one owner each (the apps' corner turns need it).
fn dist_arg(text: &str) -> Result<rimms_dist::Distribution, String> {
    match text.parse()? {
        rimms_dist::Distribution::Replicated => Err(
            "replicated gives every row to every rank; the apps' corner turns need one owner per row: block-rows, block-cyclic:ROWS or on-rank:RANK".into(),
        ),
        dist => Ok(dist),
    }
}

/// `--size`: two whole numbers joined by an x.
fn shape_arg(text: &str) -> Result<(usize, usize), String> {
    let parsed = text
        .split_once(['x', 'X', '×'])
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    match parsed {
        Some((a, b)) if a > 0 && b > 0 && a <= 1 << 16 && b <= 1 << 16 => Ok((a, b)),
        _ => Err(
            "pulses × samples as two whole numbers 1 … 65536 joined by x, e.g. 1024x4096".into(),
        ),
    }
}

/// `run --out`: a path that can take SAR's image and is not its input file (which the
/// image would replace), checked before the run.
fn check_out(args: &RunArgs) -> Result<Option<OutFile>, String> {
    let Some(path) = args.out.as_deref() else {
        return Ok(None);
    };
    let out = OutFile::check("--out", path)?;
    if let Some(dir) = &args.input {
        for input in input_files(args.app, dir) {
            out.refuse_input(&input)?;
        }
    }
    Ok(Some(out))
}

/// The CEDR files `app` reads from the folder `dir` of `--input`.
fn input_files(app: App, dir: &std::path::Path) -> Vec<PathBuf> {
    match app {
        App::Sar => vec![dir.join(apps::sar::RAW_FILE)],
        App::PulseDoppler => vec![
            dir.join(apps::pulse_doppler::PULSES_FILE),
            dir.join(apps::pulse_doppler::PULSE_FILE),
        ],
        _ => Vec::new(),
    }
}

/// A `RIMMS_TRACE_FILE` that names one of the run's input files, or a file that is not a
/// trace, is refused before the run: the runtime creates the trace file afresh, which would
/// empty it.
fn check_trace_file(args: &RunArgs) -> Result<(), Failure> {
    let Some(trace) = std::env::var_os(rimms::TRACE_FILE_ENV).filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let trace = PathBuf::from(trace);
    let input = args.input.as_deref().and_then(|dir| {
        input_files(args.app, dir)
            .into_iter()
            .find(|input| rimms_cli::out_file::is_same_file(&trace, input))
    });
    if let Some(input) = input {
        return Err(Failure::Usage(format!(
            "{}={}: is the input {}; the trace would replace it, so name another file",
            rimms::TRACE_FILE_ENV,
            trace.display(),
            input.display()
        )));
    }
    rimms_cli::out_file::refuse_foreign_trace(rimms::TRACE_FILE_ENV, &trace, None)
        .map_err(Failure::Usage)
}

/// `rimms run … --ranks N`, or any `rimms run` under `mpirun`: the app across ranks.
fn run_across_ranks(args: &RunArgs) -> Result<(), Failure> {
    let unsupported = [
        ("--mode", args.mode != Mode::Rimms),
        ("--map", args.map != Mapping::Cpu),
        ("--pool", !args.pool.is_empty()),
        ("--no-merge", args.no_merge),
        ("--no-prefetch", args.no_prefetch),
        ("--sim-link", args.sim_link.is_some()),
        (
            "--azimuth",
            args.azimuth != rimms_cli::apps::sar::Azimuth::Cedr,
        ),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        return Err(Failure::Usage(format!(
            "{flag} is not taken across ranks yet: each rank runs its steps on its CPU in rimms mode"
        )));
    }
    if args.out.is_some() && args.app != App::Sar {
        return Err(Failure::Usage(
            "--out writes SAR's image; other apps have none".into(),
        ));
    }
    let out = check_out(args)?;
    let defaults = apps::pulse_doppler::Params::default();
    let run = rimms_cli::ranks::DistRun {
        app: args.app,
        ranks: args.ranks,
        size: args.size,
        input: args.input.clone(),
        params: apps::pulse_doppler::Params {
            delay: args.delay.unwrap_or(defaults.delay),
            doppler_bin: args.doppler_bin.unwrap_or(defaults.doppler_bin),
            seed: args.seed,
        },
        frames: args.frames,
        keep_image: out.is_some(),
        dist: args.dist.unwrap_or(rimms_dist::Distribution::BlockRows),
        progress: Some(rimms_cli::progress::frames(args.frames as u64)),
    };
    let outcome = rimms_cli::ranks::run(&run);
    if let Some(bar) = &run.progress {
        bar.finish_and_clear();
    }
    let (report, printing) = outcome.map_err(app_failure)?;
    if !printing {
        return Ok(());
    }
    if let (Some(out), Some(image)) = (&out, &report.image) {
        let fast = report.size.1;
        out.write(|w| {
            for row in image.chunks(fast) {
                let line: Vec<String> = row.iter().map(|v| v.to_string()).collect();
                writeln!(w, "{}", line.join(" "))?;
            }
            Ok(())
        })?;
    }
    if args.json {
        let json = serde_json::to_string(&report).map_err(|e| Failure::Error(e.to_string()))?;
        output::print(&format!("{json}\n"))?;
    } else {
        output::print(&report.describe())?;
    }
    Ok(())
}

/// An app's error as the command reports it: asking for what an app, mode or mapping does
/// not take (a parameter out of range, an unknown memory space for `--pool`) is a usage
/// error, anything else a failed run.
fn app_failure(e: AppError) -> Failure {
    let usage = match &e {
        AppError::Param(_) | AppError::Unsupported(_) => true,
        // A distribution the job cannot take (more ranks than rows) comes from --ranks.
        AppError::Distributed(rimms_dist::ClusterError::Dist { .. }) => true,
        // A pool for a space the mapping lacks comes from the command line (`--pool`).
        AppError::Runtime(rimms::Error::NoSuchSpace { .. }) => true,
        _ => false,
    };
    if usage {
        Failure::Usage(e.to_string())
    } else {
        Failure::Error(e.to_string())
    }
}

fn run_app(args: &RunArgs) -> Result<(), Failure> {
    check_trace_file(args)?;
    let under_mpirun = std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some();
    if args.dist.is_some() && args.ranks.is_none() && !under_mpirun {
        return Err(Failure::Usage(
            "--dist spreads the rows over the ranks of a job: give --ranks N (threads), or run under mpirun with a build that has the feature mpi".into(),
        ));
    }
    if args.ranks.is_some() || args.size.is_some() || under_mpirun {
        return run_across_ranks(args);
    }
    if args.out.is_some() && args.app != App::Sar {
        return Err(Failure::Usage(
            "--out writes SAR's image; other apps have none".to_string(),
        ));
    }
    let source = match &args.input {
        Some(dir) => {
            if args.delay.is_some() || args.doppler_bin.is_some() {
                return Err(Failure::Usage("--delay and --doppler-bin shape generated input; with --input the files decide".to_string()));
            }
            Source::Cedr(dir.clone())
        }
        None => Source::Generated(Scenario {
            seed: args.seed,
            delay: args.delay,
            doppler_bin: args.doppler_bin,
        }),
    };
    let opts = Options {
        sim: SimConfig {
            link: LinkModel {
                bytes_per_second: args
                    .sim_link
                    .map_or(LinkModel::PCIE.bytes_per_second, |g| g * 1e9),
                ..LinkModel::PCIE
            },
            simulate_link: true,
            ..SimConfig::default()
        },
        submit: args.submit,
        policy: args.sched.policy(),
        sar_azimuth: args.azimuth,
        pools: args.pool.clone(),
        merge: !args.no_merge,
        prefetch: !args.no_prefetch,
        progress: Some(rimms_cli::progress::frames(args.frames as u64)),
        ..Options::new(args.mode, args.map).frames(args.frames)
    };
    // A path that cannot take the image fails now, not after the run; the file itself is
    // replaced only once the image is complete.
    let out = check_out(args)?;
    let outcome = apps::run(args.app, &source, &opts);
    if let Some(bar) = &opts.progress {
        bar.finish_and_clear();
    }
    let outcome = outcome.map_err(|e| {
        // A pool too small for the app: say how large one would do.
        let too_small = matches!(
            e,
            AppError::Runtime(rimms::Error::DoesNotFit { .. } | rimms::Error::PoolExhausted { .. })
        );
        match app_failure(e) {
            Failure::Error(why) if too_small && !args.pool.is_empty() => {
                Failure::Error(format!("{why}\n  ({})", rimms_cli::pools::hint(args.app)))
            }
            other => other,
        }
    })?;
    let run = &outcome.run;
    if let (Some(out), AppResult::Sar(sar)) = (&out, &run.result) {
        out.write(|w| sar.write_image(w))?;
    }
    if args.json {
        output::print(&format!("{}\n", run.to_json()))?;
        return Ok(());
    }
    let mut text = format!(
        "{} ({} on {}, {}, median {:.3} ms): {}\n",
        run.app.name(),
        run.mode.name(),
        run.mapping.name(),
        count(run.frames() as u64, "frame", "frames"),
        run.median().as_secs_f64() * 1e3,
        outcome.result_line
    );
    if let Some(truth) = &outcome.truth_line {
        text += truth;
        text.push('\n');
    }
    if let Some(note) = outcome.note {
        text += &textwrap::fill(note, rimms_cli::legend::WIDTH);
        text.push('\n');
    }
    let links: Vec<String> = run
        .links
        .iter()
        .map(|l| {
            format!(
                "{} -> {}: {}, {}",
                l.from,
                l.to,
                count(l.copies, "copy", "copies"),
                rimms_cli::human::bytes(l.bytes)
            )
        })
        .collect();
    for e in &run.evictions {
        text += &format!(
            "evicted from {}: {}, {} dropped, {} written back\n",
            e.space,
            count(e.evictions, "block", "blocks"),
            rimms_cli::human::bytes(e.dropped_bytes),
            rimms_cli::human::bytes(e.written_back_bytes)
        );
    }
    for p in &run.prefetches {
        text += &format!(
            "copied ahead into {}: {}, of them {} used and {} wasted\n",
            p.space,
            rimms_cli::human::bytes(p.bytes),
            p.used_bytes,
            p.wasted_bytes
        );
    }
    let retries = run.merge_retries;
    if retries > 0 {
        text += &format!(
            "{} did not fit and ran again one call a row (-v says why)\n",
            count(retries, "merged call", "merged calls")
        );
    }
    text += &format!(
        "moved: {}; allocations: {}\n",
        if links.is_empty() {
            "nothing".to_string()
        } else {
            links.join("; ")
        },
        run.allocations
    );
    output::print(&text)?;
    Ok(())
}

/// `rimms bench --ranks …`: the apps across rank counts.
fn scaling_cmd(
    frames: usize,
    app: Vec<App>,
    json: bool,
    counts: &[usize],
    rimms_cli::scaling::Shape { size, dist }: rimms_cli::scaling::Shape,
    modelled: bool,
) -> Result<(), Failure> {
    let apps = if app.is_empty() {
        vec![App::PulseDoppler, App::Sar]
    } else {
        app
    };
    if let Some(other) = apps
        .iter()
        .find(|a| !matches!(a, App::PulseDoppler | App::Sar))
    {
        return Err(Failure::Usage(format!(
            "{} does not run across ranks; pulse-doppler and sar do",
            other.name()
        )));
    }
    if let Some(bad) = counts.iter().find(|&&n| n == 0 || n > 64) {
        return Err(Failure::Usage(format!(
            "--ranks takes counts of 1 … 64, got {bad}"
        )));
    }
    let mut all = Vec::new();
    for app in apps {
        let run = rimms_cli::ranks::DistRun {
            app,
            ranks: None,
            size: size.or(Some(match app {
                App::PulseDoppler => (1024, 2048),
                _ => (2048, 2048),
            })),
            input: None,
            params: apps::pulse_doppler::Params::default(),
            frames,
            keep_image: false,
            dist: dist.unwrap_or(rimms_dist::Distribution::BlockRows),
            progress: None,
        };
        let rows = rimms_cli::scaling::run(&run, counts, modelled).map_err(app_failure)?;
        if !json {
            output::print(&rimms_cli::scaling::table(app, &rows, modelled))?;
        }
        all.extend(rows);
    }
    if json {
        let text = serde_json::to_string(&all).map_err(|e| Failure::Error(e.to_string()))?;
        output::print(&format!("{text}\n"))?;
    }
    Ok(())
}

fn bench_cmd(
    frames: usize,
    app: Vec<App>,
    json: bool,
    wide: bool,
    plot: Option<PathBuf>,
    fpga_timing: Option<String>,
) -> Result<(), Failure> {
    use rimms::drivers::fpga::{BOARD_ENV, TIMING_ENV};
    use rimms::TRACE_FILE_ENV;
    if let Some(model) = &fpga_timing {
        // Read by every runtime the bench builds; set while this is the only thread.
        std::env::set_var(TIMING_ENV, model);
    }
    // What the FPGA rows are: emulated with a timing model (the flag or the variable), unless a
    // real board is configured, which the model does not touch.
    let modelled = std::env::var(TIMING_ENV)
        .ok()
        .filter(|_| rimms::FpgaSource::board_path_from_env().is_none());
    if fpga_timing.is_some() && modelled.is_none() {
        eprintln!("note: {BOARD_ENV} names a real board, so --fpga-timing changes nothing");
    }
    let apps = if app.is_empty() {
        vec![
            App::TwoFft,
            App::Fzf,
            App::Zip3x,
            App::Correlator,
            App::PulseDoppler,
            App::Sar,
        ]
    } else {
        app
    };
    // Before minutes of measuring, not after.
    let chart = plot
        .as_deref()
        .map(rimms_cli::plot::check_path)
        .transpose()?;
    // Every runtime the bench builds would claim the one path in turn (trace.json,
    // trace.2.json, … with nothing to tell which row and mode each is); each gets a file
    // named for its cell instead, and no other runtime here (the GPU probe) writes one. Taken
    // out of the environment while this is the only thread.
    let trace = std::env::var_os(TRACE_FILE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    std::env::remove_var(TRACE_FILE_ENV);
    if let Some(base) = &trace {
        for app in &apps {
            for (map, _, _) in bench::mappings() {
                for mode in bench::MODE_NAMES {
                    let cell = bench::trace_path(base, app.name(), map, mode);
                    rimms_cli::out_file::refuse_foreign_trace(TRACE_FILE_ENV, base, Some(&cell))
                        .map_err(Failure::Usage)?;
                }
            }
        }
    }
    let bar = bench::progress_bar(&apps, frames);
    let result = bench::run(frames, &apps, trace.as_deref(), &bar);
    bar.finish_and_clear();
    let rows = result?;
    if let Some(base) = &trace {
        let written = bench::traces_written(base, &rows);
        let folder = match base.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        let name = base.file_name().map(std::path::Path::new).unwrap_or(base);
        // A closed stderr is no reason to fail a bench that ran.
        let _ = writeln!(
            std::io::stderr(),
            "{TRACE_FILE_ENV}: one trace per row and mode, {} in {} named {}",
            count(written.len() as u64, "file", "files"),
            folder.display(),
            bench::trace_path(name, "APP", "MAP", "MODE").display()
        );
    }
    if let Some(chart) = &chart {
        let svg = rimms_cli::plot::svg(&rows)?;
        chart.write(|w| w.write_all(svg.as_bytes()))?;
    }
    if json {
        output::print(&format!(
            "{}\n",
            bench::json(&rows, frames, modelled.as_deref())
        ))?;
    } else {
        output::print(&bench::table(&rows, frames, modelled.as_deref(), wide))?;
    }
    Ok(())
}

fn memstat_cmd(pid: Option<u32>, page: Option<PathBuf>, watch: Option<f64>) -> Result<(), Failure> {
    let target = match (pid, page) {
        (_, Some(path)) => memstat::Target::Page(path),
        // clap requires one of the two.
        (pid, None) => memstat::Target::Pid(pid.unwrap_or_default()),
    };
    memstat::run(&target, watch, output::print).map_err(|e| match e {
        memstat::MemstatError::Write(io) => Failure::from(io),
        other => Failure::Error(other.to_string()),
    })
}

fn devices_cmd() -> Result<(), Failure> {
    // Where each device comes from, said after the list; a broken one is said too, and the
    // rest are still listed.
    let mut origins = Vec::new();
    let mut broken = None;
    let mut builder = rimms::Runtime::builder().sim(SimConfig::default());
    match rimms::FpgaSource::from_env() {
        Ok(fpga) => {
            origins.push(match (&fpga, rimms::FpgaSource::board_path_from_env()) {
                (rimms::FpgaSource::Board(_), Some(path)) => format!(
                    "fpga: the board {} names ({})",
                    rimms::drivers::fpga::BOARD_ENV,
                    std::path::Path::new(&path).display()
                ),
                _ => format!(
                    "fpga: the embedded register-level emulator ({}=board.toml names a real board)",
                    rimms::drivers::fpga::BOARD_ENV
                ),
            });
            builder = builder.fpga(fpga);
        }
        Err(e) => {
            origins.push(format!("fpga: not listed, its board is broken: {e}"));
            broken = Some(format!("the FPGA board: {e}"));
        }
    }
    match rimms::Runtime::builder().gpu(0).build() {
        Ok(_) => builder = builder.gpu(0),
        Err(e) => origins.push(format!("gpu: none here ({e})")),
    }
    let rt = builder.build().map_err(|e| e.to_string())?;
    let mut text: String = rt.capabilities().iter().map(|c| c.to_string()).collect();
    text.push('\n');
    for origin in origins {
        text.push_str(&origin);
        text.push('\n');
    }
    output::print(&text)?;
    match broken {
        Some(why) => Err(Failure::Error(why)),
        None => Ok(()),
    }
}

/// Whether log lines may carry colour codes: only on a terminal, and never with `NO_COLOR`
/// set to anything (https://no-color.org).
fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    rimms_cli::logging::init(
        &rimms_cli::logging::default_filter(cli.quiet, cli.verbose),
        colour(),
    );
    if cli.quiet {
        rimms_cli::progress::quiet();
    }
    let command = cli.command;
    if matches!(command, Command::Run(_) | Command::Bench { .. }) {
        if let Err(e) = rimms_cli::interrupt::install() {
            // Without it a signal still ends the run, only as it always did.
            complain("setup", &e);
        }
    }
    let (name, result) = match command {
        Command::Run(args) => ("run", run_app(&args)),
        Command::FpgaEmu {
            dir,
            config,
            seconds,
            real_time,
        } => (
            "fpga-emu",
            rimms_cli::fpga_emu::run(&dir, config.as_deref(), seconds, real_time)
                .map_err(|e| Failure::Error(e.to_string())),
        ),
        Command::Devices => ("devices", devices_cmd()),
        Command::Completions { shell } => ("completions", completions_cmd(shell)),
        Command::Man => ("man", man_cmd()),
        Command::Memstat { pid, page, watch } => ("memstat", memstat_cmd(pid, page, watch)),
        Command::Bench {
            frames,
            app,
            json,
            wide,
            plot,
            fpga_timing,
            ranks,
            size,
            dist,
            modelled,
        } => (
            "bench",
            if ranks.is_empty() {
                if size.is_some() || dist.is_some() || modelled {
                    Err(Failure::Usage(
                        "--size, --dist and --modelled go with --ranks".into(),
                    ))
                } else {
                    bench_cmd(frames, app, json, wide, plot, fpga_timing)
                }
            } else {
                let shape = rimms_cli::scaling::Shape { size, dist };
                scaling_cmd(frames, app, json, &ranks, shape, modelled)
            },
        ),
    };
    // The runtimes are gone by now; the signal that stopped the run ends the process.
    if let Some(sig) = rimms_cli::interrupt::requested() {
        rimms_cli::interrupt::end_by(sig);
    }
    match result {
        Ok(()) | Err(Failure::Quiet) => ExitCode::SUCCESS,
        Err(e) => {
            complain(name, &e);
            ExitCode::from(e.exit_code())
        }
    }
}

/// Writes `shell`'s completion script for `rimms` to standard output.
fn completions_cmd(shell: clap_complete::Shell) -> Result<(), Failure> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "rimms", &mut out);
    Ok(output::print(&String::from_utf8_lossy(&out))?)
}

/// Writes the man page of `rimms` (roff) to standard output.
fn man_cmd() -> Result<(), Failure> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| Failure::Error(format!("the man page could not be rendered: {e}")))?;
    Ok(output::print(&String::from_utf8_lossy(&out))?)
}

#[cfg(test)]
mod tests {
    use super::{pool_arg, size_arg};

    #[test]
    fn sizes_take_binary_units_and_refuse_anything_else() {
        assert_eq!(size_arg("2MiB"), Ok(2 << 20));
        assert_eq!(size_arg("512KiB"), Ok(512 << 10));
        assert_eq!(size_arg("1G"), Ok(1 << 30));
        assert_eq!(size_arg("65536"), Ok(65536));
        for bad in ["", "0", "2MB", "MiB", "-1KiB", "1.5MiB"] {
            assert!(size_arg(bad).is_err(), "{bad}");
        }
        assert_eq!(pool_arg("sim0=2MiB"), Ok(("sim0".to_string(), 2 << 20)));
        assert!(pool_arg("sim0").is_err());
        assert!(pool_arg("=2MiB").is_err());
    }
}
