//! The import and validate pipelines: inputs are read, parsed, checked and prepared on one thread
//! while the caller's thread writes them to the database (or just counts them, for `validate`).
//!
//! Only a few records are in flight at once (a bounded channel), so memory is bounded by the largest
//! dump, not by how many there are. Every record's fate (imported, unchanged, replaced, refused) is
//! reported to the caller as an [`Event`] in input order, so messages come out in a stable order.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread;
use std::time::Instant;

use crate::db::{Database, Importer, Outcome};
use crate::dump::{self, parse_document, read, Annotations, Document, Options, Prepared};
use crate::error::{Error, Result};

/// What to do with the inputs.
#[derive(Debug, Clone, Copy, Default)]
pub struct IngestOptions {
    pub strict: bool,
    /// Replace a different dump already imported under the same (run, node, seq).
    pub replace: bool,
}

/// Counts of one import or validate run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
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
    /// Files in folders skipped because their names are not those of dumps.
    pub ignored_files: u64,
    pub seconds: f64,
}

/// One thing that happened, in input order.
#[derive(Debug)]
pub enum Event<'a> {
    /// The inputs are known; `count` of them will be read.
    Inputs { count: u64 },
    /// One record is done; the summary so far.
    Progress { summary: &'a Summary },
    /// One input has been read to its end.
    InputDone,
    /// A record or input was refused.
    Refused { error: &'a Error },
}

/// What the reading thread hands over.
enum Item {
    Dump { source: String, prepared: Box<Prepared> },
    Annotations { annotations: Box<Annotations> },
    Refused(Error),
    InputDone,
}

/// Start the reading thread over `paths`; returns how many inputs and the receiving end.
fn start_reader(paths: &[String], options: IngestOptions) -> (u64, u64, Vec<Error>, Receiver<Item>) {
    let expanded = read::expand(paths);
    let count = expanded.inputs.len() as u64;
    let ignored = expanded.ignored_files;
    let inputs = expanded.inputs;
    // Two dumps in flight is enough to keep both cores busy without holding many dumps in memory.
    let (sender, receiver) = sync_channel::<Item>(2);
    let parse_options = Options { strict: options.strict };
    thread::spawn(move || {
        for input in &inputs {
            match read::open(input) {
                Err(error) => {
                    if sender.send(Item::Refused(error)).is_err() {
                        return;
                    }
                }
                Ok(records) => {
                    for record in records {
                        let item = match record {
                            Err(error) => Item::Refused(error),
                            Ok(record) => match parse_document(&record.text, &record.source, parse_options) {
                                Err(error) => Item::Refused(error),
                                Ok(Document::Dump(parsed)) => {
                                    Item::Dump { source: record.source, prepared: Box::new(dump::prepare(*parsed)) }
                                }
                                Ok(Document::Annotations(annotations)) => Item::Annotations { annotations },
                            },
                        };
                        if sender.send(item).is_err() {
                            return;
                        }
                    }
                }
            }
            if sender.send(Item::InputDone).is_err() {
                return;
            }
        }
    });
    (count, ignored, expanded.errors, receiver)
}

fn refused(summary: &mut Summary, error: &Error, report: &mut dyn FnMut(Event)) {
    summary.refused += 1;
    report(Event::Refused { error });
}

/// Start reading: report the inputs and the paths that cannot be read at all.
fn begin(paths: &[String], options: IngestOptions, report: &mut dyn FnMut(Event)) -> (Summary, Receiver<Item>) {
    let mut summary = Summary::default();
    let (count, ignored, path_errors, receiver) = start_reader(paths, options);
    summary.ignored_files = ignored;
    report(Event::Inputs { count });
    for error in &path_errors {
        refused(&mut summary, error, report);
    }
    (summary, receiver)
}

/// Import every dump and annotations file found under `paths` into `database`.
///
/// Refused records are reported and counted; the others land. Only an error of the database itself
/// (it cannot be written) stops the run and is returned.
pub fn import(
    database: &mut Database,
    paths: &[String],
    options: IngestOptions,
    report: &mut dyn FnMut(Event),
) -> Result<Summary> {
    let started = Instant::now();
    let (mut summary, receiver) = begin(paths, options, report);
    let db_display = database.display();
    let mut importer = Importer::new(&mut database.conn, db_display);
    for item in receiver {
        match item {
            Item::Dump { source, prepared } => match importer.import(&prepared, &source, options.replace) {
                Ok(Outcome::Imported { allocations, .. }) => {
                    summary.imported += 1;
                    summary.allocations += allocations;
                }
                Ok(Outcome::Replaced { allocations, .. }) => {
                    summary.replaced += 1;
                    summary.allocations += allocations;
                }
                Ok(Outcome::Unchanged { .. }) => summary.unchanged += 1,
                Err(error @ Error::Input { .. }) => refused(&mut summary, &error, report),
                Err(error) => return Err(error),
            },
            Item::Annotations { annotations } => {
                importer.import_annotations(&annotations)?;
                summary.annotations += 1;
            }
            Item::Refused(error) => refused(&mut summary, &error, report),
            Item::InputDone => {
                summary.inputs += 1;
                report(Event::InputDone);
            }
        }
        report(Event::Progress { summary: &summary });
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Read and check every record under `paths` without a database.
pub fn validate(paths: &[String], options: IngestOptions, report: &mut dyn FnMut(Event)) -> Summary {
    let started = Instant::now();
    let (mut summary, receiver) = begin(paths, options, report);
    for item in receiver {
        match item {
            Item::Dump { prepared, .. } => {
                summary.imported += 1;
                summary.allocations += prepared.dump.allocation_count() as u64;
            }
            Item::Annotations { .. } => summary.annotations += 1,
            Item::Refused(error) => refused(&mut summary, &error, report),
            Item::InputDone => {
                summary.inputs += 1;
                report(Event::InputDone);
            }
        }
        report(Event::Progress { summary: &summary });
    }
    summary.seconds = started.elapsed().as_secs_f64();
    summary
}
