//! `rimms bench`: apps on every mapping this machine has, in baseline (CEDR), rimms and native
//! mode, as a table of medians, speedups and bytes moved, with a legend of what the columns
//! mean ([`LEGEND`], also in `--help` and under the chart).

use crate::apps::{self, App, AppResult, Mapping, Mode, Options, Scenario, Source};
use indicatif::{ProgressBar, ProgressStyle};
use rimms::{LinkModel, SimConfig};
use std::time::Duration;

/// What the table's words mean; printed under the table, in `rimms bench --help` and under
/// the chart.
pub const LEGEND: &str = "\
baseline  CEDR's behaviour: every call on a device copies its inputs in and its outputs out
rimms     the same app with RIMMS tracking the data: it moves only when a kernel in another memory needs it
native    hand-written code with the fewest copies for the mapping: the floor both are measured against
speedup   baseline time ÷ rimms time (above 1: RIMMS is faster); times are the median frame
MiB       bytes moved between memories (host and devices), summed over all frames
minimum   what native moves: the least this app on this mapping can move
-         no hand-written version for this mapping (auto: calls are placed at run time; gpu: see the cudarc examples)
maps      cpu: all on the CPU; sim: a simulated card behind a modelled PCIe link; fpga, fpga-cpu: the FPGA
          (RIMMS_FPGA_BOARD or the emulator) for FFT and ZIP, or FFT only; auto: the scheduler over the CPU and two sim cards";

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    pub app: App,
    /// The mapping's name, as `rimms run --map` takes it.
    pub map: &'static str,
    pub baseline: Cell,
    pub rimms: Cell,
    /// Hand-written code, where the mapping has it.
    pub native: Option<Cell>,
}

/// One mode's figures for one row.
#[derive(Debug)]
pub struct Cell {
    pub median: Duration,
    pub bytes: u64,
    pub copies: u64,
    pub allocations: u64,
    pub result: AppResult,
}

/// The mappings available here: the CPU alone, a simulated PCIe-attached card whose copies
/// take the modelled time, the FPGA (the board named by `RIMMS_FPGA_BOARD`, else the
/// register-level emulator) with and without its ZIP cores, every call left to the
/// data-aware scheduler over the CPU and two such cards, and GPU 0 where there is one.
pub fn mappings() -> Vec<(&'static str, Mapping, SimConfig)> {
    let pcie = SimConfig {
        link: LinkModel::PCIE,
        simulate_link: true,
        ..SimConfig::default()
    };
    let mut all = vec![
        Mapping::Cpu,
        Mapping::Sim,
        Mapping::Fpga,
        Mapping::FpgaCpu,
        Mapping::Auto,
    ];
    if gpu_present() {
        all.push(Mapping::Gpu);
    }
    // The names are `rimms run --map`'s, so that a row can be rerun as it is labelled.
    all.into_iter()
        .map(|m| (m.name(), m, pcie.clone()))
        .collect()
}

/// Whether GPU 0 can be used; the reason it cannot goes to the log (`RUST_LOG=info`).
fn gpu_present() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PRESENT.get_or_init(|| match rimms::Runtime::builder().gpu(0).build() {
        Ok(_) => true,
        Err(e) => {
            tracing::info!("no gpu row in the table: {e}");
            false
        }
    })
}

/// Whether hand-written (native) code exists for `mapping`: not for the GPU (its hand-written
/// FZF is an example of its own), nor for calls left to the scheduler.
fn has_native(mapping: Mapping) -> bool {
    !matches!(mapping, Mapping::Auto | Mapping::Gpu)
}

/// A bar with one tick per (app, mapping, mode) cell that [`run`] measures, on stderr. It
/// draws only when stderr is a terminal, so piped output and `--json` stay clean.
pub fn progress_bar(apps: &[App]) -> ProgressBar {
    let per_app: usize = mappings()
        .iter()
        .map(|(_, mapping, _)| 2 + usize::from(has_native(*mapping)))
        .sum();
    let bar = ProgressBar::new((apps.len() * per_app) as u64);
    // The template is a constant; the default style is only a fallback that never runs.
    let style = ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn measure(
    app: App,
    mapping: Mapping,
    sim: &SimConfig,
    mode: Mode,
    frames: usize,
) -> Result<Cell, String> {
    let opts = Options {
        sim: sim.clone(),
        ..Options::new(mode, mapping).frames(frames)
    };
    let run = apps::run(app, &Source::Generated(Scenario::default()), &opts)
        .map_err(|e| e.to_string())?
        .run;
    Ok(Cell {
        median: run.median(),
        bytes: run.total_bytes(),
        copies: run.links.iter().map(|l| l.copies).sum(),
        allocations: run.allocations,
        result: run.result,
    })
}

/// Runs the table; fails on an error, or if the modes disagree on a result. `progress` is
/// told each cell ("fzf on cpu: rimms") as it starts.
pub fn run(
    frames: usize,
    apps: &[App],
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &app in apps {
        for (map, mapping, sim) in mappings() {
            let mut cell = |mode: Mode| {
                progress(&format!("{} on {map}: {}", app.name(), mode.name()));
                measure(app, mapping, &sim, mode, frames)
            };
            let baseline = cell(Mode::Baseline)?;
            let rimms = cell(Mode::Rimms)?;
            let native = if has_native(mapping) {
                Some(cell(Mode::Native)?)
            } else {
                None
            };
            // All modes run the same kernels on the same data: results must be identical.
            let others =
                std::iter::once(("rimms", &rimms)).chain(native.as_ref().map(|n| ("native", n)));
            for (mode, cell) in others {
                if cell.result != baseline.result {
                    return Err(format!(
                        "{} on {map}: baseline and {mode} results differ ({:?} vs {:?})",
                        app.name(),
                        baseline.result,
                        cell.result
                    ));
                }
            }
            rows.push(Row {
                app,
                map,
                baseline,
                rimms,
                native,
            });
        }
    }
    Ok(rows)
}

/// Milliseconds, as the tables print them.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// MiB, as the tables print them.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Whether a row's times come from the emulator's timing model rather than from hardware.
fn is_modelled(row: &Row, model: Option<&str>) -> Option<String> {
    let fpga = row.map.starts_with("fpga");
    model.filter(|_| fpga).map(str::to_string)
}

/// The table; `model` names the FPGA emulator's timing model when its rows are modelled.
pub fn table(rows: &[Row], frames: usize, model: Option<&str>) -> String {
    let mut out = format!(
        "{per_cell} per cell; times are the median frame; bytes are totals over the frames\n\n\
         {:<13} {:<9} {:>12} {:>10} {:>10} {:>8} {:>14} {:>12} {:>12} {:>11} {:>11}\n",
        "app",
        "map",
        "baseline ms",
        "rimms ms",
        "native ms",
        "speedup",
        "baseline MiB",
        "rimms MiB",
        "minimum MiB",
        "allocs base",
        "allocs rimms",
        per_cell = crate::human::count(frames as u64, "frame", "frames")
    );
    for r in rows {
        // The minimum is what hand-written code moves; mappings without it show a dash.
        let (native_ms, minimum) = match &r.native {
            Some(n) => (
                format!("{:.3}", ms(n.median)),
                format!("{:.2}", mib(n.bytes)),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        out += &format!(
            "{:<13} {:<9} {:>12.3} {:>10.3} {:>10} {:>7.2}x {:>14.2} {:>12.2} {:>12} {:>11} {:>11}\n",
            r.app.name(),
            r.map,
            ms(r.baseline.median),
            ms(r.rimms.median),
            native_ms,
            r.baseline.median.as_secs_f64() / r.rimms.median.as_secs_f64(),
            mib(r.baseline.bytes),
            mib(r.rimms.bytes),
            minimum,
            r.baseline.allocations,
            r.rimms.allocations,
        );
    }
    out.push('\n');
    if let Some(model) = model {
        out += &format!(
            "fpga rows are modelled: the emulator with the {model} timing model (modelled DMA, core,\n\
             register and host-copy times, on top of the emulator's own work on this machine)\n\n"
        );
    }
    out.push_str(LEGEND);
    out.push('\n');
    out
}

/// The rows as JSON; FPGA rows name the timing model `model` when they are modelled.
pub fn json(rows: &[Row], frames: usize, model: Option<&str>) -> String {
    let cell = |c: &Cell| {
        serde_json::json!({
            "median_ms": ms(c.median),
            "bytes": c.bytes,
            "copies": c.copies,
            "allocations": c.allocations,
        })
    };
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "app": r.app.name(),
                "map": r.map,
                "frames": frames,
                "baseline": cell(&r.baseline),
                "rimms": cell(&r.rimms),
                "native": r.native.as_ref().map(cell),
                "minimum_bytes": r.native.as_ref().map(|n| n.bytes),
                "speedup": r.baseline.median.as_secs_f64() / r.rimms.median.as_secs_f64(),
                "modelled": is_modelled(r, model),
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}
