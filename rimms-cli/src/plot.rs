//! `rimms bench --plot FILE.svg`: the table as two bar charts, speedup over the baseline and
//! bytes moved per mode, one group of bars per app and mapping. Plain SVG written by hand: two
//! bar charts do not earn a plotting dependency.

use crate::bench::Row;
use std::fmt::Write as _;

const BAR: f64 = 14.0;
const GAP: f64 = 10.0;
const LEFT: f64 = 60.0;
const HEIGHT: f64 = 220.0;
const TOP: f64 = 50.0;

/// One chart: groups of bars, each bar a value and a colour, with a y-axis label.
struct Chart<'a> {
    title: &'a str,
    unit: &'a str,
    groups: Vec<(String, Vec<(f64, &'static str)>)>,
    legend: &'a [(&'static str, &'static str)],
    /// A dashed line at this value (1x on the speedup chart: above it, RIMMS is faster).
    reference: Option<f64>,
}

impl Chart<'_> {
    fn width(&self) -> f64 {
        let bars: usize = self.groups.iter().map(|(_, b)| b.len()).sum();
        LEFT + bars as f64 * BAR + self.groups.len() as f64 * GAP + 20.0
    }

    fn draw(&self, out: &mut String, y0: f64) {
        let max = self
            .groups
            .iter()
            .flat_map(|(_, bars)| bars.iter().map(|b| b.0))
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let base = y0 + TOP + HEIGHT;
        let _ = write!(
            out,
            r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
            y0 + 20.0,
            self.title
        );
        let _ = write!(
            out,
            r#"<text x="4" y="{}" font-size="10">{:.3} {}</text><text x="4" y="{base}" font-size="10">0</text>"#,
            y0 + TOP + 4.0,
            max,
            self.unit
        );
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{base}" x2="{}" y2="{base}" stroke="#333"/>"##,
            self.width() - 10.0
        );
        if let Some(r) = self.reference {
            let y = base - r / max * HEIGHT;
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#c33" stroke-dasharray="4 3"/><text x="4" y="{:.1}" font-size="10" fill="#c33">{r} {}</text>"##,
                self.width() - 10.0,
                y + 4.0,
                self.unit
            );
        }
        let mut x = LEFT;
        for (label, bars) in &self.groups {
            let start = x;
            for (value, colour) in bars {
                let h = value / max * HEIGHT;
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{}" height="{h:.1}" fill="{colour}"><title>{label}: {value:.3} {}</title></rect>"#,
                    base - h,
                    BAR - 2.0,
                    self.unit
                );
                x += BAR;
            }
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{}" font-size="9" transform="rotate(40 {:.1} {})">{label}</text>"#,
                start,
                base + 12.0,
                start,
                base + 12.0
            );
            x += GAP;
        }
        let mut lx = LEFT;
        for (name, colour) in self.legend {
            let _ = write!(
                out,
                r#"<rect x="{lx}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}" font-size="10">{name}</text>"#,
                y0 + 26.0,
                lx + 14.0,
                y0 + 35.0
            );
            lx += 110.0;
        }
    }
}

const BASELINE: &str = "#b0b0b0";
const RIMMS: &str = "#2a7ab9";
const NATIVE: &str = "#5aa05a";

/// The SVG document for `rows`.
pub fn svg(rows: &[Row]) -> String {
    let label = |r: &Row| format!("{} {}", r.app.name(), r.map);
    let speedup = Chart {
        title: "Speedup of RIMMS over the copy-every-call baseline",
        unit: "x",
        groups: rows
            .iter()
            .map(|r| {
                let s = r.baseline.median.as_secs_f64() / r.rimms.median.as_secs_f64();
                (label(r), vec![(s, RIMMS)])
            })
            .collect(),
        legend: &[("baseline / rimms", RIMMS)],
        reference: Some(1.0),
    };
    let bytes = Chart {
        title: "Bytes moved over all frames",
        unit: "MiB",
        groups: rows
            .iter()
            .map(|r| {
                let mib = |b: u64| b as f64 / (1 << 20) as f64;
                let mut bars = vec![
                    (mib(r.baseline.bytes), BASELINE),
                    (mib(r.rimms.bytes), RIMMS),
                ];
                if let Some(n) = &r.native {
                    bars.push((mib(n.bytes), NATIVE));
                }
                (label(r), bars)
            })
            .collect(),
        legend: &[("baseline", BASELINE), ("rimms", RIMMS), ("native", NATIVE)],
        reference: None,
    };
    let chart_height = TOP + HEIGHT + 80.0;
    let width = speedup.width().max(bytes.width());
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{:.0}" font-family="sans-serif">"#,
        2.0 * chart_height
    );
    speedup.draw(&mut out, 0.0);
    bytes.draw(&mut out, chart_height);
    out.push_str("</svg>\n");
    out
}
