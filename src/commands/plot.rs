//! `memstate plot`: a trend chart of a figure across a run's snapshots, as SVG.

use std::path::Path;

use memstate::present::{Cell, Format, Report, Table, Unit};
use memstate::query::{load, select};
use memstate::units::{counted, visible};
use memstate::viz::plot::{self, Metric, XAxis};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::PlotArgs;

pub fn run(db_path: &Path, args: &PlotArgs) -> Result<u8> {
    let is_svg = args
        .out
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("svg"));
    if !is_svg {
        return Err(Error::Usage(format!(
            "--out {}: charts are written as SVG; name the file .svg (convert it with any SVG tool, e.g. rsvg-convert, for PNG)",
            args.out.display()
        )));
    }
    let database = db::open_read_only(db_path)?;
    let target = super::output_target(&database, &args.out)?;
    let conn = database.connection();
    let run = match &args.run {
        Some(run) => {
            select::check_run(conn, run)?;
            run.clone()
        }
        None => select::only_run(conn)?,
    };
    let memory_ids = match &args.memory.memory {
        Some(memory) => {
            select::check_memory_selector(conn, memory)?;
            Some(select::run_memory_ids(conn, &run, Some(memory))?)
        }
        None => None,
    };
    let (metric, x_axis): (Metric, XAxis) = (args.metric.into(), args.x_axis.into());
    let (series, marks) = load::trend_series(
        conn,
        &run,
        memory_ids.as_deref(),
        metric.column(),
        x_axis.column(),
    )?;
    if series.is_empty() {
        return Err(Error::Usage(format!(
            "no memory of run {run:?} matches {:?}",
            args.memory.memory.as_deref().unwrap_or("(all)")
        )));
    }
    let svg = plot::render_svg(&run, &series, &marks, metric, x_axis)?;
    let mut oom_xs: Vec<f64> = marks.iter().map(|mark| mark.x).collect();
    oom_xs.dedup();
    let ooms = oom_xs.len();
    super::write_output(&target, &args.out, svg.as_bytes())?;
    let drawn = series.len().min(plot::MAX_LINES);
    let columns = [
        ("file", Unit::Plain),
        ("lines", Unit::Plain),
        ("memories", Unit::Plain),
        ("oom_marks", Unit::Plain),
    ];
    let row = vec![
        Cell::text(args.out.display().to_string()),
        Cell::count(drawn as u64),
        Cell::count(series.len() as u64),
        Cell::count(ooms as u64),
    ];
    let table = Table::declared(&columns, vec![row]);
    let report = Report::told(table, |out, _| {
        let lines = if drawn < series.len() {
            format!(
                "{drawn} lines for {} memories: the failed ones and those reaching highest; --memory chooses",
                series.len()
            )
        } else {
            format!("{drawn} lines")
        };
        writeln!(
            out,
            "wrote {} ({lines}, {})",
            visible(&args.out.display().to_string()),
            counted(ooms as u64, "oom mark")
        )
    });
    Printer::with_format(Format::Table).print(&report)?;
    Ok(0)
}
