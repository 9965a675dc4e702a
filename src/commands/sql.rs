//! `memstate sql`: one read-only statement, streamed row by row in every format (the table is
//! laid out from its first rows), so a result of millions of rows holds nothing in memory.

use std::io;
use std::path::Path;

use memstate::query::output::{RowStream, TableStream};
use memstate::query::{self, Format, RowEvent};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::SqlArgs;

pub fn run(db_path: &Path, args: &SqlArgs) -> Result<u8> {
    let parameters = query::parse_parameters(&args.params)?;
    let database = db::open_read_only(db_path)?;
    query::limit_ad_hoc(
        &database.conn,
        query::AdHocLimits {
            max_temp: args.max_temp,
            max_value: args.max_value,
        },
    )?;
    let printer = Printer::new(&args.output);
    if printer.format() == Format::Table {
        let mut stream: Option<TableStream<io::StdoutLock<'static>>> = None;
        query::for_each_row(
            &database.conn,
            &args.query,
            &parameters,
            &mut |event| match event {
                RowEvent::Columns(columns) => {
                    stream = Some(printer.table_stream(columns, io::stdout().lock()));
                    Ok(())
                }
                RowEvent::Row(cells) => match stream.as_mut() {
                    Some(table) => table.row(cells).map_err(Error::Output),
                    None => Ok(()),
                },
            },
        )?;
        if let Some(table) = stream {
            table.finish().map_err(Error::Output)?;
        }
        return Ok(0);
    }
    let mut stream: Option<RowStream<io::StdoutLock<'static>>> = None;
    query::for_each_row(
        &database.conn,
        &args.query,
        &parameters,
        &mut |event| match event {
            RowEvent::Columns(columns) => {
                stream = Some(
                    RowStream::start(columns, printer.format(), io::stdout().lock())
                        .map_err(Error::Output)?,
                );
                Ok(())
            }
            RowEvent::Row(cells) => match stream.as_mut() {
                Some(writer) => writer.row(&cells).map_err(Error::Output),
                None => Ok(()),
            },
        },
    )?;
    if let Some(writer) = stream {
        writer.finish().map_err(Error::Output)?;
    }
    Ok(0)
}
