//! `compare`: two runs side by side, from one database or two.

use std::path::{Path, PathBuf};

use memstate::analysis::compare::{compare as compare_runs, Comparison, MemoryFigures};
use memstate::present::{emit, Cell, Format, Report, Table, Unit};
use memstate::query::compare::run_figures;
use memstate::query::load;
use memstate::units::visible;
use memstate::viz::plot::{self, RunLines, XAxis, PAIR_METRICS};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::{CompareArgs, CompareBy};

/// A run as named on the command line: `RUN` (in the given database) or `RUN@DATABASE`.
fn named(text: &str, database: &Path) -> (String, PathBuf) {
    match text.rsplit_once('@') {
        Some((run, path)) if !run.is_empty() && !path.is_empty() => {
            (run.to_string(), PathBuf::from(path))
        }
        _ => (text.to_string(), database.to_path_buf()),
    }
}

pub fn compare(db_path: &Path, args: &CompareArgs) -> Result<u8> {
    let (run_a, path_a) = named(&args.a, db_path);
    let (run_b, path_b) = named(&args.b, args.other.as_deref().unwrap_or(db_path));
    if let Some(out) = &args.out {
        let is_svg = out
            .extension()
            .is_some_and(|extension| extension.eq_ignore_ascii_case("svg"));
        if !is_svg {
            return Err(Error::Usage(format!(
                "--out {}: the chart is written as SVG; name the file .svg",
                out.display()
            )));
        }
    }
    let x_axis: XAxis = args.x_axis.into();
    let database_a = db::open_read_only(&path_a)?;
    let database_b = db::open_read_only(&path_b)?;
    let a = run_figures(database_a.connection(), &run_a)?;
    let b = run_figures(database_b.connection(), &run_b)?;
    let lines = |database: &db::Database, run: &str| -> Result<RunLines> {
        let mut by_metric = Vec::new();
        let mut marks = Vec::new();
        for metric in PAIR_METRICS {
            let (series, oom) = load::trend_series(
                database.connection(),
                run,
                None,
                metric.column(),
                x_axis.column(),
            )?;
            by_metric.push((metric, series));
            marks = oom;
        }
        Ok(RunLines {
            name: run.to_string(),
            by_metric,
            marks,
        })
    };
    let chart = match &args.out {
        Some(out) => {
            let target = super::output_target(&database_a, out)?;
            let (mut lines_a, mut lines_b) =
                (lines(&database_a, &run_a)?, lines(&database_b, &run_b)?);
            lines_a.name = args.a.clone();
            lines_b.name = args.b.clone();
            let svg = plot::render_pair_svg(&lines_a, &lines_b, x_axis)?;
            super::write_output(&target, out, svg.as_bytes())?;
            Some(out.display().to_string())
        }
        None => None,
    };
    let (mut a, mut b) = (a, b);
    // Two runs of one name (one per database) are told apart by where they come from.
    if a.run == b.run && path_a != path_b {
        a.run = format!("{}@{}", a.run, path_a.display());
        b.run = format!("{}@{}", b.run, path_b.display());
    }
    let comparison = compare_runs(&a, &b);
    let memories = memory_table(&comparison);
    let provenances = provenance_table(&comparison);
    let printer = Printer::new(&args.output);
    if printer.format() != Format::Table {
        let table = match args.by {
            CompareBy::Memory => memories,
            CompareBy::Provenance => provenances,
        };
        printer.print(&Report::table(table))?;
        return Ok(0);
    }
    let (both, only_a, only_b) = comparison.matching();
    let verdict = comparison.verdict();
    let shown_provenances = Table::with_units(
        provenances.columns.clone(),
        provenances.units.clone(),
        provenances.rows.iter().take(20).cloned().collect(),
    );
    let more = provenances.rows.len().saturating_sub(20);
    let report = Report::told(Table::plain(Vec::new(), Vec::new()), move |out, style| {
        writeln!(out, "{verdict}")?;
        writeln!(out)?;
        writeln!(
            out,
            "A = {}, B = {}. Memories matched by node, kind and place among the node's memories of that kind (by handle): {both} in both, {only_a} only in A, {only_b} only in B.",
            visible(&comparison.a.run), visible(&comparison.b.run)
        )?;
        emit(&Report::table(memories.clone()), Format::Table, style, out)?;
        writeln!(out)?;
        writeln!(
            out,
            "Peak bytes held at one snapshot, by provenance, largest change first{}:",
            if more > 0 {
                format!(
                    " (20 of {}; --by provenance --format csv for all)",
                    provenances.rows.len()
                )
            } else {
                String::new()
            }
        )?;
        emit(
            &Report::table(shown_provenances.clone()),
            Format::Table,
            style,
            out,
        )?;
        if let Some(chart) = &chart {
            writeln!(out)?;
            writeln!(
                out,
                "wrote {chart}: largest hole and used bytes of both runs, A solid, B dashed"
            )?;
        }
        Ok(())
    });
    printer.print(&report)?;
    Ok(0)
}

fn bytes(value: Option<u64>) -> Cell {
    value.map_or(Cell::Null, |value| {
        Cell::Integer(i64::try_from(value).unwrap_or(i64::MAX))
    })
}

fn difference(a: Option<u64>, b: Option<u64>) -> Cell {
    match (a, b) {
        (Some(a), Some(b)) => Cell::Integer(b as i64 - a as i64),
        _ => Cell::Null,
    }
}

/// One row per matched memory: each figure in A, in B, and B - A.
fn memory_table(comparison: &Comparison<'_>) -> Table {
    let figure = |memory: Option<&MemoryFigures>, pick: fn(&MemoryFigures) -> Option<u64>| {
        memory.and_then(pick)
    };
    let rows = comparison
        .memories
        .iter()
        .map(|m| {
            let used = (figure(m.a, |x| x.peak_used), figure(m.b, |x| x.peak_used));
            let hole = (
                figure(m.a, |x| x.lowest_largest_hole),
                figure(m.b, |x| x.lowest_largest_hole),
            );
            let fragmentation = (
                m.a.and_then(|x| x.peak_fragmentation),
                m.b.and_then(|x| x.peak_fragmentation),
            );
            let failed = (
                m.a.map(|x| x.failed_requests),
                m.b.map(|x| x.failed_requests),
            );
            let real = |value: Option<f64>| value.map_or(Cell::Null, Cell::Real);
            vec![
                Cell::Integer(m.node),
                Cell::text(m.kind.clone()),
                Cell::Integer(m.ordinal),
                m.a.map_or(Cell::Null, |x| Cell::text(x.handle.clone())),
                m.b.map_or(Cell::Null, |x| Cell::text(x.handle.clone())),
                bytes(used.0),
                bytes(used.1),
                difference(used.0, used.1),
                bytes(hole.0),
                bytes(hole.1),
                difference(hole.0, hole.1),
                real(fragmentation.0),
                real(fragmentation.1),
                match fragmentation {
                    (Some(a), Some(b)) => Cell::Real(b - a),
                    _ => Cell::Null,
                },
                bytes(failed.0),
                bytes(failed.1),
                difference(failed.0, failed.1),
            ]
        })
        .collect();
    let mut table = Table::declared(
        &[
            ("node", Unit::Plain),
            ("kind", Unit::Plain),
            ("ordinal", Unit::Plain),
            ("handle_a", Unit::Identifier),
            ("handle_b", Unit::Identifier),
            ("peak_used_a", Unit::Bytes),
            ("peak_used_b", Unit::Bytes),
            ("peak_used_change", Unit::Bytes),
            ("lowest_largest_hole_a", Unit::Bytes),
            ("lowest_largest_hole_b", Unit::Bytes),
            ("lowest_largest_hole_change", Unit::Bytes),
            ("peak_fragmentation_a", Unit::Ratio),
            ("peak_fragmentation_b", Unit::Ratio),
            ("peak_fragmentation_change", Unit::Ratio),
            ("failed_requests_a", Unit::Plain),
            ("failed_requests_b", Unit::Plain),
            ("failed_requests_change", Unit::Plain),
        ],
        rows,
    );
    // People see the hole, the use and the failures of each side (--wide: every column).
    table.compact = Some(
        [
            "node",
            "kind",
            "ordinal",
            "lowest_largest_hole_a",
            "lowest_largest_hole_b",
            "peak_used_a",
            "peak_used_b",
            "peak_fragmentation_a",
            "peak_fragmentation_b",
            "failed_requests_a",
            "failed_requests_b",
        ]
        .map(str::to_string)
        .to_vec(),
    );
    table
}

/// One row per provenance: peak bytes held in A, in B, and B - A, largest change first.
fn provenance_table(comparison: &Comparison<'_>) -> Table {
    let rows = comparison
        .provenances
        .iter()
        .map(|change| {
            vec![
                change
                    .provenance
                    .as_ref()
                    .map_or(Cell::Null, |name| Cell::text(name.clone())),
                bytes(Some(change.a)),
                bytes(Some(change.b)),
                Cell::Integer(change.difference()),
            ]
        })
        .collect();
    Table::declared(
        &[
            ("provenance", Unit::Plain),
            ("peak_bytes_a", Unit::Bytes),
            ("peak_bytes_b", Unit::Bytes),
            ("peak_bytes_change", Unit::Bytes),
        ],
        rows,
    )
}
