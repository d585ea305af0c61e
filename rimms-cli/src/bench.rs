//! `rimms bench`: apps on every mapping this machine has, in baseline (CEDR), rimms (with and
//! without call merging) and native mode, as a table of frame times (median, min, max),
//! speedups with their spread and bytes moved, with a legend of what the columns mean
//! ([`crate::legend`], also in `--help` and under the chart). The default table fits 100
//! columns; `--wide` shows every column.
//!
//! The modes of one row run interleaved, frame by frame after a few untimed warm-up frames,
//! so a slow spell of a shared machine hits them alike; a ratio is the median of the per-frame
//! ratios with a 95 % confidence interval for that median (order statistics, no assumption on
//! the distribution). One whose interval contains 1.0 is printed as "can't tell" with the
//! frames it rests on, and as "inconclusive" where that interval also spans more than 2x: a
//! wide interval around 1.0 says the frames were too few or too noisy, not that the modes
//! take the same time. The chart ([`crate::plot`]) draws the same figures.

use crate::apps::{self, App, AppResult, Mapping, Mode, Options};
use indicatif::ProgressBar;
use rimms::{LinkModel, SimConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    pub app: App,
    /// The mapping's name, as `rimms run --map` takes it.
    pub map: &'static str,
    pub baseline: Cell,
    pub rimms: Cell,
    /// Rimms with call merging off: memory management alone.
    pub unmerged: Cell,
    /// Rimms with copies ahead of their calls off (merging on): the gain from overlap is
    /// what separates it from `rimms`.
    pub no_prefetch: Cell,
    /// Hand-written code, where the mapping has it.
    pub native: Option<Cell>,
}

/// One mode's figures for one row.
#[derive(Debug)]
pub struct Cell {
    pub median: Duration,
    /// Every timed frame, in order (frame i of every mode of a row ran in the same round).
    pub times: Vec<Duration>,
    pub bytes: u64,
    pub copies: u64,
    pub allocations: u64,
    /// Modelled time over the timed frames, by virtual-clock term (zero where not modelled).
    pub modelled: [Duration; rimms::drivers::vclock::TERMS],
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

/// The bench's progress bar: every frame of every row, warm-up included ([`crate::progress`]).
pub fn progress_bar(apps: &[App], frames: usize) -> ProgressBar {
    let rows = apps.len() * mappings().len();
    crate::progress::frames((rows * (WARMUP_FRAMES + frames)) as u64)
}

/// Untimed frames each mode runs first (caches, plans, pools and the first allocations).
pub const WARMUP_FRAMES: usize = 2;

/// Time the timed frames of one row may take before the row stops early (with at least
/// `apps::MIN_FRAMES`): keeps the default table near two minutes where an emulated FPGA row
/// takes a second a frame, and changes nothing for the rows that take milliseconds.
pub const ROW_BUDGET: Duration = Duration::from_secs(3);

fn cell(run: apps::Run<AppResult>) -> Cell {
    Cell {
        median: run.median(),
        bytes: run.total_bytes(),
        copies: run.links.iter().map(|l| l.copies).sum(),
        allocations: run.allocations,
        modelled: run.modelled,
        times: run.frame_times,
        result: run.result,
    }
}

impl Cell {
    /// The fastest timed frame.
    pub fn min(&self) -> Duration {
        self.times.iter().copied().min().unwrap_or_default()
    }

    /// The slowest timed frame.
    pub fn max(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or_default()
    }

    /// "1.234 (1.100–2.345)" milliseconds.
    fn show(&self) -> String {
        format!(
            "{:.3} ({:.3}–{:.3})",
            ms(self.median),
            ms(self.min()),
            ms(self.max())
        )
    }
}

/// A ratio of two modes' frame times: the median of the per-frame ratios and a 95 %
/// confidence interval for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The frames (per-frame ratios) it rests on.
    pub frames: usize,
}

/// What a ratio's interval lets one say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The interval lies above or below 1.0: one mode is faster.
    Measured,
    /// The interval holds 1.0.
    CantTell,
    /// The interval holds 1.0 and spans more than [`INCONCLUSIVE_SPAN`]: more frames would
    /// narrow it.
    Inconclusive,
}

/// An interval around 1.0 whose high end is more than this many times its low end says
/// nothing about the modes, only that there were too few or too noisy frames.
pub const INCONCLUSIVE_SPAN: f64 = 2.0;

impl Ratio {
    /// `a ÷ b` frame by frame (the frames of one interleaved round pair up).
    pub fn of(a: &Cell, b: &Cell) -> Ratio {
        let mut r: Vec<f64> = a
            .times
            .iter()
            .zip(&b.times)
            .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64().max(1e-12))
            .collect();
        r.sort_by(f64::total_cmp);
        let n = r.len();
        if n == 0 {
            return Ratio {
                median: f64::NAN,
                low: f64::NAN,
                high: f64::NAN,
                frames: 0,
            };
        }
        let median = if n % 2 == 1 {
            r[n / 2]
        } else {
            (r[n / 2 - 1] + r[n / 2]) / 2.0
        };
        // The median lies between the j-th and the k-th smallest of n samples with about
        // 95 % confidence for j = n/2 − 0.98·√n and k = n/2 + 1 + 0.98·√n (the binomial's
        // normal approximation), clamped to the samples there are (1-based).
        let half = 0.98 * (n as f64).sqrt();
        let j = ((n as f64 / 2.0 - half).floor() as usize).clamp(1, n);
        let k = ((n as f64 / 2.0 + 1.0 + half).ceil() as usize).clamp(1, n);
        Ratio {
            median,
            low: r[j - 1],
            high: r[k - 1],
            frames: n,
        }
    }

    /// What the interval lets one say.
    pub fn verdict(&self) -> Verdict {
        if !(self.low <= 1.0 && 1.0 <= self.high) {
            Verdict::Measured
        } else if self.high > INCONCLUSIVE_SPAN * self.low {
            Verdict::Inconclusive
        } else {
            Verdict::CantTell
        }
    }

    /// The figure without its interval, the same in the table and on the chart: "1.84x",
    /// "can't tell, 20 frames" or "inconclusive, 3 frames".
    pub fn headline(&self) -> String {
        let frames = crate::human::count(self.frames as u64, "frame", "frames");
        match self.verdict() {
            Verdict::Measured => format!("{:.2}x", self.median),
            Verdict::CantTell => format!("can't tell, {frames}"),
            Verdict::Inconclusive => format!("inconclusive, {frames}"),
        }
    }

    /// The headline and the interval: "1.84x [1.70–1.95]", "can't tell, 20 frames
    /// [0.97–1.04]".
    pub fn show(&self) -> String {
        format!("{} [{:.2}–{:.2}]", self.headline(), self.low, self.high)
    }

    /// [`Ratio::show`] without the frame count, for a table that has a column of it:
    /// "1.84x [1.70–1.95]", "can't tell [0.97–1.04]", "inconclusive [0.40–17.47]".
    pub fn show_short(&self) -> String {
        let words = match self.verdict() {
            Verdict::Measured => format!("{:.2}x", self.median),
            Verdict::CantTell => "can't tell".to_string(),
            Verdict::Inconclusive => "inconclusive".to_string(),
        };
        format!("{words} [{:.2}–{:.2}]", self.low, self.high)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "frames": self.frames,
            "verdict": match self.verdict() {
                Verdict::Measured => "measured",
                Verdict::CantTell => "cant_tell",
                Verdict::Inconclusive => "inconclusive",
            },
        })
    }
}

/// The names of a row's modes, in the order [`run`] runs them; the last only where the
/// mapping has native code.
pub const MODE_NAMES: [&str; 5] = ["baseline", "rimms", "unmerged", "no-prefetch", "native"];

/// The trace file of one cell when the bench traces to `base` (`RIMMS_TRACE_FILE`):
/// `trace.json` becomes `trace.fzf.sim.rimms.json`, beside it.
pub fn trace_path(base: &Path, app: &str, map: &str, mode: &str) -> PathBuf {
    let stem = base.file_stem().unwrap_or_default().to_string_lossy();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.{app}.{map}.{mode}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{app}.{map}.{mode}"),
    };
    base.with_file_name(name)
}

/// The trace files a bench of `rows` traced to `base` left (modes without a runtime, such as
/// hand-written code, leave none).
pub fn traces_written(base: &Path, rows: &[Row]) -> Vec<PathBuf> {
    rows.iter()
        .flat_map(|r| {
            MODE_NAMES
                .iter()
                .map(|mode| trace_path(base, r.app.name(), r.map, mode))
        })
        .filter(|p| p.is_file())
        .collect()
}

/// Runs the table; fails on an error, or if the modes disagree on a result. `bar` moves on
/// each frame and shows the row ("fzf on cpu"). With `trace`, every runtime writes its
/// timeline to a file of its own ([`trace_path`]).
pub fn run(
    frames: usize,
    apps: &[App],
    trace: Option<&Path>,
    bar: &ProgressBar,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &app in apps {
        for (map, mapping, sim) in mappings() {
            bar.set_message(format!("{} on {map}", app.name()));
            let opts = |mode: Mode, merge: bool, prefetch: bool, name: &str| Options {
                sim: sim.clone(),
                merge,
                prefetch,
                trace_file: trace.map(|base| trace_path(base, app.name(), map, name)),
                progress: Some(bar.clone()),
                ..Options::new(mode, mapping).frames(frames)
            };
            let [baseline, rimms, unmerged, no_prefetch, native] = MODE_NAMES;
            let mut modes = vec![
                opts(Mode::Baseline, false, false, baseline),
                opts(Mode::Rimms, true, true, rimms),
                opts(Mode::Rimms, false, true, unmerged),
                opts(Mode::Rimms, true, false, no_prefetch),
            ];
            if has_native(mapping) {
                modes.push(opts(Mode::Native, false, false, native));
            }
            let mut cells = apps::run_interleaved(app, &modes, WARMUP_FRAMES, Some(ROW_BUDGET))
                .map_err(|e| format!("{} on {map}: {e}", app.name()))?
                .into_iter()
                .map(cell);
            let missing = || format!("{} on {map}: a mode did not report", app.name());
            let baseline = cells.next().ok_or_else(missing)?;
            let rimms = cells.next().ok_or_else(missing)?;
            let unmerged = cells.next().ok_or_else(missing)?;
            let no_prefetch = cells.next().ok_or_else(missing)?;
            let native = cells.next();
            // All modes run the same kernels on the same data: results must be identical.
            let others = [
                ("rimms", &rimms),
                ("rimms unmerged", &unmerged),
                ("rimms without prefetch", &no_prefetch),
            ]
            .into_iter()
            .chain(native.as_ref().map(|n| ("native", n)));
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
                unmerged,
                no_prefetch,
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

/// Whether a row's times come from the emulator's timing model rather than from hardware:
/// an FPGA row under a model, unless none of its modes charged any modelled time (a mapping
/// that puts none of the app's steps on the FPGA, such as zip3x on fpga-cpu, is measured on
/// this machine like any CPU row).
fn is_modelled(row: &Row, model: Option<&str>) -> Option<String> {
    let fpga = row.map.starts_with("fpga");
    let charged = [&row.baseline, &row.rimms, &row.unmerged, &row.no_prefetch]
        .into_iter()
        .chain(row.native.as_ref())
        .any(|c| c.modelled.iter().any(|d| !d.is_zero()));
    model.filter(|_| fpga && charged).map(str::to_string)
}

/// The table; `model` names the FPGA emulator's timing model when its rows are modelled.
pub fn table(rows: &[Row], frames: usize, model: Option<&str>, wide: bool) -> String {
    let mut out = format!(
        "{per_cell} per cell (fewer where a row's frames took over {budget} s; see `frames`) after \
         {warmup} untimed,\nthe modes of a row interleaved frame by frame; times are the median \
         frame{spread};\nbytes are totals over every frame\n\n",
        per_cell = crate::human::count(frames as u64, "frame", "frames"),
        warmup = WARMUP_FRAMES,
        budget = ROW_BUDGET.as_secs(),
        spread = if wide { " (fastest–slowest)" } else { "" },
    );
    if wide {
        out += &wide_rows(rows);
    } else {
        out += &narrow_rows(rows);
    }
    out.push('\n');
    let inconclusive = rows.iter().any(|r| {
        std::iter::once(Ratio::of(&r.baseline, &r.rimms))
            .chain(
                r.native
                    .iter()
                    .flat_map(|n| [Ratio::of(&r.rimms, n), Ratio::of(&r.unmerged, n)]),
            )
            .any(|ratio| ratio.verdict() == Verdict::Inconclusive)
    });
    if inconclusive {
        out += "inconclusive: run more frames (--frames N) to narrow those intervals\n\n";
    }
    if let Some(model) = model {
        out += &format!(
            "fpga rows are modelled: the host's own work measured here, plus the {model} timing\n\
             model's DMA, core, register, cache-maintenance and host-copy times on a virtual\n\
             clock (the emulator's own time on this machine is not counted)\n\n"
        );
        out += "where an fpga row's frame goes (ms per frame: host work measured here, modelled terms):\n";
        out += &crate::bench_model::breakdown(rows);
        out += &format!(
            "\nthe {model} model beside the paper's ZCU102 figures (docs/fpga-model.md):\n"
        );
        out += &crate::bench_model::against_paper(rows);
        out.push('\n');
    }
    out.push_str(&crate::legend::legend(if wide {
        crate::legend::View::Wide
    } else {
        crate::legend::View::Table
    }));
    out.push('\n');
    out
}

/// The default table's rows, 100 columns: the two modes RIMMS is measured by, their speedup
/// with its interval, and the bytes each moved. The verdict leaves out the frame count, which
/// the `frames` column beside it gives.
fn narrow_rows(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<13} {:<8} {:>6} {:>11} {:>9} {:<25} {:>12} {:>9}\n",
        "app", "map", "frames", "baseline ms", "rimms ms", "speedup", "baseline MiB", "rimms MiB",
    );
    for r in rows {
        let ratio = Ratio::of(&r.baseline, &r.rimms);
        out += &format!(
            "{:<13} {:<8} {:>6} {:>11.3} {:>9.3} {:<25} {:>12.2} {:>9.2}\n",
            r.app.name(),
            r.map,
            r.rimms.times.len(),
            ms(r.baseline.median),
            ms(r.rimms.median),
            ratio.show_short(),
            mib(r.baseline.bytes),
            mib(r.rimms.bytes),
        );
    }
    out
}

/// `--wide`: every column.
fn wide_rows(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<13} {:<9} {:>6} {:>26} {:>26} {:>26} {:>26} {:>26} {:>36} {:>36} {:>36} {:>12} {:>10} {:>12} {:>11} {:>11}\n",
        "app",
        "map",
        "frames",
        "baseline ms",
        "rimms ms",
        "unmerged ms",
        "no prefetch ms",
        "native ms",
        "speedup",
        "vs native",
        "unmerged vs native",
        "baseline MiB",
        "rimms MiB",
        "minimum MiB",
        "allocs base",
        "allocs rimms",
    );
    let dash = || "-".to_string();
    for r in rows {
        // The minimum is what hand-written code moves; mappings without it show a dash.
        let (native_ms, minimum, vs, unmerged_vs) = match &r.native {
            Some(n) => (
                n.show(),
                format!("{:.2}", mib(n.bytes)),
                Ratio::of(&r.rimms, n).show(),
                Ratio::of(&r.unmerged, n).show(),
            ),
            None => (dash(), dash(), dash(), dash()),
        };
        out += &format!(
            "{:<13} {:<9} {:>6} {:>26} {:>26} {:>26} {:>26} {:>26} {:>36} {:>36} {:>36} {:>12.2} {:>10.2} {:>12} {:>11} {:>11}\n",
            r.app.name(),
            r.map,
            r.rimms.times.len(),
            r.baseline.show(),
            r.rimms.show(),
            r.unmerged.show(),
            r.no_prefetch.show(),
            native_ms,
            Ratio::of(&r.baseline, &r.rimms).show(),
            vs,
            unmerged_vs,
            mib(r.baseline.bytes),
            mib(r.rimms.bytes),
            minimum,
            r.baseline.allocations,
            r.rimms.allocations,
        );
    }
    out
}

/// The rows as JSON; FPGA rows name the timing model `model` when they are modelled.
pub fn json(rows: &[Row], frames: usize, model: Option<&str>) -> String {
    let cell = |c: &Cell| {
        serde_json::json!({
            "median_ms": ms(c.median),
            "min_ms": ms(c.min()),
            "max_ms": ms(c.max()),
            "bytes": c.bytes,
            "copies": c.copies,
            "allocations": c.allocations,
            // Per timed frame, by virtual-clock term (zero where nothing is modelled).
            "modelled_ms": rimms::drivers::vclock::Term::ALL
                .iter()
                .zip(&c.modelled)
                .map(|(t, d)| (t.name().to_string(), serde_json::json!(ms(*d) / c.times.len().max(1) as f64)))
                .collect::<serde_json::Map<_, _>>(),
        })
    };
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "app": r.app.name(),
                "map": r.map,
                "frames": frames,
                "timed_frames": r.rimms.times.len(),
                "warmup_frames": WARMUP_FRAMES,
                "baseline": cell(&r.baseline),
                "rimms": cell(&r.rimms),
                "rimms_unmerged": cell(&r.unmerged),
                "rimms_no_prefetch": cell(&r.no_prefetch),
                "native": r.native.as_ref().map(cell),
                "minimum_bytes": r.native.as_ref().map(|n| n.bytes),
                "speedup": Ratio::of(&r.baseline, &r.rimms).median,
                "speedup_ratio": Ratio::of(&r.baseline, &r.rimms).json(),
                "rimms_vs_native": r.native.as_ref().map(|n| Ratio::of(&r.rimms, n).json()),
                "unmerged_vs_native": r.native.as_ref().map(|n| Ratio::of(&r.unmerged, n).json()),
                "modelled": is_modelled(r, model),
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// A cell of frames taking `us` microseconds each, for tests of the table and the chart.
#[cfg(test)]
pub(crate) fn test_cell(us: &[u64]) -> Cell {
    Cell {
        median: Duration::ZERO,
        times: us.iter().map(|&u| Duration::from_micros(u)).collect(),
        bytes: 0,
        copies: 0,
        allocations: 0,
        modelled: Default::default(),
        result: AppResult::Chain(apps::Checksum { checksum: 0.0 }),
    }
}

/// A zip3x row on the cpu mapping with these baseline and rimms frame times (µs), the
/// unmerged rimms frames the same as the merged ones, and no native code.
#[cfg(test)]
pub(crate) fn test_row(baseline_us: &[u64], rimms_us: &[u64]) -> Row {
    Row {
        app: App::Zip3x,
        map: "cpu",
        baseline: test_cell(baseline_us),
        rimms: test_cell(rimms_us),
        unmerged: test_cell(rimms_us),
        no_prefetch: test_cell(rimms_us),
        native: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(ms: &[u64]) -> Cell {
        test_cell(&ms.iter().map(|m| m * 1000).collect::<Vec<_>>())
    }

    /// Per-frame ratios that straddle 1.0 within a narrow interval cannot tell the modes
    /// apart; ones all above it are a speedup, with the interval of the order statistics
    /// (n = 20: the 5th and 16th smallest).
    #[test]
    fn ratios_that_straddle_one_cannot_tell() {
        let a = cell(&[10; 20]);
        let wobbly: Vec<u64> = (0..20).map(|i| if i % 2 == 0 { 9 } else { 11 }).collect();
        let r = Ratio::of(&a, &cell(&wobbly));
        assert_eq!(r.verdict(), Verdict::CantTell);
        assert_eq!(r.show(), "can't tell, 20 frames [0.91–1.11]");
        let faster: Vec<u64> = (1..=20).collect();
        let r = Ratio::of(&cell(&[100; 20]), &cell(&faster));
        assert_eq!(r.verdict(), Verdict::Measured);
        // 100/k sorted ascending: 100/20, 100/19, …; the 5th smallest is 100/16, the 16th 100/5.
        assert_eq!((r.low, r.high), (100.0 / 16.0, 100.0 / 5.0));
        assert_eq!(r.median, (100.0 / 10.0 + 100.0 / 11.0) / 2.0);
        assert!(r.show().starts_with("9.55x ["), "{}", r.show());
    }

    /// Issue 32's case: baseline 6.9 ms against rimms 0.5 ms, with one rimms frame at
    /// 17.7 ms, over 3 frames: the interval [0.39–13.80] holds 1.0 and spans 35x, which says
    /// nothing about the modes: not "no difference", but "run more frames".
    #[test]
    fn a_wide_interval_around_one_is_inconclusive_not_noise() {
        let row = test_row(&[6900; 3], &[500, 17700, 500]);
        let r = Ratio::of(&row.baseline, &row.rimms);
        assert_eq!(r.verdict(), Verdict::Inconclusive);
        assert_eq!(r.show(), "inconclusive, 3 frames [0.39–13.80]");
        let wide = table(std::slice::from_ref(&row), 3, None, true);
        assert!(
            wide.contains("inconclusive, 3 frames [0.39–13.80]"),
            "{wide}"
        );
        // The default table gives the frame count in its own column.
        let narrow = table(&[row], 3, None, false);
        assert!(narrow.contains("inconclusive [0.39–13.80]"), "{narrow}");
        for table in [wide, narrow] {
            assert!(table.contains("inconclusive: run more frames"), "{table}");
            assert!(!table.contains("noise"), "{table}");
        }
    }
}
