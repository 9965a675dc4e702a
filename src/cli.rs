//! The command line: clap definitions only, no logic. `main.rs` turns these into library calls.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use memstate::query::Format;

/// Import memory state dumps of a task runtime (Legion/Realm, Legate) into a SQLite database, and
/// ask it about holes, fragmentation and live allocations across a run's snapshots.
#[derive(Debug, Parser)]
#[command(name = "memstate", version, propagate_version = true, max_term_width = 100)]
#[command(after_help = "Exit status: 0 when everything worked, 1 when some input was refused, 2 for a usage or environment error.")]
pub struct Cli {
    /// The database file (created by `import` when missing).
    #[arg(long, global = true, env = "MEMSTATE_DB", default_value = "memstate.db", value_name = "PATH")]
    pub db: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Import dumps into the database: files, folders (recursively) or - for standard input.
    ///
    /// Each dump lands in its own transaction: a bad dump is reported (file, JSON path, what is
    /// wrong) and skipped while the others land. The same dump imported again is skipped; a
    /// different dump with the same run, node and seq is refused unless --replace. Reads .json,
    /// .ndjson and .jsonl files, plain or compressed with gzip (.gz) or zstd (.zst), and side
    /// annotations files. Exit status 1 when anything was refused.
    Import(ImportArgs),

    /// Check dumps without a database: the same checks as import.
    Validate(ValidateArgs),

    /// Run one read-only SQL statement on the database (see docs/SCHEMA.md for the views).
    ///
    /// Parameters written :name in the query are bound with -p name=value. The database is opened
    /// read-only: SQLite itself refuses any statement that would change it.
    Sql(SqlArgs),
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Dump files, folders (searched recursively for dump files), or - for standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// Refuse fields that format v1 does not define (normally ignored).
    #[arg(long)]
    pub strict: bool,

    /// Print the summary in this format (csv/json/ndjson are exact and machine-readable).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Do not show a progress bar even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    /// Replace an imported snapshot when a different dump has the same run, node and seq.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The SQL statement, e.g. "SELECT * FROM memory_trend".
    #[arg(value_name = "SQL")]
    pub query: String,

    /// Bind a named parameter: -p snapshot_id=3 binds :snapshot_id.
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}
