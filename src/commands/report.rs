//! `memstate report NAME -p key=value` and `report --list`: the canned queries of queries/.

use std::path::Path;

use memstate::present::{Cell, Report, Table, Unit};
use memstate::query::{self, canned};
use memstate::{db, Error, Result};

use super::Printer;
use crate::cli::ReportArgs;

fn list(args: &ReportArgs) -> Result<u8> {
    let queries = canned::all();
    let columns = [
        ("name", Unit::Plain),
        ("description", Unit::Plain),
        ("params", Unit::Plain),
        ("columns", Unit::Plain),
    ];
    let rows = queries
        .iter()
        .map(|query| {
            let params: Vec<String> = query
                .params
                .iter()
                .map(|param| {
                    format!(
                        "{} ({}{})",
                        param.name,
                        param.kind.name(),
                        param
                            .default
                            .as_deref()
                            .map(|value| format!(", default {value}"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            let columns: Vec<String> = query
                .columns
                .iter()
                .map(|column| format!("{} ({})", column.name, column.unit))
                .collect();
            vec![
                Cell::text(query.name),
                Cell::text(query.description.clone()),
                Cell::text(params.join(", ")),
                Cell::text(columns.join(", ")),
            ]
        })
        .collect();
    let table = Table::declared(&columns, rows);
    let report = Report::told(table, |out, _| {
        for query in &queries {
            writeln!(out, "{}", query.name)?;
            writeln!(out, "    {}", query.description)?;
            for param in &query.params {
                let default = param
                    .default
                    .as_deref()
                    .map(|value| format!(" [default: {value}]"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "    -p {}=<{}>  {}{default}",
                    param.name,
                    param.kind.name(),
                    param.doc.split(" (default").next().unwrap_or(&param.doc)
                )?;
            }
            let columns: Vec<String> = query
                .columns
                .iter()
                .map(|column| format!("{} ({})", column.name, column.unit))
                .collect();
            writeln!(out, "    columns: {}", columns.join(", "))?;
            writeln!(out)?;
        }
        Ok(())
    });
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}

pub fn run(db_path: &Path, args: &ReportArgs) -> Result<u8> {
    if args.list {
        return list(args);
    }
    let name = args
        .name
        .as_deref()
        .ok_or_else(|| Error::Usage("name a canned query (see memstate report --list)".into()))?;
    let query = canned::find(name)?;
    let parameters = query::parse_parameters(&args.params)?;
    let database = db::open_read_only(db_path)?;
    Printer::new(&args.output).print(&Report::table(canned::execute(
        database.connection(),
        &query,
        &parameters,
    )?))?;
    Ok(0)
}
