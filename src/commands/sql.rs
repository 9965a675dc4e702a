//! `memstate sql`: one read-only statement; csv, json and ndjson stream row by row, so exporting
//! millions of allocations holds nothing in memory.

use std::io;
use std::path::Path;

use memstate::query::output::RowStream;
use memstate::query::{self, Format, Report, RowEvent};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::SqlArgs;

pub fn run(db_path: &Path, args: &SqlArgs) -> Result<u8> {
    let parameters = query::parse_parameters(&args.params)?;
    let database = db::open_read_only(db_path)?;
    let printer = Printer::new(&args.output);
    if printer.format() == Format::Table {
        let table = query::collect(&database.conn, &args.query, &parameters)?;
        printer.print(&Report::table(table))?;
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
