//! The canned queries of `queries/`: embedded at build time, documented by their own comments
//! (`@param` and `@column` lines, Perfetto style), listed by `memstate report --list` and run by
//! `memstate report NAME -p key=value`. Each file also runs unchanged in the sqlite3 shell.
//!
//! Each `@param NAME KIND` line declares what the parameter names ([`ParamKind`]), and values are
//! resolved by that kind, never by the parameter's name: a snapshot takes what the commands take
//! (`latest`, `RUN:NODE:SEQ`), a memory its Realm id (`0x1e00000000000003`), a run left out is the
//! only one; a parameter documented with `(default N)` may be left out.

use rusqlite::{Connection, OptionalExtension};

use super::{collect, native, query_error, select, Table};
use crate::error::{Error, Result};
use crate::present::Unit;

include!(concat!(env!("OUT_DIR"), "/queries.rs"));

/// What a parameter names, as its query declares it (`@param snapshot_id snapshot ...`): read
/// once here, and what `report`, Datasette's forms and the portable runner resolve values by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    /// A snapshot: its id, `RUN:NODE:SEQ` or `latest`; bound as the snapshot's id.
    Snapshot,
    /// A memory: its id in the database or its Realm id (`0x1e00000000000003`); bound as the id.
    Memory,
    /// A run by name; the database's only run when left out.
    Run,
    /// At most this many rows (a LIMIT): an integer.
    Limit,
    /// Any integer.
    Integer,
    /// Any text.
    Text,
}

impl ParamKind {
    /// Every kind with the word that declares it.
    pub const ALL: [(ParamKind, &'static str); 6] = [
        (ParamKind::Snapshot, "snapshot"),
        (ParamKind::Memory, "memory"),
        (ParamKind::Run, "run"),
        (ParamKind::Limit, "limit"),
        (ParamKind::Integer, "integer"),
        (ParamKind::Text, "text"),
    ];

    /// The kind a declaration's word names.
    pub fn parse(word: &str) -> Option<ParamKind> {
        Self::ALL
            .iter()
            .find(|(_, name)| *name == word)
            .map(|(kind, _)| *kind)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(kind, _)| *kind == self)
            .map_or("text", |(_, name)| name)
    }

    /// Whether the value is bound as a number (else as text).
    pub fn is_integer(self) -> bool {
        !matches!(self, ParamKind::Run | ParamKind::Text)
    }
}

/// A documented parameter of a canned query.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    pub doc: String,
    /// The value used when the parameter is not given (`(default N)` in its doc).
    pub default: Option<String>,
}

/// A documented output column: its unit (`bytes`, `count`, `ratio`, ...) and meaning.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Column {
    pub name: String,
    /// The unit as the query declares it (see [`Unit::named`]).
    pub unit: String,
    /// How its values are shown: the declared unit (none for a word that names no unit, which a
    /// test refuses).
    #[serde(skip)]
    pub shown_as: Unit,
    pub doc: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Query {
    pub name: &'static str,
    #[serde(skip)]
    pub sql: &'static str,
    pub description: String,
    pub params: Vec<Param>,
    pub columns: Vec<Column>,
}

fn split_doc(line: &str) -> (String, String, String) {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default().to_string();
    let kind = words.next().unwrap_or_default().to_string();
    (name, kind, words.collect::<Vec<_>>().join(" "))
}

fn parse(name: &'static str, sql: &'static str) -> Query {
    let mut description = Vec::new();
    let mut params = Vec::new();
    let mut columns = Vec::new();
    let mut in_description = true;
    for line in sql.lines().map_while(|line| line.strip_prefix("--")) {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("@param") {
            in_description = false;
            let (name, kind, doc) = split_doc(rest);
            let default = doc
                .split_once("(default ")
                .and_then(|(_, rest)| rest.split_once(')'))
                .map(|(value, _)| value.trim().to_string());
            // Every query's declarations are checked by a test (`every_parameter_kind_is_known`).
            let kind = ParamKind::parse(&kind).unwrap_or(ParamKind::Text);
            params.push(Param {
                name,
                kind,
                doc,
                default,
            });
        } else if let Some(rest) = line.strip_prefix("@column") {
            in_description = false;
            let (name, unit, doc) = split_doc(rest);
            let shown_as = Unit::named(&unit).unwrap_or(Unit::Plain);
            columns.push(Column {
                name,
                unit,
                shown_as,
                doc,
            });
        } else if in_description && line.is_empty() && !description.is_empty() {
            // What the query answers is its first paragraph; the "why" of how it is written
            // stays in the SQL's comments.
            in_description = false;
        } else if in_description && !line.is_empty() {
            description.push(line.to_string());
        }
    }
    Query {
        name,
        sql,
        description: description.join(" "),
        params,
        columns,
    }
}

/// Every canned query, sorted by name.
pub fn all() -> Vec<Query> {
    SOURCES.iter().map(|(name, sql)| parse(name, sql)).collect()
}

/// A canned query by name.
pub fn find(name: &str) -> Result<Query> {
    all()
        .into_iter()
        .find(|query| query.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = SOURCES.iter().map(|(name, _)| *name).collect();
            Error::Usage(format!(
                "no canned query {name:?}; there are: {}",
                names.join(", ")
            ))
        })
}

/// The value to bind for one parameter: what the commands accept, turned into what the SQL wants.
fn resolve(
    conn: &Connection,
    query: &Query,
    param: &Param,
    value: &str,
    given: &[(String, String)],
) -> Result<String> {
    let wrong =
        |why: String| Error::Usage(format!("{} -p {}={value:?}: {why}", query.name, param.name));
    let given_of = |kind: ParamKind| {
        query
            .params
            .iter()
            .find(|other| other.kind == kind)
            .and_then(|other| given.iter().find(|(key, _)| key == &other.name))
            .map(|(_, value)| value.as_str())
    };
    match param.kind {
        ParamKind::Snapshot if value.parse::<i64>().is_err() => {
            Ok(snapshot_named(conn, value, given_of(ParamKind::Memory))?.to_string())
        }
        // A memory parameter whose default is `all` (every memory of the snapshot): -1.
        ParamKind::Memory if value == "all" && param.default.as_deref() == Some("all") => {
            Ok("-1".to_string())
        }
        ParamKind::Memory if value.parse::<i64>().is_err() => {
            let handle = select::memory_handle(value).ok_or_else(|| {
                wrong("expected a memory id (0x1e00000000000003) or its number".to_string())
            })?;
            let candidates: Vec<i64> = match given_of(ParamKind::Snapshot) {
                Some(snapshot) => {
                    let snapshot_id = match snapshot.parse::<i64>() {
                        Ok(id) => id,
                        Err(_) => snapshot_named(conn, snapshot, Some(value))?,
                    };
                    select::memory_ids(conn, snapshot_id, Some(&handle))?
                }
                None => {
                    let mut statement = conn
                        .prepare("SELECT memory_id FROM memories WHERE handle = ?1")
                        .map_err(super::query_error)?;
                    let rows = statement
                        .query_map([&handle], |row| row.get(0))
                        .map_err(super::query_error)?;
                    rows.collect::<rusqlite::Result<_>>()
                        .map_err(super::query_error)?
                }
            };
            match candidates.as_slice() {
                [one] => Ok(one.to_string()),
                [] => Err(wrong("no such memory (see memstate memories)".to_string())),
                several => {
                    let snapshot = query
                        .params
                        .iter()
                        .find(|other| other.kind == ParamKind::Snapshot)
                        .map_or("the snapshot", |other| other.name.as_str());
                    Err(wrong(format!("{} memories have this id (on several nodes); give {snapshot} too, or {} as a number", several.len(), param.name)))
                }
            }
        }
        ParamKind::Run => {
            select::check_run(conn, value)?;
            Ok(value.to_string())
        }
        ParamKind::Limit | ParamKind::Integer if value.parse::<i64>().is_err() => {
            Err(wrong("expected an integer".to_string()))
        }
        _ => Ok(value.to_string()),
    }
}

/// The snapshot a snapshot selector names, `latest` by the one rule of the README ("Snapshot
/// selectors"), as Datasette's SQL and the Parquet runner read it: given a memory that names one
/// on its own (a number, or an id only one memory has), the latest snapshot of that memory's
/// node; else of the only node, and refused when there are several.
fn snapshot_named(conn: &Connection, selector: &str, memory: Option<&str>) -> Result<i64> {
    if let (true, Some(memory)) = (selector == "latest", memory) {
        let memory_id: Option<i64> = match (memory.parse::<i64>(), select::memory_handle(memory)) {
            (Ok(id), _) => Some(id),
            (Err(_), Some(handle)) => conn
                .query_row(
                    "SELECT CASE WHEN count(*) = 1 THEN min(memory_id) END FROM memories WHERE handle = ?1",
                    [handle],
                    |row| row.get(0),
                )
                .map_err(query_error)?,
            (Err(_), None) => None,
        };
        let latest =
            "SELECT s.id FROM memory m JOIN snapshot s ON s.run_id = m.run_id AND s.node = m.node
                      WHERE m.id = ?1 ORDER BY s.seq DESC LIMIT 1";
        if let Some(memory_id) = memory_id {
            let found: Option<i64> = conn
                .query_row(latest, [memory_id], |row| row.get(0))
                .optional()
                .map_err(query_error)?;
            if let Some(found) = found {
                return Ok(found);
            }
        }
    }
    select::one_snapshot(conn, selector).map_err(|error| match error {
        Error::NotFound(message) if selector == "latest" => Error::NotFound(format!(
            "{message}: latest is one node's latest snapshot, and the database holds several nodes with no memory_id to name one"
        )),
        other => other,
    })
}

/// The database's only run; with none or several, an error that says so (and lists them).
fn only_run(conn: &Connection, query: &str) -> Result<String> {
    match select::runs(conn)? {
        select::Runs::One(only) => Ok(only),
        select::Runs::None => Err(Error::NotFound(format!(
            "{query} needs -p run=VALUE, and the database holds no run yet (import dumps first)"
        ))),
        select::Runs::Several(listed) => Err(Error::Usage(format!(
            "{query} needs -p run=VALUE: the database holds several runs: {listed}"
        ))),
    }
}

/// Run a canned query with `key=value` parameters (defaults filled in, selectors resolved); the
/// columns carry the units their documentation gives.
pub fn execute(conn: &Connection, query: &Query, parameters: &[(String, String)]) -> Result<Table> {
    let bound = bind(conn, query, parameters)?;
    // growth and long-lived are answered in Rust (the same rows; see `native`), else by the SQL.
    let table = match native::answer(conn, query.name, &bound)? {
        Some(rows) => native_table(query, rows),
        None => collect(conn, query.sql, &bound)?,
    };
    Ok(with_units(query, table))
}

/// [`execute`], keeping only what `keep` says (a server's answer): the rows and how many there
/// were in all.
pub fn execute_first(
    conn: &Connection,
    query: &Query,
    parameters: &[(String, String)],
    keep: crate::query::Keep,
) -> Result<(Table, usize)> {
    let bound = bind(conn, query, parameters)?;
    let (table, total) = match native::answer(conn, query.name, &bound)? {
        Some(mut rows) => {
            let total = rows.len();
            rows.truncate(keep.rows);
            (native_table(query, rows), total)
        }
        None => {
            let first = crate::query::first_rows(conn, query.sql, &bound, keep)?;
            (first.table, first.total)
        }
    };
    Ok((with_units(query, table), total))
}

fn native_table(query: &Query, rows: Vec<Vec<crate::present::Cell>>) -> Table {
    let names: Vec<String> = query
        .columns
        .iter()
        .map(|column| column.name.clone())
        .collect();
    // Units as the query declares them, set by `with_units`.
    Table::plain(names, rows)
}

fn with_units(query: &Query, mut table: Table) -> Table {
    for column in &query.columns {
        table = table.with_unit(&[column.name.as_str()], column.shown_as);
    }
    table
}

/// The parameters a canned query runs with: each given one known, defaults filled in,
/// selectors resolved.
fn bind(
    conn: &Connection,
    query: &Query,
    parameters: &[(String, String)],
) -> Result<Vec<(String, String)>> {
    for (key, _) in parameters {
        if !query.params.iter().any(|param| &param.name == key) {
            let known: Vec<&str> = query
                .params
                .iter()
                .map(|param| param.name.as_str())
                .collect();
            return Err(Error::Usage(format!(
                "{} takes no parameter {key:?} (it takes: {})",
                query.name,
                known.join(", ")
            )));
        }
    }
    let mut bound = Vec::new();
    for param in &query.params {
        let value = match parameters.iter().find(|(key, _)| key == &param.name) {
            Some((_, value)) => value.clone(),
            None => match &param.default {
                Some(default) => default.clone(),
                // A database of one run answers about it without being told which.
                None if param.kind == ParamKind::Run => only_run(conn, query.name)?,
                None => {
                    return Err(Error::Usage(format!(
                        "{} needs -p {}=VALUE ({}: {})",
                        query.name,
                        param.name,
                        param.kind.name(),
                        param.doc
                    )));
                }
            },
        };
        bound.push((
            param.name.clone(),
            resolve(conn, query, param, &value, parameters)?,
        ));
    }
    Ok(bound)
}
