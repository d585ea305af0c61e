//! `rimms bench --ranks 1,2,4`: pulse Doppler and SAR at each rank count, as a table of frame
//! time, speedup over one rank and bytes on the network per peer against the analytic
//! minimum; with `--modelled`, the same runs on in-process ranks turned into a strong-scaling
//! model for real links.
//!
//! Measured: under `mpirun` where this machine has one and this build has MPI (each rank
//! count is its own `mpirun -np N rimms run … --json`), else ranks as threads of this
//! process. On a machine with fewer cores than ranks the times say little; the bytes are
//! exact either way.
//!
//! Modelled: the frame's CPU time, measured on in-process ranks (every rank's work in this
//! process, so it grows with the ranks' own overheads), divided evenly among the ranks, plus
//! the busiest rank's network time on a link: its bytes over the link's bandwidth and its
//! messages times the link's latency. That assumes perfectly balanced compute (block rows are
//! within one row of even), no overlap of compute with communication and no contention in the
//! network: an upper bound on what the link allows, a lower bound on the time.

use crate::apps::{App, AppError};
use crate::ranks::{self, DistReport, DistRun};
use serde::Serialize;
use std::process::Command;

/// A link of the strong-scaling model.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Link {
    /// Its name in the table.
    pub name: &'static str,
    /// Bytes per second one rank can send.
    pub bandwidth: f64,
    /// Seconds per message.
    pub latency: f64,
}

/// The links the model is stated for: 10 Gb Ethernet (line rate, MPI over TCP's typical
/// latency) and 100 Gb/s InfiniBand (EDR/HDR100 line rate, RDMA latency).
pub const LINKS: [Link; 2] = [
    Link {
        name: "10 GbE",
        bandwidth: 1.25e9,
        latency: 10e-6,
    },
    Link {
        name: "100 Gb/s IB",
        bandwidth: 12.5e9,
        latency: 1.5e-6,
    },
];

/// One rank count of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Ranks.
    pub ranks: usize,
    /// The run's report (rank 0's, with every rank's bytes).
    pub report: DistReport,
    /// Speedup of the median frame over one rank's.
    pub speedup: f64,
    /// The modelled frame per link, milliseconds (with `--modelled`).
    pub modelled_ms: Vec<f64>,
}

/// Whether `mpirun` runs here and this build can be its ranks.
fn mpi_available() -> bool {
    cfg!(feature = "mpi")
        && Command::new("mpirun")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// The busiest rank's time on `link`, seconds.
fn network_seconds(report: &DistReport, link: &Link) -> f64 {
    report
        .sent
        .iter()
        .enumerate()
        .map(|(rank, bytes)| {
            let messages: u64 = report.messages.get(rank).map_or(0, |m| m.iter().sum());
            bytes.iter().sum::<u64>() as f64 / link.bandwidth + messages as f64 * link.latency
        })
        .fold(0.0, f64::max)
}

/// What `rimms bench --ranks` runs across the rank counts: generated input of this size
/// (`None`: each app's default) with its rows spread by `dist` (`None`: block rows).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Pulses × samples.
    pub size: Option<(usize, usize)>,
    /// How the rows are spread.
    pub dist: Option<rimms_dist::Distribution>,
}

/// Runs `base` at each of `counts` ranks: under `mpirun` when `modelled` is off and MPI is
/// here, else as threads.
pub fn run(base: &DistRun, counts: &[usize], modelled: bool) -> Result<Vec<Row>, AppError> {
    let over_mpi = !modelled && mpi_available();
    let mut rows: Vec<Row> = Vec::new();
    for &ranks in counts {
        let report = if over_mpi {
            run_under_mpirun(base, ranks)?
        } else {
            let run = DistRun {
                ranks: Some(ranks),
                ..base.clone()
            };
            ranks::run(&run)?.0
        };
        let modelled_ms = if modelled {
            LINKS
                .iter()
                .map(|link| report.cpu_ms / ranks as f64 + network_seconds(&report, link) * 1e3)
                .collect()
        } else {
            Vec::new()
        };
        rows.push(Row {
            ranks,
            report,
            speedup: 1.0,
            modelled_ms,
        });
    }
    if let Some(one) = rows
        .iter()
        .find(|r| r.ranks == 1)
        .map(|r| r.report.median_ms)
    {
        for row in &mut rows {
            row.speedup = one / row.report.median_ms;
        }
    }
    Ok(rows)
}

/// `mpirun -np RANKS rimms run APP … --json`, read back.
fn run_under_mpirun(base: &DistRun, ranks: usize) -> Result<DistReport, AppError> {
    let exe = std::env::current_exe().map_err(|e| AppError::Param(e.to_string()))?;
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(exe)
        .args(["run", base.app.name(), "--json", "--frames"])
        .arg(base.frames.to_string());
    command.args(["--dist", &base.dist.to_string()]);
    if let Some((m, n)) = base.size {
        command.args(["--size", &format!("{m}x{n}")]);
    }
    if let Some(dir) = &base.input {
        command.arg("--input").arg(dir);
    }
    let out = command
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map_err(|e| AppError::Param(format!("cannot run mpirun: {e}")))?;
    if !out.status.success() {
        return Err(AppError::Param(format!(
            "mpirun -np {ranks} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout.lines().find(|l| l.starts_with('{')).unwrap_or("");
    DistReport::from_json(json)
        .ok_or_else(|| AppError::Param(format!("mpirun -np {ranks} printed no report: {stdout}")))
}

/// The table as text: one line per rank count.
pub fn table(app: App, rows: &[Row], modelled: bool) -> String {
    let first = rows.first().map(|r| &r.report);
    let mut text = format!(
        "{} across ranks, {} pulses × {} samples ({}):\n",
        app.name(),
        first.map_or(0, |r| r.size.0),
        first.map_or(0, |r| r.size.1),
        match first.map(|r| r.job) {
            Some(ranks::Job::Mpi) => "MPI processes under mpirun",
            _ if modelled => "modelled from in-process ranks",
            _ => "ranks as threads of this process",
        }
    );
    let per_peer = |m: &[Vec<u64>]| m.iter().flatten().copied().max().unwrap_or(0);
    if modelled {
        text.push_str(" ranks  cpu ms/rank");
        for link in &LINKS {
            text.push_str(&format!("  {:>11} ms  speedup", link.name));
        }
        text.push_str("  MiB/peer (max)\n");
        let one: Vec<f64> = rows
            .iter()
            .find(|r| r.ranks == 1)
            .map(|r| r.modelled_ms.clone())
            .unwrap_or_default();
        for row in rows {
            text.push_str(&format!(
                "{:>6}  {:>11.2}",
                row.ranks,
                row.report.cpu_ms / row.ranks as f64
            ));
            for (i, ms) in row.modelled_ms.iter().enumerate() {
                let speedup = one.get(i).map_or(f64::NAN, |o| o / ms);
                text.push_str(&format!("  {ms:>14.2}  {speedup:>6.2}x"));
            }
            text.push_str(&format!(
                "  {:>14.2}\n",
                per_peer(&row.report.sent) as f64 / (1 << 20) as f64
            ));
        }
        text.push_str(&format!(
            "model: a frame = the process's CPU time over it on in-process ranks ÷ ranks + the busiest rank's bytes ÷ bandwidth + its messages × latency; {}\n",
            LINKS
                .iter()
                .map(|l| format!("{}: {} GB/s, {} µs", l.name, l.bandwidth / 1e9, l.latency * 1e6))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    } else {
        text.push_str(" ranks   median ms  speedup  MiB/peer (max)  minimum  at minimum\n");
        for row in rows {
            let r = &row.report;
            text.push_str(&format!(
                "{:>6}  {:>10.2}  {:>6.2}x  {:>14.2}  {:>7.2}  {}\n",
                row.ranks,
                r.median_ms,
                row.speedup,
                per_peer(&r.sent) as f64 / (1 << 20) as f64,
                per_peer(&r.minimum) as f64 / (1 << 20) as f64,
                if r.at_minimum() { "yes" } else { "NO" }
            ));
        }
    }
    text
}
