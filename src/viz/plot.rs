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
                format!("{} — run {run}", metric.title()),
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
