//! The canned queries of `queries/`: embedded at build time, documented by their own comments
//! (`@param` and `@column` lines, Perfetto style), listed by `memstate report --list` and run by
//! `memstate report NAME -p key=value`. Each file also runs unchanged in the sqlite3 shell.

use rusqlite::Connection;

use super::{run as run_sql, Table};
use crate::error::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/queries.rs"));

/// A documented parameter of a canned query.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Param {
    pub name: String,
    pub kind: String,
    pub doc: String,
}

/// A documented output column: its unit (`bytes`, `count`, `ratio`, ...) and meaning.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Column {
    pub name: String,
    pub unit: String,
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
            params.push(Param { name, kind, doc });
        } else if let Some(rest) = line.strip_prefix("@column") {
            in_description = false;
            let (name, unit, doc) = split_doc(rest);
            columns.push(Column { name, unit, doc });
        } else if in_description && !line.is_empty() {
            description.push(line.to_string());
        }
    }
    Query { name, sql, description: description.join(" "), params, columns }
}

/// Every canned query, sorted by name.
pub fn all() -> Vec<Query> {
    SOURCES.iter().map(|(name, sql)| parse(name, sql)).collect()
}

/// A canned query by name.
pub fn find(name: &str) -> Result<Query> {
    all().into_iter().find(|query| query.name == name).ok_or_else(|| {
        let names: Vec<&str> = SOURCES.iter().map(|(name, _)| *name).collect();
        Error::Usage(format!("no canned query {name:?}; there are: {}", names.join(", ")))
    })
}

/// Run a canned query with `key=value` parameters; byte columns are marked for human display.
pub fn run(conn: &Connection, query: &Query, parameters: &[(String, String)]) -> Result<Table> {
    for (key, _) in parameters {
        if !query.params.iter().any(|param| &param.name == key) {
            let known: Vec<&str> = query.params.iter().map(|param| param.name.as_str()).collect();
            return Err(Error::Usage(format!("{} takes no parameter {key:?} (it takes: {})", query.name, known.join(", "))));
        }
    }
    let table = run_sql(conn, query.sql, parameters)?;
    let sizes: Vec<&str> = query.columns.iter().filter(|column| column.unit == "bytes").map(|column| column.name.as_str()).collect();
    Ok(table.with_sizes(&sizes))
}
