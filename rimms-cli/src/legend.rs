//! What the bench's words mean, for each place that shows some of them: the default table,
//! the wide table (`--wide`), the chart, and `rimms bench --help` (all of them).
//!
//! Each view explains the columns it shows and no others: a legend describing columns that
//! are not there sends the reader looking for them. Lines are at most 100 characters, the
//! default table's width, with the explanation wrapped under itself.

/// The views of the bench's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The default table, 100 columns wide.
    Table,
    /// `--wide`: every column.
    Wide,
    /// The SVG chart: speedups with error bars and bytes per mode.
    Chart,
    /// `rimms bench --help`: every term.
    Help,
}

use View::{Chart, Help, Table, Wide};

/// Every term, what it means, and the views that show it.
const TERMS: &[(&str, &str, &[View])] = &[
    ("baseline", "CEDR's behaviour: every call on a device copies its inputs in and its outputs out", &[Table, Wide, Chart, Help]),
    ("rimms", "the same app with RIMMS tracking the data: it moves only when a kernel in another memory needs it", &[Table, Wide, Chart, Help]),
    ("native", "hand-written code with the fewest copies for the mapping: the floor both are measured against", &[Wide, Chart, Help]),
    ("frames", "timed frames of the row (fewer where a row's frames took over 3 s); warm-up frames are not counted", &[Table, Wide, Help]),
    ("ms", "median frame time; --wide adds the fastest and slowest (fastest–slowest)", &[Table, Help]),
    ("ms", "median frame (fastest–slowest) over the timed frames", &[Wide]),
    ("unmerged", "rimms with call merging off (`--no-merge`): the gain from memory management alone", &[Wide, Help]),
    ("no prefetch", "rimms with copies ahead of their calls off (`--no-prefetch`): rimms ÷ this is the gain from overlapping copies with compute", &[Wide, Help]),
    ("speedup", "baseline time ÷ rimms time (above 1: RIMMS is faster), the median of per-frame ratios", &[Table, Wide, Chart, Help]),
    ("vs native", "rimms time ÷ native time, likewise (1.00x: as fast as hand-written code)", &[Wide, Help]),
    ("[lo–hi]", "95 % confidence interval of a ratio's median (error bars on the chart)", &[Table, Wide, Help]),
    ("error bar", "95 % confidence interval of the speedup's median", &[Chart]),
    ("can't tell", "the interval holds 1.0: these frames do not show which mode is faster (drawn pale)", &[Chart]),
    ("can't tell", "the interval holds 1.0: these frames do not show which mode is faster", &[Table, Wide, Help]),
    ("inconclusive", "the interval holds 1.0 and spans more than 2x: run more frames (--frames N)", &[Table, Wide, Chart, Help]),
    ("MiB", "bytes moved between memories (host and devices), summed over all frames", &[Table, Wide, Chart, Help]),
    ("minimum", "what native moves: the least this app on this mapping can move", &[Wide, Help]),
    ("allocs", "device and host allocations the mode made over the run", &[Wide, Help]),
    ("-", "no hand-written version for this mapping (auto: calls are placed at run time; gpu: see the cudarc examples)", &[Wide, Help]),
    ("maps", "cpu: all on the CPU; sim: a simulated card behind a modelled PCIe link; fpga, fpga-cpu: the FPGA (RIMMS_FPGA_BOARD or the emulator) for FFT and ZIP, or FFT only; auto: the scheduler over the CPU and two sim cards", &[Table, Wide, Chart, Help]),
];

/// The widest a legend line may be.
pub const WIDTH: usize = 100;

/// The legend for `view`, one term a line (explanations wrapped at [`WIDTH`]), ending
/// without a newline.
pub fn legend(view: View) -> String {
    let indent = TERMS
        .iter()
        .filter(|(_, _, views)| views.contains(&view))
        .map(|(term, _, _)| term.chars().count() + 2)
        .max()
        .unwrap_or(0);
    let mut lines = Vec::new();
    for (term, text, views) in TERMS {
        if !views.contains(&view) {
            continue;
        }
        let head = format!("{term:<indent$}");
        let hang = " ".repeat(indent);
        let options = textwrap::Options::new(WIDTH)
            .initial_indent(&head)
            .subsequent_indent(&hang);
        lines.extend(textwrap::wrap(text, options).into_iter().map(String::from));
    }
    if view == Table {
        let wide = "--wide adds native, unmerged and no-prefetch times, vs native, fastest–slowest, minimum and allocations";
        lines.extend(textwrap::wrap(wide, WIDTH).into_iter().map(String::from));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_view_explains_what_it_shows_within_100_columns() {
        for view in [Table, Wide, Chart, Help] {
            let text = legend(view);
            for line in text.lines() {
                assert!(line.chars().count() <= WIDTH, "{view:?}: {line}");
            }
        }
        assert!(!legend(Table).contains("\nunmerged"));
        assert!(!legend(Chart).contains("\nminimum") && !legend(Chart).contains("\nms "));
        assert!(legend(Help).contains("\nvs native"));
        assert!(legend(Chart).contains("\nnative"));
    }
}
