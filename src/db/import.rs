//! Writing validated dumps and annotations into the database, one transaction each.
//!
//! A dump either lands whole or not at all: every statement of one dump runs inside one
//! `BEGIN IMMEDIATE` transaction that is rolled back on any error. A snapshot is identified by
//! (run, node, seq): the same content again is skipped, different content is refused unless the
//! caller asks to replace it.

use std::collections::HashMap;

use rusqlite::{params, CachedStatement, Connection, OptionalExtension, TransactionBehavior};

use crate::dump::{Annotations, Dump, Object, Prepared, State, Sym};
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

/// Writes dumps into an open database, keeping a cache of interned string ids between dumps.
pub struct Importer<'c> {
    conn: &'c mut Connection,
    db_display: String,
    /// Interned strings already committed (ids stay valid: strings are never deleted).
    string_ids: HashMap<String, i64>,
}

fn state_code(state: State) -> i64 {
    match state {
        State::Valid => 0,
        State::Collectable => 1,
        State::PendingFree => 2,
        State::PendingAlloc => 3,
    }
}

/// The 64-bit pattern of an id, as SQLite stores it.
fn id_bits(id: u64) -> i64 {
    id as i64
}

/// Sizes are below 2^63 by validation.
fn size_bits(size: u64) -> i64 {
    size as i64
}

impl<'c> Importer<'c> {
    pub fn new(conn: &'c mut Connection, db_display: impl Into<String>) -> Self {
        Importer { conn, db_display: db_display.into(), string_ids: HashMap::new() }
    }

    /// Import one prepared dump read from `source`, in its own transaction.
    pub fn import(&mut self, prepared: &Prepared, source: &str, replace: bool) -> Result<Outcome> {
        let mut new_strings = Vec::new();
        let result = self.import_in_transaction(prepared, source, replace, &mut new_strings);
        if result.is_err() {
            // The transaction rolled back: forget the ids it handed out.
            for text in new_strings {
                self.string_ids.remove(&text);
            }
        }
        result
    }

    fn import_in_transaction(
        &mut self,
        prepared: &Prepared,
        source: &str,
        replace: bool,
        new_strings: &mut Vec<String>,
    ) -> Result<Outcome> {
        let dump = &prepared.dump;
        let db_display = self.db_display.clone();
        let db_error = |error: rusqlite::Error| Error::database(&db_display, error);
        let transaction = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;

        let run_id = upsert_run(&transaction, &dump.run.id).map_err(db_error)?;
        let existing: Option<(i64, Vec<u8>, String)> = transaction
            .query_row(
                "SELECT id, digest, source FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq = ?3",
                params![run_id, dump.run.node, dump.snapshot.seq],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(db_error)?;
        let mut replaced = false;
        if let Some((snapshot_id, digest, earlier_source)) = existing {
            if digest == prepared.digest {
                // Dropping the transaction rolls back the run row if it was new (it was not).
                return Ok(Outcome::Unchanged { snapshot_id });
            }
            if !replace {
                return Err(Error::input(
                    source,
                    "",
                    format!(
                        "a different dump of run {:?}, node {}, seq {} is already imported (snapshot {snapshot_id}, from {earlier_source}); refused (use --replace to replace it)",
                        dump.run.id, dump.run.node, dump.snapshot.seq
                    ),
                ));
            }
            delete_snapshot(&transaction, snapshot_id).map_err(db_error)?;
            replaced = true;
        }

        // Map this dump's strings to database ids, once each.
        let mut ids = Vec::with_capacity(dump.strings.len());
        for text in &dump.strings {
            ids.push(intern(&transaction, &mut self.string_ids, new_strings, text).map_err(db_error)?);
        }
        let opt = |sym: Option<Sym>| sym.map(sym_id(&ids));

        let producer = opt(dump.producer);
        transaction
            .execute(
                "UPDATE run SET node_count = max(coalesce(node_count, 0), coalesce(?2, 0), ?3 + 1),
                                producer = coalesce(?4, producer)
                 WHERE id = ?1",
                params![run_id, dump.run.node_count, dump.run.node, producer],
            )
            .map_err(db_error)?;
        transaction
            .execute(
                "INSERT INTO snapshot (run_id, node, seq, time_ns, wall_time, reason, note, producer, host, pid,
                                       source, format_version, digest, imported_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
                         strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                params![
                    run_id,
                    dump.run.node,
                    dump.snapshot.seq,
                    dump.snapshot.time_ns,
                    dump.snapshot.wall_time,
                    dump.snapshot.reason.as_str(),
                    opt(dump.snapshot.note),
                    producer,
                    dump.run.host,
                    dump.run.pid,
                    source,
                    dump.version,
                    &prepared.digest[..],
                ],
            )
            .map_err(db_error)?;
        let snapshot_id = transaction.last_insert_rowid();

        upsert_objects(&transaction, run_id, &dump.objects, &ids).map_err(db_error)?;
        let allocations = insert_memories(&transaction, run_id, snapshot_id, prepared, &ids).map_err(db_error)?;
        transaction.commit().map_err(db_error)?;
        Ok(if replaced {
            Outcome::Replaced { snapshot_id, allocations }
        } else {
            Outcome::Imported { snapshot_id, allocations }
        })
    }

    /// Import an annotations file: its objects and links join the run's allocations by uid.
    /// Returns how many links were new.
    pub fn import_annotations(&mut self, annotations: &Annotations) -> Result<u64> {
        let mut new_strings = Vec::new();
        let result = self.annotations_in_transaction(annotations, &mut new_strings);
        if result.is_err() {
            for text in new_strings {
                self.string_ids.remove(&text);
            }
        }
        result
    }

    fn annotations_in_transaction(&mut self, annotations: &Annotations, new_strings: &mut Vec<String>) -> Result<u64> {
        let transaction =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|error| Error::database(&self.db_display, error))?;
        let result = (|| -> rusqlite::Result<u64> {
            let run_id = upsert_run(&transaction, &annotations.run_id)?;
            let mut ids = Vec::with_capacity(annotations.strings.len());
            for text in &annotations.strings {
                ids.push(intern(&transaction, &mut self.string_ids, new_strings, text)?);
            }
            upsert_objects(&transaction, run_id, &annotations.objects, &ids)?;
            let mut insert = transaction.prepare_cached(
                "INSERT OR IGNORE INTO allocation_object (run_id, uid, field_id, object_key, field_size)
                 VALUES (?1, ?2, ?3, ?4, NULL)",
            )?;
            let mut added = 0;
            for link in &annotations.links {
                added += insert.execute(params![run_id, id_bits(link.uid), link.field.unwrap_or(-1), ids[link.object.0 as usize]])? as u64;
            }
            drop(insert);
            Ok(added)
        })();
        match result {
            Ok(added) => {
                transaction.commit().map_err(|error| Error::database(&self.db_display, error))?;
                Ok(added)
            }
            Err(error) => Err(Error::database(&self.db_display, error)),
        }
    }
}

fn sym_id(ids: &[i64]) -> impl Fn(Sym) -> i64 + '_ {
    move |sym| ids[sym.0 as usize]
}

fn upsert_run(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.execute("INSERT OR IGNORE INTO run (name) VALUES (?1)", [name])?;
    conn.query_row("SELECT id FROM run WHERE name = ?1", [name], |row| row.get(0))
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
        conn.prepare_cached("SELECT id FROM string WHERE value = ?1")?.query_row([text], |row| row.get(0))?
    };
    cache.insert(text.to_string(), id);
    new_strings.push(text.to_string());
    Ok(id)
}

/// Remove every row of a snapshot (for `--replace`).
fn delete_snapshot(conn: &Connection, snapshot_id: i64) -> rusqlite::Result<()> {
    let memory_ids: Vec<i64> = conn
        .prepare("SELECT memory_id FROM memory_state WHERE snapshot_id = ?1")?
        .query_map([snapshot_id], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for memory_id in memory_ids {
        conn.execute("DELETE FROM allocation WHERE snapshot_id = ?2 AND memory_id = ?1", [memory_id, snapshot_id])?;
    }
    conn.execute("DELETE FROM failed_request WHERE snapshot_id = ?1", [snapshot_id])?;
    conn.execute("DELETE FROM memory_state WHERE snapshot_id = ?1", [snapshot_id])?;
    conn.execute("DELETE FROM snapshot WHERE id = ?1", [snapshot_id])?;
    Ok(())
}

/// Objects are described again by every dump; a later description fills in what it knows.
fn upsert_objects(conn: &Connection, run_id: i64, objects: &[Object], ids: &[i64]) -> rusqlite::Result<()> {
    let mut upsert = conn.prepare_cached(
        "INSERT INTO object (run_id, object_key, kind, name, shape, dtype, transform, partition, provenance, attrs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (run_id, object_key) DO UPDATE SET
             kind = coalesce(excluded.kind, kind),
             name = coalesce(excluded.name, name),
             shape = coalesce(excluded.shape, shape),
             dtype = coalesce(excluded.dtype, dtype),
             transform = coalesce(excluded.transform, transform),
             partition = coalesce(excluded.partition, partition),
             provenance = coalesce(excluded.provenance, provenance),
             attrs = coalesce(excluded.attrs, attrs)",
    )?;
    let id = sym_id(ids);
    for object in objects {
        upsert.execute(params![
            run_id,
            id(object.id),
            object.kind.map(&id),
            object.name.map(&id),
            object.shape,
            object.dtype.map(&id),
            object.transform.map(&id),
            object.partition.map(&id),
            object.provenance.map(&id),
            object.attrs,
        ])?;
    }
    Ok(())
}

/// The statements used once per allocation, hole or request, prepared once per dump.
struct RowWriters<'t> {
    allocation: CachedStatement<'t>,
    link: CachedStatement<'t>,
    failed: CachedStatement<'t>,
}

fn insert_memories(
    conn: &Connection,
    run_id: i64,
    snapshot_id: i64,
    prepared: &Prepared,
    ids: &[i64],
) -> rusqlite::Result<u64> {
    let dump: &Dump = &prepared.dump;
    let sym = sym_id(ids);
    let opt = |value: Option<Sym>| value.map(&sym);
    let mut writers = RowWriters {
        allocation: conn.prepare_cached(
            "INSERT INTO allocation (memory_id, snapshot_id, offset, uid, size, state, kind, handle, alignment,
                                     created_ns, provenance, label, gc_priority, attrs)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )?,
        link: conn.prepare_cached(
            "INSERT INTO allocation_object (run_id, uid, field_id, object_key, field_size) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT DO UPDATE SET field_size = coalesce(excluded.field_size, field_size)",
        )?,
        failed: conn.prepare_cached(
            "INSERT INTO failed_request (snapshot_id, memory_id, ordinal, size, alignment, kind, provenance, time_ns, note)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?,
    };
    let mut upsert_memory = conn.prepare_cached(
        "INSERT INTO memory (run_id, node, handle, kind, name) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (run_id, node, handle) DO UPDATE SET kind = excluded.kind, name = coalesce(excluded.name, name)
         RETURNING id",
    )?;
    let mut insert_state = conn.prepare_cached(
        "INSERT INTO memory_state (snapshot_id, memory_id, capacity, alignment, allocation_count, used_bytes, free_bytes,
                                   hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable,
                                   unaccounted_bytes, holes_listed, holes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?;
    let mut total = 0;
    for ((memory, holes_json), figures) in dump.memories.iter().zip(&prepared.holes_json).zip(&prepared.figures) {
        let memory_id: i64 = upsert_memory.query_row(
            params![run_id, dump.run.node, id_bits(memory.id), sym(memory.kind), opt(memory.name)],
            |row| row.get(0),
        )?;
        insert_state.execute(params![
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
            holes_json,
        ])?;
        for allocation in &memory.allocations {
            writers.allocation.execute(params![
                memory_id,
                snapshot_id,
                size_bits(allocation.offset),
                id_bits(allocation.uid),
                size_bits(allocation.size),
                state_code(allocation.state),
                sym(allocation.kind),
                allocation.handle.map(id_bits),
                allocation.alignment.map(size_bits),
                allocation.created_ns,
                opt(allocation.provenance),
                opt(allocation.label),
                allocation.gc_priority,
                allocation.attrs,
            ])?;
            for field in &allocation.fields {
                writers.link.execute(params![
                    run_id,
                    id_bits(allocation.uid),
                    field.id,
                    sym(field.object),
                    field.size.map(size_bits),
                ])?;
            }
        }
        for (ordinal, request) in memory.failed_requests.iter().enumerate() {
            writers.failed.execute(params![
                snapshot_id,
                memory_id,
                ordinal as i64,
                size_bits(request.size),
                request.alignment.map(size_bits),
                opt(request.kind),
                opt(request.provenance),
                request.time_ns,
                opt(request.note),
            ])?;
        }
        total += memory.allocations.len() as u64;
    }
    Ok(total)
}
