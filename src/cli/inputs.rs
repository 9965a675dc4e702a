//! The arguments of the commands that read dumps and write them: `import`, `validate` and
//! `simulate`.

use std::path::PathBuf;

use clap::Args;
use memstate::present::Format;
use memstate::units::{parse_duration, parse_positive_size};

use super::values::{format_parser, parse_wall_start};
use super::{CompressionArg, FileLayoutArg, SourceArg};

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Dump files, folders (searched recursively for dump files), or - for standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// Refuse fields that format v1 does not define (normally ignored).
    #[arg(long)]
    pub strict: bool,

    /// The largest one dump (a .json file, or a line of a stream) may be once decompressed; a
    /// larger one is refused and skipped. Bounds memory on any input: a dump over 48 MiB is read
    /// only once those before it are written, so an import takes at most about 4 times the
    /// largest dump (plus 64 MiB).
    #[arg(long, default_value = "1GiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub max_dump_size: u64,

    /// The largest a PyTorch snapshot pickle may be once decompressed. A pickle is read whole
    /// (its values refer to each other): reading one takes about twice its size.
    #[arg(long, default_value = "4GiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub max_pickle_size: u64,

    /// How many times its compressed size a .gz or .zst input may expand to, once past 64 MiB
    /// (dumps compress about 10 times; a decompression bomb, a thousand): above it the input is
    /// refused after reading only a few MiB. 0 for no limit.
    #[arg(long, default_value_t = memstate::import::input::DEFAULT_MAX_RATIO, value_name = "N")]
    pub max_ratio: u64,

    /// How many rows per byte of pickle the snapshots rebuilt from a PyTorch snapshot's trace
    /// may hold, past 4M rows (each rebuilt snapshot counts as 64 rows, each memory and
    /// allocation as one). A few `oom` events over thousands of blocks are far below it; one
    /// event referred to thousands of times through the pickle's memo, which would take hours to
    /// rebuild, is refused before anything is written. 0 for no limit.
    #[arg(long, default_value_t = memstate::import::input::DEFAULT_MAX_ROW_RATIO, value_name = "N")]
    pub max_row_ratio: u64,

    /// What the inputs are: found from each file's content (auto), memstate's own dumps, a log
    /// holding Legate's out-of-memory reports or Realm's allocator status, a PyTorch allocator
    /// snapshot, or a Legion Prof profile. A file that is none of these, or not the kind forced, is refused whole.
    #[arg(long, value_enum, default_value_t = SourceArg::Auto, value_name = "KIND")]
    pub source: SourceArg,

    /// The run the snapshots of a Legate or Realm log belong to (their lines name none;
    /// default: the file's name up to its first dot).
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,

    /// For a PyTorch allocator snapshot: besides one snapshot per out-of-memory event and the
    /// final one, a snapshot rebuilt from its trace every N events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub every: Option<u64>,

    /// How a foreign input's snapshots are numbered per node (their seq): in the order the input
    /// tells them (file), or by their time in nanoseconds (time). With time, the inputs of one
    /// run on one clock interleave in time order: a Legion Prof profile and the log Legate
    /// printed (import them together with --run NAME --seq-by time).
    #[arg(long, value_enum, default_value = "file", value_name = "ORDER")]
    pub seq_by: SeqBy,

    /// For a Legion Prof profile: a snapshot every DURATION of the run (500ms, 2s, 1m), and at
    /// each memory's peak. Default: one after each change while there are at most 200, else
    /// 200 over the run.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub prof_step: Option<std::time::Duration>,

    /// Print the summary in this format (csv/json/ndjson are exact and machine-readable).
    #[arg(long, default_value = "table", value_parser = format_parser())]
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

    /// Keep watching the files and folders and import each dump as soon as it is complete (a
    /// file once it parses whole, a stream line once its newline is written), until Ctrl-C or
    /// SIGTERM. Starting again resumes: what was imported is recognised and skipped.
    #[arg(long)]
    pub follow: bool,

    /// With --follow: scan at least this often (500ms, 2s); file-system events wake it sooner.
    /// While nothing changes, scans back off to 8 times this.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_duration, requires = "follow")]
    pub interval: std::time::Duration,

    /// With --follow: how long a file that does not parse must stay unchanged before it is
    /// refused (until then it is taken for half-written).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration, requires = "follow")]
    pub settle: std::time::Duration,

    /// With --follow: do not use file-system events, only scan (they are missing on NFS and
    /// parallel file systems anyway, where scanning is what works).
    #[arg(long, requires = "follow")]
    pub poll: bool,

    /// With --follow: warn when a memory's largest hole is forecast to fall below its recent
    /// requests within this many dumps (as `memstate forecast` says it); 0 warns of nothing.
    #[arg(long, value_name = "DUMPS", default_value_t = 5, requires = "follow")]
    pub forecast_within: u64,

    /// Import into one database per run and node under this folder (RUN-nNODE.db), not into the
    /// database of --db: a cluster's run is split across files that can be imported, queried
    /// and exported apart. Each dump lands as in a plain import (atomically, the same one again unchanged), so
    /// running it again after a kill resumes.
    #[arg(long, value_name = "DIR", conflicts_with = "follow")]
    pub shard_dir: Option<std::path::PathBuf>,

    /// With --shard-dir: how many shards are written at once (default: the processors here).
    #[arg(long, value_name = "N", requires = "shard_dir", value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub read: ReadArgs,
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
    #[arg(long, default_value = "1GiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub gpu_capacity: u64,

    /// Capacity of each node's SYSTEM_MEM.
    #[arg(long, default_value = "4GiB", value_parser = parse_positive_size, value_name = "SIZE")]
    pub system_capacity: u64,

    /// Capacity of each node's Z_COPY_MEM.
    #[arg(long, default_value = "64MiB", value_parser = parse_positive_size, value_name = "SIZE")]
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
    #[arg(long, value_enum, default_value_t = FileLayoutArg::Files)]
    pub layout: FileLayoutArg,

    /// Compress the files.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,

    /// Keep going after an out-of-memory error (the mapper backs off from that task).
    #[arg(long)]
    pub continue_after_oom: bool,
    /// Start of the run's wall clock (each dump's wall_time): RFC 3339 (2026-12-01T08:00:00Z) or
    /// now. The default is fixed, so the same seed writes the same files.
    #[arg(long, value_name = "TIME", default_value = "2026-12-01T08:00:00Z", value_parser = parse_wall_start)]
    pub wall_start: i64,
    /// Wait this long after each dump (e.g. 500ms, 2s), to play a running job for import --follow;
    /// each dump's wall_time is then the real time it is written.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub pace: Option<std::time::Duration>,

    /// Print the summary in this format.
    #[arg(long, default_value = "table", value_parser = format_parser())]
    pub format: Format,

    /// Do not show a progress bar even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A duration longer than zero (`--prof-step`).
fn positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match parse_duration(text)? {
        duration if duration.is_zero() => Err(format!("{text:?}: a step longer than 0")),
        duration => Ok(duration),
    }
}

/// How foreign snapshots are numbered (`--seq-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SeqBy {
    /// In the order the input tells them, from 0 per node.
    #[default]
    File,
    /// By their time in nanoseconds.
    Time,
}
