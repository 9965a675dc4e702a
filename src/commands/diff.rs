//! `memstate diff A B`: allocations that appeared, disappeared or changed between two snapshots.

use std::path::Path;

use memstate::analysis::{self, Change};
use memstate::db::{self, Database};
use memstate::present::{Cell, Report, Table, Unit};
use memstate::query::{load, select};
use memstate::units::visible;
use memstate::{Error, Result};

use super::Printer;
use crate::cli::DiffArgs;

/// One row per change.
fn change_table(changes: &[Change]) -> Table {
    let columns = [
        ("change", Unit::Plain),
        ("handle", Unit::Identifier),
        ("uid", Unit::Identifier),
        ("kind", Unit::Plain),
        ("provenance", Unit::Plain),
        ("size", Unit::Bytes),
        ("offset", Unit::Offset),
        ("state_before", Unit::Plain),
        ("state_after", Unit::Plain),
    ];
    let rows = changes
        .iter()
        .map(|change| {
            vec![
                Cell::text(change.change.as_str()),
                Cell::text(change.handle.clone()),
                Cell::text(change.uid.clone()),
                Cell::text(change.kind.clone()),
                Cell::optional_text(change.provenance.as_deref()),
                Cell::count(change.size),
                Cell::count(change.offset),
                Cell::optional_text(change.state_before.map(|state| state.as_str())),
                Cell::optional_text(change.state_after.map(|state| state.as_str())),
            ]
        })
        .collect();
    Table::declared(&columns, rows)
}

/// Where a comparison means nothing, refuse it; where it may mislead, say so on stderr. Uids are
/// a run's own: snapshots of two runs share none (refused, exit 2). Two nodes of one run hold
/// different memories (a warning names both), and a later snapshot given first turns what
/// appeared into what disappeared (a warning too).
fn check_pair(database: &Database, before: i64, after: i64) -> Result<()> {
    let conn = database.connection();
    let (first, second) = (
        select::snapshot_name(conn, before)?,
        select::snapshot_name(conn, after)?,
    );
    let name = |snapshot: &select::SnapshotName, id: i64| {
        format!(
            "{}:{}:{} (snapshot {id})",
            visible(&snapshot.run),
            snapshot.node,
            snapshot.seq
        )
    };
    if first.run != second.run {
        return Err(Error::Usage(format!(
            "{} and {} belong to different runs, whose uids have nothing in common: compare snapshots of one run",
            name(&first, before),
            name(&second, after)
        )));
    }
    if first.node != second.node {
        note!(
            "warning: {} and {} are on different nodes: they hold different memories, so most allocations will show as appeared or disappeared",
            name(&first, before),
            name(&second, after)
        );
    } else if second.seq < first.seq {
        note!(
            "warning: {} comes before {}: the changes are read backwards in time (swap them to follow the run)",
            name(&second, after),
            name(&first, before)
        );
    }
    Ok(())
}

pub fn run(db_path: &Path, args: &DiffArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = database.connection();
    let before = select::one_snapshot(conn, &args.before)?;
    let after = select::one_snapshot(conn, &args.after)?;
    check_pair(&database, before, after)?;
    // What the two snapshots share unchanged cannot differ: each side leaves it out.
    let changes = analysis::diff(
        &load::placed(conn, before, Some(after))?,
        &load::placed(conn, after, Some(before))?,
    );
    let report = Report::table(change_table(&changes)).when_empty(format!(
        "no allocation appeared, disappeared or changed between snapshots {before} and {after}"
    ));
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
