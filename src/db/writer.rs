//! Writing validated dumps and annotations into the database, one transaction each.
//!
//! A dump either lands whole or not at all: every statement of one dump runs inside one
//! `BEGIN IMMEDIATE` transaction that is rolled back on any error. A snapshot is identified by
//! (run, node, seq): the same content again is skipped, different content is refused unless the
//! caller asks to replace it.
//!
//! Allocations and holes are written as spans ([`super::spans`]): importing the next dump of a
//! node writes only what changed since the node's latest snapshot. The writer keeps that
//! snapshot's open spans in memory between dumps, and trusts them only while no other connection
//! has written to the database (`PRAGMA data_version` unchanged).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::types::Value;
use rusqlite::{
    params, params_from_iter, Connection, OptionalExtension, Transaction, TransactionBehavior,
};

use super::deferred::{self, Deferral};
use super::dump_spans::{write_spans, Ends, NodeSpans, MOST_PENDING_ENDS};
use super::legacy;
use super::remove::remove_snapshot;
use super::rows::{figure_values, id_bits, neighbours, set_top_level, size_bits, top_level};
use super::span_tables::move_all_ends_alone;
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

/// Writes dumps into an open database (one writer per import), keeping a cache of interned string ids between dumps.
pub struct Writer<'c> {
    conn: &'c mut Connection,
    db_display: String,
    /// Interned strings already committed (ids stay valid: strings are never deleted).
    string_ids: HashMap<String, i64>,
    /// Per (run, node): the latest snapshot's open spans, valid while `data_version` holds.
    nodes: HashMap<(String, i64), NodeSpans>,
    /// `PRAGMA data_version` as of this writer's last commit.
    data_version: Option<i64>,
    /// Set by Ctrl-C: the dump being written is rolled back.
    stop: Option<&'c AtomicBool>,
    /// Span ends recorded since they were last moved into the span tables (as far as known).
    pending_ends: u64,
    /// How many recorded ends are moved at once, between dumps.
    most_pending_ends: u64,
    /// When a bulk import drops the secondary indexes it would rewrite with every dump (see
    /// [`deferred`]); None keeps them up to date (`import --follow`, whose readers want them).
    deferral: Option<&'c mut Deferral>,
}

/// The content digest this memstate computes (see `dump::content_digest`); 1 was memstate 1's.
const DIGEST_VERSION: i64 = 2;

/// What is stored under a dump's identity before it is written.
enum Existing {
    None,
    Same {
        snapshot_id: i64,
    },
    /// A different dump, removed to be replaced.
    Removed,
}

/// What the transaction of one dump leaves for after its commit.
struct Landed {
    outcome: Outcome,
    /// The node's open spans after this dump, when they are known.
    open: Option<NodeSpans>,
    ends: Ends,
}

impl<'c> Writer<'c> {
    /// The connection, to read what was written (the forecast of a dump that just landed).
    pub fn reader(&self) -> &Connection {
        self.conn
    }

    pub fn new(conn: &'c mut Connection, db_display: impl Into<String>) -> Self {
        Writer {
            conn,
            db_display: db_display.into(),
            string_ids: HashMap::new(),
            nodes: HashMap::new(),
            data_version: None,
            stop: None,
            pending_ends: 0,
            most_pending_ends: MOST_PENDING_ENDS,
            deferral: None,
        }
    }

    /// Defer the secondary indexes when `deferral` says the import is bulk (see [`deferred`]):
    /// the dump that finds it due drops them in its own transaction, and
    /// [`super::Database::finish`] builds them again.
    pub fn deferring(mut self, deferral: &'c mut Deferral) -> Self {
        self.deferral = Some(deferral);
        self
    }

    /// Stop when `stop` is set (Ctrl-C): a dump whose writing it interrupts is rolled back, not
    /// committed, and [`Error::Interrupted`] is returned. (Set it together with the connection's
    /// interrupt handle, so that a long statement stops too.)
    pub fn stop_on(mut self, stop: &'c AtomicBool) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Move the recorded span ends into the span tables once `ends` of them pile up, instead of
    /// 2^20 (see migrations/V8__span_ends.sql): what a long import does, made to happen on a
    /// small one.
    pub fn moving_ends_past(mut self, ends: u64) -> Self {
        self.most_pending_ends = ends;
        self
    }

    /// Import one prepared dump read from `source`, in its own transaction.
    pub fn import(&mut self, prepared: &Prepared, source: &str, replace: bool) -> Result<Outcome> {
        let outcome = self.import_one(prepared, source, replace)?;
        if self.pending_ends >= self.most_pending_ends {
            let db_display = self.db_display.clone();
            self.move_ends()
                .map_err(|error| Error::database(&db_display, error))?;
        }
        Ok(outcome)
    }

    fn import_one(&mut self, prepared: &Prepared, source: &str, replace: bool) -> Result<Outcome> {
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
            // Another connection wrote since: what this writer remembers may be stale.
            self.nodes.clear();
        }
        // A bulk import sets the span indexes aside with the dump that finds it bulk.
        let defer_now = match self.deferral.as_deref() {
            Some(deferral) => deferral
                .due(&transaction)
                .map_err(|error| Error::database(&db_display, error))?,
            None => false,
        };
        if defer_now {
            deferred::defer(&transaction).map_err(|error| Error::database(&db_display, error))?;
        }
        // The node's open spans leave the cache for the transaction and come back only with its commit.
        let node = (prepared.dump.run.id.clone(), prepared.dump.run.node);
        let cached = self.nodes.remove(&node);
        let mut writer = Statements {
            tx: &transaction,
            db_display: &db_display,
            string_ids: &mut self.string_ids,
            new_strings: &mut new_strings,
        };
        let result = writer.dump(prepared, source, replace, cached);
        let stopped = self.stop.is_some_and(|stop| stop.load(Ordering::SeqCst));
        let landed = match result {
            // Interrupted while writing: the transaction rolls back as it is dropped.
            _ if stopped => Err(Error::Interrupted),
            Ok(landed) => match transaction.commit() {
                Ok(()) => Ok(landed),
                Err(_) if self.stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) => {
                    Err(Error::Interrupted)
                }
                Err(error) => Err(Error::database(&db_display, error)),
            },
            Err(error) => Err(error),
        };
        match landed {
            Ok(landed) => {
                self.data_version = Some(data_version);
                if let Some(deferral) = self.deferral.as_deref_mut().filter(|_| defer_now) {
                    deferral.done();
                }
                if let Some(open) = landed.open {
                    self.nodes.insert(node, open);
                }
                if landed.ends.moved_before {
                    self.pending_ends = 0;
                }
                self.pending_ends += landed.ends.recorded;
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

    /// Move the recorded span ends into the span tables, in a transaction of their own (the
    /// views read the same before and after; the open spans this writer keeps stay open).
    fn move_ends(&mut self) -> rusqlite::Result<()> {
        move_all_ends_alone(self.conn)?;
        self.pending_ends = 0;
        Ok(())
    }

    /// Import an annotations file: its objects and links join the run's allocations by uid.
    /// Returns how many links were new.
    pub fn import_annotations(&mut self, annotations: &Annotations) -> Result<u64> {
        let mut new_strings = Vec::new();
        let db_display = self.db_display.clone();
        let db_error = |error: rusqlite::Error| Error::database(&db_display, error);
        let transaction = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error)?;
        let mut writer = Statements {
            tx: &transaction,
            db_display: &db_display,
            string_ids: &mut self.string_ids,
            new_strings: &mut new_strings,
        };
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
struct Statements<'t, 'a> {
    tx: &'t Transaction<'a>,
    db_display: &'t str,
    string_ids: &'t mut HashMap<String, i64>,
    new_strings: &'t mut Vec<String>,
}

impl Statements<'_, '_> {
    fn db_error(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |error| Error::database(self.db_display, error)
    }

    fn dump(
        &mut self,
        prepared: &Prepared,
        source: &str,
        replace: bool,
        cached: Option<NodeSpans>,
    ) -> Result<Landed> {
        let dump = &prepared.dump;
        let run_id = upsert_run(self.tx, &dump.run.id).map_err(self.db_error())?;
        let (replaced, cache) = match self.existing(prepared, source, replace, run_id)? {
            Existing::None => (false, cached),
            Existing::Same { snapshot_id } => {
                return Ok(Landed {
                    outcome: Outcome::Unchanged { snapshot_id },
                    open: cached,
                    ends: Ends::default(),
                })
            }
            // The node's spans changed under the cache.
            Existing::Removed => (true, None),
        };
        // This dump's strings as database ids, once each.
        let mut ids = Vec::with_capacity(dump.strings.len());
        for text in &dump.strings {
            ids.push(
                intern(self.tx, self.string_ids, self.new_strings, text)
                    .map_err(self.db_error())?,
            );
        }
        let (prev, next) = neighbours(self.tx, run_id, dump.run.node, dump.snapshot.seq)
            .map_err(self.db_error())?;
        let snapshot_id = self
            .insert_snapshot(prepared, source, run_id, &ids)
            .map_err(self.db_error())?;
        upsert_objects(self.tx, run_id, &dump.objects, &ids).map_err(self.db_error())?;
        let memory_of = self
            .write_memories(prepared, run_id, snapshot_id, &ids)
            .map_err(self.db_error())?;
        let stacks = super::stacks::stack_ids(self.tx, dump, &ids).map_err(self.db_error())?;
        let (open, ends) = write_spans(
            self.tx,
            prepared,
            run_id,
            (&ids, &stacks),
            &memory_of,
            (prev, next),
            cache,
        )
        .map_err(self.db_error())?;
        let allocations = dump.allocation_count() as u64;
        let outcome = if replaced {
            Outcome::Replaced {
                snapshot_id,
                allocations,
            }
        } else {
            Outcome::Imported {
                snapshot_id,
                allocations,
            }
        };
        Ok(Landed {
            outcome,
            open,
            ends,
        })
    }

    /// What is already stored under the dump's (run, node, seq): nothing, the same content, or a
    /// different dump, which is removed when replacing is asked for and refused otherwise.
    fn existing(
        &mut self,
        prepared: &Prepared,
        source: &str,
        replace: bool,
        run_id: i64,
    ) -> Result<Existing> {
        let dump = &prepared.dump;
        let (node, seq) = (dump.run.node, dump.snapshot.seq);
        let found: Option<(i64, Vec<u8>, i64, String)> = self
            .tx
            .query_row(
                "SELECT id, digest, digest_version, source FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq = ?3",
                params![run_id, node, seq],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()
            .map_err(self.db_error())?;
        let Some((snapshot_id, digest, digest_version, earlier_source)) = found else {
            return Ok(Existing::None);
        };
        let same = if digest_version >= DIGEST_VERSION {
            digest == prepared.digest
        } else {
            // Imported by memstate 1, whose digest cannot be recomputed: compare what is stored.
            let same = legacy::stored_matches(self.tx, snapshot_id, run_id, node, prepared)
                .map_err(self.db_error())?;
            if same {
                self.tx
                    .execute(
                        "UPDATE snapshot SET digest = ?1, digest_version = ?2 WHERE id = ?3",
                        params![&prepared.digest[..], DIGEST_VERSION, snapshot_id],
                    )
                    .map_err(self.db_error())?;
            }
            same
        };
        if same {
            return Ok(Existing::Same { snapshot_id });
        }
        if !replace {
            // Two files numbered from 0 into one run and node: say how to interleave them.
            let file = |source: &str| {
                source
                    .rsplit_once(':')
                    .map_or(source.to_string(), |(file, _)| file.to_string())
            };
            let hint = if file(&earlier_source) != file(source) {
                "; two inputs of one run and node: import them with --seq-by time to number their snapshots by time, or name another --run"
            } else {
                ""
            };
            return Err(Error::whole_input(source, format!(
                    "a different dump of run {:?}, node {}, seq {} is already imported (snapshot {snapshot_id}, from {earlier_source}); refused (use --replace to replace it){hint}",
                    dump.run.id, node, seq
                ),
            ));
        }
        remove_snapshot(self.tx, snapshot_id, run_id, node, seq).map_err(self.db_error())?;
        Ok(Existing::Removed)
    }

    /// The snapshot's row (after the later snapshots of its node move up one place); its id.
    fn insert_snapshot(
        &self,
        prepared: &Prepared,
        source: &str,
        run_id: i64,
        ids: &[i64],
    ) -> rusqlite::Result<i64> {
        let dump = &prepared.dump;
        let (node, seq) = (dump.run.node, dump.snapshot.seq);
        let opt = |value: Option<Sym>| value.map(|sym| ids[sym.0 as usize]);
        self.tx.execute(
            "UPDATE run SET node_count = max(coalesce(node_count, 0), coalesce(?2, 0), ?3 + 1) WHERE id = ?1",
            params![run_id, dump.run.node_count, node],
        )?;
        self.tx.execute("UPDATE snapshot SET ordinal = ordinal + 1 WHERE run_id = ?1 AND node = ?2 AND seq > ?3", params![run_id, node, seq])?;
        // Every row of a node has the same top level: read from any one, changed on all only
        // when this seq stretches the node into a higher level.
        let top = top_level(self.tx, run_id, node, Some(seq))?.unwrap_or(0);
        let before: Option<i64> = self
            .tx
            .query_row(
                "SELECT top_level FROM snapshot WHERE run_id = ?1 AND node = ?2 LIMIT 1",
                params![run_id, node],
                |row| row.get(0),
            )
            .optional()?;
        if before.is_some_and(|before| before != top) {
            set_top_level(self.tx, run_id, node, top)?;
        }
        self.tx.execute(
            "INSERT INTO snapshot (run_id, node, seq, time_ns, wall_time, reason, note, producer, host, pid,
                                   source, format_version, digest, imported_at, ordinal, digest_version, top_level)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                     1 + (SELECT count(*) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq < ?3), ?14, ?15)",
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
                top,
            ],
        )?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Each memory (described anew), its figures and failed requests at this snapshot, and the
    /// links of its allocations to client objects; the memories' ids, in the dump's order.
    fn write_memories(
        &self,
        prepared: &Prepared,
        run_id: i64,
        snapshot_id: i64,
        ids: &[i64],
    ) -> rusqlite::Result<Vec<i64>> {
        let dump = &prepared.dump;
        let (node, seq) = (dump.run.node, dump.snapshot.seq);
        let sym = |sym: Sym| ids[sym.0 as usize];
        let opt = |value: Option<Sym>| value.map(sym);
        let mut upsert_memory = self.tx.prepare_cached(
            "INSERT INTO memory (run_id, node, handle, kind, name, kind_seq, name_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?5 IS NULL THEN -1 ELSE ?6 END)
             ON CONFLICT (run_id, node, handle) DO UPDATE SET
                 kind = CASE WHEN excluded.kind_seq >= kind_seq THEN excluded.kind ELSE kind END,
                 kind_seq = max(kind_seq, excluded.kind_seq),
                 name = CASE WHEN excluded.name IS NOT NULL AND excluded.name_seq >= name_seq THEN excluded.name ELSE name END,
                 name_seq = CASE WHEN excluded.name IS NOT NULL AND excluded.name_seq >= name_seq THEN excluded.name_seq ELSE name_seq END
             RETURNING id",
        )?;
        let mut insert_state = self.tx.prepare_cached(
            "INSERT INTO memory_state (snapshot_id, memory_id, capacity, alignment, allocation_count, used_bytes, free_bytes,
                                       hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable,
                                       unaccounted_bytes, holes_listed, unknown, device_free)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?;
        let mut insert_segment = self.tx.prepare_cached(
            "INSERT INTO segment (snapshot_id, memory_id, offset, size, address, pool, stream, expandable, allocated_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        let mut insert_failed = self.tx.prepare_cached(
            "INSERT INTO failed_request (snapshot_id, memory_id, ordinal, size, alignment, kind, provenance, time_ns, note, device_free)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?;
        let mut insert_link = self.tx.prepare_cached(
            "INSERT INTO allocation_object (run_id, uid, field_id, object_key, field_size) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT DO UPDATE SET field_size = max(coalesce(field_size, excluded.field_size), coalesce(excluded.field_size, field_size))",
        )?;
        let mut memory_of = Vec::with_capacity(dump.memories.len());
        for (memory, figures) in dump.memories.iter().zip(&prepared.figures) {
            let memory_id: i64 = upsert_memory.query_row(
                params![
                    run_id,
                    node,
                    id_bits(memory.id),
                    sym(memory.kind),
                    opt(memory.name),
                    seq
                ],
                |row| row.get(0),
            )?;
            let keys = [Value::Integer(snapshot_id), Value::Integer(memory_id)];
            insert_state.execute(params_from_iter(
                keys.into_iter()
                    .chain(figure_values(memory, figures))
                    .chain([memory
                        .device_free
                        .map_or(Value::Null, |free| Value::Integer(size_bits(free)))]),
            ))?;
            for (segment, allocated) in memory
                .segments
                .iter()
                .zip(crate::dump::figures::segment_usage(memory))
            {
                insert_segment.execute(params![
                    snapshot_id,
                    memory_id,
                    size_bits(segment.offset),
                    size_bits(segment.size),
                    id_bits(segment.address),
                    opt(segment.pool),
                    segment.stream,
                    segment.expandable,
                    size_bits(allocated),
                ])?;
            }
            for (ordinal, request) in memory.failed_requests.iter().enumerate() {
                insert_failed.execute(params![
                    snapshot_id,
                    memory_id,
                    ordinal as i64,
                    size_bits(request.size),
                    request.alignment.map(size_bits),
                    opt(request.kind),
                    opt(request.provenance),
                    request.time_ns,
                    opt(request.note),
                    request.device_free.map(size_bits),
                ])?;
            }
            for allocation in &memory.allocations {
                for field in allocation.fields() {
                    insert_link.execute(params![
                        run_id,
                        id_bits(allocation.uid),
                        field.id,
                        sym(field.object),
                        field.size.map(size_bits)
                    ])?;
                }
            }
            memory_of.push(memory_id);
        }
        Ok(memory_of)
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
            added += insert.execute(params![
                run_id,
                id_bits(link.uid),
                link.field.unwrap_or(-1),
                ids[link.object.0 as usize]
            ])? as u64;
        }
        Ok(added)
    }
}

fn upsert_run(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.execute("INSERT OR IGNORE INTO run (name) VALUES (?1)", [name])?;
    conn.query_row("SELECT id FROM run WHERE name = ?1", [name], |row| {
        row.get(0)
    })
}

fn intern(
    conn: &Connection,
    cache: &mut HashMap<String, i64>,
    new_strings: &mut Vec<String>,
    text: &str,
) -> rusqlite::Result<i64> {
    if let Some(id) = cache.get(text) {
        return Ok(*id);
    }
    let mut insert = conn.prepare_cached("INSERT OR IGNORE INTO string (value) VALUES (?1)")?;
    let id = if insert.execute([text])? == 1 {
        conn.last_insert_rowid()
    } else {
        conn.prepare_cached("SELECT id FROM string WHERE value = ?1")?
            .query_row([text], |row| row.get(0))?
    };
    cache.insert(text.to_string(), id);
    new_strings.push(text.to_string());
    Ok(id)
}

/// Objects are described again by every dump. A later description fills in what earlier ones left
/// out; where two disagree, the greater value (by text) is kept, so that the result does not
/// depend on the order of imports.
fn upsert_objects(
    conn: &Connection,
    run_id: i64,
    objects: &[Object],
    ids: &[i64],
) -> rusqlite::Result<()> {
    // The string id whose text is the greater, either side may be NULL. Two lookups by id; an IN
    // list with ORDER BY made SQLite open and free a temporary B-tree for each column of each
    // object of each dump (46% of importing a simulated node's dumps, which describe their
    // objects every time).
    let pick = |column: &str| {
        format!(
            "{column} = CASE WHEN {column} IS NULL THEN excluded.{column}
                             WHEN excluded.{column} IS NULL THEN {column}
                             WHEN (SELECT value FROM string WHERE id = excluded.{column})
                                  > (SELECT value FROM string WHERE id = {column}) THEN excluded.{column}
                             ELSE {column} END"
        )
    };
    let text = |column: &str| {
        format!("{column} = max(coalesce({column}, excluded.{column}), coalesce(excluded.{column}, {column}))")
    };
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
