//! Turning the JSON text of one record into a validated [`Document`].
//!
//! Values are read as borrowed JSON trees ([`super::json`]) and walked by hand: that is what lets
//! every failure name its JSON path (`memories[1].allocations[42].size`) and say what was expected,
//! which derive-based deserialisation cannot do for a rule that spans fields (overlaps, capacity,
//! uniqueness). The big arrays are read one element at a time ([`stream`]), so no tree of a whole
//! dump is ever built. Every rule of docs/FORMAT.md is checked here and nowhere else.

mod stream;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::DeserializeSeed;

use super::json::{Json, Members, Number, Object as JsonObject};
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
        return Err(Error::input(
            file,
            "",
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

/// How a value looks, for "expected X, found Y" messages.
fn describe(value: &Json) -> String {
    match value {
        Json::Null => "null".to_string(),
        Json::Bool(flag) => flag.to_string(),
        Json::Number(Number::Float(float)) => {
            if float.fract() == 0.0 && *float >= 9.2e18 {
                format!("{float} (too large)")
            } else if float.fract() == 0.0 && *float <= -9.2e18 {
                format!("{float} (too small: below -2^63)")
            } else {
                format!("{float} (not an integer)")
            }
        }
        Json::Number(number) => number.to_string(),
        Json::String(text) => {
            let mut shown: String = text.chars().take(40).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!("a string ({shown:?})")
        }
        Json::Array(_) => "an array".to_string(),
        Json::Object(_) => "an object".to_string(),
    }
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

    fn error(&self, path: &Path, message: impl Into<String>) -> Error {
        Error::input(self.file, path.to_string(), message)
    }

    fn object<'v>(&self, value: &'v Json<'v>, path: &Path) -> Result<&'v JsonObject<'v>> {
        let object = value
            .as_object()
            .ok_or_else(|| self.not_an_object(path, value))?;
        match object.repeated_key() {
            Some(key) => Err(self.repeated_key_error(path, key)),
            None => Ok(object),
        }
    }

    fn not_an_object(&self, path: &Path, value: &Json) -> Error {
        self.error(
            path,
            format!("expected an object, found {}", describe(value)),
        )
    }

    /// An object that writes a key twice: readers disagree on which one counts, so it is refused.
    fn repeated_key_error(&self, path: &Path, key: &str) -> Error {
        self.error(
            &path.key(key),
            format!("the key {key:?} is written more than once in this object"),
        )
    }

    fn array<'v>(&self, value: &'v Json<'v>, path: &Path) -> Result<&'v Vec<Json<'v>>> {
        value.as_array().ok_or_else(|| {
            self.error(
                path,
                format!("expected an array, found {}", describe(value)),
            )
        })
    }

    fn required<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        key: &str,
        parent: &Path,
    ) -> Result<&'v Json<'v>> {
        match map.member(key) {
            Some(value) if !value.is_null() => Ok(value),
            Some(_) => Err(self.error(&parent.key(key), "required field is null")),
            None => Err(self.error(&parent.key(key), "required field is missing")),
        }
    }

    /// An optional field: absent and `null` both mean "not given".
    fn optional<'v, M: Members<'v>>(&self, map: &'v M, key: &str) -> Option<&'v Json<'v>> {
        map.member(key).filter(|value| !value.is_null())
    }

    /// In strict mode, refuse keys the format does not define at this level.
    fn check_known<'v, M: Members<'v>>(&self, map: &M, known: &[&str], path: &Path) -> Result<()> {
        if !self.options.strict {
            return Ok(());
        }
        match map.unknown_key(known) {
            Some(key) => Err(self.error(&path.key(key), "unknown field (refused in strict mode)")),
            None => Ok(()),
        }
    }

    /// A size or offset: a non-negative JSON integer below 2^63.
    fn size(&self, value: &Json, path: &Path) -> Result<u64> {
        match value.as_u64() {
            Some(size) if size <= i64::MAX as u64 => Ok(size),
            Some(size) => {
                Err(self.error(path, format!("{size} is above the largest size, 2^63 - 1")))
            }
            None => Err(self.error(
                path,
                format!(
                    "expected a non-negative integer below 2^63, found {}",
                    describe(value)
                ),
            )),
        }
    }

    fn positive_size(&self, value: &Json, path: &Path) -> Result<u64> {
        match self.size(value, path)? {
            0 => Err(self.error(path, "expected a size above 0, found 0")),
            size => Ok(size),
        }
    }

    fn optional_size<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        key: &str,
        parent: &Path,
    ) -> Result<Option<u64>> {
        self.optional(map, key)
            .map(|value| self.size(value, &parent.key(key)))
            .transpose()
    }

    /// A JSON integer that fits in i64 and is at least `min`.
    fn integer(&self, value: &Json, path: &Path, min: i64) -> Result<i64> {
        match value.as_i64() {
            Some(number) if number >= min => Ok(number),
            Some(number) => Err(self.error(
                path,
                format!("expected an integer >= {min}, found {number}"),
            )),
            None => Err(self.error(
                path,
                format!("expected an integer (64-bit), found {}", describe(value)),
            )),
        }
    }

    fn optional_integer<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        key: &str,
        parent: &Path,
        min: i64,
    ) -> Result<Option<i64>> {
        self.optional(map, key)
            .map(|value| self.integer(value, &parent.key(key), min))
            .transpose()
    }

    /// An id: `0x` and 1 to 16 hex digits, bare hex digits, or a non-negative integer.
    fn id(&self, value: &Json, path: &Path) -> Result<u64> {
        let parsed = match value {
            Json::String(text) => parse_id_text(text),
            Json::Number(_) => value.as_u64(),
            _ => None,
        };
        parsed.ok_or_else(|| {
            self.error(
                path,
                format!(
                    "expected an id (\"0x\" and 1 to 16 hex digits, bare hex digits, or a non-negative integer), found {}",
                    describe(value)
                ),
            )
        })
    }

    /// A string value over [`MAX_STRING_BYTES`], refused by its path.
    fn check_length(&self, text: &str, path: &Path) -> Result<()> {
        if text.len() <= MAX_STRING_BYTES {
            return Ok(());
        }
        Err(self.error(
            path,
            format!(
                "a string of {} bytes; at most {} bytes (16 MiB) are stored per string",
                text.len(),
                MAX_STRING_BYTES
            ),
        ))
    }

    /// A string value: a JSON string, or an index into the record's `strings` table.
    fn text<'v>(&'v self, value: &'v Json<'v>, path: &Path) -> Result<&'v str> {
        let text = self.text_of_any_length(value, path)?;
        self.check_length(text, path)?;
        Ok(text)
    }

    fn text_of_any_length<'v>(&'v self, value: &'v Json<'v>, path: &Path) -> Result<&'v str> {
        match value {
            Json::String(text) => Ok(text),
            Json::Number(_) => match value.as_u64() {
                Some(index) => self
                    .table
                    .get(index as usize)
                    .map(String::as_str)
                    .ok_or_else(|| {
                        self.error(
                            path,
                            format!(
                                "string index {index} is out of range (strings has {} entries)",
                                self.table.len()
                            ),
                        )
                    }),
                None => Err(self.error(
                    path,
                    format!(
                        "expected a string or an index into strings, found {}",
                        describe(value)
                    ),
                )),
            },
            _ => Err(self.error(
                path,
                format!(
                    "expected a string or an index into strings, found {}",
                    describe(value)
                ),
            )),
        }
    }

    fn owned_text(&self, value: &Json, path: &Path) -> Result<String> {
        self.text(value, path).map(str::to_string)
    }

    fn optional_owned_text<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        key: &str,
        parent: &Path,
    ) -> Result<Option<String>> {
        self.optional(map, key)
            .map(|value| self.owned_text(value, &parent.key(key)))
            .transpose()
    }

    /// A string value, interned into the result's table.
    fn sym(&mut self, value: &Json, path: &Path) -> Result<Sym> {
        if let Some(index) = value.as_u64() {
            if let Some(Some(sym)) = self.table_syms.get(index as usize) {
                return Ok(*sym);
            }
            let text = self.text(value, path)?.to_string();
            let sym = self.intern_owned(text);
            self.table_syms[index as usize] = Some(sym);
            return Ok(sym);
        }
        match value {
            Json::String(text) => {
                self.check_length(text, path)?;
                Ok(self.intern(text))
            }
            _ => Err(self.error(
                path,
                format!(
                    "expected a string or an index into strings, found {}",
                    describe(value)
                ),
            )),
        }
    }

    fn optional_sym<'v, M: Members<'v>>(
        &mut self,
        map: &'v M,
        key: &str,
        parent: &Path,
    ) -> Result<Option<Sym>> {
        match self.optional(map, key) {
            Some(value) => self.sym(value, &parent.key(key)).map(Some),
            None => Ok(None),
        }
    }

    fn intern(&mut self, text: &str) -> Sym {
        match self.index.get(text) {
            Some(sym) => *sym,
            None => self.intern_owned(text.to_string()),
        }
    }

    fn intern_owned(&mut self, text: String) -> Sym {
        if let Some(sym) = self.index.get(&text) {
            return *sym;
        }
        let sym = Sym(self.strings.len() as u32);
        self.strings.push(text.clone());
        self.index.insert(text, sym);
        sym
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
                "memories",
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
        })
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

    fn producer(&mut self, value: &Json) -> Result<Option<Sym>> {
        let path = Path::Root.key("producer");
        let map = self.object(value, &path)?;
        self.check_known(map, &["name", "version", "commit"], &path)?;
        let mut text = String::new();
        for key in ["name", "version", "commit"] {
            if let Some(part) = self.optional(map, key) {
                let part = self.text(part, &path.key(key))?;
                match key {
                    "commit" if !text.is_empty() => text.push_str(&format!(" ({part})")),
                    _ if !text.is_empty() => text.push_str(&format!(" {part}")),
                    _ => text.push_str(part),
                }
            }
        }
        Ok(if text.is_empty() {
            None
        } else {
            Some(self.intern_owned(text))
        })
    }

    fn run(&mut self, value: &Json) -> Result<Run> {
        let path = Path::Root.key("run");
        let map = self.object(value, &path)?;
        self.check_known(map, &["id", "node", "node_count", "host", "pid"], &path)?;
        let id = self.owned_text(self.required(map, "id", &path)?, &path.key("id"))?;
        if id.is_empty() {
            return Err(self.error(&path.key("id"), "expected a non-empty run id"));
        }
        let node = self.integer(self.required(map, "node", &path)?, &path.key("node"), 0)?;
        let node_count = self.optional_integer(map, "node_count", &path, 1)?;
        if let Some(count) = node_count {
            if node >= count {
                return Err(self.error(
                    &path.key("node"),
                    format!("node {node} is not below node_count {count}"),
                ));
            }
        }
        let host = self.optional_owned_text(map, "host", &path)?;
        let pid = self.optional_integer(map, "pid", &path, 0)?;
        Ok(Run {
            id,
            node,
            node_count,
            host,
            pid,
        })
    }

    fn snapshot(&mut self, value: &Json) -> Result<Snapshot> {
        let path = Path::Root.key("snapshot");
        let map = self.object(value, &path)?;
        self.check_known(
            map,
            &["seq", "time_ns", "wall_time", "reason", "note"],
            &path,
        )?;
        let seq = self.integer(self.required(map, "seq", &path)?, &path.key("seq"), 0)?;
        let time_ns = self.integer(
            self.required(map, "time_ns", &path)?,
            &path.key("time_ns"),
            0,
        )?;
        let wall_time = self.optional_owned_text(map, "wall_time", &path)?;
        if let Some(wall_time) = &wall_time {
            if !is_rfc3339(wall_time) {
                return Err(self.error(
                    &path.key("wall_time"),
                    format!("expected an RFC 3339 time such as 2026-12-01T10:00:01.5Z, found {wall_time:?}"),
                ));
            }
        }
        let reason_path = path.key("reason");
        let reason_text = self.text(self.required(map, "reason", &path)?, &reason_path)?;
        let reason = Reason::parse(reason_text).ok_or_else(|| {
            self.error(
                &reason_path,
                format!("expected one of periodic, oom, request, exit, found {reason_text:?}"),
            )
        })?;
        let note = self.optional_sym(map, "note", &path)?;
        Ok(Snapshot {
            seq,
            time_ns,
            wall_time,
            reason,
            note,
        })
    }

    fn objects(&mut self, value: &Json, path: &Path) -> Result<Vec<Object>> {
        let values = self.array(value, path)?;
        let mut objects = Vec::with_capacity(values.len());
        let mut seen: HashMap<Sym, usize> = HashMap::new();
        for (index, value) in values.iter().enumerate() {
            let object_path = path.index(index);
            let object = self.object_entry(value, &object_path)?;
            if let Some(first) = seen.insert(object.id, index) {
                return Err(self.error(
                    &object_path.key("id"),
                    format!(
                        "object id {:?} is also used by objects[{first}]",
                        self.strings[object.id.0 as usize]
                    ),
                ));
            }
            objects.push(object);
        }
        Ok(objects)
    }

    fn object_entry(&mut self, value: &Json, path: &Path) -> Result<Object> {
        let map = self.object(value, path)?;
        self.check_known(
            map,
            &[
                "id",
                "kind",
                "name",
                "shape",
                "dtype",
                "transform",
                "partition",
                "provenance",
                "attrs",
            ],
            path,
        )?;
        let id = self.sym(self.required(map, "id", path)?, &path.key("id"))?;
        let kind = self.optional_sym(map, "kind", path)?;
        let name = self.optional_sym(map, "name", path)?;
        let shape = match self.optional(map, "shape") {
            Some(value) => {
                let shape_path = path.key("shape");
                let extents = self.array(value, &shape_path)?;
                let mut parsed = Vec::with_capacity(extents.len());
                for (index, extent) in extents.iter().enumerate() {
                    parsed.push(self.size(extent, &shape_path.index(index))?);
                }
                Some(serde_json::to_string(&parsed).unwrap_or_default())
            }
            None => None,
        };
        let dtype = self.optional_sym(map, "dtype", path)?;
        let transform = self.optional_sym(map, "transform", path)?;
        let partition = self.optional_sym(map, "partition", path)?;
        let provenance = self.optional_sym(map, "provenance", path)?;
        let attrs = self.attrs(map, path)?;
        Ok(Object {
            id,
            kind,
            name,
            shape,
            dtype,
            transform,
            partition,
            provenance,
            attrs,
        })
    }

    /// Free-form attributes: an object of strings, numbers and booleans, kept as canonical JSON.
    /// Inside `attrs` a number is a number, never an index into `strings`.
    fn attrs<'v, M: Members<'v>>(&self, map: &'v M, parent: &Path) -> Result<Option<String>> {
        let Some(value) = self.optional(map, "attrs") else {
            return Ok(None);
        };
        let path = parent.key("attrs");
        let attrs = self.object(value, &path)?;
        let mut length = 0usize;
        for (key, entry) in attrs.iter() {
            // Counted before the object is copied and written out: a huge value costs nothing.
            length = length.saturating_add(key.len());
            if let Json::String(text) = entry {
                length = length.saturating_add(text.len());
            }
            if length > MAX_STRING_BYTES {
                return Err(self.error(
                    &path,
                    format!(
                        "more than {MAX_STRING_BYTES} bytes of keys and values; at most that (16 MiB) is stored per attrs object"
                    ),
                ));
            }
            if !matches!(entry, Json::String(_) | Json::Number(_) | Json::Bool(_)) {
                return Err(self.error(
                    &path.key(key),
                    format!(
                        "expected a string, number or boolean, found {}",
                        describe(entry)
                    ),
                ));
            }
        }
        // serde_json's Map keeps keys sorted, so this text is canonical.
        let text = Json::Object(attrs.clone()).to_value().to_string();
        self.check_length(&text, &path)?;
        Ok(Some(text))
    }

    /// One memory, once all of it has been read: its members as trees, its allocations and holes
    /// converted one by one while reading. Checked in the order of the old whole-tree reader.
    fn memory(
        &mut self,
        path: &Path,
        members: Vec<(Cow<str>, Json)>,
        allocations: Option<Listed<Allocation>>,
        holes: Option<Listed<Range>>,
    ) -> Result<Memory> {
        let map = JsonObject::new(members);
        if let Some(key) = map.repeated_key() {
            return Err(self.repeated_key_error(path, key));
        }
        self.check_known(
            &map,
            &[
                "id",
                "kind",
                "name",
                "capacity",
                "alignment",
                "allocations",
                "holes",
                "failed_requests",
            ],
            path,
        )?;
        let id = self.id(self.required(&map, "id", path)?, &path.key("id"))?;
        let kind = self.sym(self.required(&map, "kind", path)?, &path.key("kind"))?;
        let name = self.optional_sym(&map, "name", path)?;
        let capacity = self.positive_size(
            self.required(&map, "capacity", path)?,
            &path.key("capacity"),
        )?;
        let alignment = self.optional_size(&map, "alignment", path)?;

        let allocations_path = path.key("allocations");
        let allocations = self
            .listed(allocations, &allocations_path, true)?
            .unwrap_or_default();
        for (index, allocation) in allocations.iter().enumerate() {
            self.range_end(
                allocation.offset,
                allocation.size,
                capacity,
                &allocations_path.index(index),
            )?;
        }
        let order = self.check_overlaps(&allocations, &allocations_path)?;

        let holes_path = path.key("holes");
        let listed_holes = match self.listed(holes, &holes_path, false)? {
            Some(holes) => {
                Some(self.check_holes(holes, &holes_path, capacity, &allocations, &order)?)
            }
            None => None,
        };

        let mut failed_requests = Vec::new();
        if let Some(value) = self.optional(&map, "failed_requests") {
            let requests_path = path.key("failed_requests");
            for (index, value) in self.array(value, &requests_path)?.iter().enumerate() {
                failed_requests.push(self.failed_request(value, &requests_path.index(index))?);
            }
        }
        Ok(Memory {
            id,
            kind,
            name,
            capacity,
            alignment,
            allocations,
            listed_holes,
            failed_requests,
        })
    }

    /// A range's end, refused when it overflows or passes the memory's capacity.
    fn range_end(&self, offset: u64, size: u64, capacity: u64, path: &Path) -> Result<u64> {
        match offset.checked_add(size) {
            Some(end) if end <= capacity => Ok(end),
            Some(end) => Err(self.error(
                path,
                format!("offset {offset} + size {size} = {end} is past the memory's capacity {capacity}"),
            )),
            None => Err(self.error(path, format!("offset {offset} + size {size} overflows"))),
        }
    }

    /// One allocation (its place against the memory's capacity is checked with the memory).
    fn allocation(&mut self, read: &stream::AllocationFields, path: &Path) -> Result<Allocation> {
        if let Some(value) = &read.not_an_object {
            return Err(self.not_an_object(path, value));
        }
        if let Some(key) = &read.repeated {
            return Err(self.repeated_key_error(path, key));
        }
        let map = read;
        self.check_known(map, &stream::ALLOCATION_KEYS, path)?;
        let uid = self.id(self.required(map, "uid", path)?, &path.key("uid"))?;
        let handle = match self.optional(map, "handle") {
            Some(value) => Some(self.id(value, &path.key("handle"))?),
            None => None,
        };
        let kind = self.sym(self.required(map, "kind", path)?, &path.key("kind"))?;
        let state_path = path.key("state");
        let state_text = self.text(self.required(map, "state", path)?, &state_path)?;
        let state = State::parse(state_text).ok_or_else(|| {
            self.error(
                &state_path,
                format!("expected one of valid, collectable, pending_free, pending_alloc, found {state_text:?}"),
            )
        })?;
        let offset = self.size(self.required(map, "offset", path)?, &path.key("offset"))?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        self.range_end(offset, size, u64::MAX, path)?;
        let alignment = self.optional_size(map, "alignment", path)?;
        let created_ns = self.optional_integer(map, "created_ns", path, 0)?;
        let provenance = self.optional_sym(map, "provenance", path)?;
        let label = self.optional_sym(map, "label", path)?;
        let gc_priority = self.optional_integer(map, "gc_priority", path, i64::MIN)?;
        let mut fields = Vec::new();
        if let Some(value) = self.optional(map, "fields") {
            let fields_path = path.key("fields");
            for (index, value) in self.array(value, &fields_path)?.iter().enumerate() {
                let field_path = fields_path.index(index);
                let field = self.object(value, &field_path)?;
                self.check_known(field, &["id", "size", "object"], &field_path)?;
                let id = self.integer(
                    self.required(field, "id", &field_path)?,
                    &field_path.key("id"),
                    0,
                )?;
                let size = self.optional_size(field, "size", &field_path)?;
                let object = self.sym(
                    self.required(field, "object", &field_path)?,
                    &field_path.key("object"),
                )?;
                fields.push(Field { id, size, object });
            }
        }
        let attrs = self.attrs(map, path)?;
        Ok(Allocation {
            uid,
            handle,
            kind,
            state,
            offset,
            size,
            alignment,
            created_ns,
            provenance,
            label,
            gc_priority,
            fields,
            attrs,
        })
    }

    /// Rule 3: allocations may overlap only as a `pending_alloc` over a `pending_free`.
    /// Returns the allocations' indices in offset order, for the hole checks.
    fn check_overlaps(&self, allocations: &[Allocation], path: &Path) -> Result<Vec<usize>> {
        let mut order: Vec<usize> = (0..allocations.len()).collect();
        order.sort_by_key(|&index| {
            (
                allocations[index].offset,
                allocations[index].size,
                allocations[index].uid,
            )
        });
        // Allocations that start before the current one and are not yet over. In a valid memory a
        // byte is covered at most twice, so this stays tiny.
        let mut open: Vec<usize> = Vec::new();
        for &index in &order {
            let current = &allocations[index];
            open.retain(|&other| allocations[other].range().end() > current.offset);
            for &other in &open {
                let earlier = &allocations[other];
                let allowed = matches!(
                    (earlier.state, current.state),
                    (State::PendingAlloc, State::PendingFree)
                        | (State::PendingFree, State::PendingAlloc)
                );
                if !allowed {
                    let (first, second) = if other < index {
                        (other, index)
                    } else {
                        (index, other)
                    };
                    let (a, b) = (&allocations[first], &allocations[second]);
                    return Err(self.error(
                        &path.index(second),
                        format!(
                            "overlaps {path}[{first}]: uid {} ({}, [{}, {})) and uid {} ({}, [{}, {})); only a pending_alloc may overlap a pending_free",
                            format_id(b.uid), b.state, b.offset, b.range().end(),
                            format_id(a.uid), a.state, a.offset, a.range().end(),
                        ),
                    ));
                }
            }
            open.push(index);
        }
        Ok(order)
    }

    /// One listed hole (its place against the memory's capacity is checked with the memory).
    fn hole(&mut self, value: &Json, path: &Path) -> Result<Range> {
        let map = self.object(value, path)?;
        self.check_known(map, &["offset", "size"], path)?;
        let offset = self.size(self.required(map, "offset", path)?, &path.key("offset"))?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        self.range_end(offset, size, u64::MAX, path)?;
        Ok(Range { offset, size })
    }

    /// Rule 4: listed holes fit the memory and overlap no allocation and no other hole.
    fn check_holes(
        &self,
        listed: Vec<Range>,
        path: &Path,
        capacity: u64,
        allocations: &[Allocation],
        allocation_order: &[usize],
    ) -> Result<Vec<Range>> {
        let mut holes = Vec::with_capacity(listed.len());
        for (index, hole) in listed.into_iter().enumerate() {
            self.range_end(hole.offset, hole.size, capacity, &path.index(index))?;
            holes.push((hole, index));
        }
        holes.sort();
        for pair in holes.windows(2) {
            let ((earlier, earlier_index), (later, later_index)) = (pair[0], pair[1]);
            if earlier.end() > later.offset {
                let (first, second) = (
                    earlier_index.min(later_index),
                    earlier_index.max(later_index),
                );
                return Err(self.error(
                    &path.index(second),
                    format!(
                        "hole overlaps {path}[{first}] ([{}, {}) and [{}, {}))",
                        later.offset,
                        later.end(),
                        earlier.offset,
                        earlier.end()
                    ),
                ));
            }
        }
        // Both lists are sorted by offset: walk them together.
        let mut next = 0;
        for &(hole, hole_index) in &holes {
            while next < allocation_order.len()
                && allocations[allocation_order[next]].range().end() <= hole.offset
            {
                next += 1;
            }
            // Allocations that end after the hole starts; any of them starting before its end overlaps.
            for &index in &allocation_order[next..] {
                let allocation = &allocations[index];
                if allocation.offset >= hole.end() {
                    break;
                }
                if allocation.range().end() > hole.offset {
                    let allocations_path = path_sibling_allocations(path);
                    return Err(self.error(
                        &path.index(hole_index),
                        format!(
                            "hole [{}, {}) overlaps {allocations_path}[{index}] (uid {}, [{}, {}))",
                            hole.offset,
                            hole.end(),
                            format_id(allocation.uid),
                            allocation.offset,
                            allocation.range().end()
                        ),
                    ));
                }
            }
        }
        Ok(holes.into_iter().map(|(hole, _)| hole).collect())
    }

    fn failed_request(&mut self, value: &Json, path: &Path) -> Result<FailedRequest> {
        let map = self.object(value, path)?;
        self.check_known(
            map,
            &["size", "alignment", "kind", "provenance", "time_ns", "note"],
            path,
        )?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        let alignment = self.optional_size(map, "alignment", path)?;
        let kind = self.optional_sym(map, "kind", path)?;
        let provenance = self.optional_sym(map, "provenance", path)?;
        let time_ns = self.optional_integer(map, "time_ns", path, 0)?;
        let note = self.optional_sym(map, "note", path)?;
        Ok(FailedRequest {
            size,
            alignment,
            kind,
            provenance,
            time_ns,
            note,
        })
    }

    /// Rule 5 for allocations: uids are unique across all memories of the dump.
    fn check_unique_uids(&self, memories: &[Memory]) -> Result<()> {
        let mut uids: Vec<(u64, usize, usize)> = memories
            .iter()
            .enumerate()
            .flat_map(|(m, memory)| {
                memory
                    .allocations
                    .iter()
                    .enumerate()
                    .map(move |(a, allocation)| (allocation.uid, m, a))
            })
            .collect();
        uids.sort_unstable();
        for pair in uids.windows(2) {
            if pair[0].0 == pair[1].0 {
                let (uid, m1, a1) = pair[0];
                let (_, m2, a2) = pair[1];
                let memories_path = Path::Root.key("memories");
                let second_memory = memories_path.index(m2);
                let second_allocations = second_memory.key("allocations");
                let second = second_allocations.index(a2);
                return Err(self.error(
                    &second.key("uid"),
                    format!(
                        "uid {} is also used by memories[{m1}].allocations[{a1}]",
                        format_id(uid)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn annotations(&mut self, top: &JsonObject<'_>) -> Result<Annotations> {
        let root = Path::Root;
        let version = self.version(top)?;
        self.check_known(
            top,
            &["format", "version", "run", "strings", "objects", "links"],
            &root,
        )?;
        self.string_table(top)?;
        let run_path = root.key("run");
        let run = self.object(self.required(top, "run", &root)?, &run_path)?;
        self.check_known(run, &["id"], &run_path)?;
        let run_id = self.owned_text(self.required(run, "id", &run_path)?, &run_path.key("id"))?;
        if run_id.is_empty() {
            return Err(self.error(&run_path.key("id"), "expected a non-empty run id"));
        }
        let objects = match self.optional(top, "objects") {
            Some(value) => self.objects(value, &root.key("objects"))?,
            None => Vec::new(),
        };
        let mut links = Vec::new();
        if let Some(value) = self.optional(top, "links") {
            let links_path = root.key("links");
            for (index, value) in self.array(value, &links_path)?.iter().enumerate() {
                let path = links_path.index(index);
                let map = self.object(value, &path)?;
                self.check_known(map, &["uid", "field", "object"], &path)?;
                let uid = self.id(self.required(map, "uid", &path)?, &path.key("uid"))?;
                let field = self.optional_integer(map, "field", &path, 0)?;
                let object = self.sym(self.required(map, "object", &path)?, &path.key("object"))?;
                links.push(Link { uid, field, object });
            }
        }
        Ok(Annotations {
            version,
            strings: std::mem::take(&mut self.strings),
            run_id,
            objects,
            links,
        })
    }
}

/// `memories[1].holes` → `memories[1].allocations`, for messages that name an allocation.
fn path_sibling_allocations(holes_path: &Path) -> String {
    match holes_path {
        Path::Key(parent, _) => parent.key("allocations").to_string(),
        other => other.to_string(),
    }
}

/// Parse an id written as text: `0x` + 1..=16 hex digits, or 1..=16 bare hex digits.
pub fn parse_id_text(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    // Every allocation has one or two ids: a plain loop is quicker than from_str_radix here.
    let mut value = 0u64;
    for byte in digits.bytes() {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            b'A'..=b'F' => byte - b'A' + 10,
            _ => return None,
        };
        value = value << 4 | u64::from(digit);
    }
    Some(value)
}

/// A light RFC 3339 check: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
fn is_rfc3339(text: &str) -> bool {
    crate::units::unix_seconds(text).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_every_accepted_form() {
        assert_eq!(
            parse_id_text("0x1e00000000000003"),
            Some(0x1e00000000000003)
        );
        assert_eq!(parse_id_text("1e00000000000003"), Some(0x1e00000000000003));
        assert_eq!(parse_id_text("0X6A"), Some(0x6a));
        assert_eq!(parse_id_text("0x"), None);
        assert_eq!(parse_id_text(""), None);
        assert_eq!(parse_id_text("0x10000000000000000"), None);
        assert_eq!(parse_id_text("0xg1"), None);
        assert_eq!(parse_id_text("-1"), None);
    }

    #[test]
    fn rfc3339_times() {
        assert!(is_rfc3339("2026-12-01T10:00:01.5Z"));
        assert!(is_rfc3339("2026-12-01T10:00:01Z"));
        assert!(is_rfc3339("2026-12-01T10:00:01+02:00"));
        assert!(!is_rfc3339("2026-12-01"));
        assert!(!is_rfc3339("2026-13-01T10:00:01Z"));
        assert!(!is_rfc3339("2026-12-01T10:00:01."));
        assert!(!is_rfc3339("yesterday at noon!!"));
    }
}
