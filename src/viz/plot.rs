//! Trend charts as SVG (plotters' SVG backend): one line per memory of a figure over time or
//! sequence number, titled, with labelled axes, units and a legend, and each `oom` snapshot marked.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::analysis::{FailedAt, OomMark, Series};
use crate::error::{Error, Result};
use crate::units::human_size;

/// The figure on the y axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Used,
    Free,
    LargestHole,
    Fragmentation,
    Reclaimable,
    LargestReclaimable,
}

impl Metric {
    /// Its column in `memory_trend`.
    pub fn column(self) -> &'static str {
        match self {
            Metric::Used => "used_bytes",
            Metric::Free => "free_bytes",
            Metric::LargestHole => "largest_hole",
            Metric::Fragmentation => "fragmentation",
            Metric::Reclaimable => "reclaimable_bytes",
            Metric::LargestReclaimable => "largest_reclaimable",
        }
    }
    fn title(self) -> &'static str {
        match self {
            Metric::Used => "Used bytes",
            Metric::Free => "Free bytes (in holes)",
            Metric::LargestHole => "Largest hole",
            Metric::Fragmentation => "Fragmentation (1 - largest hole / free)",
            Metric::Reclaimable => "Reclaimable bytes (collectable + pending_free)",
            Metric::LargestReclaimable => "Largest range after collection",
        }
    }
    fn is_bytes(self) -> bool {
        self != Metric::Fragmentation
    }
}

/// The x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Seconds since the run started.
    Time,
    /// The snapshot's sequence number.
    Seq,
}

impl XAxis {
    /// Its column in `memory_trend`.
    pub fn column(self) -> &'static str {
        match self {
            XAxis::Time => "time_s",
            XAxis::Seq => "seq",
        }
    }
}

fn plot_error(error: impl std::fmt::Display) -> Error {
    Error::Internal {
        file: String::new(),
        message: format!("cannot draw the chart: {error}"),
    }
}

/// Line colours: Okabe and Ito's palette, told apart with the common colour-vision deficiencies
/// (its yellow left out: too faint on white). Past seven lines the colours repeat, dashed.
const LINE_COLOURS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0xd5, 0x5e, 0x00),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0x00, 0x00, 0x00),
];
const OOM_RED: RGBColor = RGBColor(0xb0, 0x1c, 0x1c);

/// Whether the figure is one a request's size compares with (a line for it is drawn).
fn compares_with_request(metric: Metric) -> bool {
    matches!(
        metric,
        Metric::LargestHole | Metric::LargestReclaimable | Metric::Free
    )
}

/// The chart as SVG text. The memories a request failed in are drawn thick and named at their
/// OOM mark; for a figure a request compares with, each failed request's size is a dashed line.
/// The most lines a chart draws (its legend holds them): the failed memories, then those
/// reaching highest.
pub const MAX_LINES: usize = 12;

/// The most points a line keeps: past it, each of `MAX_POINTS / 4` stretches of the x axis keeps
/// its first, lowest, highest and last point, so the line looks the same at the chart's width.
const MAX_POINTS: usize = 2400;

/// The lines a chart draws, each with at most [`MAX_POINTS`] points, and how many it leaves out:
/// a chart stays a few hundred KiB however many memories and snapshots a run has.
fn level_of_detail(series: &[Series], is_failed: &dyn Fn(&Series) -> bool) -> (Vec<Series>, usize) {
    let peak = |line: &Series| {
        line.points
            .iter()
            .map(|point| point.1)
            .fold(f64::MIN, f64::max)
    };
    let mut order: Vec<usize> = (0..series.len()).collect();
    if series.len() > MAX_LINES {
        order.sort_by(|&a, &b| {
            is_failed(&series[b])
                .cmp(&is_failed(&series[a]))
                .then(peak(&series[b]).total_cmp(&peak(&series[a])))
                .then(a.cmp(&b))
        });
        order.truncate(MAX_LINES);
        order.sort_unstable();
    }
    let kept = order
        .iter()
        .map(|&index| {
            let line = &series[index];
            let points = if line.points.len() <= MAX_POINTS {
                line.points.clone()
            } else {
                thin(&line.points, MAX_POINTS / 4)
            };
            Series {
                node: line.node,
                handle: line.handle.clone(),
                kind: line.kind.clone(),
                points,
            }
        })
        .collect();
    (kept, series.len() - order.len())
}

/// Points in x order cut into `buckets` stretches of x, each keeping its first, lowest, highest
/// and last point (in x order).
fn thin(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    let (x0, x1) = match (points.first(), points.last()) {
        (Some(first), Some(last)) if last.0 > first.0 => (first.0, last.0),
        _ => return points.to_vec(),
    };
    let bucket_of =
        |x: f64| (((x - x0) / (x1 - x0)) * buckets as f64).min(buckets as f64 - 1.0) as usize;
    let mut out = Vec::with_capacity(buckets * 4);
    let mut start = 0;
    while start < points.len() {
        let bucket = bucket_of(points[start].0);
        let end = start
            + points[start..]
                .iter()
                .take_while(|point| bucket_of(point.0) == bucket)
                .count();
        let stretch = &points[start..end];
        let lowest = stretch
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map_or(0, |(index, _)| index);
        let highest = stretch
            .iter()
            .enumerate()
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map_or(0, |(index, _)| index);
        let mut picks = vec![0, lowest, highest, stretch.len() - 1];
        picks.sort_unstable();
        picks.dedup();
        out.extend(picks.into_iter().map(|index| stretch[index]));
        start = end.max(start + 1);
    }
    out
}

pub fn render_svg(
    run: &str,
    series: &[Series],
    marks: &[OomMark],
    metric: Metric,
    x_axis: XAxis,
) -> Result<String> {
    let failed: Vec<&FailedAt> = marks
        .iter()
        .filter_map(|mark| mark.failed.as_ref())
        .collect();
    let is_failed = |line: &Series| {
        failed
            .iter()
            .any(|failed| failed.node == line.node && failed.handle == line.handle)
    };
    let requests: Vec<u64> = if compares_with_request(metric) {
        let mut sizes: Vec<u64> = failed.iter().map(|failed| failed.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    } else {
        Vec::new()
    };
    let (kept, left_out) = level_of_detail(series, &is_failed);
    let series = kept.as_slice();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let points = series.iter().flat_map(|line| line.points.iter());
        let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
        for &(x, y) in points {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        for &size in &requests {
            y_max = y_max.max(size as f64);
        }
        if x_max <= x_min {
            x_max = x_min + 1.0;
        }
        // Headroom above the highest point for the legend (about 22 pixels a line of the 560
        // the plot is high), so it covers no line.
        let legend_share = ((series.len().min(14) as f64 * 22.0 + 24.0) / 560.0).min(0.6);
        let y_top = if metric.is_bytes() {
            (y_max.max(1.0) / (1.0 - legend_share)).max(1.0)
        } else {
            1.0 / (1.0 - legend_share)
        };
        let x_label = match x_axis {
            XAxis::Time => "time since the run started (s)",
            XAxis::Seq => "snapshot (seq)",
        };
        let y_label = if metric.is_bytes() {
            format!("{} (bytes)", metric.title())
        } else {
            metric.title().to_string()
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(
                match left_out {
                    0 => format!("{} — run {run}", metric.title()),
                    more => format!(
                        "{} — run {run} ({} lines; {more} more memories not drawn)",
                        metric.title(),
                        series.len()
                    ),
                },
                ("sans-serif", 28),
            )
            .margin(20)
            .x_label_area_size(60)
            .y_label_area_size(110)
            .build_cartesian_2d(x_min..x_max, 0.0..y_top)
            .map_err(plot_error)?;
        let bytes = metric.is_bytes();
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .axis_desc_style(("sans-serif", 20))
            .label_style(("sans-serif", 17))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xcc, 0xcc, 0xcc))
            .y_label_formatter(&|value| {
                if bytes {
                    human_size(*value as i64)
                } else {
                    format!("{value:.2}")
                }
            })
            .draw()
            .map_err(plot_error)?;
        // The other memories first, so the failed ones are drawn over them.
        let mut order: Vec<usize> = (0..series.len()).collect();
        order.sort_by_key(|&index| is_failed(&series[index]));
        for index in order {
            let line = &series[index];
            let colour = LINE_COLOURS[index % LINE_COLOURS.len()];
            let emphasised = is_failed(line);
            let width = if emphasised { 5 } else { 2 };
            let style = if emphasised || failed.is_empty() {
                colour.stroke_width(width)
            } else {
                colour.mix(0.7).stroke_width(width)
            };
            let label = if emphasised {
                format!("{}  (out of memory)", line.label())
            } else {
                line.label()
            };
            let dashed = index >= LINE_COLOURS.len();
            let drawn = if dashed {
                chart.draw_series(DashedLineSeries::new(
                    line.points.iter().copied(),
                    10,
                    6,
                    style,
                ))
            } else {
                chart.draw_series(LineSeries::new(line.points.iter().copied(), style))
            };
            drawn
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        for &size in &requests {
            let y = size as f64;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x_min, y), (x_max, y)],
                    12,
                    6,
                    OOM_RED.stroke_width(2),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("failed request: {}", human_size(size as i64)),
                    (x_min, y),
                    ("sans-serif", 18)
                        .into_font()
                        .color(&OOM_RED)
                        .pos(Pos::new(HPos::Left, VPos::Bottom)),
                )))
                .map_err(plot_error)?;
        }
        // One mark per OOM x, naming the memories that failed there.
        let mut xs: Vec<f64> = marks.iter().map(|mark| mark.x).collect();
        xs.dedup();
        for x in xs {
            let here: Vec<&FailedAt> = marks
                .iter()
                .filter(|mark| mark.x == x)
                .filter_map(|mark| mark.failed.as_ref())
                .collect();
            let mut names: Vec<String> = here
                .iter()
                .map(|failed| format!("node {} {}", failed.node, failed.handle))
                .collect();
            names.dedup();
            let text = match names.as_slice() {
                [] => "OOM ".to_string(),
                [one] => format!("OOM: {one} "),
                [first, rest @ ..] => format!("OOM: {first} and {} more ", rest.len()),
            };
            chart
                .draw_series(LineSeries::new(
                    vec![(x, 0.0), (x, y_top)],
                    OOM_RED.stroke_width(3),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x, y_top * 0.985),
                    ("sans-serif", 18)
                        .into_font()
                        .color(&OOM_RED)
                        .pos(Pos::new(HPos::Right, VPos::Top)),
                )))
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 17))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(node: i64, points: Vec<(f64, f64)>) -> Series {
        Series {
            node,
            handle: format!("0x{node:x}"),
            kind: "GPU_FB_MEM".to_string(),
            points,
        }
    }

    #[test]
    fn a_long_line_keeps_its_extremes_at_the_chart_width() {
        // 10,000 points, a saw from 0 to 99: every stretch of the 600 still reaches both ends.
        let points: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, (i % 100) as f64)).collect();
        let thinned = thin(&points, 600);
        assert!(thinned.len() <= 2400, "{}", thinned.len());
        assert_eq!(thinned.first(), points.first());
        assert_eq!(thinned.last(), points.last());
        assert!(
            thinned.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "in x order"
        );
        assert_eq!(thinned.iter().map(|p| p.1).fold(f64::MAX, f64::min), 0.0);
        assert_eq!(thinned.iter().map(|p| p.1).fold(f64::MIN, f64::max), 99.0);
    }

    #[test]
    fn many_lines_keep_the_failed_and_the_highest() {
        // 40 memories reaching 0, 1, ..., 39; memory 0 failed: it and the 11 highest (29 to 39).
        let series: Vec<Series> = (0..40)
            .map(|node| line(node, vec![(0.0, node as f64)]))
            .collect();
        let (kept, left_out) = level_of_detail(&series, &|line: &Series| line.node == 0);
        assert_eq!(left_out, 28);
        let nodes: Vec<i64> = kept.iter().map(|line| line.node).collect();
        let mut expected = vec![0];
        expected.extend(29..40);
        assert_eq!(nodes, expected);
    }
}
