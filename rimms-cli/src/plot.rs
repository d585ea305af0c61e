//! `rimms bench --plot FILE.svg`: the table as two bar charts, speedup of RIMMS over the
//! baseline and bytes moved per mode, one group of bars per app and mapping, with labelled
//! axes, a legend of the modes and the table's legend of terms beneath.
//!
//! Drawn with plotters' SVG backend: axes, ticks and legends come from the library. SVG only,
//! because raster output needs a font file to draw text with, which a CLI cannot count on;
//! [`check_path`] refuses other extensions up front and says how to convert.
//!
//! The chart tells what the table tells. A speedup bar is the table's figure, the median of
//! the per-frame ratios, with its 95 % interval as an error bar, and is labelled with the
//! table's words for it ([`Ratio::headline`]): its value, or "can't tell, N frames" and
//! "inconclusive, N frames", drawn faint, where the interval holds 1.0.
//!
//! A label longer than its bar stands above the bar and its error bar, so that it does not
//! run across the red line and the whisker; every bytes bar carries its value, since on a
//! linear axis most are slivers; and the modes' legend stands beside the plot, never over a
//! bar.
//!
//! Two more choices keep the charts honest. A bar of zero bytes (RIMMS on the CPU moves
//! nothing) is drawn as a visible sliver marked "0", so that it reads as zero and not as
//! missing. And a timing is noisy where bytes are exact: one cell whose speedup stands far
//! above the others would flatten every other bar, so the speedup axis ends near the largest
//! ordinary value and taller bars and error bars are cut at the top, the label saying so.

use crate::bench::{Ratio, Row, Verdict};
use crate::legend::{legend, View};
use crate::out_file::OutFile;
use crate::output::Failure;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The modes' names and bar colours, in the order bars are drawn in a group.
const MODES: [(&str, RGBColor); 3] = [
    ("baseline", RGBColor(0xb0, 0xb0, 0xb0)),
    ("rimms", RGBColor(0x2a, 0x7a, 0xb9)),
    ("native", RGBColor(0x5a, 0xa0, 0x5a)),
];

/// The width of the margin right of each plot that holds the modes' legend.
const LEGEND_WIDTH: u32 = 90;

/// The colour of the error bars, one no other line of the chart has.
const WHISKER: RGBColor = RGBColor(0x33, 0x33, 0x33);

/// Checks, before the bench runs, that `path` can take the chart: an `.svg` name that
/// [`OutFile::check`] accepts. Nothing is created until the chart is written.
pub fn check_path(path: &Path) -> Result<OutFile, Failure> {
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if extension.as_deref() != Some("svg") {
        return Err(Failure::Usage(format!(
            "--plot {}: the chart is written as SVG, so the file must end in .svg (convert it afterwards if you need another format, e.g. `rsvg-convert -o chart.png chart.svg`)",
            path.display()
        )));
    }
    Ok(OutFile::check("--plot", path)?)
}

/// The SVG document for `rows`.
pub fn svg(rows: &[Row]) -> Result<String, String> {
    let groups = rows.len().max(1);
    let width = (140 + 44 * groups as u32).max(760);
    let chart_height = 400;
    let caption = legend(View::Chart);
    let legend_height = 26 + 16 * caption.lines().count() as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, 2 * chart_height + legend_height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let (charts, legend) = root.split_vertically(2 * chart_height);
        let (top, bottom) = charts.split_vertically(chart_height);
        let labels: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {}", r.app.name(), r.map))
            .collect();
        let speedups: Vec<Vec<Option<Bar>>> = rows
            .iter()
            .map(|r| {
                let ratio = Ratio::of(&r.baseline, &r.rimms);
                vec![
                    None,
                    Some(Bar {
                        value: ratio.median,
                        interval: Some((ratio.low, ratio.high)),
                        label: Some(ratio.headline()),
                        faint: ratio.verdict() != Verdict::Measured,
                    }),
                    None,
                ]
            })
            .collect();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let bytes: Vec<Vec<Option<Bar>>> = rows
            .iter()
            .map(|r| {
                [
                    Some(r.baseline.bytes),
                    Some(r.rimms.bytes),
                    r.native.as_ref().map(|n| n.bytes),
                ]
                .into_iter()
                .map(|b| {
                    b.map(|b| Bar {
                        // Every value written out: bars of a few KiB beside bars of tens of
                        // MiB are slivers on a linear axis, and read as nothing without it.
                        label: Some(crate::human::significant(mib(b), 3)),
                        ..Bar::plain(mib(b))
                    })
                })
                .collect()
            })
            .collect();
        let medians: Vec<f64> = speedups
            .iter()
            .flatten()
            .flatten()
            .map(|b| b.value)
            .collect();
        bars(
            &top,
            &Chart {
                title:
                    "Speedup of RIMMS over the baseline: median of per-frame ratios, 95 % interval",
                y_label: "speedup (×); above the red line RIMMS is faster",
                labels: &labels,
                values: &speedups,
                top: robust_top(&medians).max(1.2),
                reference: Some(1.0),
                unit: "×",
            },
        )?;
        let all_bytes = bytes.iter().flatten().flatten().map(|b| b.value);
        bars(
            &bottom,
            &Chart {
                title: "Bytes moved between memories, over all frames",
                y_label: "MiB moved",
                labels: &labels,
                values: &bytes,
                top: all_bytes.fold(0.0, f64::max).max(1e-3) * 1.1,
                reference: None,
                unit: "MiB",
            },
        )?;
        // Term and explanation in two columns: SVG text collapses the spaces that align them
        // in a terminal.
        for (i, line) in caption.lines().enumerate() {
            let (term, text) = match line.find("  ") {
                Some(at) => (&line[..at], line[at..].trim_start()),
                None => ("", line),
            };
            let y = 10 + 16 * i as i32;
            for (x, words) in [(20, term), (120, text)] {
                legend
                    .draw(&Text::new(words, (x, y), ("sans-serif", 12).into_font()))
                    .map_err(draw_error)?;
            }
        }
        root.present().map_err(draw_error)?;
    }
    Ok(out)
}

/// The top of an axis for noisy `values`: the largest value that is not an outlier (more
/// than four times the median), with a margin. Values above it are drawn cut.
pub fn robust_top(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let Some(&median) = sorted.get(sorted.len() / 2) else {
        return 1.0;
    };
    let ordinary = sorted
        .iter()
        .copied()
        .filter(|&v| v <= 4.0 * median.max(0.0))
        .fold(0.0, f64::max);
    let largest = sorted.last().copied().unwrap_or(0.0);
    let top = if ordinary > 0.0 { ordinary } else { largest };
    top.max(f64::MIN_POSITIVE) * 1.15
}

/// One bar of a chart.
struct Bar {
    value: f64,
    /// An error bar from the low to the high end.
    interval: Option<(f64, f64)>,
    /// Words written along the bar from its foot.
    label: Option<String>,
    /// Drawn pale: a figure that does not tell one mode from another.
    faint: bool,
}

impl Bar {
    /// A bar that is only its value.
    fn plain(value: f64) -> Bar {
        Bar {
            value,
            interval: None,
            label: None,
            faint: false,
        }
    }
}

/// One bar chart: per group, a bar (or none) per mode.
struct Chart<'a> {
    title: &'a str,
    y_label: &'a str,
    labels: &'a [String],
    values: &'a [Vec<Option<Bar>>],
    /// The top of the y axis; taller bars are cut there and labelled with their value.
    top: f64,
    /// A horizontal line at this value.
    reference: Option<f64>,
    unit: &'a str,
}

fn draw_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    format!("cannot draw the chart: {e}")
}

fn bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart<'_>) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let groups = c.labels.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(c.title, ("sans-serif", 16).into_font())
        .margin(12)
        // The modes' legend goes in this margin, beside the plot and never over a bar.
        .margin_right(LEGEND_WIDTH)
        .x_label_area_size(100)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..groups as f64, 0f64..c.top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(c.y_label)
        .y_label_formatter(&|v| crate::human::significant(*v, 3))
        .draw()
        .map_err(draw_error)?;
    let sliver = c.top * 0.006;
    // A label's length in axis units: about 5.5 pixels a character at 10 pixels.
    let plot_height = {
        let (_, ys) = chart.plotting_area().get_pixel_range();
        f64::from((ys.end - ys.start).max(1))
    };
    let label_span = |text: &str| text.chars().count() as f64 * 5.5 / plot_height * c.top;
    for (mode, (_, colour)) in MODES.iter().enumerate() {
        let mut shapes: Vec<Rectangle<(f64, f64)>> = Vec::new();
        let mut whiskers = Vec::new();
        let mut notes: Vec<(f64, f64, String)> = Vec::new();
        for (g, values) in c.values.iter().enumerate() {
            let Some(bar) = values.get(mode).and_then(Option::as_ref) else {
                continue;
            };
            let x0 = g as f64 + 0.1 + 0.8 * mode as f64 / 3.0;
            let x1 = x0 + 0.8 / 3.0 * 0.9;
            let cut = bar.value > c.top || bar.interval.is_some_and(|(_, high)| high > c.top);
            let mut note = bar.label.clone();
            if bar.value <= 0.0 {
                note.get_or_insert_with(|| "0".to_string());
            } else if bar.value > c.top && note.is_none() {
                note = Some(format!(
                    "{}{}",
                    crate::human::significant(bar.value, 3),
                    c.unit
                ));
            }
            if cut {
                note = note.map(|n| format!("{n} ↑"));
            }
            let height = if bar.value <= 0.0 {
                sliver
            } else {
                bar.value.min(c.top)
            };
            let fill = if bar.faint {
                colour.mix(0.35).filled()
            } else {
                colour.filled()
            };
            shapes.push(Rectangle::new([(x0, 0.0), (x1, height)], fill));
            if let Some((low, high)) = bar.interval {
                let middle = (x0 + x1) / 2.0;
                whiskers.push(ErrorBar::new_vertical(
                    middle,
                    low.min(c.top),
                    bar.value.min(c.top),
                    high.min(c.top),
                    WHISKER.stroke_width(1),
                    6,
                ));
            }
            if let Some(text) = note {
                // From the bar's foot where it fits inside the bar; else above the bar and its
                // error bar, clear of the reference line and the whisker, where that fits
                // under the top; else from the foot all the same.
                let margin = c.top * 0.02;
                let above = bar.interval.map_or(height, |(_, high)| high.max(height)) + margin;
                let y = if label_span(&text) + 2.0 * margin <= height
                    || above + label_span(&text) > c.top
                {
                    margin
                } else {
                    above
                };
                notes.push((x0, y, text));
            }
        }
        if shapes.is_empty() {
            continue;
        }
        chart.draw_series(shapes).map_err(draw_error)?;
        chart.draw_series(whiskers).map_err(draw_error)?;
        // Along the bar, inside the plot whatever the bar's height: a label above a cut bar
        // would run into the title.
        chart
            .draw_series(notes.into_iter().map(|(x, y, text)| {
                Text::new(
                    text,
                    (x, y),
                    ("sans-serif", 10)
                        .into_font()
                        .transform(FontTransform::Rotate270),
                )
            }))
            .map_err(draw_error)?;
    }
    if let Some(r) = c.reference {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, r), (groups as f64, r)],
                RED.stroke_width(1),
            )))
            .map_err(draw_error)?;
    }
    // The group labels, turned, under the middle of each group.
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let (origin_x, origin_y) = area.get_base_pixel();
    // The legend of the modes drawn here, right of the plot.
    let shown = MODES.iter().enumerate().filter(|(mode, _)| {
        c.values
            .iter()
            .any(|v| v.get(*mode).is_some_and(Option::is_some))
    });
    for (i, (_, (name, colour))) in shown.enumerate() {
        let x = xs.end - origin_x + 16;
        let y = ys.start - origin_y + 8 + 18 * i as i32;
        area.draw(&Rectangle::new(
            [(x, y - 5), (x + 10, y + 5)],
            colour.filled(),
        ))
        .map_err(draw_error)?;
        area.draw(&Text::new(
            *name,
            (x + 16, y - 6),
            ("sans-serif", 12).into_font(),
        ))
        .map_err(draw_error)?;
    }
    let span = f64::from(xs.end - xs.start);
    for (g, label) in c.labels.iter().enumerate() {
        let x = xs.start - origin_x + ((g as f64 + 0.5) / groups as f64 * span) as i32;
        area.draw(&Text::new(
            label.as_str(),
            (x - 5, ys.end - origin_y + 8),
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        ))
        .map_err(draw_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_outlier_does_not_set_the_scale_but_ordinary_spread_does() {
        // Four ordinary speedups and one noisy cell 30 times their size.
        let top = robust_top(&[1.1, 2.0, 1.5, 60.0, 1.8]);
        assert!((top - 2.0 * 1.15).abs() < 1e-9, "{top}");
        // Spread within four times the median is all shown.
        let top = robust_top(&[1.0, 2.0, 3.0, 4.0]);
        assert!((top - 4.0 * 1.15).abs() < 1e-9, "{top}");
        assert_eq!(robust_top(&[]), 1.0);
    }

    /// Each speedup bar is the table's figure with its interval: a pale "can't tell" or
    /// "inconclusive" bar where the interval holds 1.0, a value label where it does not.
    #[test]
    fn speedup_bars_say_what_the_table_says() {
        use crate::bench::test_row;
        let rows = [
            test_row(&[2000; 20], &[1000; 20]),
            test_row(&[1000; 20], &[900, 1100].repeat(10)),
            test_row(&[6900; 3], &[500, 17700, 500]),
        ];
        let text = svg(&rows).expect("drawn");
        for label in [
            ">\n2.00x\n<",
            "can&apos;t tell, 20 frames",
            "inconclusive, 3 frames",
        ] {
            assert!(text.contains(label), "no {label:?} in the chart");
        }
        let whiskers = text.matches("#333333").count();
        // plotters draws an error bar as four strokes: two caps and the line in two halves.
        assert_eq!(whiskers, 3 * 4, "an error bar per speedup");
    }

    /// Issue 32's look at the chart: the modes' legend stands right of every bar, not over
    /// one, and each bytes bar carries its value, so that a sliver still reads.
    #[test]
    fn the_legend_is_beside_the_bars_and_bytes_bars_carry_their_value() {
        use crate::bench::test_row;
        let mut rows = vec![
            test_row(&[2000; 5], &[1000; 5]),
            test_row(&[2000; 5], &[1000; 5]),
        ];
        rows[0].baseline.bytes = 28 << 20;
        rows[0].rimms.bytes = 3 << 19;
        // A native bar in the last group: the bar furthest right a chart has.
        rows[1].native = Some(crate::bench::test_cell(&[1000; 5]));
        let text = svg(&rows).expect("drawn");
        for label in [">\n28\n<", ">\n1.5\n<"] {
            assert!(text.contains(label), "no bytes label {label:?}");
        }
        let attr = |rect: &str, name: &str| -> i64 {
            rect.split(&format!(" {name}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|x| x.parse().ok())
                .unwrap_or(-1)
        };
        let x_of = |rect: &str| attr(rect, "x");
        let rects: Vec<&str> = text.split("<rect").skip(1).collect();
        let (swatches, bars): (Vec<&str>, Vec<&str>) = rects
            .iter()
            .filter(|r| !r.contains("fill=\"#FFFFFF\""))
            .partition(|r| r.contains("width=\"10\" height=\"10\""));
        assert!(!swatches.is_empty() && !bars.is_empty());
        let bars_end = bars
            .iter()
            .map(|r| x_of(r) + attr(r, "width"))
            .max()
            .unwrap_or(0);
        for swatch in swatches {
            assert!(
                x_of(swatch) > bars_end,
                "a legend swatch over the bars: {swatch}"
            );
        }
    }

    /// A label longer than its bar stands above the bar and its error bar, clear of the red
    /// line at 1.0, instead of running from the foot across both.
    #[test]
    fn a_label_longer_than_its_bar_stands_above_the_line() {
        use crate::bench::test_row;
        let rows = [
            test_row(&[1000; 20], &[900, 1100].repeat(10)),
            test_row(&[2000; 20], &[1000; 20]),
        ];
        let text = svg(&rows).expect("drawn");
        let number = |after: &str, key: &str| -> i64 {
            after
                .split(key)
                .nth(1)
                .and_then(|r| r.split(['"', ',', ' ']).next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1)
        };
        let line = text
            .split("<polyline")
            .find(|p| p.contains("#FF0000"))
            .expect("the red line");
        // The y of the line's first point, `points="X,Y X,Y "`.
        let line_y = number(line.split("points=\"").nth(1).unwrap_or(""), ",");
        let label = text
            .split("<text")
            .find(|t| t.contains("can&apos;t tell, 20 frames"))
            .expect("the can't-tell label");
        let label_y = number(label, " y=\"");
        assert!(
            label_y > 0 && line_y > 0 && label_y < line_y,
            "the label starts at y = {label_y}, the line is at y = {line_y}"
        );
    }

    #[test]
    fn only_svg_paths_in_existing_folders_are_taken() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(check_path(&dir.path().join("chart.svg")).is_ok());
        assert!(check_path(&dir.path().join("chart.SVG")).is_ok());
        let png = check_path(&dir.path().join("chart.png")).unwrap_err();
        assert_eq!(png.exit_code(), 2, "a wrong extension is a usage error");
        let png = png.to_string();
        assert!(png.contains("must end in .svg"), "{png}");
        let missing = check_path(&dir.path().join("no/chart.svg")).unwrap_err();
        assert_eq!(missing.exit_code(), 1, "a missing folder fails the run");
        let missing = missing.to_string();
        assert!(missing.contains("cannot create the file"), "{missing}");
    }
}
