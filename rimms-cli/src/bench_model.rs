//! The modelled FPGA rows of `rimms bench --fpga-timing` taken apart by term of the virtual
//! clock, and held against the RIMMS paper's ZCU102 figures.
//!
//! Why: a ratio alone does not say why the model and the paper differ. Each mode's frame is
//! the host's own measured work plus modelled terms (DMA and core, registers, cache
//! maintenance, host copies into and out of the u-dma-buf, A53 passes over it inside a driver
//! call); printing them side by side shows which term separates baseline from rimms, rimms
//! from native, and the model from the paper (docs/fpga-model.md discusses the figures).

use crate::bench::{ms, Cell, Ratio, Row};
use rimms::drivers::vclock::{Term, TERMS};
use std::time::Duration;

/// One of the paper's ZCU102 figures (RIMMS, CPU + FPGA, against CEDR's copy-at-every-call
/// baseline).
pub struct PaperFigure {
    /// The chain as the paper names it.
    pub chain: &'static str,
    /// Baseline and RIMMS times (ms), where the paper gives them.
    pub times: Option<(f64, f64)>,
    /// The speedup.
    pub speedup: f64,
    /// The bench row (app, map) that stands for it; `None`: no row here runs that chain.
    pub row: Option<(&'static str, &'static str)>,
}

/// The paper's ZCU102 figures.
pub const PAPER: [PaperFigure; 3] = [
    PaperFigure {
        chain: "2FFT FPGA-FPGA",
        times: Some((604.78, 132.13)),
        speedup: 4.58,
        row: Some(("2fft", "fpga")),
    },
    // FFT on the CPU, inverse on the FPGA: no mapping here splits the two FFTs of a chain
    // (fpga-cpu runs both FFTs on the FPGA and the ZIPs on the CPU).
    PaperFigure {
        chain: "2FFT CPU-FPGA",
        times: Some((638.59, 486.21)),
        speedup: 1.31,
        row: None,
    },
    PaperFigure {
        chain: "FZF (best case)",
        times: None,
        speedup: 1.82,
        row: Some(("fzf", "fpga")),
    },
];

/// Mean per timed frame of a cell: (host's own work, modelled terms).
fn per_frame(c: &Cell) -> (Duration, [Duration; TERMS]) {
    let n = c.times.len().max(1) as u32;
    let total: Duration = c.times.iter().sum();
    let modelled: Duration = c.modelled.iter().sum();
    (
        total.saturating_sub(modelled) / n,
        c.modelled.map(|d| d / n),
    )
}

/// The FPGA rows' frames by term, per mode, in milliseconds per frame.
pub fn breakdown(rows: &[Row]) -> String {
    let mut out = format!("{:<11} {:<8} {:<9} {:>8}", "app", "map", "mode", "host");
    for t in Term::ALL {
        out += &format!(" {:>11}", t.name());
    }
    out += &format!(" {:>9}\n", "total");
    for r in rows.iter().filter(|r| r.map.starts_with("fpga")) {
        let modes = [("baseline", Some(&r.baseline)), ("rimms", Some(&r.rimms))]
            .into_iter()
            .chain(std::iter::once(("native", r.native.as_ref())));
        for (mode, cell) in modes {
            let Some(cell) = cell else { continue };
            let (host, terms) = per_frame(cell);
            out += &format!(
                "{:<11} {:<8} {:<9} {:>8.3}",
                r.app.name(),
                r.map,
                mode,
                ms(host)
            );
            for t in terms {
                out += &format!(" {:>11.3}", ms(t));
            }
            out += &format!(" {:>9.3}\n", ms(host + terms.iter().sum::<Duration>()));
        }
    }
    out
}

/// The modelled speedups beside the paper's.
pub fn against_paper(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<16} {:<11} {:>15} {:>22}\n",
        "paper chain", "row here", "model speedup", "paper (ZCU102)"
    );
    for PaperFigure {
        chain,
        times,
        speedup,
        row,
    } in PAPER
    {
        let found = row.and_then(|(app, map)| {
            rows.iter()
                .find(|r| r.app.name() == app && r.map == map)
                .map(|r| (format!("{app} {map}"), Ratio::of(&r.baseline, &r.rimms)))
        });
        let (name, model) = match found {
            Some((name, ratio)) => (name, format!("{:.2}x", ratio.median)),
            None if row.is_none() => ("none".to_string(), "-".to_string()),
            None => ("not run".to_string(), "-".to_string()),
        };
        let paper = match times {
            Some((base, rimms)) => format!("{speedup:.2}x ({base:.2} → {rimms:.2} ms)"),
            None => format!("up to {speedup:.2}x"),
        };
        out += &format!("{chain:<16} {name:<11} {model:>15} {paper:>22}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::App;
    use crate::bench::test_row;

    /// A 2fft fpga row of 10 ms baseline and 4 ms rimms frames, 3 ms of them modelled DMA and
    /// 1 ms modelled copies in baseline: the breakdown shows host = frame − modelled per mode,
    /// and the paper table puts the row's speedup (2.50x) beside 4.58x, with a dash for the
    /// chain no row runs.
    #[test]
    fn rows_are_taken_apart_and_set_beside_the_paper() {
        let mut row = test_row(&[10_000; 2], &[4_000; 2]);
        row.app = App::TwoFft;
        row.map = "fpga";
        let ms = Duration::from_millis;
        row.baseline.modelled = [ms(6), ms(0), ms(0), ms(2), ms(0)];
        row.rimms.modelled = [ms(6), ms(0), ms(0), ms(0), ms(0)];
        let b = breakdown(std::slice::from_ref(&row));
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines.len(), 3, "{b}");
        // Baseline: 2 frames of 10 ms, 8 ms modelled in all: host 6 ms a frame.
        assert!(lines[1].contains("baseline     6.000       3.000"), "{b}");
        assert!(lines[1].ends_with("10.000"), "{b}");
        assert!(lines[2].contains("rimms        1.000       3.000"), "{b}");
        let p = against_paper(&[row]);
        assert!(p.contains("2fft fpga             2.50x"), "{p}");
        assert!(p.contains("4.58x (604.78 → 132.13 ms)"), "{p}");
        assert!(p.contains("2FFT CPU-FPGA    none"), "{p}");
        assert!(p.contains("fzf fpga") || p.contains("not run"), "{p}");
    }
}
