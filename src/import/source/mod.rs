//! Sources: what memstate reads besides its own format. Each module turns one kind of input that
//! producers print today into dumps of format v1 (as JSON text), and every dump then goes through
//! the one parser and validator of [`crate::dump`], as a dump written by a runtime would: parsing
//! a foreign input and validating what it says stay apart (as atuin's importers do).
//!
//! Each kind is one [`Source`], listed once in [`SOURCES`]:
//! - [`legate`]: Legate's out-of-memory report (the base mapper's `report_failed_mapping`), every
//!   released form.
//! - [`realm`]: Legion's default mapper's failed allocation and Realm's range allocator status
//!   (`BasicRangeAllocator::dump_allocator_status`).
//! - [`torch`]: PyTorch's CUDA allocator snapshots (the pickle `_dump_snapshot` writes), read by
//!   [`pickle`], which never runs code.
//! - [`prof`]: Legion Prof's binary profiles (`legate --profile`, `-lg:prof`): each memory's live
//!   instances over time, read by the layouts the profile's own header declares.
//!
//! The kind is found by trying (`--source auto`), or forced: a pickle is told by its header; a
//! file whose first JSON value starts at its first byte (not a Realm log prefix, `[0 - 7f..]`) and
//! parses is memstate's own; anything else is read as a log, line by line (memory independent of
//! its length), by every log source at once, and is refused once, naming the kinds tried, when
//! none finds anything. Common rules: one snapshot per report or status block; the node from
//! Realm's log prefix (0 without one); seq increasing in file order per node; the run from
//! `--run`, else the file's stem; `snapshots.source` names the file and line.

pub mod legate;
mod lines;
mod log;
pub mod pickle;
pub mod prof;
pub mod realm;
pub mod torch;

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::sync::{Arc, Mutex};

use crate::dump::write;
use crate::error::{Because, Error, Result};
use crate::import::input::{self, Input, Limits, Record};
pub use lines::Lines;
pub use log::LogLine;

/// What kind of input a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// Found from the content.
    #[default]
    Auto,
    /// memstate's own format v1 (a document or a stream).
    Memstate,
    LegateOom,
    RealmAllocator,
    TorchSnapshot,
    LegionProf,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Auto => "auto",
            Kind::Memstate => "memstate",
            other => source_of(other).map_or("auto", |source| source.name()),
        }
    }
}

/// One kind of foreign input: its name, how it is told, how it is read.
pub trait Source: Sync {
    /// The kind `--source` names it by.
    fn kind(&self) -> Kind;
    /// Its `--source` name.
    fn name(&self) -> &'static str;
    /// What an input of this kind holds, for the refusal of one that holds none of it.
    fn described(&self) -> &'static str;
    /// Whether an input's first bytes are of this kind by their form (a pickle's header). Logs
    /// claim nothing here: they are told by finding their lines.
    fn claims(&self, _head: &[u8]) -> bool {
        false
    }
    /// The run of an input that names none, from its file's stem (`--run` aside): the stem.
    fn run_of_stem(&self, stem: String) -> String {
        stem
    }
    /// For a log source: a reader to feed the log's lines to.
    fn line_reader(&self) -> Option<Box<dyn LineReader>> {
        None
    }
    /// Read an input whole (a source that is not a log), handing what it finds to `emit` one
    /// snapshot at a time, each with its position within its node (`line`, 1-based), so that
    /// none waits for the others in memory.
    fn read_whole(
        &self,
        reader: &mut dyn BufRead,
        display: &str,
        limits: Limits,
        options: &Options,
        emit: &mut dyn FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let _ = (reader, limits, options, emit);
        Err(refused(display, &[self.described().to_string()]))
    }
}

/// A log source's reader: fed every line of a log in order, then asked what it found.
pub trait LineReader {
    fn line(&mut self, number: usize, line: &LogLine, display: &str) -> Result<()>;
    /// What a line must hold to change what this reader finds, as it stands now; `None` while
    /// any line may (inside a report). Lines holding none of every reader's markers are skipped.
    fn markers(&self) -> Option<&'static [&'static str]>;
    /// Whether what it reads last is still open at the log's end (a report whose rest may still
    /// be written): by default, whether any line may still change it.
    fn open_at_end(&self) -> bool {
        self.markers().is_none()
    }
    fn finish(self: Box<Self>, display: &str) -> Result<Vec<Found>>;
}

/// Every source memstate reads, once.
pub static SOURCES: &[&dyn Source] = &[
    &torch::Torch,
    &prof::LegionProf,
    &legate::Legate,
    &realm::Realm,
];

fn source_of(kind: Kind) -> Option<&'static dyn Source> {
    SOURCES.iter().copied().find(|source| source.kind() == kind)
}

/// How to read foreign inputs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub kind: Kind,
    /// The run of dumps whose input names none (default: the file's stem).
    pub run: Option<String>,
    /// For a PyTorch snapshot: also a rebuilt snapshot every this many trace events.
    pub every: Option<u64>,
    /// For a Legion Prof profile: a snapshot every this many nanoseconds (else after each change
    /// while there are few, else [`prof::SNAPSHOTS`] over the run), and at each memory's peak.
    pub prof_step_ns: Option<u64>,
    /// Number each node's snapshots by their time in nanoseconds (strictly increasing), not in
    /// the order the input tells them: inputs of one run on one clock (a Legion Prof profile and
    /// the log the same run printed, both on Realm's clock) then interleave in time order.
    pub seq_by_time: bool,
    /// The seqs `seq_by_time` gave in this import, shared by its inputs.
    pub seqs_taken: SeqsTaken,
    /// A log whose last report is still open at its end is refused as not yet whole (an
    /// [`Error::Read`] saying so), not read as it stands: `import --follow` waits for the rest.
    pub wait_for_open_reports: bool,
}

/// A snapshot a source found, before its run and seq are given.
#[derive(Debug, Clone)]
pub struct Found {
    /// The line (1-based) it is told from, for `snapshots.source` and messages.
    pub line: usize,
    pub node: i64,
    pub time_ns: i64,
    pub reason: &'static str,
    pub note: Option<String>,
    /// Format v1's `memories`.
    pub memories: Vec<write::Memory>,
    /// Format v1's `strings`, which the memories' [`write::Text::Index`] values refer to.
    pub strings: Vec<String>,
    /// The run the input itself names (a Recorder's snapshot), used when `--run` is not given.
    pub run: Option<String>,
    /// The wall time the input gives (RFC 3339), when it gives one.
    pub wall_time: Option<String>,
    /// Format v1's `frames` and `stacks`, which the allocations' `stack` values refer to.
    pub calls: Calls,
}

/// A dump's call stacks: format v1's `frames` and `stacks`.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    pub frames: Vec<write::Frame>,
    pub stacks: Vec<Vec<usize>>,
}

/// The run an input's dumps belong to: `--run`, else the file's name without its compression
/// and last extension (`job.log` -> `job`, `legate-24.11.log.gz` -> `legate-24.11`).
fn run_of(display: &str, options: &Options) -> String {
    if let Some(run) = &options.run {
        return run.clone();
    }
    let name = std::path::Path::new(display)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = name.as_str();
    for compressed in [".gz", ".zst", ".zstd", ".xz", ".bz2"] {
        stem = stem.strip_suffix(compressed).unwrap_or(stem);
    }
    if let Some((base, extension)) = stem.rsplit_once('.') {
        if !base.is_empty()
            && !extension.is_empty()
            && !extension.bytes().all(|b| b.is_ascii_digit())
        {
            stem = base;
        }
    }
    if stem.is_empty() || display == "-" {
        "stdin".to_string()
    } else {
        stem.to_string()
    }
}

/// The seqs `--seq-by time` gave in one import (one `import` command, or one `--follow`
/// session), shared by its inputs: a seq another input's snapshot of the same run and node took
/// is not given again (the next nanosecond is), so every snapshot of one run's inputs lands,
/// whatever times they share. A snapshot read again (a growing file read anew) keeps its seq.
#[derive(Clone, Default)]
pub struct SeqsTaken(Arc<Mutex<Taken>>);

#[derive(Default)]
struct Taken {
    by_node: HashMap<(String, i64), HashSet<i64>>,
    by_source: HashMap<String, i64>,
}

impl std::fmt::Debug for SeqsTaken {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("SeqsTaken")
    }
}

impl SeqsTaken {
    /// The seq for the snapshot told at `source` (FILE:LINE): the one it had, else `wanted`
    /// or the first nanosecond after it that no other snapshot of the run and node took.
    fn claim(&self, run: &str, node: i64, source: &str, wanted: i64) -> i64 {
        let Ok(mut taken) = self.0.lock() else {
            return wanted;
        };
        if let Some(&seq) = taken.by_source.get(source) {
            return seq;
        }
        let seqs = taken.by_node.entry((run.to_string(), node)).or_default();
        let mut seq = wanted;
        while seqs.contains(&seq) {
            seq = seq.saturating_add(1);
        }
        seqs.insert(seq);
        taken.by_source.insert(source.to_string(), seq);
        seq
    }
}

/// The seq of each node's next snapshot: its place in the input (from 0), or with
/// [`Options::seq_by_time`] its time in nanoseconds, past the node's seq before and past what
/// other inputs of the run took ([`SeqsTaken`]).
struct Numbering {
    by_time: bool,
    last: HashMap<i64, i64>,
    taken: SeqsTaken,
}

impl Numbering {
    fn new(options: &Options) -> Numbering {
        Numbering {
            by_time: options.seq_by_time,
            last: HashMap::new(),
            taken: options.seqs_taken.clone(),
        }
    }

    /// The seq of the snapshot of `run` and `node` at `time_ns`, told at `source` (FILE:LINE).
    fn next(&mut self, run: &str, node: i64, time_ns: i64, source: &str) -> i64 {
        let last = self.last.get(&node).copied();
        let seq = match (self.by_time, last) {
            (false, last) => last.map_or(0, |last| last.saturating_add(1)),
            (true, last) => {
                // Nanoseconds: a profile records its changes to the nanosecond, and a log its lines
                // to the microsecond, so snapshots of one run's inputs on one clock rarely share
                // a seq (in microseconds, 60 changes within one pushed each other, and the log's
                // snapshot, past their seqs: refused, and out of time order).
                let nanos = time_ns.max(0);
                let wanted = last.map_or(nanos, |last| nanos.max(last.saturating_add(1)));
                self.taken.claim(run, node, source, wanted)
            }
        };
        self.last.insert(node, seq);
        seq
    }
}

/// The dumps of what a source found: seq in file order per node (or by time), as format v1 text.
fn dumps(found: Vec<Found>, display: &str, options: &Options) -> Vec<Record> {
    let run = run_of(display, options);
    let mut found = found;
    found.sort_by_key(|found| found.line);
    let mut numbering = Numbering::new(options);
    found
        .into_iter()
        .map(|found| {
            let source = format!("{display}:{}", found.line);
            let seq = numbering.next(&run, found.node, found.time_ns, &source);
            record_of(found, seq, &run, display)
        })
        .collect()
}

/// One snapshot found as the format-v1 dump it becomes.
fn record_of(found: Found, seq: i64, run: &str, display: &str) -> Record {
    let snapshot = write::Snapshot {
        seq,
        time_ns: found.time_ns,
        wall_time: found.wall_time.clone(),
        reason: found.reason.to_string(),
        note: found.note.map(write::Text::from),
    };
    let run = write::Run {
        id: run.to_string(),
        node: found.node,
        node_count: None,
        host: None,
        pid: None,
    };
    let source = format!("{display}:{}", found.line);
    let mut dump = write::Dump::new(run, snapshot, found.memories);
    dump.strings = found.strings;
    dump.frames = found.calls.frames;
    dump.stacks = found.calls.stacks;
    Record {
        source,
        text: dump.into_json(),
    }
}

/// Why an input is no memstate dump: the first JSON value's error, `None` when it is one (or
/// may be: its head ends inside the value, or is empty).
fn not_memstate(head: &[u8]) -> Option<String> {
    let first = head.iter().position(|byte| !byte.is_ascii_whitespace())?;
    if !matches!(head[first], b'{' | b'[') {
        return Some("it does not start with a JSON object or array".to_string());
    }
    let mut values =
        serde_json::Deserializer::from_slice(&head[first..]).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        None | Some(Ok(_)) => None,
        Some(Err(error)) if error.is_eof() => None,
        Some(Err(error)) => Some(format!("its first JSON value does not parse ({error})")),
    }
}

/// The refusal of an input of none of the kinds tried, naming each with what it lacked.
fn refused(display: &str, kinds: &[String]) -> Error {
    Error::Unrecognized {
        file: display.to_string(),
        message: format!(
            "not an input memstate reads; tried {}; nothing of it is imported",
            kinds.join("; ")
        ),
    }
}

/// What a log whose last report is still open at its end is refused with, while waited for.
pub const NOT_YET_WHOLE: &str =
    "its last report is still open at the end of the file (the rest not written yet?)";

/// Read a log line by line, every reader fed each line, and gather what they found; with
/// `wait_for_open`, a log whose last report is still open at its end is refused as not yet whole.
fn read_log(
    reader: &mut dyn BufRead,
    display: &str,
    readers: Vec<Box<dyn LineReader>>,
    wait_for_open: bool,
) -> Result<Vec<Found>> {
    let mut readers = readers;
    let mut lines = Lines::new(reader);
    let io_error = |error: std::io::Error| {
        Error::read(display, Because::told(input::describe_io(&error), error))
    };
    // The finders of each set of markers, built once.
    let mut finders: HashMap<Vec<(usize, usize)>, Vec<memchr::memmem::Finder<'static>>> =
        HashMap::new();
    loop {
        let wanted: Option<Vec<&'static [&'static str]>> =
            readers.iter().map(|reader| reader.markers()).collect();
        if let Some(wanted) = wanted {
            let key: Vec<(usize, usize)> = wanted
                .iter()
                .map(|set| (set.as_ptr() as usize, set.len()))
                .collect();
            let markers = finders.entry(key).or_insert_with(|| {
                wanted
                    .iter()
                    .flat_map(|set| set.iter())
                    .map(|marker| memchr::memmem::Finder::new(marker.as_bytes()))
                    .collect()
            });
            lines.skip_lines_without(markers).map_err(io_error)?;
        }
        let next = lines.next_line().map_err(io_error)?;
        let Some((number, text)) = next else { break };
        let line = log::parse(&text);
        for reader in readers.iter_mut() {
            reader.line(number, &line, display)?;
        }
    }
    if wait_for_open && readers.iter().any(|reader| reader.open_at_end()) {
        return Err(Error::read(display, NOT_YET_WHOLE));
    }
    let mut found = Vec::new();
    for reader in readers {
        found.extend(reader.finish(display)?);
    }
    Ok(found)
}

/// What one log source finds in a log (as `--source` forcing it reads it).
pub fn read_log_as(
    source: &dyn Source,
    reader: &mut dyn BufRead,
    display: &str,
) -> Result<Vec<Found>> {
    read_log(
        reader,
        display,
        source.line_reader().into_iter().collect(),
        false,
    )
}

/// The records of one input, whatever its kind: memstate's own are read as they come (a stream
/// of any length), a log line by line, a pickle whole (within `--max-dump-size`).
pub fn open(
    input: &Input,
    limits: Limits,
    options: &Options,
) -> Result<Box<dyn Iterator<Item = Result<Record>> + Send>> {
    let mut records = input::open(input, limits)?;
    let mut not_json = None;
    let tried: Vec<&dyn Source> = match options.kind {
        Kind::Memstate => return Ok(Box::new(records)),
        Kind::Auto => {
            if let Err(error) = records.peek() {
                return Err(records.error_of(error));
            }
            let head = records.peek().map_err(|error| {
                Error::read(
                    input.display.clone(),
                    Because::told(input::describe_io(&error), error),
                )
            })?;
            let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
            if let Some(source) = SOURCES.iter().copied().find(|source| source.claims(head)) {
                // The content decides: a pickle saved as `snapshot.json` is a pickle.
                vec![source]
            } else if input.form != input::Form::Sniff {
                // A file named as a dump (.json, .ndjson, .jsonl) is one.
                return Ok(Box::new(records));
            } else if head.is_empty() && input.folder.is_some() {
                return Err(refused(
                    &input.display,
                    &["any kind (it is empty)".to_string()],
                ));
            } else if head.contains(&0) {
                // No log holds a NUL byte: a binary file of another kind is not read through.
                return Err(refused(
                    &input.display,
                    &["a memstate dump, a log or a PyTorch allocator snapshot (it holds binary data)".to_string()],
                ));
            } else if let Some(why) = not_memstate(head) {
                not_json = Some(why);
                SOURCES
                    .iter()
                    .copied()
                    .filter(|source| source.line_reader().is_some())
                    .collect()
            } else {
                return Ok(Box::new(records));
            }
        }
        forced => source_of(forced).into_iter().collect(),
    };
    let display = input.display.as_str();
    let readers: Vec<Box<dyn LineReader>> = tried
        .iter()
        .filter_map(|source| source.line_reader())
        .collect();
    let nothing = |tried: &[&dyn Source], not_json: Option<String>| {
        let mut kinds: Vec<String> = Vec::new();
        if let Some(why) = not_json {
            kinds.push(format!("a memstate dump ({why})"));
            let whole = SOURCES
                .iter()
                .filter(|source| source.line_reader().is_none());
            kinds.extend(whole.map(|source| source.described().to_string()));
        }
        kinds.extend(tried.iter().map(|source| source.described().to_string()));
        refused(display, &kinds)
    };
    if readers.is_empty() {
        let Some(&source) = tried.first() else {
            return Err(nothing(&tried, not_json));
        };
        return Ok(Box::new(whole(source, records, input, limits, options)));
    }
    let found = read_log(
        records.reader(),
        display,
        readers,
        options.wait_for_open_reports,
    )?;
    if found.is_empty() {
        return Err(nothing(&tried, not_json));
    }
    let dumps = dumps(found, display, options);
    Ok(Box::new(dumps.into_iter().map(Ok)))
}

/// A whole source's snapshots as records, each made when the import is ready for it: the
/// source reads on a thread of its own and hands each snapshot over a channel that holds one,
/// so that a source telling thousands of snapshots (rebuilt from a trace) holds one at a time.
fn whole(
    source: &'static dyn Source,
    mut records: input::Records,
    input: &Input,
    limits: Limits,
    options: &Options,
) -> impl Iterator<Item = Result<Record>> + Send {
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Result<Record>>(0);
    let display = input.display.clone();
    let options = options.clone();
    let spawned = std::thread::Builder::new()
        .name("memstate-source".to_string())
        .spawn(move || {
            let run = match &options.run {
                Some(run) => run.clone(),
                None => source.run_of_stem(run_of(&display, &options)),
            };
            let mut any = false;
            let mut numbering = Numbering::new(&options);
            let mut emit = |found: Found| -> Result<()> {
                any = true;
                let run = match (&options.run, &found.run) {
                    (None, Some(named)) => named.clone(),
                    _ => run.clone(),
                };
                let seq = if options.seq_by_time {
                    let source = format!("{display}:{}", found.line);
                    numbering.next(&run, found.node, found.time_ns, &source)
                } else {
                    i64::try_from(found.line.saturating_sub(1)).unwrap_or(i64::MAX)
                };
                sender
                    .send(Ok(record_of(found, seq, &run, &display)))
                    .map_err(|_| Error::Usage("the import stopped reading".to_string()))
            };
            let outcome =
                source.read_whole(records.reader(), &display, limits, &options, &mut emit);
            let outcome = match outcome {
                Ok(()) if !any => Err(refused(&display, &[source.described().to_string()])),
                other => other,
            };
            if let Err(error) = outcome {
                let _ = sender.send(Err(error));
            }
        });
    let failed = spawned.err().map(|error| {
        Error::Usage(format!(
            "{}: cannot start a thread to read it: {error}",
            input.display
        ))
    });
    failed.map(Err).into_iter().chain(receiver)
}

/// A size printed with its digits grouped or not: `1,048,576` or `1048576`.
pub(crate) fn grouped_number(text: &str) -> Option<u64> {
    let digits: String = text.chars().filter(|c| *c != ',' && *c != '\'').collect();
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// An id as format v1 writes it.
pub(crate) fn id_text(id: u64) -> String {
    format!("0x{id:016x}")
}
