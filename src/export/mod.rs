//! Export: memstate databases written out as one Hive-partitioned Parquet dataset that DuckDB,
//! Spark or Trino query (`memstate export --format parquet --out DIR [DB...]`).
//!
//! Every database is opened read-only and checked first (not memstate's, newer, locked: refused
//! by name before anything is written), then read inside one read transaction each, so what is
//! exported is one consistent state of each. Node tables ([`tables::Level::Node`]) are written
//! one file per (table, run, node), whole or not at all, replacing what the folder held for that
//! partition: shards can be exported one by one, or in parallel, into one dataset. Run tables are
//! merged with what the dataset holds, under a lock, by the import's own rules (an object's field
//! given fills in and the greater text wins where two disagree; links are a set), so the dataset
//! is the same whether a run's nodes were exported together or apart.
//!
//! `time_unix` is computed across all databases of one call: a node whose dumps carry no wall
//! time takes the clock of the run's earliest dump that has one (by `time_ns`, then node), in
//! whichever database of the call it is, exactly as one database holding everything computes it.
//! A node exported alone, without wall time and without another node of its run beside it in
//! the call, keeps `time_unix` NULL.

pub mod dataset;
mod merge;
pub mod parquet_file;
pub mod publish;
pub mod tables;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::ValueRef;

use crate::db::Database;
use crate::error::{Error, Result};
use merge::Merged;
use parquet_file::Value;
use tables::{Level, Table};

/// How long an export waits for a database another process holds locked before refusing it.
const LOCK_PATIENCE: Duration = Duration::from_secs(3);

/// What to export, and where.
#[derive(Debug, Clone)]
pub struct Options {
    pub databases: Vec<PathBuf>,
    pub out: PathBuf,
    /// Export into a folder that holds something other than a memstate dataset.
    pub force: bool,
}

/// What one table got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSummary {
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// What an export wrote.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub databases: usize,
    pub node_partitions: u64,
    pub runs: u64,
    /// Per table, in [`tables::ALL`] order.
    pub tables: Vec<(&'static str, TableSummary)>,
}

/// Progress: partitions done of all there are.
pub trait Progress {
    fn start(&mut self, total: u64);
    fn done(&mut self, what: &str);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&mut self, _total: u64) {}
    fn done(&mut self, _what: &str) {}
}

/// A (run, node) of one database.
struct Partition {
    database: usize,
    run_id: i64,
    run: String,
    node: i64,
}

pub fn export(options: &Options, progress: &mut dyn Progress) -> Result<Summary> {
    // First every database is checked and surveyed, one open at a time (a cluster's export names
    // a thousand shards, and each open database holds its page cache), so that nothing is
    // written when one of them cannot be exported.
    let mut survey = Survey::default();
    for (index, path) in options.databases.iter().enumerate() {
        let database = open(path)?;
        survey.add(&database, index, &options.databases)?;
    }
    let anchors = survey.anchors();
    dataset::prepare(&options.out, options.force)?;

    let mut summary = Summary {
        databases: options.databases.len(),
        tables: tables::ALL
            .iter()
            .map(|table| (table.name, TableSummary::default()))
            .collect(),
        ..Summary::default()
    };
    progress.start(survey.partitions.len() as u64 + survey.runs.len() as u64);
    let planned: Vec<(String, i64)> = survey
        .partitions
        .iter()
        .map(|partition| (partition.run.clone(), partition.node))
        .collect();
    let runs: Vec<String> = survey.runs.keys().cloned().collect();
    let record = publish::begin(&options.out, &planned, &runs)?;
    // The run tables' rows of every database, merged as they come.
    let mut run_tables: BTreeMap<(String, &'static str), Merged> = BTreeMap::new();
    for (index, path) in options.databases.iter().enumerate() {
        let database = open(path)?;
        for partition in survey.partitions.iter().filter(|p| p.database == index) {
            let mut node =
                publish::NodeWrite::start(&options.out, &partition.run, partition.node, &record)?;
            let mut counts = Vec::new();
            for (position, table) in tables::ALL.iter().enumerate() {
                if table.level != Level::Node {
                    continue;
                }
                let fill =
                    |row: &mut [Value]| fill_time_unix(table, row, anchors.get(&partition.run));
                let rows = write_partition(
                    &database,
                    table,
                    &node.staging(table.name),
                    (partition.run_id, partition.node),
                    fill,
                )?;
                node.staged(table.name, rows);
                counts.push((position, rows));
            }
            for ((position, rows), (_, file)) in counts.into_iter().zip(node.commit()?) {
                add(&mut summary.tables[position].1, &file, rows);
            }
            summary.node_partitions += 1;
            progress.done(&format!("{} node {}", partition.run, partition.node));
        }
        for (run, holders) in &survey.runs {
            for (_, run_id) in holders.iter().filter(|(holder, _)| *holder == index) {
                for table in tables::ALL
                    .iter()
                    .filter(|table| matches!(table.level, Level::Run { .. }))
                {
                    let merged = run_tables
                        .entry((run.clone(), table.name))
                        .or_insert_with(|| Merged::new(table));
                    add_run_rows(&database, *run_id, table, merged)?;
                }
            }
        }
    }
    for run in survey.runs.keys() {
        for (position, table) in tables::ALL.iter().enumerate() {
            if table.level == Level::Node {
                continue;
            }
            let path =
                dataset::run_partition(&options.out, table.name, run).join(dataset::PART_FILE);
            let merged = run_tables
                .remove(&(run.clone(), table.name))
                .unwrap_or_else(|| Merged::new(table));
            let written = merge_run_table(merged, table, &options.out, &path)?;
            add(&mut summary.tables[position].1, &path, written);
        }
        summary.runs += 1;
        progress.done(run);
    }
    record.finish(&options.out, &planned)?;
    Ok(summary)
}

fn add(summary: &mut TableSummary, path: &Path, rows: u64) {
    summary.files += 1;
    summary.rows += rows;
    summary.bytes += std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
}

/// Open a database read-only and start a read transaction, so that all its tables are read from
/// one state of it; a database another process holds locked is refused after [`LOCK_PATIENCE`].
fn open(path: &Path) -> Result<Database> {
    let database = crate::db::open_read_only_waiting(path, LOCK_PATIENCE)?;
    database
        .connection()
        .execute_batch("BEGIN; SELECT count(*) FROM snapshot;")
        .map_err(|error| match &error {
            rusqlite::Error::SqliteFailure(failure, _)
                if matches!(
                    failure.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Error::database(
                    database.display(),
                    "locked by another process (an import at work?); export it when that is done",
                )
            }
            _ => Error::database(database.display(), error),
        })?;
    Ok(database)
}

fn sql_error(database: &Database) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |error| Error::database(database.display(), error)
}

/// What the databases of a call hold: their (run, node) partitions, their runs and, per run, the
/// earliest dump with a wall clock.
#[derive(Default)]
struct Survey {
    partitions: Vec<Partition>,
    /// Each (run, node) and the database holding it.
    seen: HashMap<(String, i64), usize>,
    /// Each run, with the databases that hold it and its id in each.
    runs: BTreeMap<String, Vec<(usize, i64)>>,
    /// Per run: (time_ns, node, time_unix) of its earliest dump with a wall time.
    earliest: HashMap<String, (i64, i64, f64)>,
}

impl Survey {
    fn add(&mut self, database: &Database, index: usize, paths: &[PathBuf]) -> Result<()> {
        let found: Vec<(i64, String, i64)> = query(
            database,
            "SELECT DISTINCT run_id, run, node FROM snapshots ORDER BY run, node",
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        for (run_id, run, node) in found {
            // A (run, node) held by two databases of one call: which one's rows would the
            // partition hold?
            if let Some(other) = self.seen.insert((run.clone(), node), index) {
                return Err(Error::Usage(format!(
                    "run {run:?} node {node} is in both {} and {}: export them in separate calls (each replaces the node's partition), or import them into one database",
                    paths[other].display(),
                    database.display()
                )));
            }
            self.partitions.push(Partition {
                database: index,
                run_id,
                run,
                node,
            });
        }
        let runs: Vec<(i64, String)> = query(database, "SELECT run_id, run FROM runs", |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?;
        for (run_id, run) in runs {
            dataset::check_run_folder(&run).map_err(|what| {
                Error::Usage(format!("{}: run {run:?}: {what}", database.display()))
            })?;
            let clock: Vec<(i64, i64, f64)> = query(
                database,
                &format!(
                    "SELECT time_ns, node, time_unix FROM snapshots
                     WHERE run_id = {run_id} AND wall_time IS NOT NULL AND time_unix IS NOT NULL
                     ORDER BY time_ns, node LIMIT 1"
                ),
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )?;
            if let Some(candidate) = clock.into_iter().next() {
                let earliest = self.earliest.entry(run.clone()).or_insert(candidate);
                if (candidate.0, candidate.1) < (earliest.0, earliest.1) {
                    *earliest = candidate;
                }
            }
            self.runs.entry(run).or_default().push((index, run_id));
        }
        Ok(())
    }

    /// Per run, what a dump without a wall clock of its own node adds to its `time_ns / 1e9` to
    /// get `time_unix`: the wall clock of the run's earliest dump (by time_ns, then node) that
    /// has one, over all databases of the call, less that dump's own `time_ns / 1e9`. (The
    /// snapshots view computes the same sum in the same order, so the figures are equal to the
    /// last bit.)
    fn anchors(&self) -> HashMap<String, f64> {
        self.earliest
            .iter()
            .map(|(run, (time_ns, _, time_unix))| (run.clone(), time_unix - *time_ns as f64 / 1e9))
            .collect()
    }
}

fn query<T>(
    database: &Database,
    sql: &str,
    row: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut statement = database
        .connection()
        .prepare(sql)
        .map_err(sql_error(database))?;
    statement
        .query_map([], row)
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<T>>>())
        .map_err(sql_error(database))
}

/// A snapshot whose database could not place it on the wall clock gets the call's anchor.
fn fill_time_unix(table: &Table, row: &mut [Value], anchor: Option<&f64>) {
    let (Some(anchor), Some(time_unix), Some(time_ns)) = (
        anchor,
        table
            .column("time_unix")
            .filter(|_| table.name == "snapshots"),
        table.column("time_ns"),
    ) else {
        return;
    };
    if let (Value::Null, Value::Int(time_ns)) = (&row[time_unix], &row[time_ns]) {
        row[time_unix] = Value::Real(*time_ns as f64 / 1e9 + anchor);
    }
}

/// Read one partition of a table from a database, row by row, into its file.
fn write_partition(
    database: &Database,
    table: &Table,
    path: &Path,
    (run_id, node): (i64, i64),
    fill: impl Fn(&mut [Value]),
) -> Result<u64> {
    let mut statement = database
        .connection()
        .prepare_cached(table.sql)
        .map_err(sql_error(database))?;
    let rows = statement
        .query_map([run_id, node], |row| values(row, table))
        .map_err(sql_error(database))?;
    write_rows(
        table,
        path,
        rows.map(|row| {
            let mut cells = row.map_err(sql_error(database))?;
            fill(&mut cells);
            Ok(cells)
        }),
    )
}

/// Write rows into a table's file, whole or not at all; how many. A row that could not be read
/// leaves the file as it was and is the error returned.
fn write_rows(
    table: &Table,
    path: &Path,
    rows: impl Iterator<Item = Result<Vec<Value>>>,
) -> Result<u64> {
    let mut failure: Option<Error> = None;
    let mut count = 0;
    dataset::write_whole(path, |file| {
        let mut writer = parquet_file::Writer::new(table, file)?;
        for row in rows {
            match row {
                Ok(cells) => writer.push(&cells)?,
                Err(error) => {
                    failure = Some(error);
                    return Err(std::io::Error::other("reading the rows failed"));
                }
            }
        }
        count = writer.finish()?;
        Ok(())
    })
    .map_err(|error| failure.take().unwrap_or(error))?;
    Ok(count)
}

/// A row of a table's SQL as the file's values.
fn values(row: &rusqlite::Row, table: &Table) -> rusqlite::Result<Vec<Value>> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(index, (name, _))| cell(row.get_ref(index)?, table, name))
        .collect()
}

fn cell(value: ValueRef<'_>, table: &Table, column: &str) -> rusqlite::Result<Value> {
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(number) => Value::Int(number),
        ValueRef::Real(number) => Value::Real(number),
        ValueRef::Text(bytes) => Value::Text(
            std::str::from_utf8(bytes)
                .map_err(|error| {
                    rusqlite::Error::InvalidColumnType(
                        0,
                        format!("{}.{column}: not UTF-8 text ({error})", table.name),
                        rusqlite::types::Type::Text,
                    )
                })?
                .to_string(),
        ),
        ValueRef::Blob(_) => {
            return Err(rusqlite::Error::InvalidColumnType(
                0,
                format!("{}.{column}: a blob where the view gives none", table.name),
                rusqlite::types::Type::Blob,
            ))
        }
    })
}

/// Rows of a run table from one database, merged into `merged`.
fn add_run_rows(
    database: &Database,
    run_id: i64,
    table: &Table,
    merged: &mut Merged,
) -> Result<()> {
    let mut statement = database
        .connection()
        .prepare_cached(table.sql)
        .map_err(sql_error(database))?;
    let mut rows = statement.query([run_id]).map_err(sql_error(database))?;
    while let Some(row) = rows.next().map_err(sql_error(database))? {
        merged.add(values(row, table).map_err(sql_error(database))?);
    }
    Ok(())
}

/// Merge a run table's rows with what the dataset holds, under the dataset's lock, and write it.
fn merge_run_table(mut merged: Merged, table: &Table, root: &Path, path: &Path) -> Result<u64> {
    let _lock = dataset::lock(root)?;
    if path.exists() {
        let (names, held) = parquet_file::read(path)?;
        let expected: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
        if names != expected {
            return Err(Error::database(
                path.display().to_string(),
                format!("its columns are {names:?}, not those of {} ({expected:?}); export into a new folder", table.name),
            ));
        }
        for row in held {
            merged.add(row);
        }
    }
    write_rows(table, path, merged.into_rows().map(Ok))
}
