//! Shard import: `import --shard-dir DIR --jobs N` writes one SQLite database per (run, node)
//! under DIR instead of one for everything, so no single database or importer holds a whole
//! cluster's run. Records are read and parsed by the usual pipeline ([`crate::import`]); each dump
//! is then handed to the writer thread that owns its shard (a shard always goes to the same one,
//! so its dumps land in input order), N of them writing at once. Every dump lands as in a plain
//! import (the same [`crate::import::land`]): atomically, the same dump again unchanged, so a
//! killed shard import resumes by being run again. Annotations files describe a run: they land in
//! every shard of their run once the dumps are in.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use crate::db;
use crate::dump::Annotations;
use crate::error::{Because, Error, Result};
use crate::import::{self, ImportEvent, ImportSummary, IngestOptions, Landed, Record};

/// The database file of a shard: `DIR/RUN-nNODE.db`, the run's characters other than letters,
/// digits, `-`, `_` and `.` replaced by `_`, and a run id over 100 characters cut there (and then
/// a hash of the run added, so two runs never share a file).
pub fn shard_path(dir: &Path, run: &str, node: i64) -> PathBuf {
    dir.join(format!("{}-n{node}.db", crate::files::safe_stem(run)))
}

/// What a writer thread is handed.
struct Job {
    key: (String, i64),
    record: Record,
    /// What it counts against [`IN_FLIGHT_ROWS`]: its allocations, and one for the dump.
    weight: u64,
}

/// How many allocation rows may wait in the writers' queues. The reading side runs ahead of the
/// writers by this much, so that while one writer lands a node's dumps (which come together, in
/// input order) the others already have the next nodes' to land: with a queue of two dumps each,
/// the writer of the node being read was the only one at work. One dump larger than this still
/// goes, alone; so memory stays bounded by about this many rows beside the largest dump.
const IN_FLIGHT_ROWS: u64 = 100_000;

/// The rows waiting in the writers' queues, and whether a writer has stopped (then the reading
/// side stops waiting for room it will never get).
#[derive(Default)]
struct Flow {
    rows: u64,
    writer_stopped: bool,
}

type FlowControl = (Mutex<Flow>, std::sync::Condvar);

/// What the writers share with the reading side: the counts so far and what they refused.
#[derive(Default)]
struct Shared {
    summary: ImportSummary,
    refused: Vec<Error>,
    /// Each shard written: its (run, node) and file.
    shards: Vec<((String, i64), PathBuf)>,
}

/// How many shards one writer keeps open at once. Each open database holds its page cache (8 MiB
/// at most) and file handles: a run of 1,000 nodes must not open 1,000 of them. Dumps of one node
/// usually come together (a folder or a stream per node), so the least recently used shard is
/// finished and closed to make room, and opened again should more of its dumps come.
const OPEN_SHARDS: usize = 8;

/// One writer: lands each job in its shard, an importer kept while consecutive jobs share it.
fn writer(
    dir: PathBuf,
    jobs: std::sync::mpsc::Receiver<Job>,
    replace: bool,
    shared: Arc<Mutex<Shared>>,
    flow: &FlowControl,
) -> Result<()> {
    // Open shards, the most recently used last.
    let mut databases: Vec<((String, i64), db::Database)> = Vec::new();
    let mut seen: std::collections::HashSet<(String, i64)> = std::collections::HashSet::new();
    // Nodes whose shard file is not a memstate database: their dumps are refused.
    let mut broken: std::collections::HashSet<(String, i64)> = std::collections::HashSet::new();
    let mut next = jobs.recv().ok();
    while let Some(job) = next.take() {
        let key = job.key.clone();
        if broken.contains(&key) {
            refuse(&shared, flow, job.weight, None);
            next = jobs.recv().ok();
            continue;
        }
        match databases.iter().position(|(open, _)| *open == key) {
            Some(index) => {
                let entry = databases.remove(index);
                databases.push(entry);
            }
            None => {
                if databases.len() >= OPEN_SHARDS {
                    let (_, oldest) = databases.remove(0);
                    oldest.finish()?;
                }
                let path = shard_path(&dir, &key.0, key.1);
                let database = match db::open(&path) {
                    Ok(database) => database,
                    // The file under this node's shard name is not a memstate database (or not
                    // one this memstate writes): that node is refused by name, its file left
                    // as it is, and the other nodes go on.
                    Err(Error::Database {
                        file,
                        message,
                        source,
                    }) => {
                        let error = Error::Database {
                            file,
                            message: format!(
                                "{message}; the dumps of run {:?} node {} are not imported",
                                key.0, key.1
                            ),
                            source,
                        };
                        broken.insert(key);
                        refuse(&shared, flow, job.weight, Some(error));
                        next = jobs.recv().ok();
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                if seen.insert(key.clone()) {
                    if let Ok(mut shared) = shared.lock() {
                        shared.shards.push((key.clone(), path));
                    }
                }
                databases.push((key.clone(), database));
            }
        }
        let Some((_, database)) = databases.last_mut() else {
            continue;
        };
        let display = database.display();
        let mut importer = database.bulk_writer(display);
        let mut job = job;
        loop {
            // Counted in the shared summary, not under its lock while the dump is written.
            let weight = job.weight;
            let landed = import::land(
                &mut importer,
                &mut ImportSummary::default(),
                job.record,
                replace,
            )?;
            if let Ok(mut state) = flow.0.lock() {
                state.rows = state.rows.saturating_sub(weight);
                flow.1.notify_all();
            }
            if let Ok(mut shared) = shared.lock() {
                match landed {
                    Landed::Dump { outcome, .. } => shared.summary.count(&outcome),
                    Landed::Refused(error) => {
                        shared.summary.refused += 1;
                        shared.refused.push(error);
                    }
                    Landed::Annotations => {}
                }
            }
            match jobs.recv() {
                Ok(following) if following.key == key => job = following,
                Ok(other) => {
                    next = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        // The shard stays open for its next dumps, but its page cache goes back meanwhile.
        drop(importer);
        database.release_memory()?;
    }
    for (_, database) in databases {
        database.finish()?;
    }
    Ok(())
}

/// Count a dump refused (with the error that says why, once per node) and free its room.
fn refuse(shared: &Mutex<Shared>, flow: &FlowControl, weight: u64, error: Option<Error>) {
    if let Ok(mut state) = flow.0.lock() {
        state.rows = state.rows.saturating_sub(weight);
        flow.1.notify_all();
    }
    if let Ok(mut shared) = shared.lock() {
        shared.summary.refused += 1;
        shared.refused.extend(error);
    }
}

/// Wait until the writers' queues have room for `weight` rows (or are empty), and count them in;
/// false when a writer has stopped.
fn wait_for_room(flow: &FlowControl, weight: u64) -> bool {
    let Ok(mut state) = flow.0.lock() else {
        return false;
    };
    while state.rows > 0 && state.rows + weight > IN_FLIGHT_ROWS && !state.writer_stopped {
        state = match flow.1.wait(state) {
            Ok(state) => state,
            Err(_) => return false,
        };
    }
    if state.writer_stopped {
        return false;
    }
    state.rows += weight;
    true
}

/// The counts of dumps that landed (`landed`, the writers') in the summary the reading side keeps
/// (inputs, refusals while parsing, annotations).
fn show_landed(summary: &mut ImportSummary, landed: &ImportSummary) {
    summary.imported = landed.imported;
    summary.replaced = landed.replaced;
    summary.unchanged = landed.unchanged;
    summary.allocations = landed.allocations;
}

/// Import `paths` into one database per (run, node) under `dir`, `jobs` shards written at once.
pub fn import_shards(
    dir: &Path,
    jobs: usize,
    paths: &[String],
    options: IngestOptions,
    stop: Option<&AtomicBool>,
    report: &mut dyn FnMut(ImportEvent),
) -> Result<ImportSummary> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|error| {
        Error::write(
            dir,
            Because::context("cannot create the shard folder", error),
        )
    })?;
    let jobs = jobs.max(1);
    let replace = options.replace;
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut senders: Vec<Sender<Job>> = Vec::new();
    let mut writers = Vec::new();
    let flow: Arc<FlowControl> = Arc::default();
    for _ in 0..jobs {
        let (sender, receiver) = channel::<Job>();
        senders.push(sender);
        let (dir, shared, flow) = (dir.to_path_buf(), Arc::clone(&shared), Arc::clone(&flow));
        writers.push(thread::spawn(move || {
            let result = writer(dir, receiver, replace, shared, &flow);
            if let Ok(mut state) = flow.0.lock() {
                state.writer_stopped = true;
                flow.1.notify_all();
            }
            result
        }));
    }
    let mut annotations: Vec<Box<Annotations>> = Vec::new();
    let mut writer_gone = false;
    let read = import::drive(
        paths,
        options,
        stop,
        report,
        &mut |summary, record, report| {
            // What the writers did so far, as the summary the progress shows.
            if let Ok(mut shared) = shared.lock() {
                for error in shared.refused.drain(..) {
                    report(ImportEvent::Refused { error: &error });
                }
                show_landed(summary, &shared.summary);
            }
            match record {
                Record::Dump { source, prepared } => {
                    let key = (prepared.dump.run.id.clone(), prepared.dump.run.node);
                    let hash =
                        xxhash_rust::xxh3::xxh3_64(format!("{}\0{}", key.0, key.1).as_bytes());
                    let writer = (hash % senders.len() as u64) as usize;
                    let weight = prepared.dump.allocation_count() as u64 + 1;
                    if !wait_for_room(&flow, weight) {
                        writer_gone = true;
                        return Err(Error::Interrupted);
                    }
                    let job = Job {
                        key,
                        record: Record::Dump { source, prepared },
                        weight,
                    };
                    if senders[writer].send(job).is_err() {
                        writer_gone = true;
                        return Err(Error::Interrupted);
                    }
                }
                Record::Annotations { annotations: found } => annotations.push(found),
            }
            Ok(())
        },
    );
    drop(senders);
    let mut failure = None;
    for writer in writers {
        match writer.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failure = failure.or(Some(error)),
            Err(_) => {
                failure = failure.or(Some(Error::Internal {
                    file: dir.display().to_string(),
                    message: "a shard writer failed (a bug; please report it)".to_string(),
                }))
            }
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    let mut summary = match read {
        Ok(summary) => summary,
        Err(Error::Interrupted) if writer_gone => {
            return Err(Error::Internal {
                file: dir.display().to_string(),
                message: "a shard writer stopped early".to_string(),
            })
        }
        Err(error) => return Err(error),
    };
    // The writers are done: what they counted and refused is all here.
    let shared = shared
        .lock()
        .map(|mut shared| std::mem::take(&mut *shared))
        .unwrap_or_default();
    for error in &shared.refused {
        report(ImportEvent::Refused { error });
    }
    show_landed(&mut summary, &shared.summary);
    summary.refused += shared.summary.refused;
    // Annotations describe a run: each lands in every shard of it.
    for found in annotations {
        let shards: Vec<&PathBuf> = shared
            .shards
            .iter()
            .filter(|((run, _), _)| *run == found.run_id)
            .map(|(_, path)| path)
            .collect();
        if shards.is_empty() {
            let error = Error::read(
                dir.display().to_string(),
                format!(
                    "an annotations file of run {:?}, which no shard holds; not imported",
                    found.run_id
                ),
            );
            summary.refused += 1;
            report(ImportEvent::Refused { error: &error });
            continue;
        }
        for path in shards {
            let mut database = db::open(path)?;
            let display = database.display();
            database.writer(display).import_annotations(&found)?;
            database.finish()?;
        }
        summary.annotations += 1;
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}
