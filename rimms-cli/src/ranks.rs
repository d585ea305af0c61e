//! `rimms run pulse-doppler|sar --ranks N`, and the same command as every rank of
//! `mpirun -np N rimms run …`: the apps across ranks (`apps::distributed`), the job they run in,
//! and what the command reports of them.
//!
//! Where the job comes from: under `mpirun` (Open MPI's `OMPI_COMM_WORLD_SIZE` is set) the
//! ranks are the MPI processes, which needs a build with the feature `mpi`; otherwise `--ranks
//! N` runs N ranks as threads of this process over the in-process transport, each with its
//! own runtime. Both run the same code and move the same bytes; threads share this machine's
//! memory bus instead of a network.

use crate::apps::distributed::{self, Detection, SarImage};
use crate::apps::pulse_doppler::{self, Params};
use crate::apps::sar::{self, Size};
use crate::apps::{App, AppError};
use crate::human::count;
use rimms::{Complex32, Device};
use rimms_dist::{transpose_bytes, Cluster, Distribution, Rank};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a run across ranks is asked to do.
#[derive(Clone, Debug)]
pub struct DistRun {
    /// Pulse Doppler or SAR.
    pub app: App,
    /// Ranks as threads; `None` under `mpirun` (the job's size) or for one rank.
    pub ranks: Option<usize>,
    /// Pulses × samples of generated input; `None` for CEDR's sizes.
    pub size: Option<(usize, usize)>,
    /// CEDR's input folder instead of generated input.
    pub input: Option<PathBuf>,
    /// Generated input's seed, delay and Doppler bin (pulse Doppler).
    pub params: Params,
    /// Frames; the median is reported.
    pub frames: usize,
    /// SAR: keep the image on rank 0 (for `--out`).
    pub keep_image: bool,
    /// How the rows are spread over the ranks.
    pub dist: Distribution,
    /// Moved on by rank 0 once a frame (`crate::progress`).
    pub progress: Option<indicatif::ProgressBar>,
}

/// How the ranks of a run were made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Job {
    /// Threads of this process, the in-process transport.
    Threads,
    /// Processes under `mpirun`.
    Mpi,
}

/// What a run across ranks found and moved, as rank 0 reports it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DistReport {
    /// The app's name.
    pub app: String,
    /// Ranks in the job.
    pub ranks: usize,
    /// How they were made.
    pub job: Job,
    /// Pulses × samples.
    pub size: (usize, usize),
    /// How the rows were spread (`block-rows`, `block-cyclic:ROWS`, `on-rank:RANK`).
    #[serde(default)]
    pub dist: String,
    /// Median frame, milliseconds.
    pub median_ms: f64,
    /// The result, in words.
    pub result: String,
    /// Where generated input put the target, in words; `None` for CEDR's input.
    pub truth: Option<String>,
    /// Bytes each rank sent each peer in the last frame (`[from][to]`), gathered on rank 0
    /// under MPI.
    pub sent: Vec<Vec<u64>>,
    /// The analytic minimum of the same, `[from][to]`.
    pub minimum: Vec<Vec<u64>>,
    /// Data messages each rank sent each peer a frame (`[from][to]`), with threads; what a
    /// modelled link charges latency for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Vec<u64>>,
    /// The process's CPU time a frame, median, milliseconds: with threads, every rank's work.
    pub cpu_ms: f64,
    /// SAR's image on rank 0, when kept.
    #[serde(skip)]
    pub image: Option<Vec<f32>>,
}

impl DistReport {
    /// A report `rimms run … --json` printed.
    pub fn from_json(json: &str) -> Option<DistReport> {
        serde_json::from_str(json).ok()
    }

    /// Whether every rank known here sent exactly the minimum.
    pub fn at_minimum(&self) -> bool {
        self.sent.iter().zip(&self.minimum).all(|(s, m)| s == m)
    }

    /// The report as lines of text.
    pub fn describe(&self) -> String {
        let total = |rows: &[Vec<u64>]| rows.iter().flatten().sum::<u64>();
        let (sent, minimum) = (total(&self.sent), total(&self.minimum[..self.sent.len()]));
        let job = match self.job {
            Job::Threads => "threads of this process",
            Job::Mpi => "MPI processes",
        };
        let mut text = format!(
            "{} across {} ({job}{}), {} pulses × {} samples, median {:.3} ms: {}\n",
            self.app,
            count(self.ranks as u64, "rank", "ranks"),
            match self.dist.as_str() {
                "" | "block-rows" => String::new(),
                dist => format!(", rows {dist}"),
            },
            self.size.0,
            self.size.1,
            self.median_ms,
            self.result
        );
        if let Some(truth) = &self.truth {
            text.push_str(truth);
            text.push('\n');
        }
        let whose = if self.sent.len() == self.ranks {
            "the ranks sent".to_string()
        } else {
            "rank 0 sent".to_string()
        };
        text.push_str(&format!(
            "network: {whose} {} a frame, {}\n",
            crate::human::bytes(sent),
            if self.at_minimum() {
                "the analytic minimum (the corner turns' off-diagonal blocks and 24 bytes of peak per pair of ranks)".to_string()
            } else {
                format!("more than the analytic minimum of {}", crate::human::bytes(minimum))
            }
        ));
        text
    }
}

/// What the job's ranks are, before any runs: under `mpirun` its processes, else threads.
fn under_mpirun() -> Option<usize> {
    std::env::var("OMPI_COMM_WORLD_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// The input of a run: pulses (or raw SAR rows), the transmitted pulse or azimuth filter, its
/// size, and the truth in words.
struct Prepared {
    data: Vec<Complex32>,
    reference: Vec<Complex32>,
    size: (usize, usize),
    truth: Option<String>,
}

fn prepare(run: &DistRun) -> Result<Prepared, AppError> {
    if let (Some((m, n)), None) = (run.size, &run.input) {
        room_for_input(m, n)?;
    }
    match (run.app, &run.input) {
        (App::PulseDoppler, Some(dir)) => {
            let input = pulse_doppler::Input::load(dir)?;
            Ok(Prepared {
                data: input.pulses,
                reference: input.pulse,
                size: (pulse_doppler::M, pulse_doppler::N),
                truth: None,
            })
        }
        (App::PulseDoppler, None) => {
            let (m, n) = run.size.unwrap_or((pulse_doppler::M, pulse_doppler::N));
            let burst = pulse_doppler::simulate(m, n, &run.params)?;
            Ok(Prepared {
                data: burst.pulses,
                reference: burst.pulse,
                size: (m, n),
                truth: Some(format!(
                    "truth: the target at Doppler bin {}, range bin {}",
                    burst.bins.0, burst.bins.1
                )),
            })
        }
        (App::Sar, source) => {
            let size = run
                .size
                .map_or(Size::CEDR, |(slow, fast)| Size { slow, fast });
            if size.slow < 2 || size.fast < 2 {
                return Err(AppError::Param(format!(
                    "SAR takes at least 2 pulses of 2 samples, got {} × {}",
                    size.slow, size.fast
                )));
            }
            let (data, truth) = match source {
                Some(dir) if size == Size::CEDR => (sar::Input::load(dir)?.raw, None),
                Some(_) => {
                    return Err(AppError::Param(
                        "--size shapes generated input; CEDR's SAR file is 256 × 512".into(),
                    ))
                }
                None => {
                    let scene = sar::Scene::default();
                    let columns: Vec<String> = scene
                        .scatterers
                        .iter()
                        .map(|s| format!("{:.0}", size.expected_column(s)))
                        .collect();
                    let truth = format!("truth: scatterers at columns {}", columns.join(", "));
                    (size.echoes(&scene), Some(truth))
                }
            };
            Ok(Prepared {
                data,
                reference: size.azimuth_filter(),
                size: (size.slow, size.fast),
                truth,
            })
        }
        (other, _) => Err(AppError::Param(format!(
            "{} does not run across ranks; pulse-doppler and sar do",
            other.name()
        ))),
    }
}

/// Generated input is held whole before the ranks share it, and `--size` allows up to
/// 65536 × 65536 values (32 GiB): a size this process cannot allocate is an error naming it,
/// where the generator's own allocation would abort the process halfway ("memory allocation
/// … failed"). The probe is freed at once; nothing is touched.
fn room_for_input(m: usize, n: usize) -> Result<(), AppError> {
    let values = m.saturating_mul(n);
    let mut probe: Vec<Complex32> = Vec::new();
    probe.try_reserve_exact(values).map_err(|_| {
        let gib = values as f64 * std::mem::size_of::<Complex32>() as f64 / (1u64 << 30) as f64;
        AppError::Param(format!(
            "--size {m}x{n}: the generated input ({gib:.1} GiB) does not fit in this \
             process's memory; give a smaller size"
        ))
    })
}

/// What one rank found in its last frame, and its frame times.
struct RankOutcome {
    result: String,
    sent: Vec<u64>,
    image: Option<Vec<f32>>,
    frames: Vec<Duration>,
    /// The whole process's CPU time over each frame (every rank's work, with threads).
    cpu: Vec<Duration>,
}

/// CPU time of this process so far (all its threads).
fn process_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map_or(Duration::ZERO, Duration::from)
}

/// Runs the app's frames as this rank of `cl`'s job.
fn rank_main(cl: &Cluster<'_>, run: &DistRun, input: &Prepared) -> Result<RankOutcome, AppError> {
    let mut frames = Vec::with_capacity(run.frames);
    let mut cpu = Vec::with_capacity(run.frames);
    let mut last = None;
    for _ in 0..run.frames.max(1) {
        let before = cl.net_bytes();
        let (start, cpu_start) = (Instant::now(), process_cpu());
        let found = frame(cl, run, input)?;
        frames.push(start.elapsed());
        cpu.push(process_cpu().saturating_sub(cpu_start));
        let sent = cl
            .net_bytes()
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect();
        last = Some((found, sent));
        if let Some(bar) = run.progress.as_ref().filter(|_| cl.rank().0 == 0) {
            bar.inc(1);
        }
    }
    // At least one frame ran: `max(1)` above.
    let ((result, image), sent) = last.ok_or(AppError::Param("no frame ran".into()))?;
    Ok(RankOutcome {
        result,
        sent,
        image,
        frames,
        cpu,
    })
}

/// One frame: the result in words and SAR's image on rank 0 where kept.
fn frame(
    cl: &Cluster<'_>,
    run: &DistRun,
    input: &Prepared,
) -> Result<(String, Option<Vec<f32>>), AppError> {
    let (m, n) = input.size;
    match run.app {
        App::PulseDoppler => {
            let found: Detection = distributed::pulse_doppler(
                cl,
                Device::Cpu,
                &input.data,
                &input.reference,
                m,
                run.dist,
                false,
            )?;
            let text = if (m, n) == (pulse_doppler::M, pulse_doppler::N) {
                pulse_doppler::describe(&found.cedr_output())
            } else if found.target {
                format!(
                    "Doppler bin {}, range bin {}",
                    found.doppler_bin, found.range_bin
                )
            } else {
                "no target: the range-Doppler map is flat".to_string()
            };
            Ok((text, None))
        }
        _ => {
            let size = Size { slow: m, fast: n };
            let found: SarImage = distributed::sar(
                cl,
                Device::Cpu,
                &input.data,
                size,
                &input.reference,
                run.dist,
                run.keep_image,
            )?;
            let text = format!(
                "peak {:.4} at row {}, column {}",
                found.peak, found.peak_row, found.peak_col
            );
            Ok((text, found.image))
        }
    }
}

/// The analytic minimum of a frame, `[from][to]`, with the rows spread by `dist`.
fn minimum(
    app: App,
    (m, n): (usize, usize),
    ranks: usize,
    dist: Distribution,
    keep_image: bool,
) -> Vec<Vec<u64>> {
    let turns = match app {
        App::PulseDoppler => vec![transpose_bytes((dist, dist), m, 2 * n, 8, ranks)],
        _ => vec![
            transpose_bytes((dist, dist), m, n, 8, ranks),
            transpose_bytes((dist, dist), n, m, 8, ranks),
        ],
    };
    let rows_of = |rank: usize| {
        dist.rows_of(Rank(rank as u16), m, ranks)
            .iter()
            .map(|r| r.len())
            .sum::<usize>()
    };
    (0..ranks)
        .map(|from| {
            (0..ranks)
                .map(|to| {
                    let turned: u64 = turns.iter().map(|t| t[from][to]).sum();
                    let peaks = if from == to { 0 } else { 24 };
                    let image = if app == App::Sar && keep_image && to == 0 && from != 0 {
                        (rows_of(from) * n * 4) as u64
                    } else {
                        0
                    };
                    turned + peaks + image
                })
                .collect()
        })
        .collect()
}

fn median(frames: &[Duration]) -> f64 {
    let mut sorted = frames.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Runs `run` across ranks: MPI's under `mpirun`, else `run.ranks` threads. Every MPI rank
/// returns its report; only rank 0's is meant to be printed (`DistReport` says which rank made
/// it through `printing`).
pub fn run(run: &DistRun) -> Result<(DistReport, bool), AppError> {
    let input = prepare(run)?;
    match under_mpirun() {
        Some(world) => {
            if let Some(asked) = run.ranks.filter(|&asked| asked != world) {
                return Err(AppError::Param(format!(
                    "--ranks {asked} under an mpirun of {world} processes: the job's size decides; drop --ranks or make them agree"
                )));
            }
            run_mpi(run, &input, world)
        }
        None => {
            let ranks = run.ranks.unwrap_or(1);
            if ranks == 0 || ranks > rimms_dist::MAX_RANKS {
                return Err(AppError::Param(format!(
                    "--ranks takes 1 … {}, got {ranks}",
                    rimms_dist::MAX_RANKS
                )));
            }
            // A rank waits for the others at most this long: a frame of a big scene in a
            // debug build takes seconds.
            let patience = Duration::from_secs(600);
            let outcomes = rimms_dist::on_threads(ranks, patience, |cl| {
                rank_main(cl, run, &input).map(|outcome| (outcome, cl.net_messages()))
            })?;
            let outcomes = outcomes.into_iter().collect::<Result<Vec<_>, _>>()?;
            let mut report = report(run, &input, ranks, Job::Threads, &outcomes[0].0);
            report.sent = outcomes.iter().map(|(o, _)| o.sent.clone()).collect();
            report.messages = outcomes
                .iter()
                .map(|(_, m)| m.iter().map(|n| n / run.frames.max(1) as u64).collect())
                .collect();
            Ok((report, true))
        }
    }
}

fn report(
    run: &DistRun,
    input: &Prepared,
    ranks: usize,
    job: Job,
    first: &RankOutcome,
) -> DistReport {
    DistReport {
        app: run.app.name().to_string(),
        ranks,
        job,
        size: input.size,
        median_ms: median(&first.frames),
        result: first.result.clone(),
        truth: input.truth.clone(),
        sent: vec![first.sent.clone()],
        minimum: minimum(run.app, input.size, ranks, run.dist, run.keep_image),
        dist: run.dist.to_string(),
        messages: Vec::new(),
        cpu_ms: median(&first.cpu),
        image: first.image.clone(),
    }
}

#[cfg(feature = "mpi")]
fn run_mpi(run: &DistRun, input: &Prepared, world: usize) -> Result<(DistReport, bool), AppError> {
    let transport =
        rimms_dist::Mpi::start().map_err(|e| AppError::Param(format!("cannot start MPI: {e}")))?;
    let first = rimms_dist::Transport::rank(&transport) == Rank(0);
    let cl = Cluster::new(rimms::Runtime::new()?, &transport);
    let outcome = rank_main(&cl, run, input)?;
    // Every rank's bytes to rank 0, after the frames they count.
    let mut table = cl.alloc::<u64>(world, world, Distribution::BlockRows)?;
    cl.compute(
        &mut table,
        0..world,
        true,
        "bytes sent",
        |_, _, mut mine| {
            mine.host_write()?.copy_from_slice(&outcome.sent);
            Ok(())
        },
    )?;
    cl.gather(&mut table, Rank(0))?;
    let mut report = report(run, input, world, Job::Mpi, &outcome);
    if first {
        let all = cl.read(&table, 0..world)?;
        report.sent = all.chunks(world).map(<[u64]>::to_vec).collect();
    }
    Ok((report, first))
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &DistRun, _: &Prepared, world: usize) -> Result<(DistReport, bool), AppError> {
    Err(AppError::Param(format!(
        "this rimms runs under mpirun ({world} processes) but was built without MPI: build it with `cargo build --release -p rimms-cli --features mpi` (Open MPI's headers and libclang), or run it without mpirun and with --ranks N for ranks as threads"
    )))
}
