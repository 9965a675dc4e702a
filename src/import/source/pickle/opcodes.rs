//! The opcodes of a pickle of plain data, one at a time: what each pushes, pops or builds on the
//! reader's stack, counted against its budget as it goes. Those that name, build or call an
//! object, and those not known, are refused.

use super::{grow, Entry, Id, Node, Reader, Step, CONTAINER_BYTES};

impl Reader<'_> {
    pub(super) fn run(&mut self) -> Step<Id> {
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
                b'(' => self.stack_push(Entry::Mark)?,
                b'0' => {
                    self.pop(at)?;
                }
                b'1' => {
                    self.since_mark(at)?;
                }
                b'2' => {
                    let top = self.top(at)?;
                    self.stack_push(Entry::Value(top))?;
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
                    self.hold(text.len().saturating_add(CONTAINER_BYTES))?;
                    grow(&mut self.arena.texts);
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
                    self.remember(key, top)?;
                }
                b'g' | b'h' | b'j' => {
                    let key = match opcode {
                        b'g' => String::from_utf8_lossy(self.line()?).parse::<u64>().ok(),
                        b'h' => Some(self.uint(1)?),
                        _ => Some(self.uint(4)?),
                    };
                    match key.and_then(|key| self.recall(key)) {
                        Some(index) => self.stack_push(Entry::Value(index))?,
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
