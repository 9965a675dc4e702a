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

    /// Write a realistic run of dumps: a Realm-like allocator under a Legate-like workload.
    ///
    /// Deterministic: the same seed and options give byte-identical files. Each node writes a dump
    /// every --dump-every steps and an `oom` dump when a request cannot be placed even after
    /// collecting everything collectable; the run then ends (or goes on with
    /// --continue-after-oom). The defaults end in an out-of-memory error caused by fragmentation.
    Simulate(SimulateArgs),
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

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The folder to write into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// The seed of the run: the same seed and options give the same dumps.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// The run's id in the dumps.
    #[arg(long = "run", default_value = "sim-run", value_name = "ID")]
    pub run_id: String,

    /// Number of nodes (processes), each with its own memories and dumps.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,

    /// GPUs per node (one GPU_FB_MEM each).
    #[arg(long, default_value_t = 2)]
    pub gpus: usize,

    /// Capacity of each GPU framebuffer, e.g. 16GiB.
    #[arg(long, default_value = "1GiB", value_parser = memstate::sim::parse_size, value_name = "SIZE")]
    pub gpu_capacity: u64,

    /// Capacity of each node's SYSTEM_MEM.
    #[arg(long, default_value = "4GiB", value_parser = memstate::sim::parse_size, value_name = "SIZE")]
    pub system_capacity: u64,

    /// Capacity of each node's Z_COPY_MEM.
    #[arg(long, default_value = "64MiB", value_parser = memstate::sim::parse_size, value_name = "SIZE")]
    pub zcopy_capacity: u64,

    /// Steps to simulate (a step is a millisecond of the run).
    #[arg(long, default_value_t = 400)]
    pub steps: u64,

    /// A periodic dump every this many steps, per node.
    #[arg(long, default_value_t = 10, value_name = "STEPS")]
    pub dump_every: u64,

    /// How busy the workload is: stores, tasks and temporaries per step scale with it.
    #[arg(long, default_value_t = 1.0)]
    pub intensity: f64,

    /// Write strings inline instead of interning them in a strings table.
    #[arg(long)]
    pub no_intern: bool,

    /// A file per dump, or one ndjson stream per node.
    #[arg(long, value_enum, default_value_t = memstate::sim::Layout::Files)]
    pub layout: memstate::sim::Layout,

    /// Compress the files.
    #[arg(long, value_enum, default_value_t = memstate::sim::Compression::None)]
    pub compression: memstate::sim::Compression,

    /// Keep going after an out-of-memory error (the mapper backs off from that task).
    #[arg(long)]
    pub continue_after_oom: bool,

    /// Print the summary in this format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Do not show a progress bar even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
}
