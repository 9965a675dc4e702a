//! Reading a dump's big arrays one element at a time.
//!
//! A dump is mostly `memories[*].allocations` (and `holes`): tens of thousands of small objects.
//! Building a JSON tree of the whole document first made the tree most of the reader's time and
//! memory. Here serde's visitors walk the top-level object and each memory, and every allocation
//! or hole is read as a small borrowed tree, checked and converted by the [`Parser`] at once, and
//! dropped. Everything else (run, snapshot, objects, ...) is small and kept as trees for the
//! parser's usual walk.
//!
//! Errors inside an array do not stop the reading: the first one is kept and the rest of the
//! array is skipped, so that the parser can still report the document's errors in its usual
//! order (format and version first). A syntax error stops everything, as before.

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::super::model::{Allocation, Memory, Range};
use super::{Parser, Path};
use crate::dump::json::{Json, Members, Number, Text};
use crate::error::Error;

/// An array read element by element, or the value that stood where an array was expected.
pub enum Listed<'de, T> {
    Items { items: Vec<T>, error: Option<Error> },
    Other(Json<'de>),
}

/// The top-level value of a record.
pub enum TopValue<'de> {
    Object {
        /// Members other than `memories`, in order.
        members: Vec<(Cow<'de, str>, Json<'de>)>,
        memories: Option<Listed<'de, Memory>>,
        /// The first key written twice.
        repeated: Option<String>,
    },
    Other(Json<'de>),
}

/// A visitor's answer for values that are not the container it reads: kept as a tree, for the
/// parser's "expected ..., found ..." message (each visitor's `other` says what it makes of it).
macro_rules! other_values {
    () => {
        fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
            Ok(self.other(Json::Bool(value)))
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
            Ok(self.other(Json::Number(if value >= 0 {
                Number::Unsigned(value as u64)
            } else {
                Number::Signed(value)
            })))
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
            Ok(self.other(Json::Number(Number::Unsigned(value))))
        }
        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
            Ok(self.other(Json::Number(Number::from_f64(value))))
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
            Ok(self.other(Json::String(Cow::Owned(value.to_string()))))
        }
        fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
            Ok(self.other(Json::String(Cow::Borrowed(value))))
        }
        fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
            Ok(self.other(Json::String(Cow::Owned(value))))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(self.other(Json::Null))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(self.other(Json::Null))
        }
    };
}

/// A sequence or map where something else was expected, as a tree.
fn seq_tree<'de, A: SeqAccess<'de>>(seq: A) -> Result<Json<'de>, A::Error> {
    Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq))
}

fn map_tree<'de, A: MapAccess<'de>>(map: A) -> Result<Json<'de>, A::Error> {
    Deserialize::deserialize(de::value::MapAccessDeserializer::new(map))
}

/// The top-level object, with `memories` streamed.
pub struct Top<'p, 'f, 'de> {
    pub parser: &'p mut Parser<'f>,
    pub text: &'de str,
}

impl<'de> Top<'_, '_, 'de> {
    fn other(self, value: Json<'de>) -> TopValue<'de> {
        TopValue::Other(value)
    }
}

impl<'de> DeserializeSeed<'de> for Top<'_, '_, 'de> {
    type Value = TopValue<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, '_, 'de> {
    type Value = TopValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a memstate dump (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members: Vec<(Cow<'de, str>, Json<'de>)> = Vec::new();
        let mut memories = None;
        let mut repeated_key: Option<String> = None;
        let mut strings_seen = false;
        while let Some(Text(key)) = map.next_key()? {
            let seen = members.iter().any(|(name, _)| name == &key)
                || (key == "memories" && memories.is_some());
            if seen {
                repeated_key.get_or_insert_with(|| key.to_string());
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if key == "memories" {
                if !strings_seen {
                    // Indices into `strings` need the table: when it comes later, skim for it.
                    if let Some(table) = find_strings(self.text) {
                        self.parser.load_table(&table);
                    }
                }
                memories = Some(map.next_value_seed(Memories {
                    parser: &mut *self.parser,
                })?);
            } else {
                let value: Json<'de> = map.next_value()?;
                if key == "strings" {
                    strings_seen = true;
                    self.parser.load_table(&value);
                }
                members.push((key, value));
            }
        }
        Ok(TopValue::Object {
            members,
            memories,
            repeated: repeated_key,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        seq_tree(seq).map(TopValue::Other)
    }

    other_values!();
}

/// Only the top-level `strings` value of a document (every other value skipped unread); none
/// without reading when the text never mentions the key.
fn find_strings(text: &str) -> Option<Json<'_>> {
    memchr::memmem::find(text.as_bytes(), b"\"strings\"")?;
    struct Find;
    impl<'de> Visitor<'de> for Find {
        type Value = Option<Json<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(Text(key)) = map.next_key()? {
                if key == "strings" {
                    found = Some(map.next_value::<Json<'de>>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.deserialize_map(Find).ok().flatten()
}

/// `memories`: each memory read as it comes and checked at its end.
struct Memories<'p, 'f> {
    parser: &'p mut Parser<'f>,
}

impl Memories<'_, '_> {
    fn other<'de>(self, value: Json<'de>) -> Listed<'de, Memory> {
        Listed::Other(value)
    }
}

impl<'de> DeserializeSeed<'de> for Memories<'_, '_> {
    type Value = Listed<'de, Memory>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Memories<'_, '_> {
    type Value = Listed<'de, Memory>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of memories")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items: Vec<Memory> = Vec::new();
        let mut error = None;
        let mut index = 0;
        loop {
            if error.is_some() {
                if seq.next_element::<IgnoredAny>()?.is_none() {
                    break;
                }
                continue;
            }
            let Some(memory) = seq.next_element_seed(MemorySeed {
                parser: &mut *self.parser,
                index,
            })?
            else {
                break;
            };
            match memory.and_then(|memory| {
                self.parser
                    .check_new_memory_id(&items, &memory, index)
                    .map(|_| memory)
            }) {
                Ok(memory) => items.push(memory),
                Err(failure) => error = Some(failure),
            }
            index += 1;
        }
        Ok(Listed::Items { items, error })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        map_tree(map).map(Listed::Other)
    }

    other_values!();
}

/// One memory: its members, with `allocations` and `holes` streamed.
struct MemorySeed<'p, 'f> {
    parser: &'p mut Parser<'f>,
    index: usize,
}

impl MemorySeed<'_, '_> {
    fn other(self, value: Json) -> Result<Memory, Error> {
        Err(self
            .parser
            .not_an_object(&Path::Root.key("memories").index(self.index), &value))
    }
}

impl<'de> DeserializeSeed<'de> for MemorySeed<'_, '_> {
    type Value = Result<Memory, Error>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MemorySeed<'_, '_> {
    type Value = Result<Memory, Error>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a memory")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members: Vec<(Cow<'de, str>, Json<'de>)> = Vec::new();
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        let mut allocations = None;
        let mut holes = None;
        let mut repeated_key: Option<String> = None;
        while let Some(Text(key)) = map.next_key()? {
            if keys.iter().any(|earlier| earlier == &key) {
                repeated_key.get_or_insert_with(|| key.to_string());
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            match key.as_ref() {
                "allocations" => {
                    let read = Elements {
                        parser: &mut *self.parser,
                        memory: self.index,
                        array: Array::Allocations,
                    };
                    if let ReadElements::Allocations(listed) = map.next_value_seed(read)? {
                        allocations = Some(listed);
                    }
                }
                "holes" => {
                    let read = Elements {
                        parser: &mut *self.parser,
                        memory: self.index,
                        array: Array::Holes,
                    };
                    if let ReadElements::Holes(listed) = map.next_value_seed(read)? {
                        holes = Some(listed);
                    }
                }
                _ => members.push((key.clone(), map.next_value()?)),
            }
            keys.push(key);
        }
        let path = Path::Root.key("memories");
        let path = path.index(self.index);
        if let Some(key) = repeated_key {
            return Ok(Err(self.parser.repeated_key_error(&path, &key)));
        }
        Ok(self.parser.memory(&path, members, allocations, holes))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let value = seq_tree(seq)?;
        Ok(self.other(value))
    }

    other_values!();
}

/// The keys of an allocation object, in the order [`AllocationFields`] keeps their values.
pub const ALLOCATION_KEYS: [&str; 14] = [
    "uid",
    "handle",
    "kind",
    "state",
    "offset",
    "size",
    "alignment",
    "created_ns",
    "provenance",
    "label",
    "gc_priority",
    "fields",
    "attrs",
    "stack",
];

/// One allocation object read straight into its known fields: no list of members to build and
/// search, and the values of unknown keys skipped unread.
pub struct AllocationFields<'de> {
    values: [Option<Json<'de>>; ALLOCATION_KEYS.len()],
    /// The first key that is not an allocation's.
    unknown: Option<Cow<'de, str>>,
    /// The first key written twice.
    pub repeated: Option<Cow<'de, str>>,
    /// What stood where an object was expected.
    pub not_an_object: Option<Json<'de>>,
}

impl<'de> Members<'de> for AllocationFields<'de> {
    fn member(&self, key: &str) -> Option<&Json<'de>> {
        let index = ALLOCATION_KEYS.iter().position(|known| *known == key)?;
        self.values[index].as_ref()
    }
    fn unknown_key(&self, _known: &[&str]) -> Option<&str> {
        self.unknown.as_deref()
    }
}

impl<'de> AllocationFields<'de> {
    fn new() -> Self {
        AllocationFields {
            values: Default::default(),
            unknown: None,
            repeated: None,
            not_an_object: None,
        }
    }

    fn clear(&mut self) {
        self.values.iter_mut().for_each(|value| *value = None);
        self.unknown = None;
        self.repeated = None;
        self.not_an_object = None;
    }
}

/// Reads the next allocation object into a reused [`AllocationFields`] (it is large: filled in
/// place, never moved).
struct Fill<'r, 'de>(&'r mut AllocationFields<'de>);

impl<'de> DeserializeSeed<'de> for Fill<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Fill<'_, 'de> {
    fn other(self, value: Json<'de>) {
        self.0.not_an_object = Some(value);
    }
}

impl<'de> Visitor<'de> for Fill<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an allocation")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let read = self.0;
        let mut unknown_keys: Vec<Cow<'de, str>> = Vec::new();
        while let Some(Text(key)) = map.next_key()? {
            match ALLOCATION_KEYS.iter().position(|known| *known == key) {
                Some(index) if read.values[index].is_none() => {
                    read.values[index] = Some(map.next_value()?)
                }
                Some(_) => {
                    read.repeated.get_or_insert(key);
                    map.next_value::<IgnoredAny>()?;
                }
                None => {
                    if unknown_keys.contains(&key) {
                        read.repeated.get_or_insert(key.clone());
                    } else {
                        read.unknown.get_or_insert(key.clone());
                    }
                    unknown_keys.push(key);
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let value = seq_tree(seq)?;
        self.other(value);
        Ok(())
    }

    other_values!();
}

/// The elements of an array, converted as they are read by `next` (given the array and the
/// element's index; `None` at the end); after the first error the rest is skipped unread.
fn read_elements<'de, A: SeqAccess<'de>, T>(
    mut seq: A,
    mut next: impl FnMut(&mut A, usize) -> Result<Option<Result<T, Error>>, A::Error>,
) -> Result<Listed<'de, T>, A::Error> {
    let mut items = Vec::new();
    let mut error = None;
    loop {
        if error.is_some() {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            continue;
        }
        match next(&mut seq, items.len())? {
            None => break,
            Some(Ok(item)) => items.push(item),
            Some(Err(failure)) => error = Some(failure),
        }
    }
    Ok(Listed::Items { items, error })
}

/// One of a memory's big arrays: `allocations` or `holes`.
#[derive(Clone, Copy, PartialEq)]
enum Array {
    Allocations,
    Holes,
}

/// The elements of one of a memory's big arrays, converted as they are read.
struct Elements<'p, 'f> {
    parser: &'p mut Parser<'f>,
    memory: usize,
    array: Array,
}

/// What [`Elements`] read.
enum ReadElements<'de> {
    Allocations(Listed<'de, Allocation>),
    Holes(Listed<'de, Range>),
}

impl Elements<'_, '_> {
    fn other<'de>(self, value: Json<'de>) -> ReadElements<'de> {
        match self.array {
            Array::Allocations => ReadElements::Allocations(Listed::Other(value)),
            Array::Holes => ReadElements::Holes(Listed::Other(value)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Elements<'_, '_> {
    type Value = ReadElements<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Elements<'_, '_> {
    type Value = ReadElements<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let memories = Path::Root.key("memories");
        let memory = memories.index(self.memory);
        let parser = self.parser;
        match self.array {
            Array::Allocations => {
                let array = memory.key("allocations");
                let mut fields = AllocationFields::new();
                let read = read_elements(seq, |seq, index| {
                    fields.clear();
                    Ok(seq
                        .next_element_seed(Fill(&mut fields))?
                        .map(|()| parser.allocation(&fields, &array.index(index))))
                })?;
                Ok(ReadElements::Allocations(read))
            }
            Array::Holes => {
                let array = memory.key("holes");
                let read = read_elements(seq, |seq, index| {
                    Ok(seq
                        .next_element::<Json<'de>>()?
                        .map(|value| parser.hole(&value, &array.index(index))))
                })?;
                Ok(ReadElements::Holes(read))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        map_tree(map).map(|value| self.other(value))
    }

    other_values!();
}
