//! The parts of a document around its memories: the producer, the run, the snapshot, the
//! objects and their `attrs`, and an annotations file.

use crate::dump::json::{Json, Members, Object as JsonObject};
use crate::dump::model::*;
use std::collections::HashMap;

use super::values::{describe, is_rfc3339};
use super::{Parser, Path, MAX_STRING_BYTES};
use crate::error::Result;

impl Parser<'_> {
    pub(super) fn producer(&mut self, value: &Json) -> Result<Option<Sym>> {
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

    pub(super) fn run(&mut self, value: &Json) -> Result<Run> {
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

    pub(super) fn snapshot(&mut self, value: &Json) -> Result<Snapshot> {
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

    pub(super) fn objects(&mut self, value: &Json, path: &Path) -> Result<Vec<Object>> {
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

    pub(super) fn object_entry(&mut self, value: &Json, path: &Path) -> Result<Object> {
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
    pub(super) fn attrs<'v, M: Members<'v>>(
        &self,
        map: &'v M,
        parent: &Path,
    ) -> Result<Option<String>> {
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

    pub(super) fn annotations(&mut self, top: &JsonObject<'_>) -> Result<Annotations> {
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
