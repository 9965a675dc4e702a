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
mod opcodes;

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
    indexed: HashMap<u32, Index<'b>>,
}

/// The keys of one long dict, borrowed from the pickle's bytes (never copied): each key value
/// hashed once however often the dict repeats it through the memo, so that building an index
/// costs at most the pickle's own bytes.
#[derive(Debug, Default)]
struct Index<'b> {
    keys: HashMap<&'b str, Id>,
    /// Whether some key is a copied string (line form, or bytes that were not UTF-8), not
    /// indexed: a key not found is then looked for among all of them.
    copied_keys: bool,
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
            Node::Dict(at) => {
                if let Some(index) = self.indexed.get(&at) {
                    if let Some(&value) = index.keys.get(key) {
                        return Some(value);
                    }
                    if !index.copied_keys {
                        return None;
                    }
                }
                self.arena.dicts[at as usize]
                    .iter()
                    .find_map(|&(k, v)| self.is(k, key).then_some(v))
            }
            _ => None,
        }
    }

    /// Whether a value is the string `text`: its length compared first, so that a long string
    /// met again and again (through the memo) costs nothing to tell from a short one.
    pub fn is(&self, index: Id, text: &str) -> bool {
        match self.node(index) {
            Node::Str { start, len } => {
                len as usize == text.len()
                    && self
                        .bytes
                        .get(start as usize..start as usize + len as usize)
                        == Some(text.as_bytes())
            }
            Node::Text(at) => self.arena.texts[at as usize] == text,
            _ => false,
        }
    }

    /// Which of `texts` a value is, if a string and one of them.
    pub fn one_of<'t>(&self, index: Id, texts: &[&'t str]) -> Option<&'t str> {
        texts.iter().copied().find(|text| self.is(index, text))
    }

    /// A string's bytes, UTF-8 checked when it was read (not again).
    pub fn str_bytes(&self, index: Id) -> Option<&[u8]> {
        match self.node(index) {
            Node::Str { start, len } => self
                .bytes
                .get(start as usize..start as usize + len as usize),
            Node::Text(at) => Some(self.arena.texts[at as usize].as_bytes()),
            _ => None,
        }
    }

    /// A string's length in bytes, without reading it.
    pub fn str_len(&self, index: Id) -> Option<usize> {
        match self.node(index) {
            Node::Str { len, .. } => Some(len as usize),
            Node::Text(at) => Some(self.arena.texts[at as usize].len()),
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
                    frames: (folded.frames != Id::MAX).then_some(folded.frames),
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
pub(super) const FOLDED_BYTES: usize = std::mem::size_of::<entry::Folded>();

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

    /// What the stack and the memo hold, in bytes: their tables as allocated, not as filled.
    fn beside_arena(&self) -> usize {
        let stack = self
            .stack
            .capacity()
            .saturating_mul(std::mem::size_of::<Entry>());
        let memo = self
            .memo
            .capacity()
            .saturating_mul(std::mem::size_of::<Id>());
        stack
            .saturating_add(memo)
            .saturating_add(self.sparse.capacity().saturating_mul(SPARSE_BYTES))
    }

    /// Count `bytes` more against the budget, with what the stack and the memo hold; past it,
    /// the pickle is refused.
    fn hold(&mut self, bytes: usize) -> Step<()> {
        self.held = self.held.saturating_add(bytes);
        let total = self.held.saturating_add(self.beside_arena());
        if total > self.budget {
            return self.fail(self.at, over_budget(total, self.bytes.len()));
        }
        Ok(())
    }

    /// Put an entry on the stack (a value, a mark, a value fetched again), counted.
    fn stack_push(&mut self, entry: Entry) -> Step<()> {
        grow(&mut self.stack);
        self.stack.push(entry);
        self.hold(0)
    }

    fn push(&mut self, node: Node) -> Step<()> {
        let Ok(index) = Id::try_from(self.arena.nodes.len()) else {
            return self.fail(self.at, "more values than memstate reads in one pickle");
        };
        self.hold(NODE_BYTES)?;
        grow(&mut self.arena.nodes);
        self.arena.nodes.push(node);
        self.stack_push(Entry::Value(index))
    }

    fn push_sequence(&mut self, mut items: Vec<Id>, tuple: bool) -> Step<()> {
        items.shrink_to_fit();
        self.hold(CONTAINER_BYTES + items.capacity() * ITEM_BYTES)?;
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
                self.hold(std::mem::size_of::<i128>())?;
                grow(&mut self.arena.wide);
                self.arena.wide.push(value);
                self.push(Node::Wide(self.arena.wide.len() as u32 - 1))
            }
        }
    }

    fn remember(&mut self, key: u64, value: Id) -> Step<()> {
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
        self.hold(0)
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
            self.hold(text.len().saturating_add(CONTAINER_BYTES))?;
            grow(&mut self.arena.texts);
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

    /// Add items to a list or dict, counting what its table grows by.
    fn extend(&mut self, at: usize, container: Id, values: Vec<Id>) -> Step<()> {
        match self.arena.nodes[container as usize] {
            Node::List(index) => {
                let list = &mut self.arena.sequences[index as usize];
                let grown = grow_by(list, values.len());
                list.extend(values);
                self.hold(grown * ITEM_BYTES)?;
            }
            Node::Dict(index) => {
                if !values.len().is_multiple_of(2) {
                    return self.fail(at, "SETITEMS with an odd number of values");
                }
                let dict = &mut self.arena.dicts[index as usize];
                let grown = grow_by(dict, values.len() / 2);
                dict.extend(values.chunks(2).map(|pair| (pair[0], pair[1])));
                self.hold(grown * 2 * ITEM_BYTES)?;
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
}

/// Make room for one more item, a tenth more at a time (not doubling, as `push` does): the
/// arena's tables are the largest things a snapshot's reading holds, and a doubled table holds up
/// to twice what it needs. Large blocks are moved by the allocator's remapping, not copied.
fn grow<T>(table: &mut Vec<T>) {
    if table.len() == table.capacity() {
        table.reserve_exact((table.len() / 10).max(1024));
    }
}

/// Make room in a container for `more` items, an eighth more than it holds at least (not
/// doubling: a list of millions filled by one APPENDS after another); how many slots it grew by.
fn grow_by<T>(table: &mut Vec<T>, more: usize) -> usize {
    let before = table.capacity();
    if table.len().saturating_add(more) > before {
        table.reserve_exact(more.max(table.len() / 8));
    }
    table.capacity() - before
}

/// What a key of a dict's index costs (about).
const INDEX_BYTES: usize = 32;

/// What an entry of the memo's table for keys out of order costs (about).
const SPARSE_BYTES: usize = 24;

/// The refusal of a pickle that builds more than its budget.
fn over_budget(built: usize, bytes: usize) -> String {
    let mib = |bytes: usize| bytes >> 20;
    format!(
        "the pickle builds more values than a PyTorch snapshot of its size could ({} MiB of values from {} MiB of pickle; memstate allows three times the pickle plus 32 MiB): not an allocator snapshot",
        mib(built),
        mib(bytes)
    )
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
    let Reader {
        arena,
        replaced,
        mut held,
        budget,
        stack,
        memo,
        sparse,
        ..
    } = reader;
    drop((stack, memo, sparse));
    let mut pickle = Pickle {
        bytes,
        arena,
        root,
        replaced,
        indexed: HashMap::new(),
    };
    let mut indexed = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for (at, entries) in pickle.arena.dicts.iter().enumerate() {
        if entries.len() > INDEXED {
            let mut index = Index::default();
            seen.clear();
            for &(key, value) in entries {
                // A key value met again (the memo) is not read again: the first of equal keys
                // wins, as the linear lookup finds it.
                if !seen.insert(key) {
                    continue;
                }
                match pickle.arena.nodes[key as usize] {
                    Node::Str { start, len } => {
                        let text = bytes
                            .get(start as usize..start as usize + len as usize)
                            .and_then(|text| std::str::from_utf8(text).ok());
                        if let Some(text) = text {
                            index.keys.entry(text).or_insert(value);
                        }
                    }
                    Node::Text(_) => index.copied_keys = true,
                    _ => {}
                }
            }
            held = held.saturating_add(index.keys.capacity().saturating_mul(INDEX_BYTES));
            if held > budget {
                return Err(PickleError {
                    at: bytes.len(),
                    message: over_budget(held, bytes.len()),
                });
            }
            indexed.insert(at as u32, index);
        }
    }
    pickle.indexed = indexed;
    Ok(pickle)
}

#[cfg(test)]
mod tests;
