//! The listings: `snapshots`, `memories`, `stats`, `holes`, `allocations` and `trend`.

use std::path::Path;

use memstate::present::{Cell, Format, Report, Table, Unit};
use memstate::query::listing::{self, AllocationFilter};
use memstate::query::{load, select};
use memstate::units::{counted, human, ratio, visible};
use memstate::{db, Result};

use super::Printer;
use crate::cli::{
    AllocationsArgs, ForecastArgs, HolesArgs, MemoriesArgs, RunArgs, StatsArgs, TrendArgs,
};

/// A listing of one run (or all): the run checked, the table printed.
fn run_listing(db_path: &Path, args: &RunArgs, listing: listing::RunListing) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    if let Some(run) = &args.run {
        select::check_run(database.connection(), run)?;
    }
    Printer::new(&args.output).print(&Report::table(listing(
        database.connection(),
        args.run.as_deref(),
    )?))?;
    Ok(0)
}

pub fn snapshots(db_path: &Path, args: &RunArgs) -> Result<u8> {
    run_listing(db_path, args, listing::snapshot_table)
}

pub fn memories(db_path: &Path, args: &MemoriesArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = database.connection();
    if let Some(run) = &args.run {
        select::check_run(conn, run)?;
    }
    let table = match &args.snapshot {
        None => listing::memory_table(conn, args.run.as_deref())?,
        Some(snapshot) => listing::memories_at(
            conn,
            &select::snapshot_ids(conn, snapshot)?,
            args.run.as_deref(),
        )?,
    };
    Printer::new(&args.output).print(&Report::table(table))?;
    Ok(0)
}

pub fn stats(db_path: &Path, args: &StatsArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let pairs = select::pairs(
        database.connection(),
        &args.snapshot.snapshot,
        args.memory.memory.as_deref(),
    )?;
    Printer::new(&args.output).print(&Report::table(listing::stats_table(
        database.connection(),
        &pairs,
    )?))?;
    Ok(0)
}

pub fn holes(db_path: &Path, args: &HolesArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = database.connection();
    let mut sections = Vec::new();
    let mut combined: Option<Table> = None;
    let pairs = select::pairs(conn, &args.snapshot.snapshot, args.memory.memory.as_deref())?;
    for layout in load::layouts_of(conn, &pairs, false)? {
        let snapshot_id = layout.snapshot_id;
        let table = listing::largest_holes(&layout, args.top);
        let header = format!(
            "{} node {} seq {} (snapshot {snapshot_id}), {} {}: {} free in {}, largest {}, fragmentation {}",
            visible(&layout.run),
            layout.node,
            layout.seq,
            visible(&layout.kind),
            layout.handle,
            human(layout.free_bytes),
            counted(layout.holes.len() as u64, "hole"),
            human(layout.largest_hole),
            ratio(layout.fragmentation())
        );
        // People read a section per memory; programs get one table: the rows are kept once, in
        // the combined table, and each section is cut from it while printing.
        let start = combined.as_ref().map_or(0, |all| all.rows.len());
        let count = table.rows.len();
        let prefixed = table.prefixed(
            &[("snapshot_id", Unit::Plain), ("handle", Unit::Identifier)],
            &[
                Cell::Integer(snapshot_id),
                Cell::text(layout.handle.clone()),
            ],
        );
        match combined.as_mut() {
            Some(all) => all.extend(prefixed),
            None => combined = Some(prefixed),
        }
        sections.push((header, start..start + count));
    }
    let printer = Printer::new(&args.output);
    let Some(combined) = combined else {
        return Ok(0);
    };
    // The rows are held once: by the report for programs, by the sections for people.
    let (given, kept) = match printer.format() {
        memstate::present::Format::Table => {
            let empty =
                Table::with_units(combined.columns.clone(), combined.units.clone(), Vec::new());
            (empty, combined)
        }
        _ => (combined, Table::plain(Vec::new(), Vec::new())),
    };
    let combined = &kept;
    let report = Report::told(given, |out, style| {
        for (header, rows) in &sections {
            writeln!(out, "{header}")?;
            let section = Table::with_units(
                combined.columns[2..].to_vec(),
                combined.units[2..].to_vec(),
                combined.rows[rows.clone()]
                    .iter()
                    .map(|row| row[2..].to_vec())
                    .collect(),
            );
            memstate::present::emit(
                &Report::table(section),
                memstate::present::Format::Table,
                style,
                out,
            )?;
            writeln!(out)?;
        }
        Ok(())
    });
    printer.print(&report)?;
    Ok(0)
}

pub fn allocations(db_path: &Path, args: &AllocationsArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = database.connection();
    if let Some(memory) = &args.memory.memory {
        select::check_memory_selector(conn, memory)?;
    }
    let snapshot_ids = select::snapshot_ids(conn, &args.snapshot.snapshot)?;
    if let Some(kind) = &args.kind {
        select::check_allocation_kind(conn, &snapshot_ids, kind)?;
    }
    let filter = AllocationFilter {
        kind: args.kind.clone(),
        state: args.state.map(Into::into),
        provenance: args.provenance.clone(),
    };
    let mut combined: Option<Table> = None;
    for snapshot_id in snapshot_ids {
        let memory_ids = select::memory_ids(conn, snapshot_id, args.memory.memory.as_deref())?;
        let table = listing::allocation_table(
            conn,
            snapshot_id,
            &memory_ids,
            &filter,
            args.by.map(Into::into),
            i64::from(args.top),
        )?
        .prefixed(
            &[("snapshot_id", Unit::Plain)],
            &[Cell::Integer(snapshot_id)],
        );
        match combined.as_mut() {
            Some(all) => all.extend(table),
            None => combined = Some(table),
        }
    }
    if let Some(table) = combined {
        Printer::new(&args.output).print(&Report::table(table))?;
    }
    Ok(0)
}

pub fn trend(db_path: &Path, args: &TrendArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    if let Some(memory) = &args.memory.memory {
        select::check_memory_selector(database.connection(), memory)?;
    }
    if let Some(run) = &args.run {
        select::check_run(database.connection(), run)?;
    }
    let table = listing::trend_table(
        database.connection(),
        args.memory.memory.as_deref(),
        args.run.as_deref(),
    )?;
    Printer::new(&args.output).print(&Report::table(table))?;
    Ok(0)
}

/// `forecast`: the memories warned about at each node's latest snapshot, or a line saying none is.
pub fn forecast(db_path: &Path, args: &ForecastArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    if let Some(run) = &args.run {
        select::check_run(database.connection(), run)?;
    }
    let table = listing::forecast_table(database.connection(), args.run.as_deref(), args.within)?;
    let mut report = Report::table(table);
    report.empty = Some(format!(
        "No memory's largest hole is forecast to fall below its recent requests within {} dumps, at each node's latest snapshot.",
        args.within
    ));
    Printer::new(&args.output).print(&report)?;
    if report.table.rows.is_empty() || args.output.format != Format::Table {
        return Ok(0);
    }
    // The map of the soonest, as a command to paste.
    let cell = |name: &str| {
        let index = report
            .table
            .columns
            .iter()
            .position(|column| column == name)?;
        match report.table.rows.first()?.get(index)? {
            Cell::Integer(value) => Some(value.to_string()),
            Cell::Text(text) => Some(text.clone()),
            _ => None,
        }
    };
    if let (Some(snapshot), Some(handle)) = (cell("snapshot_id"), cell("handle")) {
        super::say(&[format!(
            "The map of the first: memstate map --html map.html --snapshot {snapshot} --memory {handle}"
        )])?;
    }
    Ok(0)
}
