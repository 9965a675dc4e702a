//! Trend charts as SVG (plotters' SVG backend): one line per memory of a figure over time or
//! sequence number, titled, with labelled axes, units and a legend, and each `oom` snapshot marked.

use plotters::prelude::*;

mod pair;
mod panel;

pub use pair::{render_pair_svg, RunLines, PAIR_METRICS};

use crate::analysis::{FailedAt, OomMark, Series};
use crate::error::{Error, Result};

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
    pub(super) fn title(self) -> &'static str {
        match self {
            Metric::Used => "Used bytes",
            Metric::Free => "Free bytes (in holes)",
            Metric::LargestHole => "Largest hole",
            Metric::Fragmentation => "Fragmentation (1 - largest hole / free)",
            Metric::Reclaimable => "Reclaimable bytes (collectable + pending_free)",
            Metric::LargestReclaimable => "Largest range after collection",
        }
    }
    pub(super) fn is_bytes(self) -> bool {
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

/// The x axis's range over every point and mark: 0 to 1 with none, and a unit-wide axis with
/// the point in its middle for one snapshot.
pub(super) fn x_range(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut low, mut high) = (f64::MAX, f64::MIN);
    for x in xs {
        low = low.min(x);
        high = high.max(x);
    }
    if low > high {
        (0.0, 1.0)
    } else if high <= low {
        (low - 0.5, high + 0.5)
    } else {
        (low, high)
    }
}

pub(super) fn plot_error(error: impl std::fmt::Display) -> Error {
    Error::Internal {
        file: String::new(),
        message: format!("cannot draw the chart: {error}"),
    }
}

/// Line colours, each line its own (a chart draws at most [`MAX_LINES`]): Okabe and Ito's palette,
/// told apart with the common colour-vision deficiencies, without its vermillion (near the failure
/// red) and its yellow (too faint on white), then Paul Tol's muted colours. Failed memories are
/// drawn in [`super::FAILURE_COLOUR`], as on the map.
pub(super) const LINE_COLOURS: [RGBColor; 12] = [
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0x33, 0x22, 0x88),
    RGBColor(0x11, 0x77, 0x33),
    RGBColor(0x44, 0xaa, 0x99),
    RGBColor(0x99, 0x99, 0x33),
    RGBColor(0xaa, 0x44, 0x99),
    RGBColor(0x88, 0x88, 0x88),
];

/// The failure's colour for plotters.
pub(super) fn failure_colour() -> RGBColor {
    let (red, green, blue) = super::FAILURE_COLOUR;
    RGBColor(red, green, blue)
}

/// Whether the figure is one a request's size compares with (a line for it is drawn).
fn compares_with_request(metric: Metric) -> bool {
    matches!(
        metric,
        Metric::LargestHole | Metric::LargestReclaimable | Metric::Free
    )
}

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

/// The chart as SVG text: a panel per memory kind (each on its own scale, so a large system
/// memory does not flatten the GPU lines), the kind with a failure first, each line its own colour
/// and the failed memories in the failure's colour, drawn thick and named at their OOM mark; for a
/// figure a request compares with, each failed request's size is a dashed line in its memory's
/// panel. Sizes are scaled to one binary unit a panel, so the ticks fall on round values of it.
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
    let (kept, left_out) = level_of_detail(series, &is_failed);
    let lines: Vec<panel::Line> = {
        let mut next_colour = 0;
        let mut failed_seen = 0;
        kept.iter()
            .map(|line| {
                let failed_here = is_failed(line);
                let (colour, dashed) = if failed_here {
                    failed_seen += 1;
                    (failure_colour(), failed_seen > 1)
                } else {
                    next_colour += 1;
                    (LINE_COLOURS[(next_colour - 1) % LINE_COLOURS.len()], false)
                };
                panel::Line {
                    series: line,
                    colour,
                    dashed,
                    failed: failed_here,
                }
            })
            .collect()
    };
    // The kinds, the one a request failed in first.
    let mut kinds: Vec<&str> = lines.iter().map(|line| line.series.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.sort_by_key(|kind| {
        !lines
            .iter()
            .any(|line| line.failed && line.series.kind == *kind)
    });
    let requests: Vec<(&str, u64)> = if compares_with_request(metric) {
        let mut sizes: Vec<(&str, u64)> = failed
            .iter()
            .filter_map(|failed| {
                let line = lines.iter().find(|line| {
                    line.series.node == failed.node && line.series.handle == failed.handle
                })?;
                Some((line.series.kind.as_str(), failed.size))
            })
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    } else {
        Vec::new()
    };
    let (x_min, x_max) = x_range(
        lines
            .iter()
            .flat_map(|line| line.series.points.iter().map(|point| point.0))
            .chain(marks.iter().map(|mark| mark.x)),
    );
    let caption = match left_out {
        0 => format!("{} — run {run}", metric.title()),
        more => format!(
            "{} — run {run} ({} lines; {more} more memories not drawn)",
            metric.title(),
            lines.len()
        ),
    };
    let panel_height = if kinds.len() <= 1 { 620 } else { 360 };
    let height = 70 + panel_height * kinds.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (panel::WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let body = root
            .titled(&caption, ("sans-serif", 28))
            .map_err(plot_error)?;
        let panels = body.split_evenly((kinds.len().max(1), 1));
        for (index, (area, kind)) in panels.iter().zip(&kinds).enumerate() {
            let panel = panel::Panel {
                kind,
                lines: lines
                    .iter()
                    .filter(|line| line.series.kind == *kind)
                    .collect(),
                requests: requests
                    .iter()
                    .filter(|(of, _)| *of == *kind)
                    .map(|(_, size)| *size)
                    .collect(),
                marks,
                metric,
                x_axis,
                x_range: (x_min, x_max),
                first: index == 0,
            };
            panel.draw(area)?;
        }
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
