//! The command line: clap definitions only, no logic. The library's enums get their command-line
//! names here (the library does not know clap); `commands` turns these into library calls.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use memstate::units::parse_positive_size;

mod inputs;
mod values;

pub use inputs::{ImportArgs, ReadArgs, SeqBy, SimulateArgs, ValidateArgs};
use memstate::present::Format;
use values::{format_parser, ReportName};
pub use values::{
    CompressionArg, ExportFormat, FileLayoutArg, GroupByArg, MetricArg, SourceArg, StateArg,
    XAxisArg,
};

const AFTER_HELP: &str = "The database is --db PATH, else $MEMSTATE_DB, else memstate.db in the current folder.
Exit status: 0 when everything worked, 1 when some input was refused, 2 for a usage or environment error.";

/// Import memory state dumps of a task runtime (Legion/Realm, Legate) into a SQLite database, and
/// ask it about holes, fragmentation and live allocations across a run's snapshots.
#[derive(Debug, Parser)]
#[command(name = "memstate", version = env!("MEMSTATE_VERSION"), propagate_version = true, max_term_width = 100)]
#[command(after_help = AFTER_HELP)]
pub struct Cli {
    /// The database file (created by `import` when missing) [default: $MEMSTATE_DB, else memstate.db].
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

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
    /// annotations files. Inside folders, links to folders and files that are not regular files
    /// (FIFOs, sockets, devices) are skipped. Exit status 1 when anything was refused.
    Import(ImportArgs),

    /// Check dumps without a database: the same checks as import.
    Validate(ValidateArgs),

    /// Run one read-only SQL statement on the database (see docs/SCHEMA.md for the views).
    ///
    /// Parameters written :name in the query are bound with -p name=value. The database is opened
    /// read-only: SQLite itself refuses any statement that would change it.
    Sql(SqlArgs),

    /// Explore the database live in a browser: runs, failures, maps, trends, queries and SQL.
    ///
    /// Opens the database read-only and serves one page at http://127.0.0.1:PORT/ until Ctrl-C;
    /// everything it needs is inside memstate (no network). Open pages follow an import that
    /// runs meanwhile (import --follow). Only this machine can connect unless --bind names
    /// another address, and then every request needs the token printed in the URL.
    Serve(ServeArgs),

    /// Write a realistic run of dumps: a Realm-like allocator under a Legate-like workload.
    ///
    /// Deterministic: the same seed and options give byte-identical files. Each node writes a dump
    /// every --dump-every steps and an `oom` dump when a request cannot be placed even after
    /// collecting everything collectable; the run then ends (or goes on with
    /// --continue-after-oom). The defaults end in an out-of-memory error caused by fragmentation.
    Simulate(SimulateArgs),

    /// Simulate a run that ends in an out-of-memory error, import it, and show what happened.
    ///
    /// Writes the dumps and the database under --dir (default ./memstate-demo), prints the OOM
    /// report with the allocations that block the failed request, the fragmentation trend of the
    /// memory that failed, and the commands to try next.
    Demo(DemoArgs),

    /// List the imported snapshots.
    Snapshots(RunArgs),

    /// List the memories of every node of every run.
    Memories(MemoriesArgs),

    /// The figures of memories at snapshots: used, free, holes, largest hole, fragmentation...
    Stats(StatsArgs),

    /// The largest holes of memories at a snapshot, with the total free bytes and hole count.
    Holes(HolesArgs),

    /// The allocations of a snapshot, filtered by kind, state or provenance, or grouped.
    Allocations(AllocationsArgs),

    /// The figures of memories across all snapshots of a run.
    Trend(TrendArgs),

    /// The memories whose largest hole is falling toward the requests they see, at each node's
    /// latest snapshot: how many dumps are left before an out-of-memory error.
    Forecast(ForecastArgs),

    /// Two runs side by side (before and after a fix): per memory, matched by node, kind and
    /// place among the node's memories of that kind, peak used, lowest largest hole, peak
    /// fragmentation and failed requests; per provenance, peak bytes held; and a verdict.
    Compare(CompareArgs),

    /// Allocations that appeared, disappeared or changed (state, place, size) between two snapshots.
    Diff(DiffArgs),

    /// For each failed request: exhaustion or fragmentation, what collection would give, and the
    /// allocations in the way.
    Oom(OomArgs),

    /// The cheapest place in a memory for a request of SIZE bytes, and the allocations that block it.
    Blockers(BlockersArgs),

    /// Run a canned query of queries/ (see --list) with -p key=value parameters.
    Report(ReportArgs),

    /// Draw the memory layout of a snapshot: bars in the terminal, or an interactive HTML page.
    ///
    /// In the terminal each memory is one proportional bar whose cells show what fills most of
    /// their bytes (coloured on a terminal, lettered otherwise: V valid, c collectable,
    /// f pending_free, a pending_alloc, . hole, x unaccounted). --html writes one self-contained
    /// file (no network) to zoom and pan from the whole memory down to single allocations.
    Map(MapArgs),

    /// Draw a trend chart of a figure across a run's snapshots as SVG, one line per memory.
    Plot(PlotArgs),

    /// Write Datasette metadata for the database: titles, descriptions and units of every view
    /// and column, and the canned queries (datasette memstate.db -m metadata.json).
    DatasetteMetadata(DatasetteArgs),

    /// Write databases out as a Parquet dataset for DuckDB, Spark or Trino.
    ///
    /// Reads the --db database, or the databases named (shards of one run, several runs), and
    /// writes DIR/<table>/run=<run>/node=<node>/part-<version>.parquet for snapshots, memories,
    /// memory_stats, allocation_spans, hole_spans and failed_requests, and
    /// DIR/<table>/run=<run>/part-0.parquet for objects and allocation_objects. Columns are those
    /// of the public views (docs/SCHEMA.md) with natural keys instead of integer ids: a snapshot
    /// is (run, node, seq), a memory (run, node, memory) with memory its handle. Exporting again
    /// replaces exactly the node partitions written, each whole: its six files are switched at
    /// once by the node's manifest (DIR/_memstate_nodes/), so a reader sees the old export or the
    /// new one, and an export killed part-way is refused by the runner until run again. Run-level
    /// tables are merged with what DIR holds, under a lock, so shards can be exported one by one
    /// or in parallel. Query with scripts/parquet-query (docs/SCALE-OUT.md).
    Export(ExportArgs),

    /// Print a shell completion script: memstate completions bash > /etc/bash_completion.d/memstate
    Completions(CompletionsArgs),

    /// Print a manual page (roff): memstate man > memstate.1; man ./memstate.1. With a command's
    /// name, that command's page (memstate man holes); with --all DIR, every page into DIR.
    Man(ManArgs),
}

/// How results are printed.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format: a table for people, or exact csv, json or ndjson for programs.
    #[arg(long, default_value = "table", value_parser = format_parser())]
    pub format: Format,

    /// Show every column of wide tables (by default a compact set fitted to the terminal).
    #[arg(long)]
    pub wide: bool,

    /// Show these columns of the table, in this order: --columns node,seq,largest_hole.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub columns: Option<Vec<String>>,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The SQL statement, e.g. "SELECT * FROM memory_trend".
    #[arg(value_name = "SQL")]
    pub query: String,

    /// Bind a named parameter: -p snapshot_id=3 binds :snapshot_id.
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,

    /// The most memory the statement may use for sorting, grouping and other temporary storage
    /// (kept in memory, never spilled to /var/tmp); a statement that needs more is stopped with
    /// a message.
    #[arg(long, default_value = "1GiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub max_temp: u64,

    /// The largest string or blob the statement may make (randomblob(1e9) is refused, not
    /// printed).
    #[arg(long, default_value = "64MiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub max_value: u64,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The port to listen on (0: any free port, said in the URL printed).
    #[arg(long, default_value_t = 8642, value_name = "N")]
    pub port: u16,

    /// The address to listen on. Another than 127.0.0.1 lets other machines connect: every
    /// request then needs a token (--token, or one generated and printed in the URL, which names
    /// the machine when bound to every address), and any name of the machine is served.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub bind: std::net::IpAddr,

    /// The token every request must carry (in the URL, which sets a cookie, or the header
    /// X-Memstate-Token): 16 characters or more, of at least 6 different ones; an empty or
    /// guessable one is refused (exit 2).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,

    /// Open the page in the default browser (xdg-open).
    #[arg(long)]
    pub open: bool,

    /// The longest one SQL statement may run before it is stopped.
    #[arg(long, default_value = "5", value_name = "SECONDS")]
    pub time_limit: f64,

    /// The most rows the SQL box and a canned query return.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub row_limit: usize,
}

/// Which snapshots: `latest` (each node's latest), a snapshot id, or RUN:NODE:SEQ.
#[derive(Debug, Args)]
pub struct SnapshotArg {
    /// The snapshot: latest (each node's latest), an id, or RUN:NODE:SEQ.
    #[arg(long, short = 's', default_value = "latest", value_name = "SNAPSHOT")]
    pub snapshot: String,
}

/// Which memories: a Realm memory id, or a kind.
#[derive(Debug, Args)]
pub struct MemoryArg {
    /// A memory id (0x1e00000000000003 or 1e00000000000003) or a memory kind (GPU_FB_MEM); default: all.
    #[arg(long, short = 'm', value_name = "MEMORY")]
    pub memory: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to write the dumps, the page and the chart; the database too, unless --db names one.
    #[arg(long, default_value = "memstate-demo", value_name = "DIR")]
    pub dir: PathBuf,

    /// The seed of the simulated run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct MemoriesArgs {
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    /// The memories at this snapshot (latest: each node's latest, an id, or RUN:NODE:SEQ), with
    /// their figures there: used, reserved (a GPU's segments), free, largest hole, device free.
    #[arg(long, short = 's', value_name = "SNAPSHOT")]
    pub snapshot: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub snapshot: SnapshotArg,
    #[command(flatten)]
    pub memory: MemoryArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct HolesArgs {
    #[command(flatten)]
    pub snapshot: SnapshotArg,
    #[command(flatten)]
    pub memory: MemoryArg,
    /// At most this many holes per memory.
    #[arg(long, default_value_t = 10)]
    pub top: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct AllocationsArgs {
    #[command(flatten)]
    pub snapshot: SnapshotArg,
    #[command(flatten)]
    pub memory: MemoryArg,
    /// Only allocations of this kind (instance, future, deferred_buffer, pool...).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only allocations in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only allocations whose provenance matches this SQL LIKE pattern (train.py:%).
    #[arg(long)]
    pub provenance: Option<String>,
    /// Group by kind, state, provenance or client object: counts and bytes.
    #[arg(long, value_enum)]
    pub by: Option<GroupByArg>,
    /// At most this many rows.
    #[arg(long, default_value_t = 50)]
    pub top: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct TrendArgs {
    #[command(flatten)]
    pub memory: MemoryArg,
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "How: from the last 8 dumps of each memory, the least-squares slope of its largest \
hole per dump, and the largest request it saw (an allocation that appeared, or a failed request); \
the dumps left are how many more at that slope before the largest hole falls below that request. \
The view memory_forecast holds the same figures for every snapshot (docs/SCHEMA.md)."
)]
pub struct ForecastArgs {
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    /// Warn about a memory when its largest hole is forecast to fall below its recent requests
    /// within this many dumps.
    #[arg(long, default_value_t = 5, value_name = "DUMPS")]
    pub within: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  memstate compare before after                    two runs of one database
  memstate compare before after --other fixed.db   the second run from another database
  memstate compare before@old.db after@new.db      each run from its own database
  memstate compare before after --by provenance --format csv")]
pub struct CompareArgs {
    /// The first run (A): a run name, or RUN@DATABASE.
    pub a: String,
    /// The second run (B): a run name, or RUN@DATABASE.
    pub b: String,
    /// The database of the second run (default: the first run's).
    #[arg(long, value_name = "DB")]
    pub other: Option<PathBuf>,
    /// Which rows csv, json and ndjson give: one per matched memory, per provenance or per client
    /// object (the table for people shows them all).
    #[arg(long, value_enum, default_value = "memory")]
    pub by: CompareBy,
    /// Also draw both runs' largest hole and used bytes, one panel per memory kind and figure,
    /// A solid and B dashed, into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub out: Option<PathBuf>,
    /// Also write a page: the verdict, the chart, the moments where each matched memory's largest
    /// hole differs most, and the tables. Each moment links into a map page of each run written
    /// beside it (FILE's name with -a-map.html and -b-map.html).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// The chart's x axis: seconds since each run started (so the runs line up), or seq.
    #[arg(long = "x", value_enum, default_value_t = XAxisArg::Time)]
    pub x_axis: XAxisArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The rows `compare` gives programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareBy {
    /// One per memory, matched across the runs.
    Memory,
    /// One per provenance, largest change first.
    Provenance,
    /// One per client object (a Legate store, say, matched by its id), largest change first.
    Object,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier snapshot (an id or RUN:NODE:SEQ).
    pub before: String,
    /// The later snapshot (an id or RUN:NODE:SEQ).
    pub after: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct OomArgs {
    /// Only these snapshots (latest, an id or RUN:NODE:SEQ); default: every snapshot with a failed request.
    #[arg(long, short = 's', value_name = "SNAPSHOT")]
    pub snapshot: Option<String>,
    /// List every blocking allocation, not small ones grouped (also spelled --all).
    #[arg(long, alias = "all")]
    pub all_blockers: bool,
    /// Also write the map of the failures to this HTML file (each failing node's last snapshots,
    /// the failed memory's history) and print the link to each failure in it.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct BlockersArgs {
    /// The request's size: bytes, a human size or hex (300000, 512MiB, 0x49000).
    #[arg(long, value_parser = parse_positive_size)]
    pub size: u64,
    /// The request's alignment in bytes (default: the memory's alignment, else 1).
    #[arg(long, value_parser = parse_positive_size)]
    pub alignment: Option<u64>,
    #[command(flatten)]
    pub snapshot: SnapshotArg,
    /// Which memories: a Realm memory id, or a kind (default: the memories of the kind where a
    /// request failed in these snapshots, else GPU_FB_MEM).
    #[arg(long, short = 'm', value_name = "MEMORY", conflicts_with = "all")]
    pub memory: Option<String>,
    /// Look at every memory of the snapshots.
    #[arg(long)]
    pub all: bool,
    /// List every blocking allocation, not small ones grouped.
    #[arg(long)]
    pub all_blockers: bool,
    /// Also write the map of these memories to this HTML file, where the request fits or its
    /// cheapest place hatched and its blockers outlined, and print the link to each.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The format of the dataset (Parquet is the only one).
    #[arg(long, value_enum, default_value_t = ExportFormat::Parquet)]
    pub format: ExportFormat,
    /// The dataset's folder: created when missing; an existing one must be a memstate dataset
    /// (or empty) unless --force.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Export into a folder that holds other things than a memstate dataset.
    #[arg(long)]
    pub force: bool,
    /// The databases to export (default: the --db one), e.g. the shards of an import --shard-dir.
    #[arg(value_name = "DB")]
    pub databases: Vec<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// How the summary is printed.
    #[arg(long, default_value = "table", value_parser = format_parser())]
    pub summary_format: Format,
}

#[derive(Debug, Args)]
pub struct DatasetteArgs {
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The name Datasette serves the database under (default: the --db file's name without its
    /// extension, as Datasette names it: memstate.db → memstate).
    #[arg(long, value_name = "NAME")]
    pub database: Option<String>,
    /// Also write memstate's Datasette plugin into this folder (created if missing): sizes in
    /// binary units and offsets in hex, as the command line prints them, and the SQL box opening
    /// on a public view. Serve with: datasette DB -m FILE --plugins-dir DIR.
    #[arg(long, value_name = "DIR")]
    pub plugins_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The canned query to run (see --list).
    #[arg(required_unless_present = "list", value_parser = ReportName, hide_possible_values = true)]
    pub name: Option<String>,
    /// List the canned queries with their parameters and columns.
    #[arg(long)]
    pub list: bool,
    /// Bind a parameter: -p snapshot_id=3 (or latest, or RUN:NODE:SEQ), -p memory_id=0x1e00000000000003.
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct MapArgs {
    /// The snapshot: latest (each node's latest), an id, or RUN:NODE:SEQ. Default: with --html and
    /// a failed request in the database, the failing node's last snapshots; else latest.
    #[arg(long, short = 's', value_name = "SNAPSHOT")]
    pub snapshot: Option<String>,
    /// Several snapshots for the HTML slider: a range of ids (3..10) or a comma list of selectors.
    #[arg(long, value_name = "SNAPSHOTS", conflicts_with = "snapshot")]
    pub snapshots: Option<String>,
    #[command(flatten)]
    pub memory: MemoryArg,
    /// Zoom the terminal bars to a byte range: START:END, in bytes, human or hex (0:64MiB,
    /// 0x0:0x100000).
    #[arg(long, value_name = "START:END")]
    pub range: Option<String>,
    /// Write an interactive HTML map to this file instead of drawing in the terminal. It opens on
    /// the failed request (its window hatched, its blockers outlined) when there is one, else on
    /// the most fragmented memory; FILE#memory=HANDLE&snapshot=ID&range=START:END&probe=BYTE
    /// opens it elsewhere.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// With --html: add the history of the memory the page opens on (and of each memory --memory
    /// names): address against time, each allocation a rectangle over the snapshots it lived.
    #[arg(long, requires = "html")]
    pub history: bool,
    /// Letters instead of colours (also when the output is not a terminal, or NO_COLOR is set).
    #[arg(long)]
    pub no_color: bool,
    /// Width of the terminal bars in cells (default: the terminal's width).
    #[arg(long)]
    pub width: Option<usize>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The figure to plot.
    #[arg(long, value_enum, default_value_t = MetricArg::Fragmentation)]
    pub metric: MetricArg,
    #[command(flatten)]
    pub memory: MemoryArg,
    /// The run (default: the run of the most recently imported snapshot).
    #[arg(long)]
    pub run: Option<String>,
    /// The x axis: seconds since the run started, or snapshot sequence numbers.
    #[arg(long = "x", value_enum, default_value_t = XAxisArg::Time)]
    pub x_axis: XAxisArg,
    /// The SVG file to write (the name must end in .svg).
    #[arg(long, value_name = "FILE.svg")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// A command whose page to print (holes, report, ...); without one, memstate's own page.
    #[arg(value_name = "COMMAND", conflicts_with = "all")]
    pub command: Option<String>,
    /// Write memstate.1 and one memstate-COMMAND.1 a command into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub all: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
