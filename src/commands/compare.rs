//! `compare`: two runs side by side, from one database or two; with `--out` a chart of both, with
//! `--html` a page with the chart, the tables and links into each run's map where they differ most.

use std::path::{Path, PathBuf};

use memstate::analysis::compare::{
    compare as compare_runs, divergences, Comparison, Divergence, MemoryFigures, PeakChange,
};
use memstate::present::{emit, Cell, Format, Report, Table, Unit};
use memstate::query::compare::{run_figures, trend_points};
use memstate::query::{load, pages};
use memstate::story::link;
use memstate::units::visible;
use memstate::viz::compare_page::{self, ComparePage, Moment};
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

/// Where the map page of one side goes: beside the compare page, named after it.
fn map_path(page: &Path, letter: &str) -> PathBuf {
    let stem = page.file_stem().map_or_else(
        || "compare".into(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    page.with_file_name(format!("{stem}-{letter}-map.html"))
}

/// An output file the user named, checked against both databases (neither it nor its
/// companions, nor a dump either imported, may be written over).
fn checked_target(
    database_a: &db::Database,
    database_b: &db::Database,
    path: &Path,
) -> Result<PathBuf> {
    super::output_target(database_b, path)?;
    super::output_target(database_a, path)
}

pub fn compare(db_path: &Path, args: &CompareArgs) -> Result<u8> {
    let (run_a, path_a) = named(&args.a, db_path);
    let (run_b, path_b) = named(&args.b, args.other.as_deref().unwrap_or(db_path));
    for (path, extensions, what) in [
        (
            &args.out,
            ["svg", "svg"],
            "the chart is written as SVG; name the file .svg",
        ),
        (
            &args.html,
            ["html", "htm"],
            "the page is written as HTML; name the file .html",
        ),
    ] {
        if let Some(path) = path {
            let fits = path.extension().is_some_and(|extension| {
                extensions
                    .iter()
                    .any(|wanted| extension.eq_ignore_ascii_case(wanted))
            });
            if !fits {
                return Err(Error::Usage(format!("{}: {what}", path.display())));
            }
        }
    }
    let x_axis: XAxis = args.x_axis.into();
    let database_a = db::open_read_only(&path_a)?;
    let database_b = db::open_read_only(&path_b)?;
    let targets = Targets {
        chart: args
            .out
            .as_ref()
            .map(|out| checked_target(&database_a, &database_b, out))
            .transpose()?,
        page: match &args.html {
            Some(page) => Some([
                checked_target(&database_a, &database_b, page)?,
                checked_target(&database_a, &database_b, &map_path(page, "a"))?,
                checked_target(&database_a, &database_b, &map_path(page, "b"))?,
            ]),
            None => None,
        },
    };
    let a = run_figures(database_a.connection(), &run_a)?;
    let b = run_figures(database_b.connection(), &run_b)?;
    let svg = if args.out.is_some() || args.html.is_some() {
        let (mut lines_a, mut lines_b) = (
            run_lines(&database_a, &run_a, x_axis)?,
            run_lines(&database_b, &run_b, x_axis)?,
        );
        lines_a.name = args.a.clone();
        lines_b.name = args.b.clone();
        Some(plot::render_pair_svg(&lines_a, &lines_b, x_axis)?)
    } else {
        None
    };
    let mut written = Vec::new();
    if let (Some(out), Some(target), Some(svg)) = (&args.out, &targets.chart, &svg) {
        super::write_output(target, out, svg.as_bytes())?;
        written.push(format!(
            "wrote {}: largest hole and used bytes of both runs, A solid, B dashed",
            out.display()
        ));
    }
    let (mut a, mut b) = (a, b);
    // Two runs of one name (one per database) are told apart by where they come from.
    if a.run == b.run && path_a != path_b {
        a.run = format!("{}@{}", a.run, path_a.display());
        b.run = format!("{}@{}", b.run, path_b.display());
    }
    let comparison = compare_runs(&a, &b);
    let memories = memory_table(&comparison);
    let provenances = peak_table("provenance", &comparison.provenances);
    let objects = peak_table("object", &comparison.objects);
    let (both, only_a, only_b) = comparison.matching();
    let matching = format!(
        "Memories matched by node, kind and place among the node's memories of that kind (by handle): {both} in both, {only_a} only in A, {only_b} only in B."
    );
    let verdict = comparison.verdict();
    if let (Some(page), Some(targets)) = (&args.html, &targets.page) {
        let points_a = trend_points(database_a.connection(), &run_a, x_axis.column())?;
        let points_b = trend_points(database_b.connection(), &run_b, x_axis.column())?;
        let found = divergences(&comparison, &points_a, &points_b, MOMENTS);
        let moments = write_maps(
            page,
            targets,
            [&database_a, &database_b],
            [&comparison.a.run, &comparison.b.run],
            &found,
            x_axis,
        )?;
        let title = format!(
            "memstate compare: {} and {}",
            comparison.a.run, comparison.b.run
        );
        let mut sections: Vec<(&str, &Table)> = vec![
            ("Memories (A, B and B - A)", &memories),
            (
                "Peak bytes held at one snapshot, by provenance, largest change first",
                &provenances,
            ),
        ];
        if !objects.rows.is_empty() {
            sections.push((
                "Peak bytes held at one snapshot, by client object, largest change first",
                &objects,
            ));
        }
        let html = compare_page::render(&ComparePage {
            title: &title,
            run_a: &comparison.a.run,
            run_b: &comparison.b.run,
            verdict: &verdict,
            matching: &matching,
            chart_svg: svg.as_deref(),
            moments: &moments,
            sections: &sections,
        });
        super::write_output(&targets[0], page, html.as_bytes())?;
        written.push(format!(
            "wrote {}: the verdict, the chart, the tables and the {} moments that differ most, each linked into {} and {}; open {}",
            page.display(),
            moments.len(),
            map_path(page, "a").display(),
            map_path(page, "b").display(),
            link::file_url(page)
        ));
    }
    let printer = Printer::new(&args.output);
    if printer.format() != Format::Table {
        let table = match args.by {
            CompareBy::Memory => memories,
            CompareBy::Provenance => provenances,
            CompareBy::Object => objects,
        };
        printer.print(&Report::table(table))?;
        return Ok(0);
    }
    let shown = |table: &Table| {
        Table::with_units(
            table.columns.clone(),
            table.units.clone(),
            table.rows.iter().take(SHOWN_PEAKS).cloned().collect(),
        )
    };
    let (shown_provenances, shown_objects) = (shown(&provenances), shown(&objects));
    let heading = |what: &str, by: &str, all: usize| {
        let more = if all > SHOWN_PEAKS {
            format!(" ({SHOWN_PEAKS} of {all}; --by {by} --format csv for all)")
        } else {
            String::new()
        };
        format!("Peak bytes held at one snapshot, by {what}, largest change first{more}:")
    };
    let provenance_heading = heading("provenance", "provenance", provenances.rows.len());
    let object_heading = heading("client object", "object", objects.rows.len());
    let report = Report::told(Table::plain(Vec::new(), Vec::new()), move |out, style| {
        writeln!(out, "{verdict}")?;
        writeln!(out)?;
        writeln!(
            out,
            "A = {}, B = {}. {matching}",
            visible(&comparison.a.run),
            visible(&comparison.b.run)
        )?;
        emit(&Report::table(memories.clone()), Format::Table, style, out)?;
        writeln!(out)?;
        writeln!(out, "{provenance_heading}")?;
        emit(
            &Report::table(shown_provenances.clone()),
            Format::Table,
            style,
            out,
        )?;
        if !shown_objects.rows.is_empty() {
            writeln!(out)?;
            writeln!(out, "{object_heading}")?;
            emit(
                &Report::table(shown_objects.clone()),
                Format::Table,
                style,
                out,
            )?;
        }
        for line in &written {
            writeln!(out)?;
            writeln!(out, "{}", visible(line))?;
        }
        Ok(())
    });
    printer.print(&report)?;
    Ok(0)
}

/// The rows of a peak table people see in the terminal (the page and the exact formats give all).
const SHOWN_PEAKS: usize = 20;

/// The moments the page lists: the memories whose largest hole differs most.
const MOMENTS: usize = 10;

/// The checked places of what is written: the chart, and the page with its two map pages.
struct Targets {
    chart: Option<PathBuf>,
    page: Option<[PathBuf; 3]>,
}

/// A run's lines for the chart: each figure compared, one series per memory, and its OOM marks.
fn run_lines(database: &db::Database, run: &str, x_axis: XAxis) -> Result<RunLines> {
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
}

/// Write each run's map page of the snapshots the moments name, and the moments with their links.
fn write_maps(
    page: &Path,
    targets: &[PathBuf; 3],
    databases: [&db::Database; 2],
    runs: [&str; 2],
    found: &[Divergence],
    x_axis: XAxis,
) -> Result<Vec<Moment>> {
    let mut moments: Vec<Moment> = found
        .iter()
        .map(|divergence| Moment {
            node: divergence.node,
            kind: divergence.kind.clone(),
            ordinal: divergence.ordinal,
            when: match x_axis {
                XAxis::Time => format!("{:.3} s", divergence.x),
                XAxis::Seq => format!("seq {}", divergence.x),
            },
            seq_a: divergence.a.seq,
            seq_b: divergence.b.seq,
            hole_a: divergence.a.largest_hole,
            hole_b: divergence.b.largest_hole,
            used_a: divergence.a.used,
            used_b: divergence.b.used,
            link_a: String::new(),
            link_b: String::new(),
        })
        .collect();
    for (side, letter) in [(0usize, "a"), (1, "b")] {
        if found.is_empty() {
            break;
        }
        let mut snapshot_ids: Vec<i64> = found
            .iter()
            .map(|divergence| [divergence.a, divergence.b][side].snapshot_id)
            .collect();
        snapshot_ids.sort_unstable();
        snapshot_ids.dedup();
        let parts = pages::map_page(
            databases[side].connection(),
            &snapshot_ids,
            true,
            None,
            None,
        )?;
        let path = map_path(page, letter);
        let title = format!(
            "memstate map of {} ({}) where compare found the runs differ most",
            runs[side],
            ["A", "B"][side]
        );
        super::write_output(&targets[1 + side], &path, parts.render(&title).as_bytes())?;
        let name = path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        for (moment, divergence) in moments.iter_mut().zip(found) {
            let (point, handle) = match side {
                0 => (divergence.a, &divergence.handle_a),
                _ => (divergence.b, &divergence.handle_b),
            };
            let link = format!(
                "{}{}",
                memstate::units::percent_escaped(&name, b""),
                link::fragment(handle, point.snapshot_id, None, u64::MAX)
            );
            match side {
                0 => moment.link_a = link,
                _ => moment.link_b = link,
            }
        }
    }
    Ok(moments)
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
    // People see the hole, the use and the failures of each side (--wide: every column); the
    // kind first, since a narrow terminal keeps the first column whatever it hides.
    table.compact = Some(
        [
            "kind",
            "node",
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

/// One row per provenance or client object (`key` names the column): peak bytes held in A, in
/// B, and B - A, largest change first.
fn peak_table(key: &str, changes: &[PeakChange]) -> Table {
    let rows = changes
        .iter()
        .map(|change| {
            vec![
                change
                    .name
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
            (key, Unit::Plain),
            ("peak_bytes_a", Unit::Bytes),
            ("peak_bytes_b", Unit::Bytes),
            ("peak_bytes_change", Unit::Bytes),
        ],
        rows,
    )
}
