//! `memstate export`: databases out as a Parquet dataset, with a progress bar over partitions and
//! a summary of what each table got.

use std::path::Path;

use indicatif::ProgressBar;
use memstate::export::{self, Options, Progress};
use memstate::present::{Cell, Report, Table, Unit};
use memstate::units::{counted, visible};
use memstate::Result;

use super::{progress_bar, Printer};
use crate::cli::ExportArgs;

const BAR: &str = "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} partitions  {msg}";

struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&mut self, total: u64) {
        self.0.set_length(total);
    }
    fn done(&mut self, what: &str) {
        self.0.inc(1);
        self.0.set_message(visible(what).to_string());
    }
}

pub fn run(db_path: &Path, args: &ExportArgs) -> Result<u8> {
    let databases = if args.databases.is_empty() {
        vec![db_path.to_path_buf()]
    } else {
        args.databases.clone()
    };
    let options = Options {
        databases,
        out: args.out.clone(),
        force: args.force,
    };
    let mut bar = Bar(progress_bar(args.quiet, BAR));
    let summary = export::export(&options, &mut bar);
    bar.0.finish_and_clear();
    let summary = summary?;
    let rows = summary
        .tables
        .iter()
        .map(|(name, table)| {
            vec![
                Cell::Text(name.to_string()),
                Cell::Integer(table.files as i64),
                Cell::Integer(table.rows as i64),
                Cell::Integer(table.bytes as i64),
            ]
        })
        .collect();
    let table = Table::declared(
        &[
            ("table", Unit::Plain),
            ("files", Unit::Plain),
            ("rows", Unit::Plain),
            ("bytes", Unit::Bytes),
        ],
        rows,
    );
    let printer = Printer::with_format(args.summary_format);
    printer.print(&Report::table(table))?;
    note!(
        "exported {}: {} of {} into {}",
        counted(summary.databases as u64, "database"),
        counted(summary.node_partitions, "node partition"),
        counted(summary.runs, "run"),
        visible(&args.out.display().to_string())
    );
    Ok(0)
}
