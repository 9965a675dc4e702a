//! Two runs on one chart (`compare --out FILE.svg`): for each memory kind, the largest hole and
//! the bytes used of both runs, A solid and B dashed, a memory the same colour in both (matched
//! as `compare` matches them: node, kind and place among the node's memories of that kind).

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::{failure_colour, panel, plot_error, x_range, Metric, XAxis, LINE_COLOURS};
use crate::analysis::{OomMark, Series};
use crate::error::Result;

/// One run's lines: for each figure drawn, one series per memory; and its out-of-memory marks.
pub struct RunLines {
    pub name: String,
    pub by_metric: Vec<(Metric, Vec<Series>)>,
    pub marks: Vec<OomMark>,
}

/// The figures a comparison draws, each in its own panel per kind.
pub const PAIR_METRICS: [Metric; 2] = [Metric::LargestHole, Metric::Used];

/// A run's lines and marks with x counted from the run's start (time; a seq axis is left as it
/// is) and each handle followed by the run's letter, so the legend tells A's line from B's.
fn tagged(
    run: &RunLines,
    letter: &str,
    x_axis: XAxis,
) -> (Vec<(Metric, Vec<Series>)>, Vec<OomMark>) {
    let start = match x_axis {
        XAxis::Seq => 0.0,
        XAxis::Time => run
            .by_metric
            .iter()
            .flat_map(|(_, series)| {
                series
                    .iter()
                    .flat_map(|line| line.points.iter().map(|point| point.0))
            })
            .chain(run.marks.iter().map(|mark| mark.x))
            .fold(f64::INFINITY, f64::min),
    };
    let start = if start.is_finite() { start } else { 0.0 };
    let by_metric = run
        .by_metric
        .iter()
        .map(|(metric, series)| {
            let lines = series
                .iter()
                .map(|line| Series {
                    node: line.node,
                    handle: format!("{} {letter}", line.handle),
                    kind: line.kind.clone(),
                    points: line.points.iter().map(|&(x, y)| (x - start, y)).collect(),
                })
                .collect();
            (*metric, lines)
        })
        .collect();
    let marks = run
        .marks
        .iter()
        .map(|mark| OomMark {
            x: mark.x - start,
            failed: mark
                .failed
                .as_ref()
                .map(|failed| crate::analysis::FailedAt {
                    node: failed.node,
                    handle: format!("{} {letter}", failed.handle),
                    size: failed.size,
                }),
        })
        .collect();
    (by_metric, marks)
}

/// Each memory's place among its node's memories of its kind, by handle: the key that matches a
/// memory of A with one of B.
fn ordinals(run: &RunLines) -> BTreeMap<(i64, String, String), usize> {
    let mut handles: Vec<(i64, String, String)> = run
        .by_metric
        .iter()
        .flat_map(|(_, series)| series.iter())
        .map(|line| (line.node, line.kind.clone(), line.handle.clone()))
        .collect();
    handles.sort();
    handles.dedup();
    let mut out = BTreeMap::new();
    let mut previous: Option<(i64, String)> = None;
    let mut ordinal = 0;
    for (node, kind, handle) in handles {
        if previous.as_ref() != Some(&(node, kind.clone())) {
            ordinal = 0;
            previous = Some((node, kind.clone()));
        }
        out.insert((node, kind, handle), ordinal);
        ordinal += 1;
    }
    out
}

/// The chart as SVG text: a panel per memory kind and figure, the kind with a failure first.
pub fn render_pair_svg(a: &RunLines, b: &RunLines, x_axis: XAxis) -> Result<String> {
    let runs = [(a, "(A)", false), (b, "(B)", true)];
    let tagged_runs: Vec<_> = runs
        .iter()
        .map(|(run, letter, _)| tagged(run, letter, x_axis))
        .collect();
    let marks: Vec<OomMark> = tagged_runs
        .iter()
        .flat_map(|(_, marks)| marks.iter().cloned())
        .collect();
    // A memory's colour, by its match key; failed memories keep their colour and are drawn thick.
    let mut keys: Vec<(i64, String, usize)> = Vec::new();
    let ordinals: Vec<_> = runs.iter().map(|(run, _, _)| ordinals(run)).collect();
    for table in &ordinals {
        for ((node, kind, _), ordinal) in table {
            keys.push((*node, kind.clone(), *ordinal));
        }
    }
    keys.sort();
    keys.dedup();
    let colour_of = |node: i64, kind: &str, ordinal: usize| {
        let index = keys
            .iter()
            .position(|key| key.0 == node && key.1 == kind && key.2 == ordinal)
            .unwrap_or(0);
        LINE_COLOURS[index % LINE_COLOURS.len()]
    };
    let mut lines: Vec<(Metric, panel::Line)> = Vec::new();
    for (((run, _, dashed), (by_metric, _)), table) in runs.iter().zip(&tagged_runs).zip(&ordinals)
    {
        for ((metric, series), (_, original)) in by_metric.iter().zip(&run.by_metric) {
            for (line, source) in series.iter().zip(original) {
                let ordinal = table
                    .get(&(source.node, source.kind.clone(), source.handle.clone()))
                    .copied()
                    .unwrap_or(0);
                let failed = marks.iter().any(|mark| {
                    mark.failed.as_ref().is_some_and(|failed| {
                        failed.node == line.node && failed.handle == line.handle
                    })
                });
                lines.push((
                    *metric,
                    panel::Line {
                        series: line,
                        colour: if failed {
                            failure_colour()
                        } else {
                            colour_of(line.node, &line.kind, ordinal)
                        },
                        dashed: *dashed,
                        failed,
                    },
                ));
            }
        }
    }
    let mut kinds: Vec<&str> = lines
        .iter()
        .map(|(_, line)| line.series.kind.as_str())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.sort_by_key(|kind| {
        !lines
            .iter()
            .any(|(_, line)| line.failed && line.series.kind == *kind)
    });
    let (x_min, x_max) = x_range(
        lines
            .iter()
            .flat_map(|(_, line)| line.series.points.iter().map(|point| point.0))
            .chain(marks.iter().map(|mark| mark.x)),
    );
    let panels: Vec<(&str, Metric)> = kinds
        .iter()
        .flat_map(|kind| PAIR_METRICS.iter().map(move |metric| (*kind, *metric)))
        .collect();
    let caption = format!("A = {} (solid), B = {} (dashed)", a.name, b.name);
    let height = 70 + 360 * panels.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (panel::WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let body = root
            .titled(&caption, ("sans-serif", 28))
            .map_err(plot_error)?;
        let areas = body.split_evenly((panels.len().max(1), 1));
        for (index, (area, (kind, metric))) in areas.iter().zip(&panels).enumerate() {
            let requests: Vec<u64> = if *metric == Metric::LargestHole {
                let mut sizes: Vec<u64> = marks
                    .iter()
                    .filter_map(|mark| mark.failed.as_ref())
                    .filter(|failed| {
                        lines.iter().any(|(_, line)| {
                            line.series.kind == *kind
                                && line.series.node == failed.node
                                && line.series.handle == failed.handle
                        })
                    })
                    .map(|failed| failed.size)
                    .collect();
                sizes.sort_unstable();
                sizes.dedup();
                sizes
            } else {
                Vec::new()
            };
            let panel = panel::Panel {
                kind,
                lines: lines
                    .iter()
                    .filter(|(of, line)| of == metric && line.series.kind == *kind)
                    .map(|(_, line)| line)
                    .collect(),
                requests,
                marks: &marks,
                metric: *metric,
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
