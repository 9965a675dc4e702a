//! Trend charts as SVG (plotters' SVG backend): one line per memory of a figure over time or
//! sequence number, titled, with labelled axes, units and a legend, and each `oom` snapshot marked.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::analysis::Series;
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
    Error::Internal { file: String::new(), message: format!("cannot draw the chart: {error}") }
}

/// The chart as SVG text.
pub fn render_svg(run: &str, series: &[Series], ooms: &[f64], metric: Metric, x_axis: XAxis) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let points = series.iter().flat_map(|line| line.points.iter());
        let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
        for &(x, y) in points {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        if x_max <= x_min {
            x_max = x_min + 1.0;
        }
        let y_top = if metric.is_bytes() { (y_max * 1.08).max(1.0) } else { 1.0 };
        let x_label = match x_axis {
            XAxis::Time => "time since the run started (s)",
            XAxis::Seq => "snapshot (seq)",
        };
        let y_label = if metric.is_bytes() { format!("{} (bytes)", metric.title()) } else { metric.title().to_string() };
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} — run {run}", metric.title()), ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(90)
            .build_cartesian_2d(x_min..x_max, 0.0..y_top)
            .map_err(plot_error)?;
        let bytes = metric.is_bytes();
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .y_label_formatter(&|value| if bytes { human_size(*value as i64) } else { format!("{value:.2}") })
            .draw()
            .map_err(plot_error)?;
        for (index, line) in series.iter().enumerate() {
            let colour = Palette99::pick(index).to_rgba();
            chart
                .draw_series(LineSeries::new(line.points.iter().copied(), colour.stroke_width(2)))
                .map_err(plot_error)?
                .label(line.label())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
        }
        for &x in ooms {
            chart
                .draw_series(LineSeries::new(vec![(x, 0.0), (x, y_top)], RED.stroke_width(2)))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    "OOM ".to_string(),
                    (x, y_top * 0.97),
                    ("sans-serif", 16).into_font().color(&RED).pos(Pos::new(HPos::Right, VPos::Top)),
                )))
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}
