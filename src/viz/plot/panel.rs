//! One panel of a trend chart: the memories of one kind on their own scale, with their OOM marks,
//! the failed requests' sizes, and a legend beside the plot (so it covers no line).

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{failure_colour, plot_error, Metric, XAxis};
use crate::analysis::{OomMark, Series};
use crate::error::Result;
use crate::units::human_size;

/// The chart's width; the legend takes [`LEGEND_WIDTH`] of it, at the right.
pub(super) const WIDTH: u32 = 1400;
const LEGEND_WIDTH: u32 = 440;

/// A line as drawn: its colour, whether dashed, whether its memory is one a request failed in.
pub(super) struct Line<'s> {
    pub series: &'s Series,
    pub colour: RGBColor,
    pub dashed: bool,
    pub failed: bool,
}

/// The memories of one kind.
pub(super) struct Panel<'a> {
    pub kind: &'a str,
    pub lines: Vec<&'a Line<'a>>,
    /// The sizes of the requests that failed in these memories (for a figure they compare with).
    pub requests: Vec<u64>,
    pub marks: &'a [OomMark],
    pub metric: Metric,
    pub x_axis: XAxis,
    pub x_range: (f64, f64),
    /// Whether this is the chart's first panel: an OOM mark that names no memory is named here.
    pub first: bool,
}

/// The binary unit a panel's sizes are shown in: the largest its highest value reaches twice, so
/// that the ticks are whole numbers of it (1.5 GiB is shown as 1536 MiB, ticks at 200 MiB).
fn binary_unit(highest: f64) -> (&'static str, f64) {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut unit = 0;
    let mut scale = 1.0;
    while unit + 1 < UNITS.len() && highest >= scale * 2048.0 {
        scale *= 1024.0;
        unit += 1;
    }
    (UNITS[unit], scale)
}

/// A tick's value without the float noise of its computation: `200`, `0.5`, `1.25`.
fn tick(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Panel<'_> {
    pub fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let (plot, legend) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
        let bytes = self.metric.is_bytes();
        let highest = self
            .lines
            .iter()
            .flat_map(|line| line.series.points.iter().map(|point| point.1))
            .chain(self.requests.iter().map(|&size| size as f64))
            .fold(0.0f64, f64::max);
        let (unit_name, unit) = if bytes {
            binary_unit(highest)
        } else {
            ("", 1.0)
        };
        // Sizes a little above the highest; fragmentation from 0 to 1, its whole range.
        let y_top = if bytes {
            (highest / unit * 1.08).max(1.0)
        } else {
            1.0
        };
        let (x_min, x_max) = self.x_range;
        let y_desc = if bytes {
            format!("{} ({unit_name})", self.metric.title())
        } else {
            self.metric.title().to_string()
        };
        let x_desc = match self.x_axis {
            XAxis::Time => "time since the run started (s)",
            XAxis::Seq => "snapshot (seq)",
        };
        let mut chart = ChartBuilder::on(&plot)
            .caption(self.kind, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(55)
            .y_label_area_size(105)
            .build_cartesian_2d(x_min..x_max, 0.0..y_top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .axis_desc_style(("sans-serif", 18))
            .label_style(("sans-serif", 16))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xcc, 0xcc, 0xcc))
            .y_label_formatter(&|value| {
                if bytes {
                    format!("{} {unit_name}", tick(*value))
                } else {
                    format!("{value:.2}")
                }
            })
            .draw()
            .map_err(plot_error)?;
        let failure = failure_colour();
        // The other memories first, so the failed ones are drawn over them.
        let mut order: Vec<&Line> = self.lines.clone();
        order.sort_by_key(|line| line.failed);
        for line in &order {
            let style = line.colour.stroke_width(if line.failed { 5 } else { 2 });
            let points: Vec<(f64, f64)> = line
                .series
                .points
                .iter()
                .map(|&(x, y)| (x, y / unit))
                .collect();
            if line.dashed {
                chart.draw_series(DashedLineSeries::new(points.iter().copied(), 10, 6, style))
            } else {
                chart.draw_series(LineSeries::new(points.iter().copied(), style))
            }
            .map_err(plot_error)?;
            // A line of one point (a run of one snapshot) is a dot.
            if points.len() < 2 {
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&point| Circle::new(point, 6, line.colour.filled())),
                    )
                    .map_err(plot_error)?;
            }
        }
        for &size in &self.requests {
            let y = size as f64 / unit;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x_min, y), (x_max, y)],
                    12,
                    6,
                    failure.stroke_width(2),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("failed request: {}", human_size(size as i64)),
                    (x_min + (x_max - x_min) * 0.01, y),
                    ("sans-serif", 17)
                        .into_font()
                        .color(&failure)
                        .pos(Pos::new(HPos::Left, VPos::Bottom)),
                )))
                .map_err(plot_error)?;
        }
        self.draw_marks(&mut chart, y_top)?;
        self.draw_legend(&legend)
    }

    /// One mark per OOM x, named where a memory of this panel failed there: the label on the side
    /// of the mark with room for it, so it is never cut at the chart's edge.
    fn draw_marks<DB: DrawingBackend>(
        &self,
        chart: &mut ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
        y_top: f64,
    ) -> Result<()> {
        let failure = failure_colour();
        let (x_min, x_max) = self.x_range;
        let mut xs: Vec<f64> = self.marks.iter().map(|mark| mark.x).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        for x in xs {
            let at_x = || self.marks.iter().filter(move |mark| mark.x == x);
            let mut names: Vec<String> = at_x()
                .filter_map(|mark| mark.failed.as_ref())
                .filter(|failed| {
                    self.lines.iter().any(|line| {
                        line.series.node == failed.node && line.series.handle == failed.handle
                    })
                })
                .map(|failed| format!("node {} {}", failed.node, failed.handle))
                .collect();
            names.dedup();
            let named_elsewhere = at_x().any(|mark| mark.failed.is_some());
            let text = match names.as_slice() {
                [] if named_elsewhere || !self.first => None,
                [] => Some("OOM".to_string()),
                [one] => Some(format!("OOM: {one}")),
                [first, rest @ ..] => Some(format!("OOM: {first} and {} more", rest.len())),
            };
            chart
                .draw_series(LineSeries::new(
                    vec![(x, 0.0), (x, y_top)],
                    failure.stroke_width(3),
                ))
                .map_err(plot_error)?;
            if let Some(text) = text {
                let gap = (x_max - x_min) * 0.008;
                let (anchor, at) = if x - x_min > (x_max - x_min) / 2.0 {
                    (HPos::Right, x - gap)
                } else {
                    (HPos::Left, x + gap)
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (at, y_top * 0.98),
                        ("sans-serif", 17)
                            .into_font()
                            .color(&failure)
                            .pos(Pos::new(anchor, VPos::Top)),
                    )))
                    .map_err(plot_error)?;
            }
        }
        Ok(())
    }

    /// The legend beside the plot: a swatch and the memory a line.
    fn draw_legend<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        for (index, line) in self.lines.iter().enumerate() {
            let y = 60 + index as i32 * 26;
            let style = line.colour.stroke_width(if line.failed { 5 } else { 2 });
            // The swatch drawn as the line is: two short strokes for a dashed one.
            let strokes: &[(i32, i32)] = if line.dashed {
                &[(8, 18), (26, 36)]
            } else {
                &[(8, 36)]
            };
            for &(from, to) in strokes {
                area.draw(&PathElement::new(vec![(from, y), (to, y)], style))
                    .map_err(plot_error)?;
            }
            let label = if line.failed {
                format!("{}  (out of memory)", line.series.label())
            } else {
                line.series.label()
            };
            area.draw(&Text::new(
                label,
                (44, y),
                ("sans-serif", 15)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(plot_error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_shown_in_the_largest_unit_they_reach() {
        assert_eq!(binary_unit(0.0), ("B", 1.0));
        assert_eq!(binary_unit(2047.0), ("B", 1.0));
        assert_eq!(binary_unit(2048.0), ("KiB", 1024.0));
        assert_eq!(binary_unit(4.0 * 1073741824.0), ("GiB", 1073741824.0));
        assert_eq!(tick(200.00000001), "200");
        assert_eq!(tick(0.5), "0.5");
    }
}
