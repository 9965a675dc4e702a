//! What the Parquet dataset holds: one [`Table`] per exported public view, its columns (the
//! view's names and meanings, database-local integer ids replaced by natural keys) and the SQL that
//! reads one partition of it from a memstate database.
//!
//! Node tables are read per (run, node): `?1` is the run's integer id, `?2` the node. Run tables
//! are read per run: `?1` is the run's id. `run` and `node` themselves are not columns of the
//! files: they are the Hive partition folders (`run=<run>/node=<node>`), which DuckDB and Spark
//! turn back into columns. A memory is named by its handle text (`0x1e00000000000002`) in a
//! column called `memory`, a snapshot by its `seq`.
//!
//! Rows come sorted for scans: by memory, then first seq (or seq), then offset, so that a reader
//! who asks about one memory or a stretch of snapshots skips whole row groups by their statistics.

/// A column's type in the files: 64-bit integers, doubles (never 32-bit REAL), UTF-8 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int,
    Real,
    Text,
}

/// Whether a table is split by node or kept once per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `DIR/<table>/run=<run>/node=<node>/part-0.parquet`, replaced whole by each export.
    Node,
    /// `DIR/<table>/run=<run>/part-0.parquet`, merged with what is there: rows with the same
    /// `key` columns are one row, each other field the greatest given (see `export::Merged`).
    Run { key: &'static [&'static str] },
}

/// One table of the dataset.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub level: Level,
    pub columns: &'static [(&'static str, Type)],
    /// Reads one partition, sorted as the file keeps it.
    pub sql: &'static str,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|(column, _)| *column == name)
    }

    /// The positions of the columns that name a row: a run table's `key`; every column of a
    /// node table (never merged: its partition is replaced whole), so that rows are a set.
    pub fn key_columns(&self) -> Vec<usize> {
        match self.level {
            Level::Run { key } => key.iter().filter_map(|name| self.column(name)).collect(),
            Level::Node => (0..self.columns.len()).collect(),
        }
    }
}

use Type::{Int, Real, Text};

pub const SNAPSHOTS: Table = Table {
    name: "snapshots",
    level: Level::Node,
    columns: &[
        ("seq", Int),
        ("time_ns", Int),
        ("wall_time", Text),
        ("reason", Text),
        ("note", Text),
        ("source", Text),
        ("format_version", Int),
        ("imported_at", Text),
        ("time_s", Real),
        ("host", Text),
        ("pid", Int),
        ("producer", Text),
        ("time_unix", Real),
        ("series", Text),
    ],
    sql: "SELECT seq, time_ns, wall_time, reason, note, source, format_version, imported_at, \
          time_s, host, pid, producer, time_unix, series \
          FROM snapshots WHERE run_id = ?1 AND node = ?2 ORDER BY seq",
};

pub const MEMORIES: Table = Table {
    name: "memories",
    level: Level::Node,
    columns: &[("memory", Text), ("kind", Text), ("name", Text)],
    sql: "SELECT handle, kind, name FROM memories WHERE run_id = ?1 AND node = ?2 ORDER BY handle",
};

pub const MEMORY_STATS: Table = Table {
    name: "memory_stats",
    level: Level::Node,
    columns: &[
        ("seq", Int),
        ("memory", Text),
        ("capacity", Int),
        ("allocation_count", Int),
        ("used_bytes", Int),
        ("free_bytes", Int),
        ("hole_count", Int),
        ("largest_hole", Int),
        ("fragmentation", Real),
        ("reclaimable_bytes", Int),
        ("largest_reclaimable", Int),
        ("unaccounted_bytes", Int),
        ("alignment", Int),
        ("holes_listed", Int),
        ("unknown", Text),
    ],
    sql: "SELECT s.seq, m.handle, ms.capacity, ms.allocation_count, ms.used_bytes, ms.free_bytes, \
          ms.hole_count, ms.largest_hole, ms.fragmentation, ms.reclaimable_bytes, \
          ms.largest_reclaimable, ms.unaccounted_bytes, ms.alignment, ms.holes_listed, ms.unknown \
          FROM memories m \
          JOIN memory_stats ms ON ms.memory_id = m.memory_id \
          JOIN snapshots s ON s.snapshot_id = ms.snapshot_id \
          WHERE m.run_id = ?1 AND m.node = ?2 ORDER BY m.handle, s.seq",
};

pub const ALLOCATION_SPANS: Table = Table {
    name: "allocation_spans",
    level: Level::Node,
    columns: &[
        ("memory", Text),
        ("uid", Text),
        ("first_seq", Int),
        ("last_seq", Int),
        ("first_time_ns", Int),
        ("last_time_ns", Int),
        ("snapshot_count", Int),
        ("open", Int),
        ("handle", Text),
        ("kind", Text),
        ("state", Text),
        ("offset", Int),
        ("size", Int),
        ("alignment", Int),
        ("created_ns", Int),
        ("provenance", Text),
        ("label", Text),
        ("gc_priority", Int),
        ("attrs", Text),
        ("end_offset", Int),
    ],
    sql: "SELECT m.handle, a.uid, a.first_seq, a.last_seq, a.first_time_ns, a.last_time_ns, \
          a.snapshot_count, a.open, a.handle, a.kind, a.state, a.\"offset\", a.size, a.alignment, \
          a.created_ns, a.provenance, a.label, a.gc_priority, a.attrs, a.end_offset \
          FROM memories m JOIN allocation_spans a ON a.memory_id = m.memory_id \
          WHERE m.run_id = ?1 AND m.node = ?2 \
          ORDER BY m.handle, a.first_seq, a.\"offset\", a.uid, a.last_seq",
};

pub const HOLE_SPANS: Table = Table {
    name: "hole_spans",
    level: Level::Node,
    columns: &[
        ("memory", Text),
        ("offset", Int),
        ("size", Int),
        ("first_seq", Int),
        ("last_seq", Int),
        ("first_time_ns", Int),
        ("last_time_ns", Int),
        ("snapshot_count", Int),
        ("open", Int),
        ("end_offset", Int),
    ],
    sql: "SELECT m.handle, h.\"offset\", h.size, h.first_seq, h.last_seq, h.first_time_ns, \
          h.last_time_ns, h.snapshot_count, h.open, h.end_offset \
          FROM memories m JOIN hole_spans h ON h.memory_id = m.memory_id \
          WHERE m.run_id = ?1 AND m.node = ?2 \
          ORDER BY m.handle, h.first_seq, h.\"offset\", h.last_seq",
};

pub const FAILED_REQUESTS: Table = Table {
    name: "failed_requests",
    level: Level::Node,
    columns: &[
        ("seq", Int),
        ("memory", Text),
        ("size", Int),
        ("alignment", Int),
        ("kind", Text),
        ("provenance", Text),
        ("time_ns", Int),
        ("note", Text),
        ("ordinal", Int),
        ("device_free", Int),
    ],
    sql: "SELECT s.seq, m.handle, f.size, f.alignment, f.kind, f.provenance, f.time_ns, f.note, \
          f.ordinal, f.device_free \
          FROM snapshots s JOIN failed_requests f ON f.snapshot_id = s.snapshot_id \
          JOIN memories m ON m.memory_id = f.memory_id \
          WHERE s.run_id = ?1 AND s.node = ?2 ORDER BY m.handle, s.seq, f.ordinal",
};

pub const OBJECTS: Table = Table {
    name: "objects",
    level: Level::Run {
        key: &["object_id"],
    },
    columns: &[
        ("object_id", Text),
        ("kind", Text),
        ("name", Text),
        ("shape", Text),
        ("dtype", Text),
        ("transform", Text),
        ("partition", Text),
        ("provenance", Text),
        ("attrs", Text),
    ],
    sql: "SELECT object_id, kind, name, shape, dtype, transform, partition, provenance, attrs \
          FROM objects WHERE run_id = ?1 ORDER BY object_id",
};

pub const ALLOCATION_OBJECTS: Table = Table {
    name: "allocation_objects",
    level: Level::Run {
        key: &["uid", "field_id", "object_id"],
    },
    columns: &[
        ("uid", Text),
        ("field_id", Int),
        ("field_size", Int),
        ("object_id", Text),
    ],
    sql: "SELECT uid, field_id, field_size, object_id FROM allocation_objects WHERE run_id = ?1 \
          ORDER BY uid, field_id NULLS FIRST, object_id, field_size NULLS FIRST",
};

/// Every table, node tables first.
pub const ALL: [&Table; 8] = [
    &SNAPSHOTS,
    &MEMORIES,
    &MEMORY_STATS,
    &ALLOCATION_SPANS,
    &HOLE_SPANS,
    &FAILED_REQUESTS,
    &OBJECTS,
    &ALLOCATION_OBJECTS,
];
