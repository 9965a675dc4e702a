//! A pickle reader that never runs code: it understands the opcodes that build plain data (None,
//! booleans, integers, floats, strings, bytes, lists, tuples, dicts, sets) and refuses every one
//! that names, builds or calls an object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
//! NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) and any it does not know. A PyTorch allocator snapshot
//! (`torch.cuda.memory._dump_snapshot`) is plain data and never uses them.
//!
//! Values live in an arena and are referred to by index, so a memoized list filled after it was
//! memoized is seen filled wherever it is fetched again, as in Python.

use std::collections::HashMap;

mod entry;

use entry::Folded;
pub use entry::TraceEntry;

/// A value's index in the arena.
pub type Id = u32;

/// One value of the arena, 16 bytes: strings and bytes are ranges of the pickle itself (read and
/// checked once, never copied), containers indices into their own tables, so that a snapshot's
/// millions of small values cost little more than the pickle does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An integer wider than 64 bits, in [`Pickle::wide`].
    Wide(u32),
    Float(f64),
    /// Bytes `[start, start + len)` of the pickle, UTF-8.
    Str {
        start: u64,
        len: u32,
    },
    /// A line-form string (`V`), copied (it is rare): its index in [`Pickle::texts`].
    Text(u32),
    Bytes,
    /// Index in [`Pickle::sequences`].
    List(u32),
    Tuple(u32),
    /// Index in [`Pickle::dicts`].
    Dict(u32),
    /// A dict of the shape of an allocator trace entry, folded: index in [`Pickle::entries`].
    Entry(u32),
}

/// The values read: nodes, and the tables their containers, wide integers, copied strings and
/// folded trace entries live in (the parsed pickle's and the reader's, the same).
#[derive(Debug, Default)]
struct Arena {
    nodes: Vec<Node>,
    sequences: Vec<Vec<Id>>,
    dicts: Vec<Vec<(Id, Id)>>,
    wide: Vec<i128>,
    texts: Vec<String>,
    entries: Vec<Folded>,
    /// The `device_free` of folded entries that have one, by entry.
    device_free: HashMap<u32, u64>,
}

/// A parsed pickle: its arena and the index of its top value, over the bytes it was read from.
#[derive(Debug)]
pub struct Pickle<'b> {
    bytes: &'b [u8],
    arena: Arena,
    pub root: Id,
    /// How many strings held bytes that are not UTF-8 (replaced by U+FFFD).
    pub replaced: u64,
    /// The string keys of each dict of more than [`INDEXED`] entries: a key looked up is then
    /// found at once, however often the dict is met (a memoized dict can be met many times).
    indexed: HashMap<u32, HashMap<String, Id>>,
}

/// Dicts longer than this are indexed.
const INDEXED: usize = 32;

impl Pickle<'_> {
    /// How many bytes the pickle was read from.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it was read from no bytes (never: an empty pickle does not parse).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn node(&self, index: Id) -> Node {
        self.arena.nodes[index as usize]
    }

    /// A dict's value for a string key.
    pub fn get(&self, dict: Id, key: &str) -> Option<Id> {
        match self.node(dict) {
            Node::Dict(at) => match self.indexed.get(&at) {
                Some(index) => index.get(key).copied(),
                None => self.arena.dicts[at as usize]
                    .iter()
                    .find_map(|&(k, v)| (self.str(k) == Some(key)).then_some(v)),
            },
            _ => None,
        }
    }

    pub fn int(&self, index: Id) -> Option<i128> {
        match self.node(index) {
            Node::Int(value) => Some(i128::from(value)),
            Node::Wide(at) => Some(self.arena.wide[at as usize]),
            Node::Bool(value) => Some(i128::from(value)),
            Node::Float(value) if value.fract() == 0.0 && value.abs() < 9.0e18 => {
                Some(value as i128)
            }
            _ => None,
        }
    }

    pub fn str(&self, index: Id) -> Option<&str> {
        match self.node(index) {
            Node::Str { start, len } => {
                let bytes = self
                    .bytes
                    .get(start as usize..start as usize + len as usize)?;
                std::str::from_utf8(bytes).ok()
            }
            Node::Text(at) => Some(&self.arena.texts[at as usize]),
            _ => None,
        }
    }

    /// What a value is, for a message: `the float 1.5`, `a string`, `a list`, ...
    pub fn describe(&self, index: Id) -> String {
        match self.node(index) {
            Node::None => "None".to_string(),
            Node::Bool(value) => format!("the boolean {value}"),
            Node::Int(value) => format!("the integer {value}"),
            Node::Wide(at) => format!("the integer {}", self.arena.wide[at as usize]),
            Node::Float(value) => format!("the float {value}"),
            Node::Str { .. } | Node::Text(_) => "a string".to_string(),
            Node::Bytes => "bytes".to_string(),
            Node::List(_) => "a list".to_string(),
            Node::Tuple(_) => "a tuple".to_string(),
            Node::Dict(_) | Node::Entry(_) => "a dict".to_string(),
        }
    }

    /// A folded trace entry.
    pub fn trace_entry(&self, index: Id) -> Option<TraceEntry> {
        match self.node(index) {
            Node::Entry(at) => {
                let folded = self.arena.entries[at as usize];
                Some(TraceEntry {
                    action: folded.action,
                    addr: folded.number(0),
                    size: folded.number(1),
                    time_us: folded.number(2).map(|bits| bits as i64),
                    device_free: folded
                        .number(3)
                        .and_then(|_| self.arena.device_free.get(&at).copied()),
                })
            }
            _ => None,
        }
    }

    /// A list's or tuple's items.
    pub fn items(&self, index: Id) -> Option<&[Id]> {
        match self.node(index) {
            Node::List(at) | Node::Tuple(at) => Some(&self.arena.sequences[at as usize]),
            _ => None,
        }
    }
}

enum Entry {
    Mark,
    Value(Id),
}

/// What went wrong, and at which byte.
#[derive(Debug, Clone, PartialEq)]
pub struct PickleError {
    pub at: usize,
    pub message: String,
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
    arena: Arena,
    /// The highest value the memo refers to: values above it only the stack holds.
    memo_high: Option<Id>,
    stack: Vec<Entry>,
    replaced: u64,
    /// Memo keys as pickles write them, 0, 1, 2, ...: by position; any other in `sparse`.
    memo: Vec<Id>,
    sparse: HashMap<u64, Id>,
    /// About how many bytes the arena holds, kept as values are made, against [`budget`].
    held: usize,
    budget: usize,
}

/// What one value, one container and one container item cost in the arena (about).
pub(super) const NODE_BYTES: usize = 16;
pub(super) const CONTAINER_BYTES: usize = 24;
pub(super) const ITEM_BYTES: usize = 4;
pub(super) const FOLDED_BYTES: usize = 32;

/// The most the arena may hold for a pickle of `bytes` bytes: three times the pickle plus 32 MiB.
/// A PyTorch snapshot holds well under twice its size (its trace entries are folded as they are
/// read); a pickle that builds more (50 MB of EMPTY_LIST opcodes made 2.4 GB of empty lists) is
/// not one, and is refused before it takes the machine's memory.
fn budget(bytes: usize) -> usize {
    bytes.saturating_mul(3).saturating_add(32 << 20)
}

type Step<T> = std::result::Result<T, PickleError>;

impl Reader<'_> {
    fn fail<T>(&self, at: usize, message: impl Into<String>) -> Step<T> {
        Err(PickleError {
            at,
            message: message.into(),
        })
    }

    fn take(&mut self, count: usize) -> Step<&[u8]> {
        let end = self
            .at
            .checked_add(count)
            .filter(|&end| end <= self.bytes.len());
        match end {
            Some(end) => {
                let taken = &self.bytes[self.at..end];
                self.at = end;
                Ok(taken)
            }
            None => self.fail(
                self.at,
                "the pickle ends in the middle of a value (truncated?)",
            ),
        }
    }

    fn uint(&mut self, width: usize) -> Step<u64> {
        let bytes = self.take(width)?;
        let mut value = 0u64;
        for (shift, byte) in bytes.iter().enumerate() {
            value |= u64::from(*byte) << (8 * shift);
        }
        Ok(value)
    }

    fn length(&mut self, width: usize) -> Step<usize> {
        let at = self.at;
        let length = self.uint(width)?;
        if length > (self.bytes.len() - self.at) as u64 {
            return self.fail(
                at,
                format!("a length of {length} bytes runs past the end of the pickle"),
            );
        }
        Ok(length as usize)
    }

    /// Count `bytes` more against the budget; past it, the pickle is refused.
    fn hold(&mut self, bytes: usize) -> Step<()> {
        self.held = self.held.saturating_add(bytes);
        let stack = self
            .stack
            .len()
            .saturating_mul(std::mem::size_of::<Entry>());
        if self.held.saturating_add(stack) > self.budget {
            let mib = |bytes: usize| bytes >> 20;
            return self.fail(
                self.at,
                format!(
                    "the pickle builds more values than a PyTorch snapshot of its size could ({} MiB of values from {} MiB of pickle; memstate allows three times the pickle plus 32 MiB): not an allocator snapshot",
                    mib(self.held.saturating_add(stack)),
                    mib(self.bytes.len())
                ),
            );
        }
        Ok(())
    }

    fn push(&mut self, node: Node) -> Step<()> {
        let Ok(index) = Id::try_from(self.arena.nodes.len()) else {
            return self.fail(self.at, "more values than memstate reads in one pickle");
        };
        self.hold(NODE_BYTES)?;
        grow(&mut self.arena.nodes);
        self.arena.nodes.push(node);
        self.stack.push(Entry::Value(index));
        Ok(())
    }

    fn push_sequence(&mut self, items: Vec<Id>, tuple: bool) -> Step<()> {
        self.hold(CONTAINER_BYTES + items.len() * ITEM_BYTES)?;
        let at = self.arena.sequences.len() as u32;
        grow(&mut self.arena.sequences);
        self.arena.sequences.push(items);
        self.push(if tuple {
            Node::Tuple(at)
        } else {
            Node::List(at)
        })
    }

    fn push_dict(&mut self) -> Step<()> {
        self.hold(CONTAINER_BYTES)?;
        let at = self.arena.dicts.len() as u32;
        grow(&mut self.arena.dicts);
        self.arena.dicts.push(Vec::new());
        self.push(Node::Dict(at))
    }

    fn push_int(&mut self, value: i128) -> Step<()> {
        match i64::try_from(value) {
            Ok(value) => self.push(Node::Int(value)),
            Err(_) => {
                self.arena.wide.push(value);
                self.push(Node::Wide(self.arena.wide.len() as u32 - 1))
            }
        }
    }

    fn remember(&mut self, key: u64, value: Id) {
        self.memo_high = self.memo_high.max(Some(value));
        if key == self.memo.len() as u64 {
            self.sparse.remove(&key);
            grow(&mut self.memo);
            self.memo.push(value);
        } else if key < self.memo.len() as u64 {
            self.memo[key as usize] = value;
        } else {
            self.sparse.insert(key, value);
        }
    }

    fn recall(&self, key: u64) -> Option<Id> {
        match self.memo.get(key as usize) {
            Some(&value) => Some(value),
            None => self.sparse.get(&key).copied(),
        }
    }

    fn pop(&mut self, at: usize) -> Step<Id> {
        match self.stack.pop() {
            Some(Entry::Value(index)) => Ok(index),
            _ => self.fail(at, "a value was expected on the stack"),
        }
    }

    fn top(&self, at: usize) -> Step<Id> {
        match self.stack.last() {
            Some(Entry::Value(index)) => Ok(*index),
            _ => self.fail(at, "a value was expected on the stack"),
        }
    }

    /// The values above the topmost mark, the mark removed.
    fn since_mark(&mut self, at: usize) -> Step<Vec<Id>> {
        let Some(mark) = self
            .stack
            .iter()
            .rposition(|entry| matches!(entry, Entry::Mark))
        else {
            return self.fail(at, "no mark on the stack");
        };
        let values = self
            .stack
            .drain(mark + 1..)
            .filter_map(|entry| match entry {
                Entry::Value(index) => Some(index),
                Entry::Mark => None,
            })
            .collect();
        self.stack.pop();
        Ok(values)
    }

    /// A string of `length` bytes from here: checked UTF-8, kept as its place in the pickle.
    fn string(&mut self, at: usize, length: usize) -> Step<()> {
        let start = self.at;
        let bytes = self.take(length)?;
        if std::str::from_utf8(bytes).is_err() {
            // Python writes a str holding lone surrogates (a file name it could not decode) as
            // bytes that are not UTF-8: kept, those bytes replaced, and counted.
            let text = String::from_utf8_lossy(bytes).into_owned();
            self.replaced += 1;
            self.arena.texts.push(text);
            return self.push(Node::Text(self.arena.texts.len() as u32 - 1));
        }
        let Ok(len) = u32::try_from(length) else {
            return self.fail(at, "a string longer than 4 GiB");
        };
        self.push(Node::Str {
            start: start as u64,
            len,
        })
    }

    fn line(&mut self) -> Step<&[u8]> {
        let start = self.at;
        match memchr::memchr(b'\n', &self.bytes[start..]) {
            Some(length) => {
                self.at = start + length + 1;
                Ok(&self.bytes[start..start + length])
            }
            None => self.fail(start, "the pickle ends in the middle of a line"),
        }
    }

    fn extend(&mut self, at: usize, container: Id, values: Vec<Id>) -> Step<()> {
        self.hold(values.len() * ITEM_BYTES)?;
        match self.arena.nodes[container as usize] {
            Node::List(index) => self.arena.sequences[index as usize].extend(values),
            Node::Dict(index) => {
                if !values.len().is_multiple_of(2) {
                    return self.fail(at, "SETITEMS with an odd number of values");
                }
                self.arena.dicts[index as usize]
                    .extend(values.chunks(2).map(|pair| (pair[0], pair[1])));
            }
            _ => {
                return self.fail(
                    at,
                    "items added to something that is not a list, dict or set",
                )
            }
        }
        Ok(())
    }

    fn run(&mut self) -> Step<Id> {
        loop {
            let at = self.at;
            let opcode = self.take(1)?[0];
            match opcode {
                0x80 => {
                    let protocol = self.take(1)?[0];
                    if protocol > 5 {
                        return self.fail(at, format!("pickle protocol {protocol} is not known"));
                    }
                }
                0x95 => {
                    self.uint(8)?; // FRAME: its length; the frame's bytes follow as usual
                }
                b'.' => return self.pop(at),
                b'(' => self.stack.push(Entry::Mark),
                b'0' => {
                    self.pop(at)?;
                }
                b'1' => {
                    self.since_mark(at)?;
                }
                b'2' => {
                    let top = self.top(at)?;
                    self.stack.push(Entry::Value(top));
                }
                b'N' => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                b'J' => {
                    let value = self.uint(4)? as u32 as i32;
                    self.push(Node::Int(i64::from(value)))?;
                }
                b'K' => {
                    let value = self.uint(1)?;
                    self.push(Node::Int(value as i64))?;
                }
                b'M' => {
                    let value = self.uint(2)?;
                    self.push(Node::Int(value as i64))?;
                }
                0x8a | 0x8b => {
                    let length = self.length(if opcode == 0x8a { 1 } else { 4 })?;
                    if length > 16 {
                        return self.fail(at, "an integer wider than 128 bits");
                    }
                    let bytes = self.take(length)?;
                    let mut value: i128 = 0;
                    for (shift, byte) in bytes.iter().enumerate() {
                        value |= i128::from(*byte) << (8 * shift);
                    }
                    if length > 0 && length < 16 && bytes[length - 1] & 0x80 != 0 {
                        value -= 1i128 << (8 * length);
                    }
                    self.push_int(value)?;
                }
                b'G' => {
                    let bytes = self.take(8)?;
                    let mut array = [0u8; 8];
                    array.copy_from_slice(bytes);
                    self.push(Node::Float(f64::from_be_bytes(array)))?;
                }
                b'I' | b'L' => {
                    let line = self.line()?;
                    let text = String::from_utf8_lossy(line)
                        .trim_end_matches('L')
                        .to_string();
                    match text.as_str() {
                        "00" => self.push(Node::Bool(false))?,
                        "01" => self.push(Node::Bool(true))?,
                        number => match number.parse::<i128>() {
                            Ok(value) => self.push_int(value)?,
                            Err(_) => return self.fail(at, "an integer that does not read"),
                        },
                    }
                }
                b'F' => {
                    let line = self.line()?;
                    match String::from_utf8_lossy(line).parse::<f64>() {
                        Ok(value) => self.push(Node::Float(value))?,
                        Err(_) => return self.fail(at, "a float that does not read"),
                    }
                }
                0x8c | b'X' | 0x8d => {
                    let width = match opcode {
                        0x8c => 1,
                        b'X' => 4,
                        _ => 8,
                    };
                    let length = self.length(width)?;
                    self.string(at, length)?;
                }
                b'V' => {
                    let line = self.line()?;
                    let text = String::from_utf8_lossy(line).into_owned();
                    self.replaced += u64::from(std::str::from_utf8(line).is_err());
                    self.arena.texts.push(text);
                    self.push(Node::Text(self.arena.texts.len() as u32 - 1))?;
                }
                b'C' | b'B' | 0x8e | b'U' | b'T' | 0x96 => {
                    let width = match opcode {
                        b'C' | b'U' => 1,
                        b'B' | b'T' => 4,
                        _ => 8,
                    };
                    let length = self.length(width)?;
                    self.take(length)?;
                    self.push(Node::Bytes)?;
                }
                b'}' => self.push_dict()?,
                b']' => self.push_sequence(Vec::new(), false)?,
                b')' => self.push_sequence(Vec::new(), true)?,
                0x8f => self.push_sequence(Vec::new(), false)?, // EMPTY_SET, kept as a list
                b'd' => {
                    let values = self.since_mark(at)?;
                    self.push_dict()?;
                    let dict = self.top(at)?;
                    self.extend(at, dict, values)?;
                }
                b'l' => {
                    let values = self.since_mark(at)?;
                    self.push_sequence(values, false)?;
                }
                b't' | 0x91 => {
                    let values = self.since_mark(at)?;
                    self.push_sequence(values, true)?;
                }
                0x85..=0x87 => {
                    let count = usize::from(opcode - 0x84);
                    let mut values = Vec::with_capacity(count);
                    for _ in 0..count {
                        values.push(self.pop(at)?);
                    }
                    values.reverse();
                    self.push_sequence(values, true)?;
                }
                b'a' => {
                    let value = self.pop(at)?;
                    let list = self.top(at)?;
                    self.extend(at, list, vec![value])?;
                }
                b'e' | 0x90 => {
                    let values = self.since_mark(at)?;
                    let list = self.top(at)?;
                    self.extend(at, list, values)?;
                }
                b's' => {
                    let value = self.pop(at)?;
                    let key = self.pop(at)?;
                    let dict = self.top(at)?;
                    self.extend(at, dict, vec![key, value])?;
                }
                b'u' => {
                    let values = self.since_mark(at)?;
                    let dict = self.top(at)?;
                    if !self.fold(dict, &values) {
                        self.extend(at, dict, values)?;
                    }
                }
                b'p' | b'q' | b'r' | 0x94 => {
                    let key = match opcode {
                        b'p' => String::from_utf8_lossy(self.line()?).parse::<u64>().ok(),
                        b'q' => Some(self.uint(1)?),
                        b'r' => Some(self.uint(4)?),
                        // Python's: the memo's length, every key stored so far counted once.
                        _ => Some((self.memo.len() + self.sparse.len()) as u64),
                    };
                    let Some(key) = key else {
                        return self.fail(at, "a memo key that does not read");
                    };
                    let top = self.top(at)?;
                    self.remember(key, top);
                }
                b'g' | b'h' | b'j' => {
                    let key = match opcode {
                        b'g' => String::from_utf8_lossy(self.line()?).parse::<u64>().ok(),
                        b'h' => Some(self.uint(1)?),
                        _ => Some(self.uint(4)?),
                    };
                    match key.and_then(|key| self.recall(key)) {
                        Some(index) => self.stack.push(Entry::Value(index)),
                        None => return self.fail(at, "a memo entry fetched before it was stored"),
                    }
                }
                b'c' | 0x93 | b'R' | b'b' | b'i' | b'o' | 0x81 | 0x92 | 0x82 | 0x83 | 0x84
                | b'P' | b'Q' | 0x97 | 0x98 => {
                    let name = match opcode {
                        b'c' => "GLOBAL",
                        0x93 => "STACK_GLOBAL",
                        b'R' => "REDUCE",
                        b'b' => "BUILD",
                        b'i' => "INST",
                        b'o' => "OBJ",
                        0x81 => "NEWOBJ",
                        0x92 => "NEWOBJ_EX",
                        0x82..=0x84 => "EXT",
                        b'P' | b'Q' => "PERSID",
                        _ => "an out-of-band buffer",
                    };
                    return self.fail(at, format!("the pickle uses {name}, which builds or calls objects; refused (an allocator snapshot never does, and memstate never runs a pickle's code)"));
                }
                other => {
                    return self.fail(at, format!("unknown pickle opcode 0x{other:02x}; refused"));
                }
            }
        }
    }
}

/// Make room for one more item, a tenth more at a time (not doubling, as `push` does): the
/// arena's tables are the largest things a snapshot's reading holds, and a doubled table holds up
/// to twice what it needs. Large blocks are moved by the allocator's remapping, not copied.
fn grow<T>(table: &mut Vec<T>) {
    if table.len() == table.capacity() {
        table.reserve_exact((table.len() / 10).max(1024));
    }
}

/// Read a pickle of plain data.
pub fn read(bytes: &[u8]) -> std::result::Result<Pickle<'_>, PickleError> {
    let mut reader = Reader {
        bytes,
        at: 0,
        arena: Arena::default(),
        memo_high: None,
        stack: Vec::new(),
        replaced: 0,
        memo: Vec::new(),
        sparse: HashMap::new(),
        held: 0,
        budget: budget(bytes.len()),
    };
    let root = reader.run()?;
    let mut pickle = Pickle {
        bytes,
        arena: reader.arena,
        root,
        replaced: reader.replaced,
        indexed: HashMap::new(),
    };
    let mut indexed = HashMap::new();
    for (at, entries) in pickle.arena.dicts.iter().enumerate() {
        if entries.len() > INDEXED {
            let mut index = HashMap::with_capacity(entries.len());
            for &(key, value) in entries {
                if let Some(key) = pickle.str(key) {
                    // The first of equal keys wins, as the linear lookup finds it.
                    index.entry(key.to_string()).or_insert(value);
                }
            }
            indexed.insert(at as u32, index);
        }
    }
    pickle.indexed = indexed;
    Ok(pickle)
}

#[cfg(test)]
mod tests;
