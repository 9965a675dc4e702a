//! `import --follow`: keep a database current while a job writes its dumps.
//!
//! The given files and folders are scanned again and again: at once when the file system reports
//! a change (inotify and the like, through the `notify` crate), and every `interval` in any case,
//! which is all there is on file systems without change events (NFS, Lustre, GPFS: where HPC jobs
//! write). Each dump is imported as soon as it is complete:
//!
//! * a document file (`.json`, `.json.gz`, ...) once it parses whole. While it does not, it is taken
//!   for half-written and waited for; only when it has not changed for `settle` is it refused, once,
//!   with the usual message. Changed again later, it is read again.
//! * a stream (`.ndjson`, `.jsonl`) line by line, each line once its newline is written: a line
//!   still being written is kept (in memory, up to the dump size limit) and finished later. A
//!   complete line that is not a valid dump is refused at once, naming the file and line. A plain
//!   stream is read on from where the last read stopped; a compressed one is decompressed from its
//!   start each time it grows, skipping the lines already taken. A stream that shrinks or is
//!   replaced (a new inode) is read again from its start.
//!
//! Nothing is duplicated: a dump imported before (by an earlier `--follow`, or `import`) is
//! recognised by its content and counted as unchanged, so stopping and starting again resumes.
//! The caller's `stop` flag is looked at between dumps: each dump lands whole or not at all.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod files;
mod forecast;
mod oom;
mod watch;

use oom::failures;
use watch::Watch;

use files::{
    hash_of, marks_of, stamp, tracked_for, worth_reading, Position, Stamp, Tracked, MARK_BYTES,
};

use crate::db::{Database, Outcome, Writer};
use crate::dump::Options;
use crate::error::{Error, Result};
use crate::import::input::{self, Form, Input};
use crate::import::source;
use crate::import::{self, ImportSummary, IngestOptions, Item, Landed};

/// How to follow.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub ingest: IngestOptions,
    /// Scan at least this often.
    pub interval: Duration,
    /// How long a document that does not parse must stay unchanged before it is refused.
    pub settle: Duration,
    /// Use file-system change events (else scanning alone).
    pub events: bool,
    /// Warn when a memory's largest hole is forecast to fall below its recent requests within
    /// this many dumps (`None`: no forecast).
    pub forecast_within: Option<u64>,
}

/// Something that happened while following.
#[derive(Debug)]
pub enum FollowEvent<'a> {
    /// How changes are noticed: with events and scans, or scans alone (and why).
    Watching { how: String },
    /// A dump landed (or was already there).
    Landed {
        source: &'a str,
        run: &'a str,
        node: i64,
        seq: i64,
        outcome: &'a Outcome,
    },
    /// A dump or an input was refused (once).
    Refused { error: &'a Error },
    /// A file found in a folder is no input memstate reads (said once a version of it).
    Skipped { error: &'a Error },
    /// At a node's latest dump, a memory's largest hole is forecast to fall below its recent
    /// requests within the dumps asked: said once a memory, until its largest hole stops falling.
    Forecast {
        run: &'a str,
        node: i64,
        seq: i64,
        forecast: &'a crate::query::forecast::Forecast,
    },
    /// A dump that landed holds a failed request: the moment a user following a job waits for.
    OutOfMemory {
        run: &'a str,
        node: i64,
        seq: i64,
        /// The memory's kind and id (`GPU_FB_MEM 0x1e00000000000002`).
        memory: String,
        request: u64,
        /// What the dump's own figures say of it: exhaustion, fragmentation, or room now.
        verdict: &'static str,
    },
    /// A scan ended; the counts so far and the latest seq of each (run, node).
    Scanned {
        summary: &'a ImportSummary,
        latest: &'a BTreeMap<(String, i64), i64>,
    },
}

/// The follower's state between scans.
struct Follower<'d> {
    importer: Writer<'d>,
    options: FollowOptions,
    summary: ImportSummary,
    latest: BTreeMap<(String, i64), i64>,
    files: HashMap<PathBuf, Tracked>,
    /// Problems with the paths themselves (an unreadable folder), each said once.
    said: HashSet<String>,
    /// Files seen changed (read again, or waited for): activity that lands nothing yet.
    changes: u64,
    /// Files found in folders whose last version read is no input memstate reads.
    skipped_files: HashSet<PathBuf>,
    /// The memories warned about by the forecast and not recovered since.
    warned: HashSet<i64>,
}

/// Follow `paths` until `stop` is set, importing into `database`; the counts at the end.
pub fn follow(
    database: &mut Database,
    paths: &[String],
    options: FollowOptions,
    stop: &AtomicBool,
    report: &mut dyn FnMut(FollowEvent),
) -> Result<ImportSummary> {
    if paths.iter().any(|path| path == "-") {
        return Err(Error::Usage("--follow watches files and folders; a stream on standard input is read to its end without it".to_string()));
    }
    let started = Instant::now();
    let display = database.display();
    let mut follower = Follower {
        importer: database.writer(display),
        options: options.clone(),
        summary: ImportSummary::default(),
        latest: BTreeMap::new(),
        files: HashMap::new(),
        said: HashSet::new(),
        changes: 0,
        skipped_files: HashSet::new(),
        warned: HashSet::new(),
    };
    let (wake, woken) = mpsc::channel::<()>();
    let mut watcher = if options.events {
        Watch::start(wake)
    } else {
        Err("scanning only, as asked (--poll)".to_string())
    };
    let every = format!("a scan every {} ms", options.interval.as_millis());
    report(FollowEvent::Watching {
        how: match &watcher {
            Ok(_) => format!("file-system events and {every}"),
            Err(why) => format!("{every} ({why})"),
        },
    });
    // While nothing changes, scans back off from `interval` to `IDLE_BACKOFF` times it (events
    // still wake a scan at once): an idle follower of thousands of files costs next to nothing.
    let mut wait = options.interval;
    while !stop.load(Ordering::SeqCst) {
        if let Ok(watch) = &mut watcher {
            watch.add(paths);
        }
        let before = follower.activity();
        follower.scan(paths, stop, report)?;
        follower.summary.seconds = started.elapsed().as_secs_f64();
        report(FollowEvent::Scanned {
            summary: &follower.summary,
            latest: &follower.latest,
        });
        wait = if follower.activity() == before {
            (wait * 2).min(options.interval * IDLE_BACKOFF)
        } else {
            options.interval
        };
        // Sleep until a change is reported or the wait has passed, waking often enough to
        // notice `stop`.
        let deadline = Instant::now() + wait;
        while !stop.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if woken
                .recv_timeout(left.min(Duration::from_millis(100)))
                .is_ok()
            {
                // A burst of writes is one scan: let it settle a moment, then drain the rest.
                std::thread::sleep(Duration::from_millis(20));
                while woken.try_recv().is_ok() {}
                wait = options.interval;
                break;
            }
        }
    }
    follower.summary.seconds = started.elapsed().as_secs_f64();
    Ok(follower.summary)
}

/// How many times `interval` an idle follower waits between scans at most.
const IDLE_BACKOFF: u32 = 8;

impl Follower<'_> {
    /// Something that grows whenever a scan finds anything to do (a dump taken, refused, a file
    /// that changed): a scan that leaves it alone found nothing.
    fn activity(&self) -> (u64, u64, u64, u64, u64, usize) {
        let s = &self.summary;
        (
            s.imported + s.replaced,
            s.unchanged,
            s.refused,
            s.annotations,
            self.changes,
            self.files.len(),
        )
    }

    /// One pass over every input under `paths`.
    fn scan(
        &mut self,
        paths: &[String],
        stop: &AtomicBool,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        // A path that does not exist yet (the job has not made its folder) is waited for quietly.
        let present: Vec<String> = paths
            .iter()
            .filter(|path| Path::new(path).exists())
            .cloned()
            .collect();
        let expanded = input::expand(&present);
        for error in &expanded.errors {
            if self.said.insert(error.to_string()) {
                self.summary.refused += 1;
                report(FollowEvent::Refused { error });
            }
        }
        self.summary.ignored_files = self.skipped_files.len() as u64;
        self.summary.skipped = expanded.skipped;
        self.summary.inputs = expanded.inputs.len() as u64;
        for input in &expanded.inputs {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Some(path) = input.path.clone() else {
                continue;
            };
            // Taken out while it is worked on (the methods below need the follower too), without
            // copying the path again: the key goes back with it.
            let (path, mut tracked) = match self.files.remove_entry(&path) {
                Some(entry) => entry,
                None => {
                    let tracked = tracked_for(input, &path);
                    (path, tracked)
                }
            };
            let outcome = match &mut tracked {
                Tracked::Document { done, failing } => {
                    self.document(input, &path, done, failing, report)
                }
                Tracked::PlainStream(position) => {
                    self.plain_stream(input, &path, position, stop, report)
                }
                Tracked::PackedStream {
                    lines,
                    done,
                    failing,
                    head,
                } => self.packed_stream(input, &path, lines, done, failing, head, stop, report),
            };
            self.files.insert(path, tracked);
            outcome?;
        }
        Ok(())
    }

    /// Parse one record and import it; a bad record is refused. Only a failure of the database
    /// itself is returned.
    fn record(
        &mut self,
        source: &str,
        text: &[u8],
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let options = Options {
            strict: self.options.ingest.strict,
        };
        self.land(
            import::take(source.to_string(), text.to_vec(), options),
            report,
        )
    }

    fn refuse(&mut self, error: &Error, report: &mut dyn FnMut(FollowEvent)) {
        self.summary.refused += 1;
        report(FollowEvent::Refused { error });
    }

    /// Write what [`import::take`] made of a record, as `import` does, and say what became of it.
    fn land(&mut self, item: Item, report: &mut dyn FnMut(FollowEvent)) -> Result<()> {
        self.land_replacing(item, false, report)
    }

    /// [`Follower::land`], replacing a different dump of the same identity when `replace` (or
    /// `--replace`) says so.
    fn land_replacing(
        &mut self,
        item: Item,
        replace: bool,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let record = match item {
            Item::Record(record) => record,
            Item::Refused(error) | Item::Skipped(error) => {
                self.refuse(&error, report);
                return Ok(());
            }
            Item::Crashed(error) => return Err(error),
            Item::InputDone => return Ok(()),
        };
        let replace = replace || self.options.ingest.replace;
        match import::land(&mut self.importer, &mut self.summary, record, replace)? {
            Landed::Refused(error) => report(FollowEvent::Refused { error: &error }),
            Landed::Annotations => {}
            Landed::Dump {
                prepared,
                source,
                outcome,
            } => {
                let dump = &prepared.dump;
                let (run, node, seq) = (dump.run.id.as_str(), dump.run.node, dump.snapshot.seq);
                let latest = self.latest.entry((run.to_string(), node)).or_insert(seq);
                *latest = (*latest).max(seq);
                report(FollowEvent::Landed {
                    source: &source,
                    run,
                    node,
                    seq,
                    outcome: &outcome,
                });
                if !matches!(outcome, Outcome::Unchanged { .. }) {
                    if seq == *self.latest.get(&(run.to_string(), node)).unwrap_or(&seq) {
                        self.forecast(run, node, seq, &outcome, report)?;
                    }
                    for (memory, request, verdict) in failures(&prepared) {
                        report(FollowEvent::OutOfMemory {
                            run,
                            node,
                            seq,
                            memory,
                            request,
                            verdict,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// A document: import it once it parses; refuse it once it has stayed broken for `settle`.
    fn document(
        &mut self,
        input: &Input,
        path: &Path,
        done: &mut Option<Stamp>,
        failing: &mut Option<(Stamp, Instant)>,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let Some((now, settled)) = worth_reading(path, *done, *failing, self.options.settle) else {
            return Ok(());
        };
        // A file not named as a dump may be a log of today's producers: its kind is found from
        // its content, and each of its snapshots lands (those already imported are unchanged).
        let whole = Input {
            form: if input.form == Form::Sniff {
                Form::Sniff
            } else {
                Form::Document
            },
            ..input.clone()
        };
        // A log whose last report is still open at its end is waited for as a half-written
        // document is: until the rest comes, or it has not changed for `settle`.
        let mut sources = self.options.ingest.source.clone();
        sources.wait_for_open_reports = !settled;
        let read = source::open(&whole, self.options.ingest.limits, &sources)
            .and_then(|records| records.collect::<Result<Vec<_>>>())
            .and_then(|records| {
                if records.is_empty() {
                    Err(Error::whole_input(&input.display, "empty input"))
                } else {
                    Ok(records)
                }
            });
        let options = Options {
            strict: self.options.ingest.strict,
        };
        let items: Vec<Item> = match read {
            Ok(records) => records
                .into_iter()
                .map(|record| import::take(record.source, record.text, options))
                .collect(),
            // A file in a folder that is none of the kinds read: skipped until it changes (a
            // log whose first report is still to come is read again once it grows).
            Err(error) if input.folder.is_some() && error.is_unrecognized() => {
                *done = Some(now);
                *failing = None;
                if self.skipped_files.insert(path.to_path_buf()) {
                    self.summary.ignored_files = self.skipped_files.len() as u64;
                    report(FollowEvent::Skipped { error: &error });
                }
                return Ok(());
            }
            Err(error) => vec![Item::Refused(error)],
        };
        if self.skipped_files.remove(path) {
            self.summary.ignored_files = self.skipped_files.len() as u64;
        }
        // Not parsed yet: perhaps still being written; refused once it has had `settle`.
        if items.iter().any(|item| matches!(item, Item::Refused(_))) && !settled {
            *failing = Some((now, Instant::now()));
            return Ok(());
        }
        // A file read before that changed (a log grown past a report taken as it stood, a
        // snapshot pickle written again in place) replaces what it gave before.
        let again = done.is_some();
        *done = Some(now);
        *failing = None;
        for item in items {
            self.land_replacing(item, again, report)?;
        }
        Ok(())
    }

    /// A plain stream: read on from where the last scan stopped, a line at a time.
    fn plain_stream(
        &mut self,
        input: &Input,
        path: &Path,
        position: &mut Position,
        stop: &AtomicBool,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let Position {
            file: file_id,
            offset,
            line,
            partial,
            oversized,
            modified,
            marks,
        } = position;
        let Some(now) = stamp(path) else {
            return Ok(());
        };
        // Metadata first (cheap); the bytes are looked at only when the file was modified.
        let rewritten = *file_id != Some((now.device, now.inode))
            || now.len < *offset
            || (now.modified != *modified && *offset > 0 && marks_of(path, *offset) != *marks);
        if rewritten {
            // A new file, or the same name written anew: from the start (dumps already imported
            // are recognised and skipped).
            *file_id = Some((now.device, now.inode));
            (*offset, *line, *oversized) = (0, 0, false);
            partial.clear();
        }
        *modified = now.modified;
        if now.len == *offset {
            return Ok(());
        }
        self.changes += 1;
        let result =
            self.read_stream_lines(input, path, offset, line, partial, oversized, stop, report);
        *marks = marks_of(path, *offset);
        result
    }

    /// Read a plain stream on from `offset`: each complete line is a record.
    #[allow(clippy::too_many_arguments)]
    fn read_stream_lines(
        &mut self,
        input: &Input,
        path: &Path,
        offset: &mut u64,
        line: &mut u64,
        partial: &mut Vec<u8>,
        oversized: &mut bool,
        stop: &AtomicBool,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let mut file = match File::open(path)
            .and_then(|mut file| file.seek(SeekFrom::Start(*offset)).map(|_| file))
        {
            Ok(file) => file,
            Err(_) => return Ok(()), // gone or unreadable for now: try again next scan
        };
        let limit = self.options.ingest.limits.max_dump_size;
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            let count = match file.read(&mut chunk) {
                Ok(0) | Err(_) => return Ok(()),
                Ok(count) => count,
            };
            let mut rest = &chunk[..count];
            while let Some(end) = memchr::memchr(b'\n', rest) {
                let (head, tail) = (&rest[..end], &rest[end + 1..]);
                *line += 1;
                *offset += head.len() as u64 + 1;
                let too_long = *oversized || (partial.len() + head.len()) as u64 > limit;
                if too_long {
                    self.refuse(
                        &input::too_large(
                            format!("{}:{}", input.display, line),
                            self.options.ingest.limits,
                        ),
                        report,
                    );
                } else {
                    partial.extend_from_slice(head);
                    if !partial.iter().all(u8::is_ascii_whitespace) {
                        let text = std::mem::take(partial);
                        self.record(&format!("{}:{}", input.display, line), &text, report)?;
                    }
                }
                partial.clear();
                *oversized = false;
                rest = tail;
                if stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
            }
            // The start of a line whose newline is not written yet.
            *offset += rest.len() as u64;
            if *oversized || (partial.len() + rest.len()) as u64 > limit {
                *oversized = true;
                partial.clear();
            } else {
                partial.extend_from_slice(rest);
            }
        }
    }

    /// A compressed stream: decompress it from its start, take the complete lines not taken yet.
    #[allow(clippy::too_many_arguments)]
    fn packed_stream(
        &mut self,
        input: &Input,
        path: &Path,
        lines: &mut u64,
        done: &mut Option<Stamp>,
        failing: &mut Option<(Stamp, Instant)>,
        head: &mut Option<(u64, u64)>,
        stop: &AtomicBool,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let Some((now, settled)) = worth_reading(path, *done, *failing, self.options.settle) else {
            return Ok(());
        };
        self.changes += 1;
        // Written anew in place rather than grown by a member: its lines from the start again.
        // The version read last (failing, when it stopped short after the one done with).
        let previous = failing.map(|(stamp, _)| stamp).or(*done);
        let grown = previous.is_none_or(|previous| {
            (previous.device, previous.inode) == (now.device, now.inode) && previous.len <= now.len
        });
        let same_start = head.is_some_and(|(length, hash)| hash_of(path, 0, length) == Some(hash));
        if !grown || !same_start {
            *lines = 0;
        }
        let length = now.len.min(MARK_BYTES);
        *head = hash_of(path, 0, length).map(|hash| (length, hash));
        let Ok((mut reader, _)) = input::open_decompressed(path, self.options.ingest.limits) else {
            return Ok(());
        };
        let limit = self.options.ingest.limits.max_dump_size;
        let mut number = 0u64;
        let mut text = Vec::new();
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            text.clear();
            // Bounded: a line over the limit is refused without holding it.
            let read = (&mut reader)
                .take(limit.saturating_add(2))
                .read_until(b'\n', &mut text);
            match read {
                Ok(0) => {
                    // The end of what is written: all complete lines taken.
                    *done = Some(now);
                    *failing = None;
                    return Ok(());
                }
                Ok(_) if text.last() == Some(&b'\n') => {
                    number += 1;
                    if number <= *lines {
                        continue;
                    }
                    *lines = number;
                    if !text.iter().all(u8::is_ascii_whitespace) {
                        let source = format!("{}:{number}", input.display);
                        self.record(&source, &text, report)?;
                    }
                }
                Ok(_) if text.len() as u64 > limit => {
                    // Over the limit: refuse it once and stop here (its end cannot be found
                    // without reading it all); the stream is not read further.
                    let error = Error::read(
                        format!("{}:{}", input.display, number + 1),
                        format!("larger than {limit} bytes once decompressed, the limit for one dump; refused, with the rest of the stream"),
                    );
                    *done = Some(now);
                    self.refuse(&error, report);
                    return Ok(());
                }
                Ok(_) => {
                    // A last line without its newline yet: taken once it has one (this version
                    // of the file is done with).
                    *done = Some(now);
                    *failing = None;
                    return Ok(());
                }
                Err(error) if settled || input::too_compressed(&error).is_some() => {
                    // The compressed data stops short and has not grown for `settle`, or it
                    // expands like a bomb: refused, with the rest of the stream.
                    *done = Some(now);
                    *failing = None;
                    let message = input::too_compressed(&error).unwrap_or_else(|| {
                        format!("corrupt or truncated compressed data: {error}")
                    });
                    let error = Error::read(format!("{}:{}", input.display, number + 1), message);
                    self.refuse(&error, report);
                    return Ok(());
                }
                Err(_) => {
                    *failing = Some((now, Instant::now()));
                    return Ok(());
                }
            }
        }
    }
}
