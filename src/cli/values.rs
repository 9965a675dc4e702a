//! The values the command line names: the library's enums under their command-line names (the
//! library does not know clap), the canned queries' names for completions, and start times.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::ValueEnum;
use memstate::present::Format;

/// `--format`: the library's formats as it registers them ([`Format::all`]), each with its help,
/// so a format added there is offered, completed and documented here without a change.
pub fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(
        Format::all().map(|(name, about)| PossibleValue::new(name).help(about)),
    )
    .try_map(|name| Format::named(&name).ok_or_else(|| format!("unknown format {name:?}")))
}

/// Dataset formats of `export` (Parquet is the only one the library writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Apache Parquet, Hive-partitioned by run and node, zstd-compressed.
    Parquet,
}

/// How the simulator lays out its dumps (the library's `sim::FileLayout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum FileLayoutArg {
    /// One .json file per dump, in a folder per node.
    #[default]
    Files,
    /// One .ndjson stream per node, a dump per line.
    Stream,
}

/// Compression of the simulator's files (the library's `sim::Compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CompressionArg {
    #[default]
    None,
    Gzip,
    Zstd,
}

/// Allocation states (the library's `dump::State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    Valid,
    Collectable,
    #[value(name = "pending_free")]
    PendingFree,
    #[value(name = "pending_alloc")]
    PendingAlloc,
}

/// How to group allocations (the library's `query::listing::GroupBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupByArg {
    Kind,
    State,
    Provenance,
    Object,
}

/// The figure of a chart (the library's `viz::plot::Metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricArg {
    Used,
    Free,
    LargestHole,
    Fragmentation,
    Reclaimable,
    LargestReclaimable,
}

/// A chart's x axis (the library's `viz::plot::XAxis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum XAxisArg {
    /// Seconds since the run started.
    Time,
    /// The snapshot's sequence number.
    Seq,
}

/// The canned queries' names for completions and help, while any name is taken here (an unknown
/// one is refused by `report` itself, with the list).
#[derive(Clone)]
pub(super) struct ReportName;

impl clap::builder::TypedValueParser for ReportName {
    type Value = String;

    fn parse_ref(
        &self,
        _command: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            memstate::query::canned::all()
                .into_iter()
                .map(|query| clap::builder::PossibleValue::new(query.name)),
        ))
    }
}

/// `now` or an RFC 3339 time, as seconds since the Unix epoch.
pub(super) fn parse_wall_start(text: &str) -> Result<i64, String> {
    if text == "now" {
        return Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64));
    }
    memstate::units::unix_seconds(text).ok_or_else(|| {
        format!("{text:?}: expected now or an RFC 3339 time such as 2026-12-01T08:00:00Z")
    })
}

impl From<FileLayoutArg> for memstate::sim::FileLayout {
    fn from(layout: FileLayoutArg) -> Self {
        match layout {
            FileLayoutArg::Files => memstate::sim::FileLayout::Files,
            FileLayoutArg::Stream => memstate::sim::FileLayout::Stream,
        }
    }
}

impl From<CompressionArg> for memstate::sim::Compression {
    fn from(compression: CompressionArg) -> Self {
        match compression {
            CompressionArg::None => memstate::sim::Compression::None,
            CompressionArg::Gzip => memstate::sim::Compression::Gzip,
            CompressionArg::Zstd => memstate::sim::Compression::Zstd,
        }
    }
}

impl From<StateArg> for memstate::dump::State {
    fn from(state: StateArg) -> Self {
        match state {
            StateArg::Valid => memstate::dump::State::Valid,
            StateArg::Collectable => memstate::dump::State::Collectable,
            StateArg::PendingFree => memstate::dump::State::PendingFree,
            StateArg::PendingAlloc => memstate::dump::State::PendingAlloc,
        }
    }
}

impl From<GroupByArg> for memstate::query::listing::GroupBy {
    fn from(group: GroupByArg) -> Self {
        match group {
            GroupByArg::Kind => memstate::query::listing::GroupBy::Kind,
            GroupByArg::State => memstate::query::listing::GroupBy::State,
            GroupByArg::Provenance => memstate::query::listing::GroupBy::Provenance,
            GroupByArg::Object => memstate::query::listing::GroupBy::Object,
        }
    }
}

impl From<MetricArg> for memstate::viz::plot::Metric {
    fn from(metric: MetricArg) -> Self {
        use memstate::viz::plot::Metric;
        match metric {
            MetricArg::Used => Metric::Used,
            MetricArg::Free => Metric::Free,
            MetricArg::LargestHole => Metric::LargestHole,
            MetricArg::Fragmentation => Metric::Fragmentation,
            MetricArg::Reclaimable => Metric::Reclaimable,
            MetricArg::LargestReclaimable => Metric::LargestReclaimable,
        }
    }
}

impl From<XAxisArg> for memstate::viz::plot::XAxis {
    fn from(axis: XAxisArg) -> Self {
        match axis {
            XAxisArg::Time => memstate::viz::plot::XAxis::Time,
            XAxisArg::Seq => memstate::viz::plot::XAxis::Seq,
        }
    }
}

/// The kinds of input (the library's `source::Kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SourceArg {
    /// Found from each file's content.
    #[default]
    Auto,
    /// memstate's own format v1.
    Memstate,
    /// A log with Legate's out-of-memory reports.
    LegateOom,
    /// A log with Realm's range allocator status.
    RealmAllocator,
    /// A PyTorch CUDA allocator snapshot (the pickle torch.cuda.memory._dump_snapshot writes).
    TorchSnapshot,
    /// A Legion Prof profile (legate --profile's legate_N.prof, -lg:prof's prof_N.gz).
    LegionProf,
}

impl From<SourceArg> for memstate::import::source::Kind {
    fn from(kind: SourceArg) -> Self {
        match kind {
            SourceArg::Auto => memstate::import::source::Kind::Auto,
            SourceArg::Memstate => memstate::import::source::Kind::Memstate,
            SourceArg::LegateOom => memstate::import::source::Kind::LegateOom,
            SourceArg::RealmAllocator => memstate::import::source::Kind::RealmAllocator,
            SourceArg::TorchSnapshot => memstate::import::source::Kind::TorchSnapshot,
            SourceArg::LegionProf => memstate::import::source::Kind::LegionProf,
        }
    }
}
