//! The records after a profile's header, read one at a time by the layouts the header declared:
//! a record is its id (4 bytes, little-endian) and its fields in order. The few records memstate
//! uses are decoded by field name; every other is skipped by its declared sizes, so a release
//! that adds fields or records keeps working. A record id the header did not declare, or a file
//! that ends inside a record, is an error naming the byte offset.

use std::collections::HashMap;
use std::io::BufRead;

use super::header::{FieldKind, Header, Layout};

/// The longest string field read (a backtrace, a provenance): longer is an error, not a buffer
/// that grows with a corrupt file.
const MAX_TEXT: usize = 1 << 20;

/// The records memstate uses, with the places of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Used {
    MaxDim {
        max_dim: usize,
    },
    Machine {
        node_id: usize,
    },
    Memory {
        mem_id: usize,
        kind: usize,
        capacity: usize,
    },
    Instance(InstanceFields),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InstanceFields {
    inst_uid: Option<usize>,
    inst_id: usize,
    mem_id: usize,
    size: usize,
    create: usize,
    ready: Option<usize>,
    destroy: usize,
}

/// A record as memstate reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    MaxDim(u64),
    Machine {
        node: u64,
    },
    Memory {
        id: u64,
        kind: u64,
        capacity: u64,
    },
    Instance(Instance),
    /// Any other, read past.
    Other,
}

/// An instance's life as `InstTimelineInfo` records it (64 bytes: a profile can hold millions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// What names it across snapshots: the unique id of its creation (`inst_uid`) when the
    /// release records one, else Realm's instance id (recycled by Realm after a destroy).
    pub key: u64,
    /// Realm's instance id.
    pub id: u64,
    pub memory: u64,
    pub size: u64,
    /// Nanoseconds since Realm's zero time, as every timestamp of the profile: when it was
    /// asked for, when Realm had placed it (`ready`, the create time in a release without it;
    /// never before `create`), and when it was destroyed.
    pub create: u64,
    pub ready: u64,
    pub destroy: u64,
    /// The byte offset of its record in the (decompressed) file, which names it in messages.
    pub offset: u64,
}
/// What the reader knows of one record id before reading any: its layout, its length when every
/// field has a declared size, and what memstate uses of it.
#[derive(Clone, Copy)]
struct Entry<'h> {
    layout: &'h Layout,
    fixed: Option<usize>,
    used: Option<Used>,
}

/// Record ids below this are looked up in a table, the others in a map.
const TABLE: u32 = 4096;

/// Reads records one at a time.
pub struct Records<'h> {
    table: Vec<Option<Entry<'h>>>,
    large: HashMap<u32, Entry<'h>>,
    /// The byte offset of the next record in the (decompressed) file.
    pub offset: u64,
    max_dim: Option<u64>,
    scratch: Vec<u8>,
    values: Vec<u64>,
}

/// The place of a field `record` needs, which must be an integer of at most 8 bytes.
fn integer(layout: &Layout, name: &str) -> Result<usize, String> {
    let place = layout.field(name).ok_or_else(|| {
        format!(
            "the header declares {} without its field {name}",
            layout.name
        )
    })?;
    let field = &layout.fields[place];
    if field.kind != FieldKind::Fixed || field.size > 8 {
        return Err(format!(
            "the header declares {}.{name} as {}:{}, not an integer of at most 8 bytes",
            layout.name, field.type_name, field.size
        ));
    }
    Ok(place)
}

impl<'h> Records<'h> {
    /// A reader of the records after `header`; an error when a record memstate uses is declared
    /// without a field it needs.
    pub fn new(header: &'h Header) -> Result<Records<'h>, String> {
        let mut table: Vec<Option<Entry<'h>>> = Vec::new();
        let mut large = HashMap::new();
        for (id, layout) in &header.layouts {
            let fixed = layout
                .fields
                .iter()
                .map(|field| match field.kind {
                    FieldKind::Fixed | FieldKind::UuidSize => Some(field.size),
                    _ => None,
                })
                .sum::<Option<usize>>();
            let mut entry = Entry {
                layout,
                fixed,
                used: None,
            };
            let found: Option<Used> = match layout.name.as_str() {
                "MaxDimDesc" => Some(Used::MaxDim {
                    max_dim: integer(layout, "max_dim")?,
                }),
                "MachineDesc" => Some(Used::Machine {
                    node_id: integer(layout, "node_id")?,
                }),
                "MemDesc" => Some(Used::Memory {
                    mem_id: integer(layout, "mem_id")?,
                    kind: integer(layout, "kind")?,
                    capacity: integer(layout, "capacity")?,
                }),
                "InstTimelineInfo" => Some(Used::Instance(InstanceFields {
                    inst_uid: integer(layout, "inst_uid").ok(),
                    inst_id: integer(layout, "inst_id")?,
                    mem_id: integer(layout, "mem_id")?,
                    size: integer(layout, "size")?,
                    create: integer(layout, "create")?,
                    ready: integer(layout, "ready").ok(),
                    destroy: integer(layout, "destroy")?,
                })),
                _ => None,
            };
            entry.used = found;
            if *id < TABLE {
                let at = *id as usize;
                if table.len() <= at {
                    table.resize(at + 1, None);
                }
                table[at] = Some(entry);
            } else {
                large.insert(*id, entry);
            }
        }
        Ok(Records {
            table,
            large,
            offset: header.length,
            max_dim: None,
            scratch: Vec::new(),
            values: Vec::new(),
        })
    }

    /// The next record; `None` at the end of the file, between records.
    pub fn next(&mut self, reader: &mut dyn BufRead) -> Result<Option<Record>, String> {
        self.skip_unused(reader)?;
        let start = self.offset;
        let mut id = [0u8; 4];
        let got = self.fill(reader, &mut id)?;
        if got == 0 {
            return Ok(None);
        }
        if got < 4 {
            return Err(format!(
                "byte offset {start}: the file ends inside a record id (cut short?)"
            ));
        }
        let id = u32::from_le_bytes(id);
        let entry = if id < TABLE {
            self.table.get(id as usize).copied().flatten()
        } else {
            self.large.get(&id).copied()
        };
        let Some(entry) = entry else {
            return Err(format!(
                "byte offset {start}: record id {id} is not declared in the header"
            ));
        };
        let layout = entry.layout;
        self.values.clear();
        if let Some(length) = entry.fixed {
            // Every field sized by the header: skipped whole, or read whole and decoded.
            let cut = || {
                format!(
                    "byte offset {start}: the file ends inside a {} record (cut short?)",
                    layout.name
                )
            };
            if entry.used.is_none() {
                if self.skip(reader, length)? < length {
                    return Err(cut());
                }
                return Ok(Some(Record::Other));
            }
            self.scratch.resize(length, 0);
            let mut bytes = std::mem::take(&mut self.scratch);
            let got = self.fill(reader, &mut bytes)?;
            let mut at = 0;
            for field in &layout.fields {
                let take = field.size.min(8);
                let mut wide = [0u8; 8];
                if let Some(value) = bytes.get(at..at + take) {
                    wide[..take].copy_from_slice(value);
                }
                self.values.push(u64::from_le_bytes(wide));
                at += field.size;
            }
            self.scratch = bytes;
            if got < length {
                return Err(cut());
            }
            return self.decoded(entry.used, start);
        }
        let mut uuid_size: u64 = 0;
        for field in &layout.fields {
            let length = match field.kind {
                FieldKind::Fixed | FieldKind::UuidSize => field.size,
                FieldKind::Reduction if self.values.last() == Some(&4) => field.size,
                FieldKind::Reduction => {
                    self.values.push(0);
                    continue;
                }
                FieldKind::Uuid => usize::try_from(uuid_size).unwrap_or(usize::MAX),
                FieldKind::Array | FieldKind::Point => {
                    let Some(max_dim) = self.max_dim else {
                        return Err(format!(
                            "byte offset {start}: a {} record (its field {} is sized by max_dim) before any MaxDimDesc record",
                            layout.name, field.name
                        ));
                    };
                    let count = if field.kind == FieldKind::Array {
                        2 * max_dim
                    } else {
                        max_dim
                    };
                    usize::try_from(count)
                        .ok()
                        .and_then(|count| count.checked_mul(field.size))
                        .unwrap_or(usize::MAX)
                }
                FieldKind::Text => {
                    self.skip_text(reader).map_err(|why| {
                        format!("byte offset {start}: {}.{}: {why}", layout.name, field.name)
                    })?;
                    self.values.push(0);
                    continue;
                }
            };
            if length > MAX_TEXT {
                return Err(format!(
                    "byte offset {start}: {}.{} would be {length} bytes long",
                    layout.name, field.name
                ));
            }
            self.scratch.resize(length, 0);
            let mut bytes = std::mem::take(&mut self.scratch);
            let got = self.fill(reader, &mut bytes)?;
            self.scratch = bytes;
            if got < length {
                return Err(format!(
                    "byte offset {start}: the file ends inside a {} record (at its field {}; cut short?)",
                    layout.name, field.name
                ));
            }
            let value = if length <= 8 {
                let mut wide = [0u8; 8];
                wide[..length].copy_from_slice(&self.scratch[..length]);
                u64::from_le_bytes(wide)
            } else {
                0
            };
            if field.kind == FieldKind::UuidSize {
                uuid_size = value;
            }
            self.values.push(value);
        }
        self.decoded(entry.used, start)
    }

    /// The record of `id` from the values of its fields just read.
    fn decoded(&mut self, used: Option<Used>, start: u64) -> Result<Option<Record>, String> {
        let value = |place: usize| self.values[place];
        let record = match used.as_ref() {
            None => Record::Other,
            Some(Used::MaxDim { max_dim }) => {
                let max_dim = value(*max_dim);
                if max_dim > 64 {
                    return Err(format!(
                        "byte offset {start}: MaxDimDesc says max_dim {max_dim}"
                    ));
                }
                self.max_dim = Some(max_dim);
                Record::MaxDim(max_dim)
            }
            Some(Used::Machine { node_id }) => Record::Machine {
                node: value(*node_id),
            },
            Some(Used::Memory {
                mem_id,
                kind,
                capacity,
            }) => Record::Memory {
                id: value(*mem_id),
                kind: value(*kind),
                capacity: value(*capacity),
            },
            Some(Used::Instance(fields)) => {
                let id = value(fields.inst_id);
                let create = value(fields.create);
                Record::Instance(Instance {
                    key: fields.inst_uid.map_or(id, value),
                    id,
                    memory: value(fields.mem_id),
                    size: value(fields.size),
                    create,
                    ready: fields.ready.map_or(create, value).max(create),
                    destroy: value(fields.destroy),
                    offset: start,
                })
            }
        };
        Ok(Some(record))
    }

    /// Read past every whole record that memstate does not use and whose fields all have a
    /// declared size, straight from the reader's buffer (most of a profile: tasks, copies,
    /// events); stop at anything else, left for [`Records::next`] to read or refuse.
    fn skip_unused(&mut self, reader: &mut dyn BufRead) -> Result<(), String> {
        loop {
            let available = reader
                .fill_buf()
                .map_err(|error| crate::import::input::describe_io(&error))?;
            let mut at = 0;
            while let Some(id) = available.get(at..at + 4) {
                let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                let entry = if id < TABLE {
                    self.table.get(id as usize).and_then(Option::as_ref)
                } else {
                    self.large.get(&id)
                };
                match entry {
                    Some(Entry {
                        fixed: Some(length),
                        used: None,
                        ..
                    }) if available.len() - at - 4 >= *length => at += 4 + length,
                    _ => break,
                }
            }
            reader.consume(at);
            self.offset += at as u64;
            if at == 0 {
                return Ok(());
            }
        }
    }

    /// Read past `length` bytes; how many there were.
    fn skip(&mut self, reader: &mut dyn BufRead, length: usize) -> Result<usize, String> {
        let mut skipped = 0;
        while skipped < length {
            let available = reader
                .fill_buf()
                .map_err(|error| crate::import::input::describe_io(&error))?
                .len();
            if available == 0 {
                break;
            }
            let take = available.min(length - skipped);
            reader.consume(take);
            skipped += take;
        }
        self.offset += skipped as u64;
        Ok(skipped)
    }

    /// Fill `buffer` as far as the input goes; how many bytes were read.
    fn fill(&mut self, reader: &mut dyn BufRead, buffer: &mut [u8]) -> Result<usize, String> {
        let mut got = 0;
        while got < buffer.len() {
            let available = reader
                .fill_buf()
                .map_err(|error| crate::import::input::describe_io(&error))?;
            if available.is_empty() {
                break;
            }
            let take = available.len().min(buffer.len() - got);
            buffer[got..got + take].copy_from_slice(&available[..take]);
            reader.consume(take);
            got += take;
        }
        self.offset += got as u64;
        Ok(got)
    }

    /// Read past a NUL-terminated string.
    fn skip_text(&mut self, reader: &mut dyn BufRead) -> Result<(), String> {
        let mut length = 0usize;
        loop {
            let available = reader
                .fill_buf()
                .map_err(|error| crate::import::input::describe_io(&error))?;
            if available.is_empty() {
                return Err("the file ends inside this string (cut short?)".to_string());
            }
            match memchr::memchr(0, available) {
                Some(end) => {
                    reader.consume(end + 1);
                    self.offset += end as u64 + 1;
                    return Ok(());
                }
                None => {
                    let taken = available.len();
                    reader.consume(taken);
                    self.offset += taken as u64;
                    length += taken;
                    if length > MAX_TEXT {
                        return Err(format!("a string longer than {MAX_TEXT} bytes"));
                    }
                }
            }
        }
    }
}
