//! The values of format v1 one at a time: objects and arrays, sizes, integers, ids, strings
//! (with their length limit) and interned texts, each failure naming its JSON path.

use super::{Parser, Path, MAX_STRING_BYTES};
use crate::dump::json::{Json, Members, Number, Object as JsonObject};
use crate::dump::model::*;
use crate::error::{Error, Result};

/// How a value looks, for "expected X, found Y" messages.
pub(super) fn describe(value: &Json) -> String {
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

impl Parser<'_> {
    pub(super) fn error(&self, path: &Path, message: impl Into<String>) -> Error {
        Error::input(self.file, path.to_string(), message)
    }

    pub(super) fn object<'v>(
        &self,
        value: &'v Json<'v>,
        path: &Path,
    ) -> Result<&'v JsonObject<'v>> {
        let object = value
            .as_object()
            .ok_or_else(|| self.not_an_object(path, value))?;
        match object.repeated_key() {
            Some(key) => Err(self.repeated_key_error(path, key)),
            None => Ok(object),
        }
    }

    pub(super) fn not_an_object(&self, path: &Path, value: &Json) -> Error {
        self.error(
            path,
            format!("expected an object, found {}", describe(value)),
        )
    }

    /// An object that writes a key twice: readers disagree on which one counts, so it is refused.
    pub(super) fn repeated_key_error(&self, path: &Path, key: &str) -> Error {
        self.error(
            &path.key(key),
            format!("the key {key:?} is written more than once in this object"),
        )
    }

    pub(super) fn array<'v>(&self, value: &'v Json<'v>, path: &Path) -> Result<&'v Vec<Json<'v>>> {
        value.as_array().ok_or_else(|| {
            self.error(
                path,
                format!("expected an array, found {}", describe(value)),
            )
        })
    }

    pub(super) fn required<'v, M: Members<'v>>(
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
    pub(super) fn optional<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        key: &str,
    ) -> Option<&'v Json<'v>> {
        map.member(key).filter(|value| !value.is_null())
    }

    /// In strict mode, refuse keys the format does not define at this level.
    pub(super) fn check_known<'v, M: Members<'v>>(
        &self,
        map: &M,
        known: &[&str],
        path: &Path,
    ) -> Result<()> {
        if !self.options.strict {
            return Ok(());
        }
        match map.unknown_key(known) {
            Some(key) => Err(self.error(&path.key(key), "unknown field (refused in strict mode)")),
            None => Ok(()),
        }
    }

    /// A size or offset: a non-negative JSON integer below 2^63.
    pub(super) fn size(&self, value: &Json, path: &Path) -> Result<u64> {
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

    pub(super) fn positive_size(&self, value: &Json, path: &Path) -> Result<u64> {
        match self.size(value, path)? {
            0 => Err(self.error(path, "expected a size above 0, found 0")),
            size => Ok(size),
        }
    }

    pub(super) fn optional_size<'v, M: Members<'v>>(
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
    pub(super) fn integer(&self, value: &Json, path: &Path, min: i64) -> Result<i64> {
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

    pub(super) fn optional_integer<'v, M: Members<'v>>(
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
    pub(super) fn id(&self, value: &Json, path: &Path) -> Result<u64> {
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
    pub(super) fn check_length(&self, text: &str, path: &Path) -> Result<()> {
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
    pub(super) fn text<'v>(&'v self, value: &'v Json<'v>, path: &Path) -> Result<&'v str> {
        let text = self.text_of_any_length(value, path)?;
        self.check_length(text, path)?;
        Ok(text)
    }

    pub(super) fn text_of_any_length<'v>(
        &'v self,
        value: &'v Json<'v>,
        path: &Path,
    ) -> Result<&'v str> {
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

    pub(super) fn owned_text(&self, value: &Json, path: &Path) -> Result<String> {
        self.text(value, path).map(str::to_string)
    }

    pub(super) fn optional_owned_text<'v, M: Members<'v>>(
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
    pub(super) fn sym(&mut self, value: &Json, path: &Path) -> Result<Sym> {
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

    pub(super) fn optional_sym<'v, M: Members<'v>>(
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

    pub(super) fn intern(&mut self, text: &str) -> Sym {
        match self.index.get(text) {
            Some(sym) => *sym,
            None => self.intern_owned(text.to_string()),
        }
    }

    pub(super) fn intern_owned(&mut self, text: String) -> Sym {
        if let Some(sym) = self.index.get(&text) {
            return *sym;
        }
        let sym = Sym(self.strings.len() as u32);
        self.strings.push(text.clone());
        self.index.insert(text, sym);
        sym
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
pub(super) fn is_rfc3339(text: &str) -> bool {
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
