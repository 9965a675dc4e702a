//! Questions asked of the database: ad hoc SQL (read-only), the canned queries of `queries/`, the
//! listings behind the commands, the selection of snapshots and memories, and the loaders of the
//! analyses' inputs: [`context`] gathers what a story is told from, [`pages`] what a page draws.
//! Everything here reads the public views only, but for [`native`], which reads the span tables
//! as the canned SQL it answers for does. Results are [`Table`]s of [`Cell`]s, their
//! columns shown in the units [`columns`] finds declared, which the presenting room
//! ([`crate::present`]) writes out.

pub mod canned;
pub mod columns;
pub mod compare;
pub mod context;
pub mod datasette;
pub mod explore;
pub mod forecast;
pub mod history;
pub mod listing;
pub mod load;
pub mod native;
pub mod pages;
pub mod select;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::Connection;

use crate::error::{Because, Error, Result};

use crate::present::{Cell, Table, Unit};

/// A database error while answering a question.
pub(crate) fn query_error(error: rusqlite::Error) -> Error {
    Error::query(error)
}

impl From<ValueRef<'_>> for Cell {
    fn from(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(number) => Cell::Integer(number),
            ValueRef::Real(number) => Cell::Real(number),
            ValueRef::Text(text) => Cell::Text(String::from_utf8_lossy(text).into_owned()),
            ValueRef::Blob(bytes) => Cell::Blob(bytes.to_vec()),
        }
    }
}

/// A `-p key=value` parameter: integers and reals bind as numbers, anything else as text.
pub fn parameter_value(text: &str) -> SqlValue {
    if let Ok(integer) = text.parse::<i64>() {
        SqlValue::Integer(integer)
    } else if let Ok(real) = text.parse::<f64>() {
        if real.is_finite() {
            SqlValue::Real(real)
        } else {
            SqlValue::Text(text.to_string())
        }
    } else {
        SqlValue::Text(text.to_string())
    }
}

/// Every `key=value` given with `-p`, in order.
pub fn parse_parameters(texts: &[String]) -> Result<Vec<(String, String)>> {
    texts.iter().map(|text| parse_parameter(text)).collect()
}

/// Split `key=value` (a leading `:` on the key is optional).
pub fn parse_parameter(text: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim_start_matches(':').is_empty() => {
            Ok((key.trim_start_matches(':').to_string(), value.to_string()))
        }
        _ => Err(Error::Usage(format!(
            "parameter {text:?}: expected key=value"
        ))),
    }
}

/// Run one SQL statement with named parameters and collect its rows.
///
/// On a read-only connection (see `db::open_read_only`) SQLite refuses anything that writes.
pub fn collect(conn: &Connection, sql: &str, parameters: &[(String, String)]) -> Result<Table> {
    Ok(first_rows(conn, sql, parameters, Keep::ALL)?.table)
}

/// How much of a statement's answer to keep: the first `rows` rows, holding at most `bytes`.
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    pub rows: usize,
    pub bytes: usize,
    /// Run the statement to its end to count every row (else it stops past the kept ones).
    pub count_all: bool,
}

impl Keep {
    /// Every row, whatever it holds.
    pub const ALL: Keep = Keep {
        rows: usize::MAX,
        bytes: usize::MAX,
        count_all: true,
    };
}

/// The kept rows of a statement, how many it had, and whether there were more than kept.
pub struct FirstRows {
    pub table: Table,
    /// Every row when [`Keep::count_all`], else the kept ones and one more when there were more.
    pub total: usize,
    pub more: bool,
}

/// Run one statement and keep its first rows as `keep` says; an answer whose kept rows would
/// hold more than `keep.bytes` is refused (a server's bound on what one request makes it hold).
pub fn first_rows(
    conn: &Connection,
    sql: &str,
    parameters: &[(String, String)],
    keep: Keep,
) -> Result<FirstRows> {
    let mut columns = Vec::new();
    let mut units: Vec<Unit> = Vec::new();
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut held = 0usize;
    let mut total = 0usize;
    let outcome = for_each_row(conn, sql, parameters, &mut |event| {
        match event {
            RowEvent::Columns(names, shown_as) => {
                columns = names.to_vec();
                units = shown_as.to_vec();
            }
            RowEvent::Row(cells) => {
                total += 1;
                if rows.len() == keep.rows {
                    // Enough is held: stop, unless every row is to be counted.
                    return if keep.count_all {
                        Ok(())
                    } else {
                        Err(Error::Interrupted)
                    };
                }
                held = held.saturating_add(cells.iter().map(Cell::held_bytes).sum::<usize>());
                if held > keep.bytes {
                    return Err(Error::Usage(format!(
                        "the answer's first {} rows hold more than {} (values this large are for `memstate sql`): ask for fewer rows, fewer columns or shorter values",
                        rows.len() + 1,
                        crate::units::human_size(i64::try_from(keep.bytes).unwrap_or(i64::MAX))
                    )));
                }
                rows.push(cells);
            }
        }
        Ok(())
    });
    match outcome {
        Ok(()) | Err(Error::Interrupted) => Ok(FirstRows {
            more: total > rows.len(),
            table: Table::with_units(columns, units, rows),
            total,
        }),
        Err(error) => Err(error),
    }
}

/// What [`for_each_row`] hands over: the column names and the units declared for them
/// ([`columns::unit_of`]) once, then each row.
pub enum RowEvent<'a> {
    Columns(&'a [String], &'a [Unit]),
    Row(Vec<Cell>),
}

/// Run one SQL statement and hand its column names, then each row as it comes, to `visit`,
/// without holding the result. An error from `visit` stops the query.
pub fn for_each_row(
    conn: &Connection,
    sql: &str,
    parameters: &[(String, String)],
    visit: &mut dyn FnMut(RowEvent) -> Result<()>,
) -> Result<()> {
    for (position, (key, _)) in parameters.iter().enumerate() {
        if parameters[..position]
            .iter()
            .any(|(earlier, _)| earlier == key)
        {
            return Err(Error::Usage(format!(
                "parameter {key:?} is given twice: give each parameter once"
            )));
        }
    }
    let mut statement = conn
        .prepare(sql)
        .map_err(|error| Error::query(Because::told(describe_sql_error(&error), error)))?;
    // Said before SQLite runs it: a statement that writes (VACUUM INTO included, which on a
    // connection without attachments would fail with "too many attached databases") is refused
    // for what it is.
    if !statement.readonly() {
        return Err(Error::Usage(
            "the statement writes, and memstate opens the database read-only: nothing can be written through it (VACUUM INTO included: copy the database with `sqlite3 DB \".backup copy.db\"`, or cp while no import runs; change it with sqlite3)".to_string(),
        ));
    }
    for (key, value) in parameters {
        let name = format!(":{key}");
        let index = statement
            .parameter_index(&name)
            .map_err(Error::query)?
            .ok_or_else(|| Error::Usage(format!("parameter {key:?} is not used by the query")))?;
        statement
            .raw_bind_parameter(index, parameter_value(value))
            .map_err(Error::query)?;
    }
    for index in 1..=statement.parameter_count() {
        if let Some(name) = statement.parameter_name(index) {
            if !parameters.iter().any(|(key, _)| format!(":{key}") == name) {
                return Err(Error::Usage(format!(
                    "the query needs parameter {name}: pass -p {}=VALUE",
                    name.trim_start_matches([':', '@', '$'])
                )));
            }
        }
    }
    let names: Vec<String> = statement.column_names().map(str::to_string).collect();
    let units: Vec<Unit> = names.iter().map(|name| columns::unit_of(name)).collect();
    visit(RowEvent::Columns(&names, &units))?;
    let width = names.len();
    let mut cursor = statement.raw_query();
    while let Some(current) = cursor
        .next()
        .map_err(|error| Error::query(Because::told(describe_sql_error(&error), error)))?
    {
        let mut cells = Vec::with_capacity(width);
        for index in 0..width {
            cells.push(Cell::from(current.get_ref(index).map_err(Error::query)?));
        }
        visit(RowEvent::Row(cells))?;
    }
    Ok(())
}

/// What an ad hoc statement may use: temporary storage held in memory up to `max_temp` (SQLite
/// would otherwise spill a sort to /var/tmp without bound), values up to `max_value` bytes.
#[derive(Debug, Clone, Copy)]
pub struct AdHocLimits {
    pub max_temp: u64,
    pub max_value: u64,
}

/// How much SQLite's heap may hold beyond the temporary storage: the page cache and statements.
const HEAP_BESIDE_TEMP: u64 = 64 << 20;

thread_local! {
    static LIMITS: std::cell::Cell<Option<AdHocLimits>> = const { std::cell::Cell::new(None) };
}

/// Hold ad hoc statements on `conn` to `limits`. SQLite's heap limit is one for the process,
/// so this is for a process that runs the user's SQL and nothing else (`memstate sql`).
pub fn limit_ad_hoc(conn: &Connection, limits: AdHocLimits) -> Result<()> {
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(Error::query)?;
    let length = i32::try_from(limits.max_value).unwrap_or(i32::MAX);
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, length)
        .map_err(Error::query)?;
    let heap = limits.max_temp.saturating_add(HEAP_BESIDE_TEMP);
    // SAFETY: sets SQLite's process-wide heap limit; it takes effect for later allocations.
    unsafe {
        rusqlite::ffi::sqlite3_hard_heap_limit64(i64::try_from(heap).unwrap_or(i64::MAX));
    }
    LIMITS.with(|cell| cell.set(Some(limits)));
    Ok(())
}

/// The largest value a served statement may make: 8 MiB.
pub const SERVED_VALUE_BYTES: i32 = 8 << 20;

/// Hold one server connection's statements to values of at most [`SERVED_VALUE_BYTES`], their
/// temporary storage (sorts, groupings) in files past a small page cache, not in memory: a
/// server's connections share the process, so what one statement may hold is bounded here and
/// by the process's heap limit (`memstate serve` sets it), never by what a request asks.
pub fn limit_served_statements(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA temp_store = FILE; PRAGMA cache_size = -4096")
        .map_err(Error::query)?;
    conn.set_limit(
        rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
        SERVED_VALUE_BYTES,
    )
    .map_err(Error::query)?;
    Ok(())
}

fn describe_sql_error(error: &rusqlite::Error) -> String {
    let limits = LIMITS.with(|cell| cell.get());
    let text = error.to_string();
    if text.contains("too many attached databases") {
        return format!(
            "{text} (memstate sql opens the database read-only and attaches nothing, so ATTACH and VACUUM INTO cannot run; copy it with `sqlite3 DB \".backup copy.db\"` or cp while no import runs)"
        );
    }
    let size = |bytes: u64| crate::units::human_size(i64::try_from(bytes).unwrap_or(i64::MAX));
    match (error, limits) {
        (rusqlite::Error::SqliteFailure(failure, _), Some(limits))
            if failure.code == rusqlite::ErrorCode::OutOfMemory =>
        {
            format!(
                "the statement needed more than --max-temp {} of temporary storage (a sort, a grouping or a recursive query without end?); narrow it, or give a larger --max-temp",
                size(limits.max_temp)
            )
        }
        (rusqlite::Error::SqliteFailure(failure, _), Some(limits))
            if failure.code == rusqlite::ErrorCode::TooBig =>
        {
            format!(
                "a value larger than --max-value {} ({text}); give a larger --max-value to make it",
                size(limits.max_value)
            )
        }
        (rusqlite::Error::SqliteFailure(failure, _), _)
            if failure.code == rusqlite::ErrorCode::ReadOnly =>
        {
            format!(
                "{error} (memstate sql is read-only: the database cannot be changed through it)"
            )
        }
        (rusqlite::Error::MultipleStatement, _) => {
            "only one SQL statement may be given".to_string()
        }
        _ => error.to_string(),
    }
}

/// Which memories a query over the views reads, bound to parameter `?N`: one (`= ?N`) or a JSON
/// list (`IN json_each(?N)`: a list of bound variables would stop at 32,766). One memory is named
/// with `=` because SQLite plans a list of memory ids over the views as a scan of the node's
/// memories, which costs what all of them cost (0.3 s instead of 0.01 s with 40,000 memories).
pub(crate) struct MemoryFilter {
    pub sql: String,
    pub value: rusqlite::types::Value,
}

impl MemoryFilter {
    pub fn of(memory_ids: &[i64], parameter: usize) -> MemoryFilter {
        match memory_ids {
            [one] => MemoryFilter {
                sql: format!("= ?{parameter}"),
                value: rusqlite::types::Value::Integer(*one),
            },
            many => MemoryFilter {
                sql: format!("IN (SELECT value FROM json_each(?{parameter}))"),
                value: rusqlite::types::Value::Text(
                    serde_json::Value::from(many.to_vec()).to_string(),
                ),
            },
        }
    }
}
