//! A JSON tree that borrows from the input text, for the reader.
//!
//! `serde_json::Value` allocates a `String` for every key and string and a `BTreeMap` for every
//! object; profiling the import showed that to be most of the reader's time. Dump objects are
//! small (a dozen keys), so here an object is a vector of (key, value) pairs searched linearly,
//! and strings without escapes point into the input. The reader walks this tree by hand to name
//! JSON paths in its errors.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON number as the parser saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A non-negative integer that fits in 64 bits.
    Unsigned(u64),
    /// A negative integer that fits in 64 bits.
    Signed(i64),
    /// A number with a fraction or exponent, or an integer too large for 64 bits.
    Float(f64),
}

impl Number {
    /// A number serde_json read as a float. `-0` is one (no integer type holds it): it is zero.
    pub fn from_f64(value: f64) -> Number {
        if value == 0.0 && value.is_sign_negative() {
            Number::Unsigned(0)
        } else {
            Number::Float(value)
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Unsigned(value) => write!(f, "{value}"),
            Number::Signed(value) => write!(f, "{value}"),
            Number::Float(value) => write!(f, "{value}"),
        }
    }
}

/// An object: its members in the order written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object<'a> {
    members: Vec<(Cow<'a, str>, Json<'a>)>,
}

impl<'a> Object<'a> {
    /// An object of these members, in the order written.
    pub fn new(members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        Object { members }
    }

    /// The value of `key` (the reader refuses objects that repeat a key, see [`Object::repeated_key`]).
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.members
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    /// The first key written twice, if any. Objects are small (a dozen keys), so the pairs are
    /// compared directly, by length first.
    pub fn repeated_key(&self) -> Option<&str> {
        repeated(self.members.iter().map(|(name, _)| name.as_ref()))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(name, _)| name.as_ref())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.members
            .iter()
            .map(|(name, value)| (name.as_ref(), value))
    }
}

/// Members looked up by key: a parsed object, or an object read straight into known fields.
pub trait Members<'a> {
    fn member(&self, key: &str) -> Option<&Json<'a>>;
    /// The first key (in the order written) that is not one of `known`.
    fn unknown_key(&self, known: &[&str]) -> Option<&str>;
}

impl<'a> Members<'a> for Object<'a> {
    fn member(&self, key: &str) -> Option<&Json<'a>> {
        self.get(key)
    }
    fn unknown_key(&self, known: &[&str]) -> Option<&str> {
        self.keys().find(|key| !known.contains(key))
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Json<'a> {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

impl<'a> Json<'a> {
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(object) => Some(object),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Json<'a>>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }

    /// A non-negative integer written without fraction or exponent.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(Number::Unsigned(value)) => Some(*value),
            _ => None,
        }
    }

    /// An integer written without fraction or exponent that fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(Number::Unsigned(value)) => i64::try_from(*value).ok(),
            Json::Number(Number::Signed(value)) => Some(*value),
            _ => None,
        }
    }

    /// The same value as a `serde_json::Value` (for the few places that keep JSON text).
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            Json::Null => serde_json::Value::Null,
            Json::Bool(flag) => serde_json::Value::Bool(*flag),
            Json::Number(Number::Unsigned(value)) => serde_json::Value::from(*value),
            Json::Number(Number::Signed(value)) => serde_json::Value::from(*value),
            Json::Number(Number::Float(value)) => serde_json::Value::from(*value),
            Json::String(text) => serde_json::Value::String(text.to_string()),
            Json::Array(items) => {
                serde_json::Value::Array(items.iter().map(Json::to_value).collect())
            }
            Json::Object(object) => serde_json::Value::Object(
                object
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_value()))
                    .collect(),
            ),
        }
    }
}

/// The first of `keys` that repeats an earlier one.
pub fn repeated<'k>(keys: impl Iterator<Item = &'k str> + Clone) -> Option<&'k str> {
    for (index, key) in keys.clone().enumerate() {
        if keys
            .clone()
            .take(index)
            .any(|earlier| earlier.len() == key.len() && earlier == key)
        {
            return Some(key);
        }
    }
    None
}

/// A string that borrows from the input when it has no escapes.
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(value)))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(value.to_string())))
            }
            fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(value)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct JsonVisitor;
        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
                Ok(Json::Bool(value))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                Ok(Json::Number(Number::Unsigned(value)))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                Ok(Json::Number(if value >= 0 {
                    Number::Unsigned(value as u64)
                } else {
                    Number::Signed(value)
                }))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                Ok(Json::Number(Number::from_f64(value)))
            }
            fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
                Ok(Json::String(Cow::Borrowed(value)))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                Ok(Json::String(Cow::Owned(value.to_string())))
            }
            fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
                Ok(Json::String(Cow::Owned(value)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Text(key)) = map.next_key()? {
                    members.push((key, map.next_value()?));
                }
                Ok(Json::Object(Object { members }))
            }
        }
        deserializer.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_kind_of_value_and_borrows_plain_strings() {
        let text = br#"{"a": [1, -2, 1.5, 18446744073709551616, true, null], "b": "plain", "c": "esc\"aped", "a": 7}"#;
        let json: Json = serde_json::from_slice(text).unwrap();
        let object = json.as_object().unwrap();
        assert_eq!(object.repeated_key(), Some("a"));
        assert_eq!(
            object.get("a").and_then(Json::as_u64),
            Some(7),
            "the last duplicate counts"
        );
        assert!(matches!(
            object.get("b"),
            Some(Json::String(Cow::Borrowed("plain")))
        ));
        assert_eq!(object.get("c").and_then(Json::as_str), Some("esc\"aped"));
        let first = object.iter().next().unwrap().1.as_array().unwrap();
        assert_eq!(first[0].as_u64(), Some(1));
        assert_eq!(first[1].as_i64(), Some(-2));
        assert_eq!(first[1].as_u64(), None);
        assert_eq!(first[2], Json::Number(Number::Float(1.5)));
        assert!(
            matches!(first[3], Json::Number(Number::Float(_))),
            "beyond u64 is not an integer"
        );
        assert_eq!(first[4], Json::Bool(true));
        assert!(first[5].is_null());
        assert_eq!(json.to_value()["b"], serde_json::json!("plain"));
    }
}
