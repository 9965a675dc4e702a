//! Finding dumps on disk and cutting them into records, one dump in memory at a time.
//!
//! An input is a file, a folder (walked recursively in sorted order) or `-` for standard input.
//! Compression is recognised by its magic bytes (gzip, including appended members, and zstd), so a
//! misnamed file still reads. The form comes from the name: `*.json[.gz|.zst]` is one document,
//! `*.ndjson`/`*.jsonl[.gz|.zst]` is a stream with one dump per line; standard input and files with
//! another name are sniffed (a first line that is a whole JSON value means a stream).
//!
//! Whatever the input, memory stays bounded: one record may not decompress to more than
//! [`Limits::max_dump_size`] bytes (a longer one is refused and skipped unread), compressed data
//! may not expand more than [`Limits::max_ratio`] times once past [`RATIO_FLOOR`] (a
//! decompression bomb is refused after a few MiB of it, not after the whole), folders are walked
//! without following links to folders (a loop of links cannot make the walk endless), and what is
//! not a regular file inside a folder (a FIFO, a socket, a device) is skipped, not read.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Because, Error, Result};

/// How the records of an input are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One JSON document (a `.json` file).
    Document,
    /// Newline-delimited JSON, one document per line (`.ndjson`, `.jsonl`).
    Stream,
    /// Not known from the name: decided from the content.
    Sniff,
}

/// One input to read: a file, or standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// `None` for standard input.
    pub path: Option<PathBuf>,
    /// How the user sees it: the path as given or found, or `-`.
    pub display: String,
    pub form: Form,
    /// For a file found inside a folder the user named: that folder's index in
    /// [`Expanded::folders`]. Such a file that is no input memstate reads is skipped, not refused.
    pub folder: Option<usize>,
}

/// What expanding the user's paths found.
#[derive(Debug, Default)]
pub struct Expanded {
    pub inputs: Vec<Input>,
    /// Paths that could not be read at all (missing, unreadable folders).
    pub errors: Vec<Error>,
    /// The folders the user named, as named.
    pub folders: Vec<String>,
    /// Those of them that hold no file at all.
    pub empty_folders: Vec<String>,
    /// Entries inside folders that are not regular files or folders (FIFOs, sockets, devices,
    /// links to folders, broken links), skipped.
    pub skipped: u64,
}

/// The default for the largest record read: one dump, decompressed.
pub const DEFAULT_MAX_DUMP_SIZE: u64 = 1 << 30;

/// The default for the largest PyTorch snapshot pickle, read whole: 4 GiB (users report
/// snapshots over 1 GB; reading one takes about twice its size).
pub const DEFAULT_MAX_PICKLE_SIZE: u64 = 4 << 30;

/// The default for how many times its compressed size a compressed input may expand to. Dumps
/// compress about 10 times (zstd -19 and gzip -9 on simulated ones: 12 and 10); a bomb, a
/// thousand times or more (1 GiB of spaces is 33 KiB of zstd).
pub const DEFAULT_MAX_RATIO: u64 = 100;

/// Below this many decompressed bytes no input is refused for its ratio (small inputs of one
/// repeated character are not bombs).
pub const RATIO_FLOOR: u64 = 64 << 20;

/// The default for how many rows (each snapshot counted as [`SNAPSHOT_ROWS`], each memory and
/// allocation as one, a provenance text as one per 128 bytes) a PyTorch snapshot's rebuilt
/// snapshots may hold per byte of its pickle. A trace tells a rebuilt snapshot per `oom` event,
/// each holding every block then live: 500 events over 5,000 blocks are 2.5M rows from 0.3 MB of
/// pickle. One event referred to 10,000 times through the memo is 10M rows from 76 KB: hours of
/// work from a file of any size, which a limit per byte stops.
pub const DEFAULT_MAX_ROW_RATIO: u64 = 8;

/// Below this many rows no PyTorch snapshot is refused for what it rebuilds.
pub const ROW_FLOOR: u64 = 4_000_000;

/// What one rebuilt snapshot counts as against [`Limits::max_row_ratio`], besides its rows.
pub const SNAPSHOT_ROWS: u64 = 64;

/// Bounds on what one input may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most bytes one record (a document, or a line of a stream) may have once decompressed.
    pub max_dump_size: u64,
    /// The most bytes a PyTorch snapshot pickle (read whole) may have once decompressed.
    pub max_pickle_size: u64,
    /// How many times its compressed size a compressed input may expand to past [`RATIO_FLOOR`]
    /// (0: no limit).
    pub max_ratio: u64,
    /// How many rows per byte of pickle the snapshots rebuilt from a PyTorch trace may hold past
    /// [`ROW_FLOOR`] (0: no limit).
    pub max_row_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_dump_size: DEFAULT_MAX_DUMP_SIZE,
            max_pickle_size: DEFAULT_MAX_PICKLE_SIZE,
            max_ratio: DEFAULT_MAX_RATIO,
            max_row_ratio: DEFAULT_MAX_ROW_RATIO,
        }
    }
}

/// The form a file name announces, or `None` when the name is not that of a dump.
pub fn form_from_name(name: &str) -> Option<Form> {
    let name = name.to_ascii_lowercase();
    let base = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(&name);
    if base.ends_with(".json") {
        Some(Form::Document)
    } else if base.ends_with(".ndjson") || base.ends_with(".jsonl") {
        Some(Form::Stream)
    } else {
        None
    }
}

/// Expand files, folders and `-` into the inputs to read, in a stable order. A path the user
/// names is read whatever it is (a named pipe from `<(zstdcat ...)` is a fine input); inside
/// folders only regular files are.
pub fn expand(paths: &[String]) -> Expanded {
    let mut expanded = Expanded::default();
    let mut visited = HashSet::new();
    for given in paths {
        if given == "-" {
            expanded.inputs.push(Input {
                path: None,
                display: "-".to_string(),
                form: Form::Sniff,
                folder: None,
            });
            continue;
        }
        let path = PathBuf::from(given);
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_dir() => {
                let folder = expanded.folders.len();
                expanded.folders.push(given.clone());
                let before = expanded.inputs.len();
                walk(&path, folder, &mut expanded, &mut visited);
                if expanded.inputs.len() == before {
                    expanded.empty_folders.push(given.clone());
                }
            }
            Ok(_) => {
                let form = form_from_name(given).unwrap_or(Form::Sniff);
                expanded.inputs.push(Input {
                    path: Some(path),
                    display: given.clone(),
                    form,
                    folder: None,
                });
            }
            Err(error) => expanded.errors.push(Error::read(
                given.clone(),
                Because::told(describe_io(&error), error),
            )),
        }
    }
    expanded
}

/// Walk a folder: real subfolders (each once, by device and inode), regular files and links to
/// regular files; hidden files (`.name`), links to folders, and anything else, are counted as
/// skipped. Every file is an
/// input: one named as a dump is read as its name says, any other is told by its content (a
/// pickle or a log named anyhow), as a file named on the command line is.
fn walk(folder: &Path, given: usize, expanded: &mut Expanded, visited: &mut HashSet<(u64, u64)>) {
    if let Ok(metadata) = std::fs::metadata(folder) {
        if !visited.insert((metadata.dev(), metadata.ino())) {
            return;
        }
    }
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) => {
            expanded.errors.push(Error::read(
                folder.display().to_string(),
                Because::told(describe_io(&error), error),
            ));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    paths.sort();
    for path in paths {
        let Ok(own) = std::fs::symlink_metadata(&path) else {
            expanded.skipped += 1;
            continue;
        };
        let kind = if own.file_type().is_symlink() {
            match std::fs::metadata(&path) {
                Ok(target) if target.is_file() => Some(false),
                _ => None,
            }
        } else if own.is_dir() {
            Some(true)
        } else if own.is_file() {
            Some(false)
        } else {
            None
        };
        match kind {
            Some(true) => walk(&path, given, expanded, visited),
            Some(false) => {
                let name = path
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // A hidden file is a writer's file in the making (written under a hidden name,
                // then renamed: memstate.torch.Recorder does), or not an input at all.
                if name.starts_with('.') {
                    expanded.skipped += 1;
                    continue;
                }
                expanded.inputs.push(Input {
                    display: path.display().to_string(),
                    form: form_from_name(&name).unwrap_or(Form::Sniff),
                    path: Some(path),
                    folder: Some(given),
                });
            }
            None => expanded.skipped += 1,
        }
    }
}

/// An I/O error as the user reads it.
pub fn describe_io(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "no such file or folder".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => error.to_string(),
    }
}

/// The JSON text of one dump (or annotations file) and where it came from.
#[derive(Debug, Clone)]
pub struct Record {
    /// The file, with `:LINE` for a line of a stream.
    pub source: String,
    pub text: Vec<u8>,
}

/// Counts the bytes read from a compressed file, for [`Expanding`] to compare against.
struct Counted {
    inner: Box<dyn Read + Send>,
    count: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.count.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read)
    }
}

/// What a decompressor gives, stopped with [`TooCompressed`] once it has given more than the
/// floor and more than the ratio times what was read from the file.
struct Expanding<R> {
    inner: R,
    compressed: Arc<AtomicU64>,
    produced: u64,
    max_ratio: u64,
}

impl<R: Read> Read for Expanding<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.produced += read as u64;
        let compressed = self.compressed.load(Ordering::Relaxed);
        if self.max_ratio > 0
            && self.produced > RATIO_FLOOR
            && self.produced > compressed.saturating_mul(self.max_ratio)
        {
            return Err(io::Error::other(TooCompressed {
                compressed,
                produced: self.produced,
                max_ratio: self.max_ratio,
            }));
        }
        Ok(read)
    }
}

/// A compressed input that expands more than the limit allows: a likely decompression bomb.
#[derive(Debug)]
pub struct TooCompressed {
    compressed: u64,
    produced: u64,
    max_ratio: u64,
}

impl std::fmt::Display for TooCompressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "expands more than {} times (over {} from {} of compressed data): refused as a likely decompression bomb (raise the limit with --max-ratio, 0 for none)",
            self.max_ratio,
            crate::units::human(self.produced),
            crate::units::human(self.compressed)
        )
    }
}

impl std::error::Error for TooCompressed {}

/// The message of a read error that is a [`TooCompressed`] refusal.
pub fn too_compressed(error: &io::Error) -> Option<String> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<TooCompressed>())
        .map(TooCompressed::to_string)
}

/// Wrap `raw` in the decompressor its first bytes call for; whether it is compressed.
fn decompress(
    raw: Box<dyn Read + Send>,
    limits: Limits,
) -> io::Result<(Box<dyn BufRead + Send>, bool)> {
    let count = Arc::new(AtomicU64::new(0));
    let counted: Box<dyn Read + Send> = Box::new(Counted {
        inner: raw,
        count: count.clone(),
    });
    let mut reader = BufReader::with_capacity(1 << 16, counted);
    let magic = reader.fill_buf()?;
    fn expanding<R>(inner: R, compressed: &Arc<AtomicU64>, limits: Limits) -> Expanding<R> {
        Expanding {
            inner,
            compressed: compressed.clone(),
            produced: 0,
            max_ratio: limits.max_ratio,
        }
    }
    if magic.starts_with(&[0x1f, 0x8b]) {
        let decoder = flate2::bufread::MultiGzDecoder::new(reader);
        Ok((
            Box::new(BufReader::new(expanding(decoder, &count, limits))),
            true,
        ))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = zstd::stream::read::Decoder::with_buffer(reader)?;
        Ok((
            Box::new(BufReader::new(expanding(decoder, &count, limits))),
            true,
        ))
    } else {
        Ok((Box::new(reader), false))
    }
}

/// The refusal of a record (a file, or `file:LINE`) over the size limit.
pub fn too_large(file: String, limits: Limits) -> Error {
    Error::read(
        file,
        format!("larger than {} bytes once decompressed, the limit for one dump; refused (raise it with --max-dump-size)", limits.max_dump_size),
    )
}

/// A file's bytes, decompressed when its first bytes say so (gzip, zstd); whether they were.
pub fn open_decompressed(
    path: &Path,
    limits: Limits,
) -> io::Result<(Box<dyn BufRead + Send>, bool)> {
    let file: Box<dyn Read + Send> = Box::new(File::open(path)?);
    decompress(file, limits)
}

/// The records of one input, read lazily.
pub struct Records {
    reader: Box<dyn BufRead + Send>,
    display: String,
    form: Form,
    line: u64,
    done: bool,
    /// A first line read while sniffing, not yet handed out.
    pending: Option<Vec<u8>>,
    /// The size of an uncompressed file: a whole document is read into a buffer of that size.
    size: Option<usize>,
    compressed: bool,
    limits: Limits,
    /// Whether any record was handed out (a stream without one is refused).
    any: bool,
}

/// Open an input for reading its records.
pub fn open(input: &Input, limits: Limits) -> Result<Records> {
    let mut size = None;
    let raw: Box<dyn Read + Send> = match &input.path {
        Some(path) => {
            let file = File::open(path).map_err(|error| {
                Error::read(
                    input.display.clone(),
                    Because::told(describe_io(&error), error),
                )
            })?;
            size = file.metadata().ok().map(|meta| meta.len() as usize);
            Box::new(file)
        }
        None => Box::new(io::stdin()),
    };
    let (reader, compressed) = decompress(raw, limits).map_err(|error| {
        Error::read(
            input.display.clone(),
            Because::told(describe_io(&error), error),
        )
    })?;
    let size = if compressed {
        None
    } else {
        size.filter(|&size| (size as u64) <= limits.max_dump_size)
    };
    Ok(Records {
        reader,
        display: input.display.clone(),
        form: input.form,
        line: 0,
        done: false,
        pending: None,
        size,
        compressed,
        limits,
        any: false,
    })
}

impl Records {
    /// The input's first bytes (decompressed), not consumed: what a reader decides its kind from.
    pub fn peek(&mut self) -> io::Result<&[u8]> {
        self.reader.fill_buf()
    }

    /// A failure to read the input (its first bytes, say), as the user is told it: corrupt
    /// compressed data named as such.
    pub fn error_of(&mut self, error: io::Error) -> Error {
        self.read_error("", error)
    }

    /// The decompressed input itself, for a reader that takes it whole.
    pub fn reader(&mut self) -> &mut (dyn BufRead + Send) {
        &mut *self.reader
    }

    fn read_error(&mut self, place: &str, error: io::Error) -> Error {
        self.done = true;
        let message = match error.kind() {
            _ if too_compressed(&error).is_some() => too_compressed(&error).unwrap_or_default(),
            io::ErrorKind::InvalidInput
            | io::ErrorKind::InvalidData
            | io::ErrorKind::UnexpectedEof => {
                format!("corrupt or truncated compressed data: {error}")
            }
            // zstd names its failures in its own words ("Dictionary mismatch"...).
            _ if self.compressed => {
                format!("corrupt or truncated compressed data (the decompressor says: {error})")
            }
            _ => describe_io(&error),
        };
        Error::read(
            format!("{}{place}", self.display),
            Because::told(message, error),
        )
    }

    fn too_large(&self, place: &str) -> Error {
        too_large(format!("{}{place}", self.display), self.limits)
    }

    /// Read up to and including the next newline into `line`, keeping at most the limit of bytes;
    /// whether the line fit. A line over the limit is read to its end and dropped.
    fn read_line_bounded(&mut self, line: &mut Vec<u8>) -> io::Result<(usize, bool)> {
        let limit = self.limits.max_dump_size;
        let (mut read, mut fits) = (0usize, true);
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok((read, fits));
            }
            let (chunk, done) = match memchr::memchr(b'\n', buffer) {
                Some(end) => (end + 1, true),
                None => (buffer.len(), false),
            };
            if fits && (line.len() + chunk) as u64 <= limit.saturating_add(1) {
                line.extend_from_slice(&buffer[..chunk]);
            } else {
                fits = false;
                line.clear();
            }
            self.reader.consume(chunk);
            read += chunk;
            if done {
                return Ok((read, fits));
            }
        }
    }

    /// The next non-blank line, with its line number.
    fn next_line(&mut self) -> Option<Result<(u64, Vec<u8>)>> {
        loop {
            let mut line = Vec::new();
            match self.read_line_bounded(&mut line) {
                Ok((0, _)) => {
                    self.done = true;
                    return None;
                }
                Ok((_, false)) => {
                    self.line += 1;
                    return Some(Err(self.too_large(&format!(":{}", self.line))));
                }
                Ok((_, true)) => {
                    self.line += 1;
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        return Some(Ok((self.line, line)));
                    }
                }
                Err(error) => {
                    let place = format!(":{}", self.line + 1);
                    return Some(Err(self.read_error(&place, error)));
                }
            }
        }
    }

    fn whole(&mut self, mut text: Vec<u8>) -> Option<Result<Record>> {
        self.done = true;
        if let Some(size) = self.size {
            text.reserve_exact(size.saturating_sub(text.len()) + 1);
        }
        let room = self
            .limits
            .max_dump_size
            .saturating_sub(text.len() as u64)
            .saturating_add(1);
        match (&mut self.reader).take(room).read_to_end(&mut text) {
            Ok(_) if text.len() as u64 > self.limits.max_dump_size => Some(Err(self.too_large(""))),
            Ok(_) => Some(Ok(Record {
                source: self.display.clone(),
                text,
            })),
            Err(error) => Some(Err(self.read_error("", error))),
        }
    }
}

impl Iterator for Records {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.form {
            Form::Document => self.whole(super::buffers::take()),
            Form::Stream => {
                if let Some(text) = self.pending.take() {
                    self.any = true;
                    return Some(Ok(Record {
                        source: format!("{}:{}", self.display, self.line),
                        text,
                    }));
                }
                match self.next_line() {
                    Some(Ok((line, text))) => {
                        self.any = true;
                        Some(Ok(Record {
                            source: format!("{}:{line}", self.display),
                            text,
                        }))
                    }
                    Some(Err(error)) => {
                        self.any = true;
                        Some(Err(error))
                    }
                    None if !self.any => {
                        self.any = true;
                        Some(Err(Error::read(
                            self.display.clone(),
                            "no dump in this stream (it is empty or blank)",
                        )))
                    }
                    None => None,
                }
            }
            Form::Sniff => {
                let first = match self.next_line() {
                    None => {
                        // Nothing but blank lines: hand the (empty) document to the parser to refuse.
                        return Some(Ok(Record {
                            source: self.display.clone(),
                            text: Vec::new(),
                        }));
                    }
                    Some(Err(error)) => return Some(Err(error)),
                    Some(Ok((_, text))) => text,
                };
                let whole_value = match serde_json::from_slice::<serde::de::IgnoredAny>(&first) {
                    Ok(_) => true,
                    Err(error) => !error.is_eof(),
                };
                if whole_value {
                    self.form = Form::Stream;
                    self.pending = Some(first);
                    self.next()
                } else {
                    // Keep the blank lines skipped before it, so syntax errors name the right line.
                    self.form = Form::Document;
                    let mut text = vec![b'\n'; self.line.saturating_sub(1) as usize];
                    text.extend_from_slice(&first);
                    self.whole(text)
                }
            }
        }
    }
}
