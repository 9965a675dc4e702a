//! Getting inputs into the database: the import and validate pipelines ([`import`], [`validate`]),
//! the inputs on disk and their I/O ([`input`]), the foreign formats turned into dumps
//! ([`source`]), `import --follow` ([`follow`]) and one database per (run, node) ([`shards`]).
//!
//! The pipeline: one thread reads inputs into records, a few workers parse,
//! check and prepare them in parallel, and the caller's thread takes them back in input order to
//! write them to the database (or just count them, for `validate`).
//!
//! At most a few records are in flight at once (read, parsed or waiting for the writer: a window of
//! tickets), so memory is bounded by the largest dumps, not by how many there are. Every record's
//! fate (imported, unchanged, replaced, refused) is reported to the caller as an [`ImportEvent`] in input
//! order, so messages come out in a stable order. A panic while reading or parsing (a bug) is not
//! taken for the end of the input: it becomes an error naming the file.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::db::{Database, Outcome, Writer};
use crate::dump::{self, parse_document, Annotations, Document, Options, Prepared};
use crate::error::{Error, Result};
use window::Window;

mod buffers;
pub mod follow;
pub mod input;
pub mod shards;
pub mod source;
mod window;

/// What to do with the inputs.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    pub strict: bool,
    /// Replace a different dump already imported under the same (run, node, seq).
    pub replace: bool,
    /// Bounds on one record (a dump may not decompress to more than its `max_dump_size`).
    pub limits: input::Limits,
    /// What kind of input the files are (found from their content by default), and the run of
    /// foreign inputs.
    pub source: source::Options,
}

/// Counts of one import or validate run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ImportSummary {
    /// Inputs (files, `-`) read.
    pub inputs: u64,
    /// Dumps that landed as new snapshots (for `validate`: dumps that passed).
    pub imported: u64,
    /// Dumps that replaced an earlier different dump of the same identity.
    pub replaced: u64,
    /// Dumps already imported with the same content: skipped.
    pub unchanged: u64,
    /// Records refused (bad dump, unreadable file, conflicting identity).
    pub refused: u64,
    /// Annotations files read.
    pub annotations: u64,
    /// Allocations in the dumps imported or replaced (for `validate`: in the dumps that passed).
    pub allocations: u64,
    /// Files in folders skipped because they are no input memstate reads (each named in an
    /// [`ImportEvent::Skipped`]).
    pub ignored_files: u64,
    /// Entries in folders that are not regular files (FIFOs, sockets, devices, links to folders).
    pub skipped: u64,
    pub seconds: f64,
    /// Stopped by the user (Ctrl-C) before the end: the dump in progress was rolled back.
    pub interrupted: bool,
}

impl ImportSummary {
    /// Count a dump that landed.
    pub fn count(&mut self, outcome: &Outcome) {
        match *outcome {
            Outcome::Imported { allocations, .. } => {
                self.imported += 1;
                self.allocations += allocations;
            }
            Outcome::Replaced { allocations, .. } => {
                self.replaced += 1;
                self.allocations += allocations;
            }
            Outcome::Unchanged { .. } => self.unchanged += 1,
        }
    }
}

/// One thing that happened, in input order.
#[derive(Debug)]
pub enum ImportEvent<'a> {
    /// The inputs are known; `count` of them will be read.
    Inputs { count: u64 },
    /// One record is done; the summary so far.
    Progress { summary: &'a ImportSummary },
    /// One input has been read to its end.
    InputDone,
    /// A record or input was refused.
    Refused { error: &'a Error },
    /// A file found in a folder is no input memstate reads: skipped (the error says why).
    Skipped { error: &'a Error },
}

/// What the pipeline hands to the writer, in input order; what [`take`] makes of one record.
pub(crate) enum Item {
    Record(Record),
    Refused(Error),
    /// A file found in a folder that is no input memstate reads; its input's end follows.
    Skipped(Error),
    InputDone,
    /// Reading or parsing panicked: a bug, reported as an error naming the input.
    Crashed(Error),
}

/// What the reading thread hands to the workers.
enum Job {
    Parse { source: String, text: Vec<u8> },
    Ready(Item),
}

/// The message of a caught panic.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn crashed(file: &str, message: String) -> Item {
    Item::Crashed(Error::Internal {
        file: file.to_string(),
        message: format!("memstate failed while reading it (a bug; please report it): {message}"),
    })
}

/// The inputs whose parsing panics on purpose, named by their full paths: the hook the unit tests
/// of a failure inside the parser use (see `tests.rs`; tests running at once each add their own).
/// It exists only in test builds, so no input and no environment of the shipped binary reach it.
#[cfg(test)]
pub(crate) static PANIC_ON: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[cfg(test)]
fn panics_on_purpose(source: &str) -> bool {
    PANIC_ON
        .lock()
        .map(|names| names.iter().any(|name| source.ends_with(name.as_str())))
        .unwrap_or(false)
}

#[cfg(not(test))]
fn panics_on_purpose(_: &str) -> bool {
    false
}

/// Parse, check and prepare one record's text: what every way of importing (the pipeline's
/// workers for `import` and `validate`, `import --follow` as records arrive) does with a record.
/// A panic while parsing (a bug) is caught and becomes [`Item::Crashed`], naming the record.
pub(crate) fn take(source: String, text: Vec<u8>, options: Options) -> Item {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        match parse_document(&text, &source, options) {
            _ if panics_on_purpose(&source) => panic!("injected failure (a test)"),
            Err(error) => Item::Refused(error),
            Ok(Document::Dump(parsed)) => {
                buffers::give_back(text);
                Item::Record(Record::Dump {
                    source: source.clone(),
                    prepared: Box::new(dump::prepare(*parsed)),
                })
            }
            Ok(Document::Annotations(annotations)) => {
                Item::Record(Record::Annotations { annotations })
            }
        }
    }));
    outcome.unwrap_or_else(|payload| crashed(&source, panic_message(payload)))
}

/// The running pipeline: results in input order, and the threads to join.
struct Pipeline {
    results: Receiver<(u64, Item, u64)>,
    window: Arc<Window>,
    threads: Vec<JoinHandle<()>>,
    inputs: u64,
    skipped: u64,
    path_errors: Vec<Error>,
    empty_folders: Vec<String>,
}

/// Start reading `paths`: a reading thread and `workers` parsing threads.
fn start(paths: &[String], options: IngestOptions) -> Pipeline {
    let expanded = input::expand(paths);
    let workers = thread::available_parallelism()
        .map(|count| count.get())
        .unwrap_or(1)
        .clamp(1, 4);
    // Records read, being parsed, or parsed and waiting: bounded, so memory is too.
    let window = Window::new(workers + 1);
    let (job_sender, job_receiver) = sync_channel::<(u64, Job)>(1);
    let (result_sender, results) = sync_channel::<(u64, Item, u64)>(workers + 1);
    let parse_options = Options {
        strict: options.strict,
    };
    let limits = options.limits;
    let sources = options.source.clone();
    let inputs = expanded.inputs.len() as u64;
    let mut threads = Vec::new();
    let reading = Arc::clone(&window);
    threads.push(thread::spawn(move || {
        let mut index = 0u64;
        // Room in the window is taken (waiting while it is full) before a record is read, not
        // after, so that a record waiting for room is not already held in memory: `room` takes
        // it, `send` uses the room taken.
        let room = || reading.enter();
        let mut send = |job: Job| -> bool {
            if job_sender.send((index, job)).is_err() {
                return false;
            }
            index += 1;
            true
        };
        // The folder the inputs read last were found in, and whether any of its files was an
        // input memstate reads: a folder that yields none is refused once its files are read.
        let mut folder: Option<(usize, bool)> = None;
        let yielded_nothing = |folder: Option<(usize, bool)>, send: &mut dyn FnMut(Job) -> bool| {
            match folder {
                Some((index, false)) => {
                    let named = expanded.folders.get(index).cloned().unwrap_or_default();
                    room()
                        && send(Job::Ready(Item::Refused(Error::Unrecognized {
                            file: named,
                            message: "no file in it is an input memstate reads (a memstate dump, a Legate or Realm log, a PyTorch allocator snapshot); nothing imported from it".to_string(),
                        })))
                }
                _ => true,
            }
        };
        for input in &expanded.inputs {
            if folder.map(|(index, _)| index) != input.folder {
                if !yielded_nothing(folder, &mut send) {
                    break;
                }
                folder = input.folder.map(|index| (index, false));
            }
            let mut recognized = true;
            // The input's end marker holds nothing, so it takes no room in the window: were it to,
            // each single-record input would take two of the window's places, and one worker of
            // two would wait for the writer instead of parsing the next input.
            let outcome = catch_unwind(AssertUnwindSafe(|| -> bool {
                if !room() {
                    return false;
                }
                let records = match source::open(input, limits, &sources) {
                    Err(error) if input.folder.is_some() && error.is_unrecognized() => {
                        recognized = false;
                        return send(Job::Ready(Item::Skipped(error)));
                    }
                    Err(error) => return send(Job::Ready(Item::Refused(error))),
                    Ok(records) => records,
                };
                for record in records {
                    let job = match record {
                        Err(error) => Job::Ready(Item::Refused(error)),
                        Ok(record) => {
                            reading.weigh(record.text.len() as u64);
                            Job::Parse {
                                source: record.source,
                                text: record.text,
                            }
                        }
                    };
                    if !send(job) || !room() {
                        return false;
                    }
                }
                // The room taken for a record after the last one is not used.
                reading.leave(0);
                true
            }));
            let going_on = match outcome {
                Ok(going_on) => going_on,
                Err(payload) => {
                    let _ = send(Job::Ready(crashed(&input.display, panic_message(payload))));
                    false
                }
            };
            if let Some((_, yielded)) = folder.as_mut() {
                *yielded |= recognized;
            }
            if !going_on || !send(Job::Ready(Item::InputDone)) {
                folder = None;
                break;
            }
        }
        yielded_nothing(folder, &mut send);
    }));
    let jobs = Arc::new(Mutex::new(job_receiver));
    for _ in 0..workers {
        let jobs = Arc::clone(&jobs);
        let results = result_sender.clone();
        threads.push(thread::spawn(move || loop {
            let next = match jobs.lock() {
                Ok(receiver) => receiver.recv(),
                Err(_) => return,
            };
            let Ok((index, job)) = next else { return };
            let (item, weight) = match job {
                Job::Ready(item) => (item, 0),
                Job::Parse { source, text } => {
                    let weight = text.len() as u64;
                    (take(source, text, parse_options), weight)
                }
            };
            if results.send((index, item, weight)).is_err() {
                return;
            }
        }));
    }
    drop(result_sender);
    Pipeline {
        results,
        window,
        threads,
        inputs,
        skipped: expanded.skipped,
        path_errors: expanded.errors,
        empty_folders: expanded.empty_folders,
    }
}

impl Pipeline {
    /// Hand every item to `handle` in input order; then join the threads. A thread that died
    /// without saying why is an error too. When `stop` is set the run ends within a tenth of a
    /// second with [`Error::Interrupted`], even while the reader waits for a slow input (a pipe,
    /// standard input): its threads are left to end with the process, not joined.
    fn run(
        mut self,
        stop: Option<&AtomicBool>,
        handle: &mut dyn FnMut(Item) -> Result<()>,
    ) -> Result<()> {
        let mut waiting: BTreeMap<u64, (Item, u64)> = BTreeMap::new();
        let mut next = 0u64;
        let mut outcome = Ok(());
        loop {
            let (index, item, weight) = match self.results.recv_timeout(Duration::from_millis(100))
            {
                Ok(received) => received,
                Err(RecvTimeoutError::Timeout) => {
                    if stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) {
                        self.window.close();
                        return Err(Error::Interrupted);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            waiting.insert(index, (item, weight));
            while let Some((item, weight)) = waiting.remove(&next) {
                next += 1;
                // An input's end marker took no room (see `start`).
                let held_room = !matches!(item, Item::InputDone);
                let result = handle(item);
                if held_room {
                    self.window.leave(weight);
                }
                if let Err(error) = result {
                    outcome = Err(error);
                    break;
                }
            }
            if outcome.is_err() {
                break;
            }
        }
        if matches!(outcome, Err(Error::Interrupted)) {
            self.window.close();
            return outcome;
        }
        // Stop the reading side (if it is still going) and wait for every thread.
        self.window.close();
        drop(self.results);
        for thread in self.threads.drain(..) {
            if let Err(payload) = thread.join() {
                if outcome.is_ok() {
                    outcome = Err(Error::Internal {
                        file: String::new(),
                        message: format!("a reading thread failed: {}", panic_message(payload)),
                    });
                }
            }
        }
        if outcome.is_ok() && !waiting.is_empty() {
            outcome = Err(Error::Internal {
                file: String::new(),
                message: "the reading threads stopped early".to_string(),
            });
        }
        outcome
    }
}

pub(crate) fn refused(
    summary: &mut ImportSummary,
    error: &Error,
    report: &mut dyn FnMut(ImportEvent),
) {
    summary.refused += 1;
    report(ImportEvent::Refused { error });
}

/// Start reading: report the inputs and the paths that cannot be read at all.
fn begin(
    paths: &[String],
    options: IngestOptions,
    report: &mut dyn FnMut(ImportEvent),
) -> (ImportSummary, Pipeline) {
    let mut summary = ImportSummary::default();
    let pipeline = start(paths, options);
    summary.skipped = pipeline.skipped;
    report(ImportEvent::Inputs {
        count: pipeline.inputs,
    });
    for error in &pipeline.path_errors {
        refused(&mut summary, error, report);
    }
    for folder in &pipeline.empty_folders {
        let error = Error::Unrecognized {
            file: folder.clone(),
            message: "the folder holds no file; nothing imported from it".to_string(),
        };
        refused(&mut summary, &error, report);
    }
    (summary, pipeline)
}

/// A record read whole, parsed and checked: what the writer writes.
pub(crate) enum Record {
    Dump {
        source: String,
        prepared: Box<Prepared>,
    },
    Annotations {
        annotations: Box<Annotations>,
    },
}

/// What the writer does with a record: import it (or count it, for `validate`).
pub(crate) type WriteRecord<'a> =
    &'a mut dyn FnMut(&mut ImportSummary, Record, &mut dyn FnMut(ImportEvent)) -> Result<()>;

/// Run the pipeline over `paths`, handing each record to `write` and counting the rest.
pub(crate) fn drive(
    paths: &[String],
    options: IngestOptions,
    stop: Option<&AtomicBool>,
    report: &mut dyn FnMut(ImportEvent),
    write: WriteRecord<'_>,
) -> Result<ImportSummary> {
    let started = Instant::now();
    let (mut summary, pipeline) = begin(paths, options, report);
    let stopped = || stop.is_some_and(|stop| stop.load(Ordering::SeqCst));
    // A skipped file is no input: its end is not counted as one read.
    let mut skipping = false;
    let ran = pipeline.run(stop, &mut |item| {
        if stopped() {
            return Err(Error::Interrupted);
        }
        match item {
            Item::Record(record) => write(&mut summary, record, report)?,
            Item::Refused(error) => refused(&mut summary, &error, report),
            Item::Skipped(error) => {
                summary.ignored_files += 1;
                skipping = true;
                report(ImportEvent::Skipped { error: &error });
            }
            Item::Crashed(error) => return Err(error),
            Item::InputDone if skipping => skipping = false,
            Item::InputDone => {
                summary.inputs += 1;
                report(ImportEvent::InputDone);
            }
        }
        report(ImportEvent::Progress { summary: &summary });
        Ok(())
    });
    match ran {
        Ok(()) => {}
        Err(Error::Interrupted) => summary.interrupted = true,
        Err(error) => return Err(error),
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// What writing one record did.
pub(crate) enum Landed {
    Dump {
        prepared: Box<Prepared>,
        source: String,
        outcome: Outcome,
    },
    Annotations,
    /// Refused by the database (its identity conflicts with a snapshot already there).
    Refused(Error),
}

/// Write one record with `importer` and count it in `summary`: the one way a record lands, for
/// `import` and `import --follow` alike. Only an error of the database itself is returned.
pub(crate) fn land(
    importer: &mut Writer<'_>,
    summary: &mut ImportSummary,
    record: Record,
    replace: bool,
) -> Result<Landed> {
    match record {
        Record::Dump { source, prepared } => match importer.import(&prepared, &source, replace) {
            Ok(outcome) => {
                summary.count(&outcome);
                Ok(Landed::Dump {
                    prepared,
                    source,
                    outcome,
                })
            }
            Err(error @ Error::Input { .. }) => {
                summary.refused += 1;
                Ok(Landed::Refused(error))
            }
            Err(error) => Err(error),
        },
        Record::Annotations { annotations } => {
            importer.import_annotations(&annotations)?;
            summary.annotations += 1;
            Ok(Landed::Annotations)
        }
    }
}

/// Import every dump and annotations file found under `paths` into `database`.
///
/// Refused records are reported and counted; the others land. Only an error of the database itself
/// (it cannot be written), or a failure of memstate itself, stops the run and is returned. When
/// `stop` is set (Ctrl-C) the run ends early: the dump being written is rolled back, and the
/// summary says `interrupted`.
pub fn import_until(
    database: &mut Database,
    paths: &[String],
    options: IngestOptions,
    stop: Option<&AtomicBool>,
    report: &mut dyn FnMut(ImportEvent),
) -> Result<ImportSummary> {
    let db_display = database.display();
    let mut importer = database.bulk_writer(db_display);
    if let Some(stop) = stop {
        importer = importer.stop_on(stop);
    }
    let replace = options.replace;
    drive(
        paths,
        options,
        stop,
        report,
        &mut |summary, record, report| {
            if let Landed::Refused(error) = land(&mut importer, summary, record, replace)? {
                report(ImportEvent::Refused { error: &error });
            }
            Ok(())
        },
    )
}

/// [`import_until`] with nothing to stop it.
pub fn import(
    database: &mut Database,
    paths: &[String],
    options: IngestOptions,
    report: &mut dyn FnMut(ImportEvent),
) -> Result<ImportSummary> {
    import_until(database, paths, options, None, report)
}

/// Read and check every record under `paths` without a database.
pub fn validate(
    paths: &[String],
    options: IngestOptions,
    report: &mut dyn FnMut(ImportEvent),
) -> Result<ImportSummary> {
    drive(paths, options, None, report, &mut |summary, record, _| {
        match record {
            Record::Dump { prepared, .. } => {
                summary.imported += 1;
                summary.allocations += prepared.dump.allocation_count() as u64;
            }
            Record::Annotations { .. } => summary.annotations += 1,
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests;
