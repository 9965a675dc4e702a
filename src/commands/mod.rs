//! What each command does, one module per command (its arguments come from `cli`, its `run`
//! here), and what they share: where the database is, how results are printed (tables and the
//! machine-readable formats through [`Printer`], plain lines of text through [`say`]; the map's
//! terminal bars, completion scripts, `sql`'s streamed rows and Datasette metadata on standard
//! output are written by their commands), messages on standard error, progress bars.

/// `eprintln!` without its panic: a message on standard error that cannot be written (a closed
/// or full stderr) is dropped, never the command's work.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod blockers;
mod compare;
mod completions;
mod datasette;
mod demo;
mod diff;
mod export;
mod import;
mod listing;
mod map;
mod oom;
mod plot;
mod report;
mod serve;
mod simulate;
mod sql;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use memstate::present::{emit, Style};
use memstate::present::{Format, Report};
use memstate::units::visible_lines;
use memstate::{Error, Result};

use crate::cli::{Cli, Command, OutputArgs};

/// Run the command; the exit status for outcomes that are not errors (1 when some input was refused).
pub fn dispatch(cli: Cli) -> Result<u8> {
    let db = database_path(cli.db.as_deref());
    match cli.command {
        Command::Import(args) => import::import(&db, &args),
        Command::Validate(args) => import::validate(&args),
        Command::Sql(args) => sql::run(&db, &args),
        Command::Serve(args) => serve::run(&db, &args),
        Command::Simulate(args) => simulate::run(&args),
        // The demo's database is its folder's unless --db names one (not $MEMSTATE_DB: the demo
        // should not write into a database the user keeps).
        Command::Demo(args) => demo::run(&args, cli.db.as_deref()),
        Command::Snapshots(args) => listing::snapshots(&db, &args),
        Command::Memories(args) => listing::memories(&db, &args),
        Command::Stats(args) => listing::stats(&db, &args),
        Command::Holes(args) => listing::holes(&db, &args),
        Command::Allocations(args) => listing::allocations(&db, &args),
        Command::Trend(args) => listing::trend(&db, &args),
        Command::Forecast(args) => listing::forecast(&db, &args),
        Command::Compare(args) => compare::compare(&db, &args),
        Command::Diff(args) => diff::run(&db, &args),
        Command::Oom(args) => oom::run(&db, &args),
        Command::Blockers(args) => blockers::run(&db, &args),
        Command::Report(args) => report::run(&db, &args),
        Command::Map(args) => map::run(&db, &args),
        Command::Plot(args) => plot::run(&db, &args),
        Command::DatasetteMetadata(args) => datasette::run(&db, &args),
        Command::Export(args) => export::run(&db, &args),
        Command::Completions(args) => completions::completions(&args),
        Command::Man(args) => completions::man(&args),
    }
}

/// Where an output file the user named goes, checked before the command does its work: refused
/// (exit 2) when it is the database, one of its companions or a dump it imported.
fn output_target(database: &memstate::db::Database, output: &Path) -> Result<PathBuf> {
    if output == Path::new("-") {
        return Err(Error::Usage(
            "a page or a chart is written to a file: name one (`-` is no file here; tables and exact formats go to standard output)".to_string(),
        ));
    }
    database.protected()?.check(output)
}

/// The database opened to read, and the checked target of the page the user asked for, if any.
fn open_for_page(
    db_path: &Path,
    page: Option<&PathBuf>,
) -> Result<(memstate::db::Database, Option<PathBuf>)> {
    let database = memstate::db::open_read_only(db_path)?;
    let target = page
        .map(|path| output_target(&database, path))
        .transpose()?;
    Ok((database, target))
}

/// Write an output file (a page, a chart) whole or not at all, at the target [`output_target`] gave.
fn write_output(target: &Path, shown: &Path, bytes: &[u8]) -> Result<()> {
    memstate::files::write_atomically(target, bytes, shown)
}

/// `--db`, else `$MEMSTATE_DB` (when set and not empty), else `memstate.db`.
fn database_path(given: Option<&Path>) -> PathBuf {
    if let Some(path) = given {
        return path.to_path_buf();
    }
    match std::env::var_os("MEMSTATE_DB") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from("memstate.db"),
    }
}

/// The width of the terminal standard output is, if it is one.
fn terminal_width() -> Option<usize> {
    if !io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ fills a winsize on a terminal file descriptor and touches nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let found = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0
        && size.ws_col > 0;
    if found {
        Some(usize::from(size.ws_col))
    } else {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|columns| columns.parse().ok())
    }
}

/// Where results go and how.
pub struct Printer {
    format: Format,
    style: Style,
}

impl Printer {
    pub fn new(args: &OutputArgs) -> Printer {
        Printer {
            format: args.format,
            style: Style {
                width: terminal_width(),
                wide: args.wide,
                columns: args.columns.clone(),
            },
        }
    }

    /// For commands that only choose a format.
    pub fn with_format(format: Format) -> Printer {
        Printer {
            format,
            style: Style {
                width: terminal_width(),
                wide: false,
                columns: None,
            },
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// A table for people written as its rows come, laid out as [`Printer::print`] lays one out.
    pub fn table_stream<W: Write>(
        &self,
        columns: &[String],
        units: &[memstate::present::Unit],
        out: W,
    ) -> memstate::present::TableStream<W> {
        memstate::present::TableStream::start(columns, units, &self.style, out)
    }

    /// The columns `--columns` names among `columns` (`None` without it): an unknown name is a
    /// usage error that lists the columns there are.
    pub fn chosen(&self, columns: &[String]) -> Result<Option<Vec<usize>>> {
        match &self.style.columns {
            None => Ok(None),
            Some(chosen) => memstate::present::chosen_columns(columns, chosen)
                .map(Some)
                .map_err(Error::Usage),
        }
    }

    /// Print a report to standard output: `--columns` chooses the table's columns in every
    /// format.
    pub fn print(&self, report: &Report) -> Result<()> {
        let chosen = self.chosen(&report.table.columns)?;
        // The report is whole before it is written: buffered, it leaves in large writes, not in
        // one write a line (standard output flushes at each line end, even into a file or pipe:
        // 600,000 writes for `blockers` on 40,000 memories).
        let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
        match (&chosen, self.format) {
            (Some(indices), Format::Rows(_)) => {
                let projected = Report::table(report.table.projected(indices));
                emit(&projected, self.format, &self.style, &mut out)
            }
            _ => emit(report, self.format, &self.style, &mut out),
        }
        .map_err(Error::Output)?;
        out.flush().map_err(Error::Output)
    }
}

/// Write lines for people to standard output.
pub fn say(lines: &[String]) -> Result<()> {
    let mut out = io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}").map_err(Error::Output)?;
    }
    out.flush().map_err(Error::Output)
}

/// An error as people read it on standard error (control characters of dump text made visible).
pub fn error_line(error: &Error) -> String {
    format!("error: {}", visible_lines(&error.to_string()))
}

/// How a file skipped (found in a folder, no input memstate reads) is said.
pub fn skipped_line(error: &Error) -> String {
    format!("skipped: {}", visible_lines(&error.to_string()))
}

/// A progress bar on stderr; indicatif hides it when stderr is not a terminal.
fn progress_bar(quiet: bool, template: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
