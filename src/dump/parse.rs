//! Turning the JSON text of one record into a validated [`Document`].
//!
//! Values are read as borrowed JSON trees ([`super::json`]) and walked by hand: that is what lets
//! every failure name its JSON path (`memories[1].allocations[42].size`) and say what was expected,
//! which derive-based deserialisation cannot do for a rule that spans fields (overlaps, capacity,
//! uniqueness). The big arrays are read one element at a time ([`stream`]), so no tree of a whole
//! dump is ever built. Every rule of docs/FORMAT.md is checked here and nowhere else: the
//! document's frame here, single values in [`values`], the run, snapshot, objects and annotations
//! in [`run`], a memory and what it holds in [`memory`].

mod memory;
mod run;
mod stream;
mod values;

use values::describe;
pub use values::parse_id_text;

use std::collections::HashMap;
use std::fmt;

use serde::de::DeserializeSeed;

use super::json::{Json, Object as JsonObject};
use stream::{Listed, TopValue};

use super::model::*;
use crate::error::{Error, Result};

/// How strictly to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Refuse fields that format v1 does not define (normally they are ignored).
    pub strict: bool,
}

/// The newest format version this reader understands.
pub const FORMAT_VERSION: u64 = 1;

/// The longest string value a dump may hold, in bytes of UTF-8 (and the longest `attrs` object,
/// written as compact JSON): far above any name, label or provenance a runtime prints, and far
/// below what one SQLite value may hold (about 1 GB), so a dump `validate` accepts always imports.
pub const MAX_STRING_BYTES: usize = 16 << 20;

/// A JSON path, built on the stack while walking and only rendered when an error needs it.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn key<'b>(&'b self, key: &'b str) -> Path<'b> {
        Path::Key(self, key)
    }
    fn index(&self, index: usize) -> Path<'_> {
        Path::Index(self, index)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => f.write_str("top level"),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// Parse and validate one record (a whole `.json` file or one line of a stream).
pub fn parse_document(text: &[u8], file: &str, options: Options) -> Result<Document> {
    // A UTF-8 byte order mark is not JSON, but editors write one: it is accepted and skipped.
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::whole_input(
            file,
            "empty input: expected a memstate dump (a JSON object)",
        ));
    }
    // UTF-8 is checked once for the whole text (quicker than string by string, as serde_json does
    // for bytes), and the reader then works on a `str`.
    let text = match std::str::from_utf8(text) {
        Ok(text) => text,
        Err(error) => {
            let at = error.valid_up_to();
            let before = &text[..at];
            let line = before.iter().filter(|&&byte| byte == b'\n').count() + 1;
            let column = at
                - before
                    .iter()
                    .rposition(|&byte| byte == b'\n')
                    .map_or(0, |newline| newline + 1)
                + 1;
            return Err(Error::input(
                file,
                format!("line {line}, column {column}"),
                format!("invalid UTF-8 (byte {:#04x})", text[at]),
            ));
        }
    };
    let mut parser = Parser::new(file, options);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let top = stream::Top {
        parser: &mut parser,
        text,
    }
    .deserialize(&mut deserializer)
    .map_err(|error| syntax_error(file, &error))?;
    deserializer
        .end()
        .map_err(|error| syntax_error(file, &error))?;
    parser.document(top)
}

/// Parse and validate one record that must be a dump (not an annotations file).
pub fn parse_dump(text: &[u8], file: &str, options: Options) -> Result<Dump> {
    match parse_document(text, file, options)? {
        Document::Dump(dump) => Ok(*dump),
        Document::Annotations(_) => Err(Error::input(
            file,
            "format",
            "expected a dump (\"memstate-dump\"), found an annotations file",
        )),
    }
}

/// A syntax error placed at its line and column, with serde_json's own position suffix removed.
fn syntax_error(file: &str, error: &serde_json::Error) -> Error {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    let message = match error.classify() {
        serde_json::error::Category::Eof => format!("{message} (the JSON is truncated)"),
        _ => message.to_string(),
    };
    Error::input(
        file,
        format!("line {}, column {}", error.line(), error.column()),
        message,
    )
}

struct Parser<'f> {
    file: &'f str,
    options: Options,
    /// The record's own `strings` table, when it has one.
    table: Vec<String>,
    /// For each entry of `table`, the Sym it was interned as (filled on first use).
    table_syms: Vec<Option<Sym>>,
    /// The interned strings of the result, and their index.
    strings: Vec<String>,
    index: HashMap<String, Sym>,
    /// What reading the `strings` table found, once it was read (before or after `memories`).
    table_read: Option<Result<()>>,
}

impl<'f> Parser<'f> {
    fn new(file: &'f str, options: Options) -> Self {
        Parser {
            file,
            options,
            table: Vec::new(),
            table_syms: Vec::new(),
            strings: Vec::new(),
            index: HashMap::new(),
            table_read: None,
        }
    }

    fn version(&self, top: &JsonObject<'_>) -> Result<u32> {
        let path = Path::Root.key("version");
        let value = self.required(top, "version", &Path::Root)?;
        match value.as_u64() {
            Some(FORMAT_VERSION) => Ok(FORMAT_VERSION as u32),
            Some(newer) if newer > FORMAT_VERSION => Err(self.error(
                &path,
                format!(
                    "format version {newer} is newer than this memstate reads (version {FORMAT_VERSION}); upgrade memstate"
                ),
            )),
            _ => Err(self.error(&path, format!("expected version {FORMAT_VERSION}, found {}", describe(value)))),
        }
    }

    /// Read the `strings` table (once: the reader may meet it before the memories that use it).
    fn load_table(&mut self, value: &Json) {
        if self.table_read.is_some() || value.is_null() {
            return;
        }
        let path = Path::Root.key("strings");
        let read = (|| {
            let entries = self.array(value, &path)?;
            let mut table = Vec::with_capacity(entries.len());
            for (index, entry) in entries.iter().enumerate() {
                match entry {
                    Json::String(text) => table.push(text.to_string()),
                    other => {
                        return Err(self.error(
                            &path.index(index),
                            format!("expected a string, found {}", describe(other)),
                        ))
                    }
                }
            }
            Ok(table)
        })();
        self.table_read = Some(match read {
            Ok(table) => {
                self.table_syms = vec![None; table.len()];
                self.table = table;
                Ok(())
            }
            Err(error) => Err(error),
        });
    }

    /// The `strings` table's error, if reading it failed.
    fn string_table(&mut self, top: &JsonObject<'_>) -> Result<()> {
        if let Some(value) = self.optional(top, "strings") {
            self.load_table(value);
        }
        match self.table_read.take() {
            Some(Err(error)) => Err(error),
            _ => {
                self.table_read = Some(Ok(()));
                Ok(())
            }
        }
    }

    /// The whole record, checked in a fixed order whatever the order of its keys.
    fn document(&mut self, top: TopValue) -> Result<Document> {
        let (members, memories, repeated) = match top {
            TopValue::Object {
                members,
                memories,
                repeated,
            } => (members, memories, repeated),
            TopValue::Other(value) => return Err(self.not_an_object(&Path::Root, &value)),
        };
        if let Some(key) = repeated {
            return Err(self.repeated_key_error(&Path::Root, &key));
        }
        let top = JsonObject::new(members);
        let format = self.required(&top, "format", &Path::Root)?;
        match format.as_str() {
            Some("memstate-dump") => Ok(Document::Dump(Box::new(self.dump(&top, memories)?))),
            Some("memstate-annotations") => {
                if memories.is_some() && self.options.strict {
                    return Err(self.error(
                        &Path::Root.key("memories"),
                        "unknown field (refused in strict mode)",
                    ));
                }
                Ok(Document::Annotations(Box::new(self.annotations(&top)?)))
            }
            _ => Err(self.error(
                &Path::Root.key("format"),
                format!(
                    "expected \"memstate-dump\" or \"memstate-annotations\", found {}",
                    describe(format)
                ),
            )),
        }
    }

    fn dump(&mut self, top: &JsonObject<'_>, memories: Option<Listed<Memory>>) -> Result<Dump> {
        let root = Path::Root;
        let version = self.version(top)?;
        self.check_known(
            top,
            &[
                "format", "version", "producer", "run", "snapshot", "strings", "objects",
                "memories", "frames", "stacks",
            ],
            &root,
        )?;
        self.string_table(top)?;
        let producer = match self.optional(top, "producer") {
            Some(value) => self.producer(value)?,
            None => None,
        };
        let run = self.run(self.required(top, "run", &root)?)?;
        let snapshot = self.snapshot(self.required(top, "snapshot", &root)?)?;
        let objects = match self.optional(top, "objects") {
            Some(value) => self.objects(value, &root.key("objects"))?,
            None => Vec::new(),
        };
        let mut memories = self
            .listed(memories, &root.key("memories"), true)?
            .unwrap_or_default();
        self.check_unique_uids(&memories)?;
        let frames = match self.optional(top, "frames") {
            Some(value) => self.frames(value, &root.key("frames"))?,
            None => Vec::new(),
        };
        let stacks = match self.optional(top, "stacks") {
            Some(value) => self.stacks(value, &root.key("stacks"), frames.len())?,
            None => Vec::new(),
        };
        // Before the sort, while each allocation is at its place in the input.
        for (m, memory) in memories.iter().enumerate() {
            for (a, allocation) in memory.allocations.iter().enumerate() {
                if let Some(stack) = allocation.stack() {
                    if stack as usize >= stacks.len() {
                        return Err(self.error(
                            &root
                                .key("memories")
                                .index(m)
                                .key("allocations")
                                .index(a)
                                .key("stack"),
                            format!(
                                "{stack} is out of range: the dump has {} stacks",
                                stacks.len()
                            ),
                        ));
                    }
                }
            }
        }
        for memory in &mut memories {
            memory
                .allocations
                .sort_by_key(|allocation| (allocation.offset, allocation.size, allocation.uid));
        }
        Ok(Dump {
            version,
            strings: std::mem::take(&mut self.strings),
            producer,
            run,
            snapshot,
            objects,
            memories,
            frames,
            stacks,
        })
    }

    /// `frames`: `{file, line, name}` each, `file` required.
    fn frames(&mut self, value: &Json, path: &Path) -> Result<Vec<Frame>> {
        let mut frames = Vec::new();
        for (index, value) in self.array(value, path)?.iter().enumerate() {
            let path = path.index(index);
            let map = self.object(value, &path)?;
            self.check_known(map, &["file", "line", "name"], &path)?;
            let file = self.sym(self.required(map, "file", &path)?, &path.key("file"))?;
            let line = self.optional_integer(map, "line", &path, 0)?;
            let name = self.optional_sym(map, "name", &path)?;
            frames.push(Frame { file, line, name });
        }
        Ok(frames)
    }

    /// `stacks`: each a list of indices into `frames`, innermost first.
    fn stacks(&mut self, value: &Json, path: &Path, frames: usize) -> Result<Vec<Vec<u32>>> {
        let mut stacks = Vec::new();
        for (index, value) in self.array(value, path)?.iter().enumerate() {
            let path = path.index(index);
            let mut stack = Vec::new();
            for (depth, value) in self.array(value, &path)?.iter().enumerate() {
                let at = path.index(depth);
                let frame = self.integer(value, &at, 0)?;
                match u32::try_from(frame) {
                    Ok(frame) if (frame as usize) < frames => stack.push(frame),
                    _ => {
                        return Err(self.error(
                            &at,
                            format!("{frame} is out of range: the dump has {frames} frames"),
                        ))
                    }
                }
            }
            stacks.push(stack);
        }
        Ok(stacks)
    }

    /// The items of a streamed array, or the error that stands for it: the first error among its
    /// elements, a value that is not an array, or (when `required`) a missing or null one.
    fn listed<T>(
        &self,
        listed: Option<Listed<T>>,
        path: &Path,
        required: bool,
    ) -> Result<Option<Vec<T>>> {
        match listed {
            None if required => Err(self.error(path, "required field is missing")),
            None => Ok(None),
            Some(Listed::Other(Json::Null)) if required => {
                Err(self.error(path, "required field is null"))
            }
            Some(Listed::Other(Json::Null)) => Ok(None),
            Some(Listed::Other(value)) => Err(self.error(
                path,
                format!("expected an array, found {}", describe(&value)),
            )),
            Some(Listed::Items {
                error: Some(error), ..
            }) => Err(error),
            Some(Listed::Items { items, error: None }) => Ok(Some(items)),
        }
    }

    /// Rule 5 for memories, checked as each memory is read: its id is not used by an earlier one.
    fn check_new_memory_id(&self, earlier: &[Memory], memory: &Memory, index: usize) -> Result<()> {
        match earlier.iter().position(|other| other.id == memory.id) {
            Some(first) => Err(self.error(
                &Path::Root.key("memories").index(index).key("id"),
                format!(
                    "memory id {} is also used by memories[{first}]",
                    format_id(memory.id)
                ),
            )),
            None => Ok(()),
        }
    }
}
