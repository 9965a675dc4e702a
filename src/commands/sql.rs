//! `memstate sql`: one read-only statement, streamed row by row in every format (the table is
//! laid out from its first rows), so a result of millions of rows holds nothing in memory.

use std::io;
use std::path::Path;

use memstate::present::Format;
use memstate::present::{RowStream, TableStream};
use memstate::query::{self, RowEvent};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::SqlArgs;

pub fn run(db_path: &Path, args: &SqlArgs) -> Result<u8> {
    let parameters = query::parse_parameters(&args.params)?;
    let database = db::open_read_only(db_path)?;
    // A snapshot parameter takes the forms `report` takes: `latest` and RUN:NODE:SEQ name the
    // snapshot, bound as its id (before, `latest` was bound as text and answered nothing).
    let parameters = parameters
        .into_iter()
        .map(|(key, value)| {
            if key.ends_with("snapshot_id") && value.parse::<i64>().is_err() {
                let id = query::select::one_snapshot(database.connection(), &value)
                    .map_err(|error| Error::Usage(format!("-p {key}={value}: {error}")))?;
                Ok((key, id.to_string()))
            } else {
                Ok((key, value))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    query::limit_ad_hoc(
        database.connection(),
        query::AdHocLimits {
            max_temp: args.max_temp,
            max_value: args.max_value,
        },
    )?;
    let printer = Printer::new(&args.output);
    let mut sink: Option<Sink> = None;
    query::for_each_row(
        database.connection(),
        &args.query,
        &parameters,
        &mut |event| match event {
            RowEvent::Columns(columns, units) => {
                let chosen = printer.chosen(columns)?;
                let out = io::stdout().lock();
                sink = Some(match printer.format() {
                    Format::Table => {
                        Sink::Table(Box::new(printer.table_stream(columns, units, out)))
                    }
                    Format::Rows(format) => {
                        let shown: Vec<String> = match &chosen {
                            Some(indices) => indices.iter().map(|&i| columns[i].clone()).collect(),
                            None => columns.to_vec(),
                        };
                        let rows = RowStream::start(&shown, format, out).map_err(Error::Output)?;
                        Sink::Exact(rows, chosen)
                    }
                });
                Ok(())
            }
            RowEvent::Row(cells) => match sink.as_mut() {
                Some(Sink::Table(table)) => table.row(cells).map_err(Error::Output),
                Some(Sink::Exact(rows, None)) => rows.row(&cells).map_err(Error::Output),
                Some(Sink::Exact(rows, Some(indices))) => {
                    let shown: Vec<_> = indices.iter().map(|&i| cells[i].clone()).collect();
                    rows.row(&shown).map_err(Error::Output)
                }
                None => Ok(()),
            },
        },
    )?;
    match sink {
        Some(Sink::Table(table)) => table.finish().map_err(Error::Output)?,
        Some(Sink::Exact(rows, _)) => rows.finish().map_err(Error::Output)?,
        None => {}
    }
    Ok(0)
}

/// Where the rows go: a table for people, or an exact format.
enum Sink {
    Table(Box<TableStream<io::StdoutLock<'static>>>),
    /// With the columns `--columns` chose, by index.
    Exact(RowStream<'static>, Option<Vec<usize>>),
}
