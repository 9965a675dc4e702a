//! A Legion Prof profile's header: the file type line, perhaps the producer's version, and one
//! line per record kind declaring its id and fields, ended by an empty line. Legion writes it in
//! `LegionProfBinarySerializer::writePreamble` (runtime/legion/legion_profiling_serializer.cc):
//!
//! ```text
//! FileType: BinaryLegionProf v: 1.0                      (legion-24.03.0 .. legion-25.06.0)
//! FileType: BinaryLegionProf v: 1011                     (Legate 26.06's Legion, legion-25.12.0)
//! legion-25.12.0-75-g7b770cff5-dirty                     (the version line, in the latter)
//! MemDesc {id:7, mem_id:MemID:8, kind:MemKind:4, capacity:unsigned long long:8}
//! ...
//! ```
//!
//! A field is `name:type:size`: the size in bytes, or -1 for a NUL-terminated string. Three types
//! are sized by what came before them rather than by the header: `array` (2 x max_dim values of
//! the declared size) and `point` (max_dim values), max_dim from the `MaxDimDesc` record; `uuid`
//! (as many bytes as the `uuid_size` field before it says).
//!
//! One field is not always there: in the profiles of Legate 26.06 (Legion 25.12),
//! `PhysicalInstanceUsage` declares `mode:unsigned:4, redop:unsigned:4`, but `redop` is written
//! only when `mode` is 4 (a reduction privilege): the records hold 60 bytes after their id where
//! the header adds up to 64, and Legion Prof's own reader (`parse_privilege_mode`) reads a
//! reduction id only after mode 4. A `redop` field right after a `mode` field is read that way.

use std::collections::HashMap;
use std::io::BufRead;

/// The first bytes of every profile.
pub const MAGIC: &[u8] = b"FileType: BinaryLegionProf";

/// The longest header line read, and the longest header (Legate 26.06's is 9 KB: a header of
/// 1 MiB is a hundred times that, and what its layouts take stays within a few tens of MiB).
const MAX_LINE: usize = 64 << 10;
const MAX_HEADER: u64 = 1 << 20;

/// How a field's bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// `size` bytes, little-endian (an integer when 1 to 8 bytes, else skipped).
    Fixed,
    /// Bytes up to and with a NUL.
    Text,
    /// 2 x max_dim values of `size` bytes.
    Array,
    /// max_dim values of `size` bytes.
    Point,
    /// `size` bytes: how many bytes the next `uuid` field holds.
    UuidSize,
    /// As many bytes as the `uuid_size` field before it said.
    Uuid,
    /// `redop` right after a privilege `mode`: written only when that mode is 4 (reduce).
    Reduction,
}

/// One field as the header declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub type_name: String,
    pub kind: FieldKind,
    pub size: usize,
}

/// One record kind: its name and its fields in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub name: String,
    pub fields: Vec<Field>,
}

impl Layout {
    /// The place of the field named `name`.
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|field| field.name == name)
    }
}

/// What the header says.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// After `v: ` on the first line.
    pub version: String,
    /// The producer's own version line, when the header has one (`legion-25.12.0-...`).
    pub producer: Option<String>,
    /// By record id.
    pub layouts: HashMap<u32, Layout>,
    /// Its length in bytes, with the empty line that ends it: where the records start.
    pub length: u64,
}

impl Header {
    /// The id and layout of the record kind named `name`.
    #[cfg(test)]
    pub fn named(&self, name: &str) -> Option<(u32, &Layout)> {
        self.layouts
            .iter()
            .find(|(_, layout)| layout.name == name)
            .map(|(id, layout)| (*id, layout))
    }
}

/// One line, without its newline; `None` at the end of the input. A line longer than
/// [`MAX_LINE`] is an error (a header has none).
fn line(reader: &mut dyn BufRead) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    loop {
        let available = reader
            .fill_buf()
            .map_err(|error| crate::import::input::describe_io(&error))?;
        if available.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        match memchr::memchr(b'\n', available) {
            Some(end) => {
                line.extend_from_slice(&available[..end]);
                reader.consume(end + 1);
                return Ok(Some(line));
            }
            None => {
                let taken = available.len();
                line.extend_from_slice(available);
                reader.consume(taken);
            }
        }
        if line.len() > MAX_LINE {
            return Err(format!("a header line is longer than {MAX_LINE} bytes"));
        }
    }
}

/// Read the header, leaving `reader` at the first record. The error says which line and what.
pub fn read(reader: &mut dyn BufRead) -> Result<Header, String> {
    let mut header = Header::default();
    let first = line(reader)?.unwrap_or_default();
    header.length = first.len() as u64 + 1;
    let version = first
        .strip_prefix(MAGIC)
        .and_then(|rest| rest.strip_prefix(b" v: "))
        .ok_or("header line 1: not `FileType: BinaryLegionProf v: ...`")?;
    header.version = String::from_utf8_lossy(version).trim().to_string();
    let mut number = 1;
    loop {
        number += 1;
        let Some(text) = line(reader)? else {
            return Err(format!(
                "the file ends inside its header (line {number}), before the empty line that ends it"
            ));
        };
        header.length += text.len() as u64 + 1;
        if header.length > MAX_HEADER {
            return Err(format!("its header is longer than {MAX_HEADER} bytes"));
        }
        let text = String::from_utf8_lossy(&text);
        let text = text.trim_end_matches('\r');
        if text.is_empty() {
            break;
        }
        match record_format(text) {
            Ok((id, layout)) => {
                if let Some(earlier) = header.layouts.insert(id, layout) {
                    return Err(format!(
                        "header line {number}: record id {id} is declared twice (also by {})",
                        earlier.name
                    ));
                }
            }
            // The producer's version line comes before the first record format.
            Err(_)
                if header.layouts.is_empty()
                    && header.producer.is_none()
                    && !text.contains('{') =>
            {
                header.producer = Some(text.to_string());
            }
            Err(why) => return Err(format!("header line {number}: {why}")),
        }
    }
    if header.layouts.is_empty() {
        return Err("its header declares no record".to_string());
    }
    Ok(header)
}

/// `Name {id:N, field:type:size, ...}` as an id and a layout.
fn record_format(text: &str) -> Result<(u32, Layout), String> {
    let (name, rest) = text
        .split_once(" {")
        .ok_or_else(|| format!("{text:?} is not `Name {{id:N, field:type:size, ...}}`"))?;
    let inner = rest
        .strip_suffix('}')
        .ok_or_else(|| format!("{text:?} does not end with `}}`"))?;
    let mut items = inner.split(", ");
    let id = items
        .next()
        .and_then(|item| item.strip_prefix("id:"))
        .and_then(|id| id.trim().parse::<u32>().ok())
        .ok_or_else(|| format!("{name}: no `id:N` first"))?;
    let mut fields: Vec<Field> = Vec::new();
    for item in items {
        let (head, size) = item
            .rsplit_once(':')
            .ok_or_else(|| format!("{name}: field {item:?} is not `name:type:size`"))?;
        let (field, type_name) = head
            .split_once(':')
            .ok_or_else(|| format!("{name}: field {item:?} is not `name:type:size`"))?;
        let size: i64 = size
            .trim()
            .parse()
            .map_err(|_| format!("{name}: field {field} has size {size:?}, not a number"))?;
        let kind = match (type_name, size) {
            (_, -1) => FieldKind::Text,
            ("array", _) => FieldKind::Array,
            ("point", _) => FieldKind::Point,
            ("uuid_size", _) => FieldKind::UuidSize,
            ("uuid", _) => FieldKind::Uuid,
            _ if field == "redop" && fields.last().is_some_and(|before| before.name == "mode") => {
                FieldKind::Reduction
            }
            _ => FieldKind::Fixed,
        };
        if kind != FieldKind::Text && !(1..=1024).contains(&size) {
            return Err(format!("{name}: field {field} has size {size}"));
        }
        if kind == FieldKind::Uuid
            && fields
                .last()
                .is_none_or(|before| before.kind != FieldKind::UuidSize)
        {
            return Err(format!(
                "{name}: field {field} is a uuid without a uuid_size field before it"
            ));
        }
        if kind == FieldKind::UuidSize && size > 8 {
            return Err(format!(
                "{name}: field {field} is a uuid_size of {size} bytes"
            ));
        }
        fields.push(Field {
            name: field.to_string(),
            type_name: type_name.to_string(),
            kind,
            size: usize::try_from(size).unwrap_or(0),
        });
    }
    Ok((
        id,
        Layout {
            name: name.to_string(),
            fields,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_header_forms_are_read() {
        let old = b"FileType: BinaryLegionProf v: 1.0\nMaxDimDesc {id:8, max_dim:maxdim:4}\n\nrest";
        let mut reader: &[u8] = old;
        let header = read(&mut reader).unwrap();
        assert_eq!(
            (header.version.as_str(), header.producer.as_deref()),
            ("1.0", None)
        );
        assert_eq!(reader, b"rest");
        assert_eq!(header.length, old.len() as u64 - 4);
        let new = b"FileType: BinaryLegionProf v: 1011\nlegion-25.12.0\nProcDesc {id:6, proc_id:ProcID:8, uuid_size:uuid_size:4, cuda_device_uuid:uuid:1}\nProvenance {id:65, provenance:unsigned long long:8, prov:string:-1}\n\n";
        let mut reader: &[u8] = new;
        let header = read(&mut reader).unwrap();
        assert_eq!(header.producer.as_deref(), Some("legion-25.12.0"));
        let (id, provenance) = header.named("Provenance").unwrap();
        assert_eq!(id, 65);
        assert_eq!(provenance.fields[0].type_name, "unsigned long long");
        assert_eq!(provenance.fields[1].kind, FieldKind::Text);
        assert_eq!(
            header.named("ProcDesc").unwrap().1.fields[2].kind,
            FieldKind::Uuid
        );
    }

    #[test]
    fn a_bad_header_is_refused_by_line() {
        for (text, said) in [
            (&b"FileType: Other\n\n"[..], "line 1"),
            (
                b"FileType: BinaryLegionProf v: 1.0\nMemDesc {id:7, mem_id:MemID:8}\n",
                "ends inside its header",
            ),
            (
                b"FileType: BinaryLegionProf v: 1.0\nMemDesc {id:7, mem_id:MemID:x}\n\n",
                "line 2",
            ),
            (
                b"FileType: BinaryLegionProf v: 1.0\nA {id:7, a:u:8}\nB {id:7, b:u:8}\n\n",
                "declared twice",
            ),
        ] {
            let mut reader: &[u8] = text;
            let error = read(&mut reader).unwrap_err();
            assert!(error.contains(said), "{error}");
        }
    }
}
