//! `rimms bench`: every pipeline on every mapping this machine has, in baseline (CEDR) and
//! tracked (RIMMS) mode, as a table of medians, speedups and bytes moved.

use crate::pipelines::{self, App};
use rimms::{Device, ExecMode, LinkModel, Runtime, SimConfig};
use std::time::Duration;

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    pub app: App,
    pub map: &'static str,
    pub baseline: Cell,
    pub rimms: Cell,
    pub minimum_bytes: u64,
}

/// One mode's figures for one row.
#[derive(Debug)]
pub struct Cell {
    pub median: Duration,
    pub bytes: u64,
    pub copies: u64,
    pub allocations: u64,
    pub checksum: f64,
}

/// The mappings available here: the CPU alone, and a simulated PCIe-attached device whose
/// copies take the modelled time (the stand-in for a GPU or FPGA card until those backends
/// land).
pub fn mappings() -> Vec<(&'static str, Device, SimConfig)> {
    let pcie = SimConfig {
        link: LinkModel::PCIE,
        simulate_link: true,
        ..SimConfig::default()
    };
    vec![
        ("cpu", Device::Cpu, pcie.clone()),
        ("sim-pcie", Device::Sim(0), pcie),
    ]
}

fn measure(
    app: App,
    device: Device,
    sim: &SimConfig,
    mode: ExecMode,
    frames: usize,
) -> rimms::Result<Cell> {
    let rt = Runtime::builder().sim(sim.clone()).mode(mode).build()?;
    // One warm-up frame so FFT plans and pools are in place, then measure.
    pipelines::run(&rt, app, device, 1)?;
    rt.reset_stats();
    let allocations =
        |rt: &Runtime| -> u64 { rt.stats().spaces.iter().map(|s| s.allocations).sum() };
    let before = allocations(&rt);
    let (mut times, checksum) = pipelines::run(&rt, app, device, frames)?;
    times.sort();
    let stats = rt.stats();
    Ok(Cell {
        median: times[times.len() / 2],
        bytes: stats.total_bytes(),
        copies: stats.total_copies(),
        allocations: allocations(&rt) - before,
        checksum,
    })
}

/// Runs the table; fails on a runtime error, or if the two modes disagree on a result.
pub fn run(
    frames: usize,
    apps: &[App],
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &app in apps {
        for (map, device, sim) in mappings() {
            progress(&format!("{} on {map}", app.name()));
            let baseline = measure(app, device, &sim, ExecMode::Baseline, frames)
                .map_err(|e| e.to_string())?;
            let rimms =
                measure(app, device, &sim, ExecMode::Tracked, frames).map_err(|e| e.to_string())?;
            // Both modes run the same kernels on the same data: results must be identical.
            if baseline.checksum != rimms.checksum {
                return Err(format!(
                    "{} on {map}: baseline and rimms results differ ({} vs {})",
                    app.name(),
                    baseline.checksum,
                    rimms.checksum
                ));
            }
            let minimum_bytes = if device == Device::Cpu {
                0
            } else {
                pipelines::minimum_bytes(app, frames)
            };
            rows.push(Row {
                app,
                map,
                baseline,
                rimms,
                minimum_bytes,
            });
        }
    }
    Ok(rows)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

pub fn table(rows: &[Row], frames: usize) -> String {
    let mut out = format!(
        "{frames} frames per cell; times are the median frame; bytes are totals over the frames\n\n\
         {:<6} {:<9} {:>12} {:>10} {:>8} {:>14} {:>12} {:>12} {:>11} {:>11}\n",
        "app", "map", "baseline ms", "rimms ms", "speedup", "baseline MiB", "rimms MiB",
        "minimum MiB", "allocs base", "allocs rimms"
    );
    for r in rows {
        out += &format!(
            "{:<6} {:<9} {:>12.3} {:>10.3} {:>7.2}x {:>14.2} {:>12.2} {:>12.2} {:>11} {:>11}\n",
            r.app.name(),
            r.map,
            ms(r.baseline.median),
            ms(r.rimms.median),
            r.baseline.median.as_secs_f64() / r.rimms.median.as_secs_f64(),
            mib(r.baseline.bytes),
            mib(r.rimms.bytes),
            mib(r.minimum_bytes),
            r.baseline.allocations,
            r.rimms.allocations,
        );
    }
    out
}

pub fn json(rows: &[Row], frames: usize) -> String {
    let cell = |c: &Cell| {
        format!(
            "{{\"median_ms\":{:.6},\"bytes\":{},\"copies\":{},\"allocations\":{}}}",
            ms(c.median),
            c.bytes,
            c.copies,
            c.allocations
        )
    };
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"app\":\"{}\",\"map\":\"{}\",\"frames\":{frames},\"baseline\":{},\"rimms\":{},\"minimum_bytes\":{},\"speedup\":{:.4}}}",
                r.app.name(),
                r.map,
                cell(&r.baseline),
                cell(&r.rimms),
                r.minimum_bytes,
                r.baseline.median.as_secs_f64() / r.rimms.median.as_secs_f64()
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}
