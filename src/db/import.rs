//! Writing validated dumps and annotations into the database, one transaction each.
//!
//! A dump either lands whole or not at all: every statement of one dump runs inside one
//! `BEGIN IMMEDIATE` transaction that is rolled back on any error. A snapshot is identified by
//! (run, node, seq): the same content again is skipped, different content is refused unless the
//! caller asks to replace it.
//!
//! Allocations and holes are written as spans ([`super::spans`]): importing the next dump of a
//! node writes only what changed since the node's latest snapshot. The importer keeps that
//! snapshot's open spans in memory between dumps, and trusts them only while no other connection
//! has written to the database (`PRAGMA data_version` unchanged).

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::spans::{self, AllocationAttrs, AllocationSpans, HoleSpans, SpanList, SpanTable};
use crate::dump::{Annotations, Object, Prepared, Sym};
use crate::error::{Error, Result};

/// What importing one dump did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new snapshot landed, with this many allocations.
    Imported { snapshot_id: i64, allocations: u64 },
    /// The snapshot was already there with the same content: nothing changed.
    Unchanged { snapshot_id: i64 },
    /// A different snapshot with the same identity was replaced (only when asked to).
    Replaced { snapshot_id: i64, allocations: u64 },
}

/// The open spans of a node's latest snapshot, as committed.
struct NodeSpans {
    latest: i64,
    allocations: SpanList<(i64, i64), AllocationAttrs>,
    holes: SpanList<(i64, i64), i64>,
}

/// Writes dumps into an open database, keeping a cache of interned string ids between dumps.
pub struct Importer<'c> {
    conn: &'c mut Connection,
    db_display: String,
    /// Interned strings already committed (ids stay valid: strings are never deleted).
    string_ids: HashMap<String, i64>,
    /// Per (run, node): the latest snapshot's open spans, valid while `data_version` holds.
    nodes: HashMap<(String, i64), NodeSpans>,
    /// `PRAGMA data_version` as of this importer's last commit.
    data_version: Option<i64>,
}

/// The content digest this memstate computes (see `dump::content_digest`); 1 was memstate 1's.
const DIGEST_VERSION: i64 = 2;

/// The 64-bit pattern of an id, as SQLite stores it.
fn id_bits(id: u64) -> i64 {
    id as i64
}

/// Sizes are below 2^63 by validation.
fn size_bits(size: u64) -> i64 {
    size as i64
}

/// What the transaction of one dump leaves for after its commit.
struct Landed {
    outcome: Outcome,
    /// The node's open spans after this dump, when they are known.
    open: Option<NodeSpans>,
}

impl<'c> Importer<'c> {
    pub fn new(conn: &'c mut Connection, db_display: impl Into<String>) -> Self {
        Importer { conn, db_display: db_display.into(), string_ids: HashMap::new(), nodes: HashMap::new(), data_version: None }
    }

    /// Import one prepared dump read from `source`, in its own transaction.
    pub fn import(&mut self, prepared: &Prepared, source: &str, replace: bool) -> Result<Outcome> {
        let mut new_strings = Vec::new();
        let db_display = self.db_display.clone();
        let transaction = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|error| Error::database(&db_display, error))?;
        let data_version: i64 = transaction
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(|error| Error::database(&db_display, error))?;
        if self.data_version != Some(data_version) {
            // Another connection wrote since: what this importer remembers may be stale.
            self.nodes.clear();
        }
        // The node's open spans leave the cache for the transaction and come back only with its commit.
        let node = (prepared.dump.run.id.clone(), prepared.dump.run.node);
        let cached = self.nodes.remove(&node);
        let mut writer = Writer { tx: &transaction, db_display: &db_display, string_ids: &mut self.string_ids, new_strings: &mut new_strings };
        let result = writer.dump(prepared, source, replace, cached);
        let landed = match result {
            Ok(landed) => match transaction.commit() {
                Ok(()) => Ok(landed),
                Err(error) => Err(Error::database(&db_display, error)),
            },
            Err(error) => Err(error),
        };
        match landed {
            Ok(landed) => {
                self.data_version = Some(data_version);
                if let Some(open) = landed.open {
                    self.nodes.insert(node, open);
                }
                Ok(landed.outcome)
            }
            Err(error) => {
                // The transaction rolled back: forget the ids it handed out.
                for text in new_strings {
                    self.string_ids.remove(&text);
                }
                Err(error)
            }
        }
    }

    /// Import an annotations file: its objects and links join the run's allocations by uid.
    /// Returns how many links were new.
    pub fn import_annotations(&mut self, annotations: &Annotations) -> Result<u64> {
        let mut new_strings = Vec::new();
        let db_display = self.db_display.clone();
        let db_error = |error: rusqlite::Error| Error::database(&db_display, error);
        let transaction = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;
        let mut writer = Writer { tx: &transaction, db_display: &db_display, string_ids: &mut self.string_ids, new_strings: &mut new_strings };
        let result = writer.annotations(annotations).map_err(db_error);
        let result = match result {
            Ok(added) => transaction.commit().map(|_| added).map_err(db_error),
            Err(error) => Err(error),
        };
        if result.is_err() {
            for text in new_strings {
                self.string_ids.remove(&text);
            }
        }
        result
    }
}

/// The statements of one transaction.
struct Writer<'t, 'a> {
    tx: &'t Transaction<'a>,
    db_display: &'t str,
    string_ids: &'t mut HashMap<String, i64>,
    new_strings: &'t mut Vec<String>,
}

impl Writer<'_, '_> {
    fn db_error(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |error| Error::database(self.db_display, error)
    }

    fn dump(&mut self, prepared: &Prepared, source: &str, replace: bool, cached: Option<NodeSpans>) -> Result<Landed> {
        let dump = &prepared.dump;
        let (node, seq) = (dump.run.node, dump.snapshot.seq);
        let run_id = upsert_run(self.tx, &dump.run.id).map_err(self.db_error())?;
        let existing: Option<(i64, Vec<u8>, i64, String)> = self
            .tx
            .query_row(
                "SELECT id, digest, digest_version, source FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq = ?3",
                params![run_id, node, seq],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()
            .map_err(self.db_error())?;
        let mut replaced = false;
        let mut cache = cached;
        if let Some((snapshot_id, digest, digest_version, earlier_source)) = existing {
            let same = if digest_version >= DIGEST_VERSION {
                digest == prepared.digest
            } else {
                // Imported by memstate 1, whose digest cannot be recomputed: compare what is stored.
                let same = stored_matches(self.tx, snapshot_id, run_id, node, prepared).map_err(self.db_error())?;
                if same {
                    self.tx
                        .execute("UPDATE snapshot SET digest = ?1, digest_version = ?2 WHERE id = ?3", params![&prepared.digest[..], DIGEST_VERSION, snapshot_id])
                        .map_err(self.db_error())?;
                }
                same
            };
            if same {
                return Ok(Landed { outcome: Outcome::Unchanged { snapshot_id }, open: cache });
            }
            if !replace {
                return Err(Error::input(
                    source,
                    "",
                    format!(
                        "a different dump of run {:?}, node {}, seq {} is already imported (snapshot {snapshot_id}, from {earlier_source}); refused (use --replace to replace it)",
                        dump.run.id, node, seq
                    ),
                ));
            }
            remove_snapshot(self.tx, snapshot_id, run_id, node, seq).map_err(self.db_error())?;
            replaced = true;
            cache = None;
        }

        // Map this dump's strings to database ids, once each.
        let mut ids = Vec::with_capacity(dump.strings.len());
        for text in &dump.strings {
            ids.push(intern(self.tx, self.string_ids, self.new_strings, text).map_err(self.db_error())?);
        }
        let sym = |sym: Sym| ids[sym.0 as usize];
        let opt = |value: Option<Sym>| value.map(sym);

        let tx = self.tx;
        let db_error = self.db_error();
        tx.execute(
            "UPDATE run SET node_count = max(coalesce(node_count, 0), coalesce(?2, 0), ?3 + 1) WHERE id = ?1",
            params![run_id, dump.run.node_count, node],
        )
        .map_err(&db_error)?;
        let (prev, next) = neighbours(tx, run_id, node, seq).map_err(&db_error)?;
        tx.execute("UPDATE snapshot SET ordinal = ordinal + 1 WHERE run_id = ?1 AND node = ?2 AND seq > ?3", params![run_id, node, seq])
            .map_err(&db_error)?;
        tx.execute(
            "INSERT INTO snapshot (run_id, node, seq, time_ns, wall_time, reason, note, producer, host, pid,
                                   source, format_version, digest, imported_at, ordinal, digest_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                     1 + (SELECT count(*) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq < ?3), ?14)",
            params![
                run_id,
                node,
                seq,
                dump.snapshot.time_ns,
                dump.snapshot.wall_time,
                dump.snapshot.reason.as_str(),
                opt(dump.snapshot.note),
                opt(dump.producer),
                dump.run.host,
                dump.run.pid,
                source,
                dump.version,
                &prepared.digest[..],
                DIGEST_VERSION,
            ],
        )
        .map_err(&db_error)?;
        let snapshot_id = tx.last_insert_rowid();
        upsert_objects(tx, run_id, &dump.objects, &ids).map_err(&db_error)?;

        // Memories, their figures and failed requests, and what the spans must hold at `seq`.
        let mut upsert_memory = tx
            .prepare_cached(
                "INSERT INTO memory (run_id, node, handle, kind, name, kind_seq, name_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?5 IS NULL THEN -1 ELSE ?6 END)
                 ON CONFLICT (run_id, node, handle) DO UPDATE SET
                     kind = CASE WHEN excluded.kind_seq >= kind_seq THEN excluded.kind ELSE kind END,
                     kind_seq = max(kind_seq, excluded.kind_seq),
                     name = CASE WHEN excluded.name IS NOT NULL AND excluded.name_seq >= name_seq THEN excluded.name ELSE name END,
                     name_seq = CASE WHEN excluded.name IS NOT NULL AND excluded.name_seq >= name_seq THEN excluded.name_seq ELSE name_seq END
                 RETURNING id",
            )
            .map_err(&db_error)?;
        let mut insert_state = tx
            .prepare_cached(
                "INSERT INTO memory_state (snapshot_id, memory_id, capacity, alignment, allocation_count, used_bytes, free_bytes,
                                           hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable,
                                           unaccounted_bytes, holes_listed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .map_err(&db_error)?;
        let mut insert_failed = tx
            .prepare_cached(
                "INSERT INTO failed_request (snapshot_id, memory_id, ordinal, size, alignment, kind, provenance, time_ns, note)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .map_err(&db_error)?;
        let mut insert_link = tx
            .prepare_cached(
                "INSERT INTO allocation_object (run_id, uid, field_id, object_key, field_size) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT DO UPDATE SET field_size = max(coalesce(field_size, excluded.field_size), coalesce(excluded.field_size, field_size))",
            )
            .map_err(&db_error)?;
        let mut memory_of = Vec::with_capacity(dump.memories.len());
        for (memory, figures) in dump.memories.iter().zip(&prepared.figures) {
            let memory_id: i64 = upsert_memory
                .query_row(params![run_id, node, id_bits(memory.id), sym(memory.kind), opt(memory.name), seq], |row| row.get(0))
                .map_err(&db_error)?;
            insert_state
                .execute(params![
                    snapshot_id,
                    memory_id,
                    size_bits(figures.capacity),
                    memory.alignment.map(size_bits),
                    size_bits(figures.allocation_count),
                    size_bits(figures.used_bytes),
                    size_bits(figures.free_bytes),
                    size_bits(figures.hole_count),
                    size_bits(figures.largest_hole),
                    figures.fragmentation,
                    size_bits(figures.reclaimable_bytes),
                    size_bits(figures.largest_reclaimable),
                    size_bits(figures.unaccounted_bytes),
                    memory.listed_holes.is_some(),
                ])
                .map_err(&db_error)?;
            for (ordinal, request) in memory.failed_requests.iter().enumerate() {
                insert_failed
                    .execute(params![
                        snapshot_id,
                        memory_id,
                        ordinal as i64,
                        size_bits(request.size),
                        request.alignment.map(size_bits),
                        opt(request.kind),
                        opt(request.provenance),
                        request.time_ns,
                        opt(request.note),
                    ])
                    .map_err(&db_error)?;
            }
            for allocation in memory.allocations.iter().filter(|allocation| !allocation.fields.is_empty()) {
                for field in &allocation.fields {
                    insert_link
                        .execute(params![run_id, id_bits(allocation.uid), field.id, sym(field.object), field.size.map(size_bits)])
                        .map_err(&db_error)?;
                }
            }
            memory_of.push(memory_id);
        }
        drop((upsert_memory, insert_state, insert_failed, insert_link));
        let allocation_count = dump.allocation_count() as u64;
        // What the spans must hold at `seq`, in key order (memory id, then uid or offset), made as
        // the planner asks for it.
        let mut memories_in_order: Vec<usize> = (0..dump.memories.len()).collect();
        memories_in_order.sort_unstable_by_key(|&index| memory_of[index]);
        let allocations = memories_in_order.iter().flat_map(|&index| {
            let (memory, memory_id) = (&dump.memories[index], memory_of[index]);
            prepared.by_uid[index].iter().map(move |&position| {
                let allocation = &memory.allocations[position as usize];
                let attrs = AllocationAttrs {
                    offset: size_bits(allocation.offset),
                    size: size_bits(allocation.size),
                    state: allocation.state.code(),
                    kind: sym(allocation.kind),
                    handle: allocation.handle.map(id_bits),
                    alignment: allocation.alignment.map(size_bits),
                    created_ns: allocation.created_ns,
                    provenance: opt(allocation.provenance),
                    label: opt(allocation.label),
                    gc_priority: allocation.gc_priority,
                    attrs: allocation.attrs.clone(),
                };
                ((memory_id, id_bits(allocation.uid)), attrs)
            })
        });
        let holes = memories_in_order.iter().flat_map(|&index| {
            let memory_id = memory_of[index];
            prepared.holes[index].iter().map(move |hole| ((memory_id, size_bits(hole.offset)), size_bits(hole.size)))
        });

        // The spans around `seq`: from memory when `seq` follows the node's latest snapshot that
        // this importer wrote, else from the database.
        let memory_ids = node_memories(tx, run_id, node).map_err(&db_error)?;
        let appended = next.is_none() && prev.is_some();
        let (prev_allocations, prev_holes) = match (cache.filter(|spans| appended && Some(spans.latest) == prev), prev) {
            (Some(spans), _) => (spans.allocations, spans.holes),
            (None, Some(_)) if appended => {
                (AllocationSpans::open(tx, &memory_ids).map_err(&db_error)?, HoleSpans::open(tx, &memory_ids).map_err(&db_error)?)
            }
            (None, Some(prev)) => (
                AllocationSpans::containing(tx, &memory_ids, prev).map_err(&db_error)?,
                HoleSpans::containing(tx, &memory_ids, prev).map_err(&db_error)?,
            ),
            (None, None) => (Vec::new(), Vec::new()),
        };
        let (next_allocations, next_holes) = match next {
            Some(next) => (
                AllocationSpans::containing(tx, &memory_ids, next).map_err(&db_error)?,
                HoleSpans::containing(tx, &memory_ids, next).map_err(&db_error)?,
            ),
            None => (Vec::new(), Vec::new()),
        };
        let allocation_spans = spans::plan_insert(seq, prev, next, prev_allocations, &next_allocations, allocations);
        let hole_spans = spans::plan_insert(seq, prev, next, prev_holes, &next_holes, holes);
        AllocationSpans::apply(tx, &allocation_spans.changes).map_err(&db_error)?;
        HoleSpans::apply(tx, &hole_spans.changes).map_err(&db_error)?;

        // When `seq` is the node's latest snapshot, its open spans are what the next dump needs.
        let open = match (allocation_spans.open, hole_spans.open) {
            (Some(allocations), Some(holes)) => Some(NodeSpans { latest: seq, allocations, holes }),
            _ => None,
        };
        let outcome = if replaced {
            Outcome::Replaced { snapshot_id, allocations: allocation_count }
        } else {
            Outcome::Imported { snapshot_id, allocations: allocation_count }
        };
        Ok(Landed { outcome, open })
    }

    fn annotations(&mut self, annotations: &Annotations) -> rusqlite::Result<u64> {
        let run_id = upsert_run(self.tx, &annotations.run_id)?;
        let mut ids = Vec::with_capacity(annotations.strings.len());
        for text in &annotations.strings {
            ids.push(intern(self.tx, self.string_ids, self.new_strings, text)?);
        }
        upsert_objects(self.tx, run_id, &annotations.objects, &ids)?;
        let mut insert = self.tx.prepare_cached(
            "INSERT OR IGNORE INTO allocation_object (run_id, uid, field_id, object_key, field_size)
             VALUES (?1, ?2, ?3, ?4, NULL)",
        )?;
        let mut added = 0;
        for link in &annotations.links {
            added += insert.execute(params![run_id, id_bits(link.uid), link.field.unwrap_or(-1), ids[link.object.0 as usize]])? as u64;
        }
        Ok(added)
    }
}

fn upsert_run(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.execute("INSERT OR IGNORE INTO run (name) VALUES (?1)", [name])?;
    conn.query_row("SELECT id FROM run WHERE name = ?1", [name], |row| row.get(0))
}

fn intern(conn: &Connection, cache: &mut HashMap<String, i64>, new_strings: &mut Vec<String>, text: &str) -> rusqlite::Result<i64> {
    if let Some(id) = cache.get(text) {
        return Ok(*id);
    }
    let mut insert = conn.prepare_cached("INSERT OR IGNORE INTO string (value) VALUES (?1)")?;
    let id = if insert.execute([text])? == 1 {
        conn.last_insert_rowid()
    } else {
        conn.prepare_cached("SELECT id FROM string WHERE value = ?1")?.query_row([text], |row| row.get(0))?
    };
    cache.insert(text.to_string(), id);
    new_strings.push(text.to_string());
    Ok(id)
}

/// The imported seqs of a node just before and just after `seq`.
fn neighbours(conn: &Connection, run_id: i64, node: i64, seq: i64) -> rusqlite::Result<(Option<i64>, Option<i64>)> {
    conn.query_row(
        "SELECT (SELECT max(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq < ?3),
                (SELECT min(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq > ?3)",
        params![run_id, node, seq],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// Every memory a node has had.
fn node_memories(conn: &Connection, run_id: i64, node: i64) -> rusqlite::Result<Vec<i64>> {
    let mut statement = conn.prepare_cached("SELECT id FROM memory WHERE run_id = ?1 AND node = ?2 ORDER BY id")?;
    let rows = statement.query_map(params![run_id, node], |row| row.get(0))?;
    rows.collect()
}

/// Remove a snapshot and everything that is only its (for `--replace`), keeping the spans exact.
fn remove_snapshot(conn: &Connection, snapshot_id: i64, run_id: i64, node: i64, seq: i64) -> rusqlite::Result<()> {
    let (prev, next) = neighbours(conn, run_id, node, seq)?;
    let memory_ids = node_memories(conn, run_id, node)?;
    fn remove<T: SpanTable>(conn: &Connection, memory_ids: &[i64], seq: i64, prev: Option<i64>, next: Option<i64>) -> rusqlite::Result<()> {
        let here = T::containing(conn, memory_ids, seq)?;
        let before = match prev {
            Some(prev) => T::containing(conn, memory_ids, prev)?,
            None => Vec::new(),
        };
        let after = match next {
            Some(next) => T::containing(conn, memory_ids, next)?,
            None => Vec::new(),
        };
        T::apply(conn, &spans::plan_remove(seq, prev, next, &here, &before, &after))
    }
    remove::<AllocationSpans>(conn, &memory_ids, seq, prev, next)?;
    remove::<HoleSpans>(conn, &memory_ids, seq, prev, next)?;
    conn.execute("DELETE FROM failed_request WHERE snapshot_id = ?1", [snapshot_id])?;
    conn.execute("DELETE FROM memory_state WHERE snapshot_id = ?1", [snapshot_id])?;
    conn.execute("DELETE FROM snapshot WHERE id = ?1", [snapshot_id])?;
    conn.execute("UPDATE snapshot SET ordinal = ordinal - 1 WHERE run_id = ?1 AND node = ?2 AND seq > ?3", params![run_id, node, seq])?;
    Ok(())
}

/// Whether a stored snapshot holds what `prepared` would store: the snapshot's own fields, each
/// memory's figures, allocations, holes and failed requests. (Descriptions of memories and objects
/// are kept per run, not per snapshot, so they are not compared.) Nothing is written.
fn stored_matches(conn: &Connection, snapshot_id: i64, run_id: i64, node: i64, prepared: &Prepared) -> rusqlite::Result<bool> {
    let dump = &prepared.dump;
    // Texts to their ids, without interning: a text the database lacks cannot be stored.
    let mut ids: Vec<Option<i64>> = Vec::with_capacity(dump.strings.len());
    let mut find = conn.prepare_cached("SELECT id FROM string WHERE value = ?1")?;
    for text in &dump.strings {
        ids.push(find.query_row([text], |row| row.get(0)).optional()?);
    }
    let sym = |sym: Sym| ids[sym.0 as usize];
    let opt = |value: Option<Sym>| value.map(|value| ids[value.0 as usize]);
    let text_id = |value: Option<Sym>| -> Option<Option<i64>> {
        match value {
            None => Some(None),
            Some(value) => ids[value.0 as usize].map(Some),
        }
    };
    type SnapshotRow = (i64, Option<String>, String, Option<i64>, Option<i64>, Option<String>, Option<i64>, i64);
    let stored: SnapshotRow = conn.query_row(
        "SELECT time_ns, wall_time, reason, note, producer, host, pid, format_version FROM snapshot WHERE id = ?1",
        [snapshot_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?, row.get(7)?)),
    )?;
    let (Some(note), Some(producer)) = (text_id(dump.snapshot.note), text_id(dump.producer)) else { return Ok(false) };
    let wanted: SnapshotRow = (
        dump.snapshot.time_ns,
        dump.snapshot.wall_time.clone(),
        dump.snapshot.reason.as_str().to_string(),
        note,
        producer,
        dump.run.host.clone(),
        dump.run.pid,
        i64::from(dump.version),
    );
    if stored != wanted {
        return Ok(false);
    }
    // Memories and their figures.
    let mut memories: HashMap<i64, (i64, Vec<rusqlite::types::Value>)> = HashMap::new();
    let mut statement = conn.prepare(
        "SELECT m.handle, m.id, ms.capacity, ms.alignment, ms.allocation_count, ms.used_bytes, ms.free_bytes, ms.hole_count,
                ms.largest_hole, ms.fragmentation, ms.reclaimable_bytes, ms.largest_reclaimable, ms.unaccounted_bytes, ms.holes_listed
         FROM memory_state ms JOIN memory m ON m.id = ms.memory_id WHERE ms.snapshot_id = ?1",
    )?;
    let mut rows = statement.query([snapshot_id])?;
    while let Some(row) = rows.next()? {
        let figures = (2..14).map(|index| row.get::<_, rusqlite::types::Value>(index)).collect::<rusqlite::Result<Vec<_>>>()?;
        memories.insert(row.get(0)?, (row.get(1)?, figures));
    }
    if memories.len() != dump.memories.len() {
        return Ok(false);
    }
    let mut wanted_allocations = Vec::new();
    let mut wanted_holes = Vec::new();
    for ((memory, figures), holes) in dump.memories.iter().zip(&prepared.figures).zip(&prepared.holes) {
        use rusqlite::types::Value;
        let Some((memory_id, stored)) = memories.get(&id_bits(memory.id)) else { return Ok(false) };
        let wanted = vec![
            Value::Integer(size_bits(figures.capacity)),
            memory.alignment.map_or(Value::Null, |alignment| Value::Integer(size_bits(alignment))),
            Value::Integer(size_bits(figures.allocation_count)),
            Value::Integer(size_bits(figures.used_bytes)),
            Value::Integer(size_bits(figures.free_bytes)),
            Value::Integer(size_bits(figures.hole_count)),
            Value::Integer(size_bits(figures.largest_hole)),
            Value::Real(figures.fragmentation),
            Value::Integer(size_bits(figures.reclaimable_bytes)),
            Value::Integer(size_bits(figures.largest_reclaimable)),
            Value::Integer(size_bits(figures.unaccounted_bytes)),
            Value::Integer(i64::from(memory.listed_holes.is_some())),
        ];
        if *stored != wanted {
            return Ok(false);
        }
        for allocation in &memory.allocations {
            let (Some(kind), Some(provenance), Some(label)) = (sym(allocation.kind), text_id(allocation.provenance), text_id(allocation.label)) else {
                return Ok(false);
            };
            let attrs = AllocationAttrs {
                offset: size_bits(allocation.offset),
                size: size_bits(allocation.size),
                state: allocation.state.code(),
                kind,
                handle: allocation.handle.map(id_bits),
                alignment: allocation.alignment.map(size_bits),
                created_ns: allocation.created_ns,
                provenance,
                label,
                gc_priority: allocation.gc_priority,
                attrs: allocation.attrs.clone(),
            };
            wanted_allocations.push(((*memory_id, id_bits(allocation.uid)), attrs));
        }
        wanted_holes.extend(holes.iter().map(|hole| ((*memory_id, size_bits(hole.offset)), size_bits(hole.size))));
    }
    let seq = dump.snapshot.seq;
    let memory_ids = node_memories(conn, run_id, node)?;
    let stored_allocations: Vec<((i64, i64), AllocationAttrs)> =
        AllocationSpans::containing(conn, &memory_ids, seq)?.into_iter().map(|(key, span)| (key, span.attrs)).collect();
    let stored_holes: Vec<((i64, i64), i64)> = HoleSpans::containing(conn, &memory_ids, seq)?.into_iter().map(|(key, span)| (key, span.attrs)).collect();
    wanted_allocations.sort_by_key(|(key, _)| *key);
    wanted_holes.sort_by_key(|(key, _)| *key);
    if stored_allocations != wanted_allocations || stored_holes != wanted_holes {
        return Ok(false);
    }
    // Failed requests, in order.
    let mut statement = conn.prepare(
        "SELECT memory_id, size, alignment, kind, provenance, time_ns, note FROM failed_request WHERE snapshot_id = ?1 ORDER BY memory_id, ordinal",
    )?;
    type RequestRow = (i64, i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
    let stored: Vec<RequestRow> = statement
        .query_map([snapshot_id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut wanted: Vec<RequestRow> = Vec::new();
    for memory in &dump.memories {
        let memory_id = memories[&id_bits(memory.id)].0;
        for request in &memory.failed_requests {
            if [request.kind, request.provenance, request.note].iter().any(|value| text_id(*value).is_none()) {
                return Ok(false);
            }
            wanted.push((
                memory_id,
                size_bits(request.size),
                request.alignment.map(size_bits),
                opt(request.kind).flatten(),
                opt(request.provenance).flatten(),
                request.time_ns,
                opt(request.note).flatten(),
            ));
        }
    }
    wanted.sort_by_key(|row| row.0);
    Ok(stored == wanted)
}

/// Objects are described again by every dump. A later description fills in what earlier ones left
/// out; where two disagree, the greater value (by text) is kept, so that the result does not
/// depend on the order of imports.
fn upsert_objects(conn: &Connection, run_id: i64, objects: &[Object], ids: &[i64]) -> rusqlite::Result<()> {
    let pick = |column: &str| format!("{column} = (SELECT id FROM string WHERE id IN ({column}, excluded.{column}) ORDER BY value DESC LIMIT 1)");
    let text = |column: &str| format!("{column} = max(coalesce({column}, excluded.{column}), coalesce(excluded.{column}, {column}))");
    let sql = format!(
        "INSERT INTO object (run_id, object_key, kind, name, shape, dtype, transform, partition, provenance, attrs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (run_id, object_key) DO UPDATE SET {}, {}, {}, {}, {}, {}, {}, {}",
        pick("kind"),
        pick("name"),
        text("shape"),
        pick("dtype"),
        pick("transform"),
        pick("partition"),
        pick("provenance"),
        text("attrs")
    );
    let mut upsert = conn.prepare_cached(&sql)?;
    let id = |sym: Sym| ids[sym.0 as usize];
    for object in objects {
        upsert.execute(params![
            run_id,
            id(object.id),
            object.kind.map(id),
            object.name.map(id),
            object.shape,
            object.dtype.map(id),
            object.transform.map(id),
            object.partition.map(id),
            object.provenance.map(id),
            object.attrs,
        ])?;
    }
    Ok(())
}
