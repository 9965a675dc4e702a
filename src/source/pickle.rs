//! A pickle reader that never runs code: it understands the opcodes that build plain data (None,
//! booleans, integers, floats, strings, bytes, lists, tuples, dicts, sets) and refuses every one
//! that names, builds or calls an object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
//! NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) and any it does not know. A PyTorch allocator snapshot
//! (`torch.cuda.memory._dump_snapshot`) is plain data and never uses them.
//!
//! Values live in an arena and are referred to by index, so a memoized list filled after it was
//! memoized is seen filled wherever it is fetched again, as in Python.

use std::collections::HashMap;

/// One value of the arena.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

/// A parsed pickle: its arena and the index of its top value.
#[derive(Debug)]
pub struct Pickle {
    nodes: Vec<Node>,
    pub root: usize,
}

impl Pickle {
    pub fn node(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    /// A dict's value for a string key.
    pub fn get(&self, dict: usize, key: &str) -> Option<usize> {
        match &self.nodes[dict] {
            Node::Dict(items) => items.iter().find_map(|(k, v)| match &self.nodes[*k] {
                Node::Str(text) if text == key => Some(*v),
                _ => None,
            }),
            _ => None,
        }
    }

    pub fn int(&self, index: usize) -> Option<i128> {
        match &self.nodes[index] {
            Node::Int(value) => Some(*value),
            Node::Bool(value) => Some(i128::from(*value)),
            Node::Float(value) if value.fract() == 0.0 && value.abs() < 9.0e18 => {
                Some(*value as i128)
            }
            _ => None,
        }
    }

    pub fn str(&self, index: usize) -> Option<&str> {
        match &self.nodes[index] {
            Node::Str(text) => Some(text),
            _ => None,
        }
    }

    /// A list's or tuple's items.
    pub fn items(&self, index: usize) -> Option<&[usize]> {
        match &self.nodes[index] {
            Node::List(items) | Node::Tuple(items) => Some(items),
            _ => None,
        }
    }
}

enum Entry {
    Mark,
    Value(usize),
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
    nodes: Vec<Node>,
    stack: Vec<Entry>,
    memo: HashMap<u64, usize>,
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

    fn push(&mut self, node: Node) {
        self.nodes.push(node);
        self.stack.push(Entry::Value(self.nodes.len() - 1));
    }

    fn pop(&mut self, at: usize) -> Step<usize> {
        match self.stack.pop() {
            Some(Entry::Value(index)) => Ok(index),
            _ => self.fail(at, "a value was expected on the stack"),
        }
    }

    fn top(&self, at: usize) -> Step<usize> {
        match self.stack.last() {
            Some(Entry::Value(index)) => Ok(*index),
            _ => self.fail(at, "a value was expected on the stack"),
        }
    }

    /// The values above the topmost mark, the mark removed.
    fn since_mark(&mut self, at: usize) -> Step<Vec<usize>> {
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

    fn text(&self, at: usize, bytes: &[u8]) -> Step<String> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => self.fail(at, "a string is not UTF-8"),
        }
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

    fn extend(&mut self, at: usize, container: usize, values: Vec<usize>) -> Step<()> {
        match &mut self.nodes[container] {
            Node::List(items) => items.extend(values),
            Node::Dict(items) => {
                if !values.len().is_multiple_of(2) {
                    return self.fail(at, "SETITEMS with an odd number of values");
                }
                items.extend(values.chunks(2).map(|pair| (pair[0], pair[1])));
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

    fn run(&mut self) -> Step<usize> {
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
                b'N' => self.push(Node::None),
                0x88 => self.push(Node::Bool(true)),
                0x89 => self.push(Node::Bool(false)),
                b'J' => {
                    let value = self.uint(4)? as u32 as i32;
                    self.push(Node::Int(i128::from(value)));
                }
                b'K' => {
                    let value = self.uint(1)?;
                    self.push(Node::Int(i128::from(value)));
                }
                b'M' => {
                    let value = self.uint(2)?;
                    self.push(Node::Int(i128::from(value)));
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
                    self.push(Node::Int(value));
                }
                b'G' => {
                    let bytes = self.take(8)?;
                    let mut array = [0u8; 8];
                    array.copy_from_slice(bytes);
                    self.push(Node::Float(f64::from_be_bytes(array)));
                }
                b'I' | b'L' => {
                    let line = self.line()?;
                    let text = String::from_utf8_lossy(line)
                        .trim_end_matches('L')
                        .to_string();
                    let node = match text.as_str() {
                        "00" => Node::Bool(false),
                        "01" => Node::Bool(true),
                        number => match number.parse::<i128>() {
                            Ok(value) => Node::Int(value),
                            Err(_) => return self.fail(at, "an integer that does not read"),
                        },
                    };
                    self.push(node);
                }
                b'F' => {
                    let line = self.line()?;
                    match String::from_utf8_lossy(line).parse::<f64>() {
                        Ok(value) => self.push(Node::Float(value)),
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
                    let bytes = self.take(length)?.to_vec();
                    let text = self.text(at, &bytes)?;
                    self.push(Node::Str(text));
                }
                b'V' => {
                    let line = self.line()?.to_vec();
                    let text = self.text(at, &line)?;
                    self.push(Node::Str(text));
                }
                b'C' | b'B' | 0x8e | b'U' | b'T' | 0x96 => {
                    let width = match opcode {
                        b'C' | b'U' => 1,
                        b'B' | b'T' => 4,
                        _ => 8,
                    };
                    let length = self.length(width)?;
                    let bytes = self.take(length)?.to_vec();
                    self.push(Node::Bytes(bytes));
                }
                b'}' => self.push(Node::Dict(Vec::new())),
                b']' => self.push(Node::List(Vec::new())),
                b')' => self.push(Node::Tuple(Vec::new())),
                0x8f => self.push(Node::List(Vec::new())), // EMPTY_SET, kept as a list
                b'd' => {
                    let values = self.since_mark(at)?;
                    self.push(Node::Dict(Vec::new()));
                    let dict = self.top(at)?;
                    self.extend(at, dict, values)?;
                }
                b'l' => {
                    let values = self.since_mark(at)?;
                    self.push(Node::List(values));
                }
                b't' | 0x91 => {
                    let values = self.since_mark(at)?;
                    self.push(Node::Tuple(values));
                }
                0x85..=0x87 => {
                    let count = usize::from(opcode - 0x84);
                    let mut values = Vec::with_capacity(count);
                    for _ in 0..count {
                        values.push(self.pop(at)?);
                    }
                    values.reverse();
                    self.push(Node::Tuple(values));
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
                    self.extend(at, dict, values)?;
                }
                b'p' | b'q' | b'r' | 0x94 => {
                    let key = match opcode {
                        b'p' => String::from_utf8_lossy(self.line()?).parse::<u64>().ok(),
                        b'q' => Some(self.uint(1)?),
                        b'r' => Some(self.uint(4)?),
                        _ => Some(self.memo.len() as u64),
                    };
                    let Some(key) = key else {
                        return self.fail(at, "a memo key that does not read");
                    };
                    let top = self.top(at)?;
                    self.memo.insert(key, top);
                }
                b'g' | b'h' | b'j' => {
                    let key = match opcode {
                        b'g' => String::from_utf8_lossy(self.line()?).parse::<u64>().ok(),
                        b'h' => Some(self.uint(1)?),
                        _ => Some(self.uint(4)?),
                    };
                    match key.and_then(|key| self.memo.get(&key).copied()) {
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

/// Read a pickle of plain data.
pub fn read(bytes: &[u8]) -> std::result::Result<Pickle, PickleError> {
    let mut reader = Reader {
        bytes,
        at: 0,
        nodes: Vec::new(),
        stack: Vec::new(),
        memo: HashMap::new(),
    };
    let root = reader.run()?;
    Ok(Pickle {
        nodes: reader.nodes,
        root,
    })
}
