//! One memory and what it holds: its allocations (no two overlapping, all inside the capacity),
//! its listed holes (exactly the free ranges), its failed requests, and uids unique per node.

use std::borrow::Cow;

use super::stream::{self, Listed};
use super::{Parser, Path};
use crate::dump::json::{Json, Object as JsonObject};
use crate::dump::model::*;
use crate::error::Result;

impl Parser<'_> {
    /// One memory, once all of it has been read: its members as trees, its allocations and holes
    /// converted one by one while reading. Checked in the order of the old whole-tree reader.
    pub(super) fn memory(
        &mut self,
        path: &Path,
        members: Vec<(Cow<str>, Json)>,
        allocations: Option<Listed<Allocation>>,
        holes: Option<Listed<Range>>,
    ) -> Result<Memory> {
        let map = JsonObject::new(members);
        if let Some(key) = map.repeated_key() {
            return Err(self.repeated_key_error(path, key));
        }
        self.check_known(
            &map,
            &[
                "id",
                "kind",
                "name",
                "capacity",
                "alignment",
                "allocations",
                "holes",
                "failed_requests",
                "unknown",
                "segments",
                "device_free",
            ],
            path,
        )?;
        let id = self.id(self.required(&map, "id", path)?, &path.key("id"))?;
        let kind = self.sym(self.required(&map, "kind", path)?, &path.key("kind"))?;
        let name = self.optional_sym(&map, "name", path)?;
        let capacity = self.positive_size(
            self.required(&map, "capacity", path)?,
            &path.key("capacity"),
        )?;
        let alignment = self.optional_size(&map, "alignment", path)?;

        let allocations_path = path.key("allocations");
        let allocations = self
            .listed(allocations, &allocations_path, true)?
            .unwrap_or_default();
        for (index, allocation) in allocations.iter().enumerate() {
            self.range_end(
                allocation.offset,
                allocation.size,
                capacity,
                &allocations_path.index(index),
            )?;
        }
        let order = self.check_overlaps(&allocations, &allocations_path)?;

        let holes_path = path.key("holes");
        let listed_holes = match self.listed(holes, &holes_path, false)? {
            Some(holes) => {
                Some(self.check_holes(holes, &holes_path, capacity, &allocations, &order)?)
            }
            None => None,
        };

        let mut failed_requests = Vec::new();
        if let Some(value) = self.optional(&map, "failed_requests") {
            let requests_path = path.key("failed_requests");
            for (index, value) in self.array(value, &requests_path)?.iter().enumerate() {
                failed_requests.push(self.failed_request(value, &requests_path.index(index))?);
            }
        }
        let mut unknown = Unknown::default();
        if let Some(value) = self.optional(&map, "unknown") {
            let unknown_path = path.key("unknown");
            for (index, value) in self.array(value, &unknown_path)?.iter().enumerate() {
                let name = value.as_str().unwrap_or("");
                if unknown.names().contains(&name) {
                    return Err(self.error(
                        &unknown_path.index(index),
                        format!("{name:?} is named more than once"),
                    ));
                }
                if unknown.set(name).is_none() {
                    return Err(self.error(
                        &unknown_path.index(index),
                        format!(
                            "expected one of \"capacity\", \"placement\", \"allocations\", found {}",
                            super::values::describe(value)
                        ),
                    ));
                }
            }
        }
        unknown.holes_listed = listed_holes.is_some();
        let segments = match self.optional(&map, "segments") {
            Some(value) => self.segments(value, &path.key("segments"), capacity)?,
            None => Vec::new(),
        };
        let device_free = self.optional_size(&map, "device_free", path)?;
        Ok(Memory {
            device_free,
            segments,
            unknown,
            id,
            kind,
            name,
            capacity,
            alignment,
            allocations,
            listed_holes,
            failed_requests,
        })
    }

    /// A range's end, refused when it overflows or passes the memory's capacity.
    pub(super) fn range_end(
        &self,
        offset: u64,
        size: u64,
        capacity: u64,
        path: &Path,
    ) -> Result<u64> {
        match offset.checked_add(size) {
            Some(end) if end <= capacity => Ok(end),
            Some(end) => Err(self.error(
                path,
                format!("offset {offset} + size {size} = {end} is past the memory's capacity {capacity}"),
            )),
            None => Err(self.error(path, format!("offset {offset} + size {size} overflows"))),
        }
    }

    /// One allocation (its place against the memory's capacity is checked with the memory).
    pub(super) fn allocation(
        &mut self,
        read: &stream::AllocationFields,
        path: &Path,
    ) -> Result<Allocation> {
        if let Some(value) = &read.not_an_object {
            return Err(self.not_an_object(path, value));
        }
        if let Some(key) = &read.repeated {
            return Err(self.repeated_key_error(path, key));
        }
        let map = read;
        self.check_known(map, &stream::ALLOCATION_KEYS, path)?;
        let uid = self.id(self.required(map, "uid", path)?, &path.key("uid"))?;
        let handle = match self.optional(map, "handle") {
            Some(value) => Some(self.id(value, &path.key("handle"))?),
            None => None,
        };
        let kind = self.sym(self.required(map, "kind", path)?, &path.key("kind"))?;
        let state_path = path.key("state");
        let state_text = self.text(self.required(map, "state", path)?, &state_path)?;
        let state = State::parse(state_text).ok_or_else(|| {
            self.error(
                &state_path,
                format!("expected one of valid, collectable, pending_free, pending_alloc, found {state_text:?}"),
            )
        })?;
        let offset = self.size(self.required(map, "offset", path)?, &path.key("offset"))?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        self.range_end(offset, size, u64::MAX, path)?;
        let alignment = self.optional_size(map, "alignment", path)?;
        let created_ns = self.optional_integer(map, "created_ns", path, 0)?;
        let provenance = self.optional_sym(map, "provenance", path)?;
        let label = self.optional_sym(map, "label", path)?;
        let gc_priority = self.optional_integer(map, "gc_priority", path, i64::MIN)?;
        let mut fields = Vec::new();
        if let Some(value) = self.optional(map, "fields") {
            let fields_path = path.key("fields");
            for (index, value) in self.array(value, &fields_path)?.iter().enumerate() {
                let field_path = fields_path.index(index);
                let field = self.object(value, &field_path)?;
                self.check_known(field, &["id", "size", "object"], &field_path)?;
                let id = self.integer(
                    self.required(field, "id", &field_path)?,
                    &field_path.key("id"),
                    0,
                )?;
                let size = self.optional_size(field, "size", &field_path)?;
                let object = self.sym(
                    self.required(field, "object", &field_path)?,
                    &field_path.key("object"),
                )?;
                fields.push(Field { id, size, object });
            }
        }
        let attrs = self.attrs(map, path)?;
        let stack = match self.optional_integer(map, "stack", path, 0)? {
            None => None,
            Some(index) => Some(u32::try_from(index).map_err(|_| {
                self.error(
                    &path.key("stack"),
                    format!("{index} is no index of the dump's stacks (at most 2^32 - 1)"),
                )
            })?),
        };
        Ok(AllocationParts {
            stack,
            uid,
            handle,
            kind,
            state,
            offset,
            size,
            alignment,
            created_ns,
            provenance,
            label,
            gc_priority,
            fields,
            attrs,
        }
        .into())
    }

    /// Rule 3: allocations may overlap only as a `pending_alloc` over a `pending_free`.
    /// Returns the allocations' indices in offset order, for the hole checks.
    pub(super) fn check_overlaps(
        &self,
        allocations: &[Allocation],
        path: &Path,
    ) -> Result<Vec<usize>> {
        let mut order: Vec<usize> = (0..allocations.len()).collect();
        order.sort_by_key(|&index| {
            (
                allocations[index].offset,
                allocations[index].size,
                allocations[index].uid,
            )
        });
        // Allocations that start before the current one and are not yet over. In a valid memory a
        // byte is covered at most twice, so this stays tiny.
        let mut open: Vec<usize> = Vec::new();
        for &index in &order {
            let current = &allocations[index];
            open.retain(|&other| allocations[other].range().end() > current.offset);
            for &other in &open {
                let earlier = &allocations[other];
                let allowed = matches!(
                    (earlier.state, current.state),
                    (State::PendingAlloc, State::PendingFree)
                        | (State::PendingFree, State::PendingAlloc)
                );
                if !allowed {
                    let (first, second) = if other < index {
                        (other, index)
                    } else {
                        (index, other)
                    };
                    let (a, b) = (&allocations[first], &allocations[second]);
                    return Err(self.error(
                        &path.index(second),
                        format!(
                            "overlaps {path}[{first}]: uid {} ({}, [{}, {})) and uid {} ({}, [{}, {})); only a pending_alloc may overlap a pending_free",
                            format_id(b.uid), b.state, b.offset, b.range().end(),
                            format_id(a.uid), a.state, a.offset, a.range().end(),
                        ),
                    ));
                }
            }
            open.push(index);
        }
        Ok(order)
    }

    /// One listed hole (its place against the memory's capacity is checked with the memory).
    pub(super) fn hole(&mut self, value: &Json, path: &Path) -> Result<Range> {
        let map = self.object(value, path)?;
        self.check_known(map, &["offset", "size"], path)?;
        let offset = self.size(self.required(map, "offset", path)?, &path.key("offset"))?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        self.range_end(offset, size, u64::MAX, path)?;
        Ok(Range { offset, size })
    }

    /// Rule 4: listed holes fit the memory and overlap no allocation and no other hole.
    pub(super) fn check_holes(
        &self,
        listed: Vec<Range>,
        path: &Path,
        capacity: u64,
        allocations: &[Allocation],
        allocation_order: &[usize],
    ) -> Result<Vec<Range>> {
        let mut holes = Vec::with_capacity(listed.len());
        for (index, hole) in listed.into_iter().enumerate() {
            self.range_end(hole.offset, hole.size, capacity, &path.index(index))?;
            holes.push((hole, index));
        }
        holes.sort();
        for pair in holes.windows(2) {
            let ((earlier, earlier_index), (later, later_index)) = (pair[0], pair[1]);
            if earlier.end() > later.offset {
                let (first, second) = (
                    earlier_index.min(later_index),
                    earlier_index.max(later_index),
                );
                return Err(self.error(
                    &path.index(second),
                    format!(
                        "hole overlaps {path}[{first}] ([{}, {}) and [{}, {}))",
                        later.offset,
                        later.end(),
                        earlier.offset,
                        earlier.end()
                    ),
                ));
            }
        }
        // Both lists are sorted by offset: walk them together.
        let mut next = 0;
        for &(hole, hole_index) in &holes {
            while next < allocation_order.len()
                && allocations[allocation_order[next]].range().end() <= hole.offset
            {
                next += 1;
            }
            // Allocations that end after the hole starts; any of them starting before its end overlaps.
            for &index in &allocation_order[next..] {
                let allocation = &allocations[index];
                if allocation.offset >= hole.end() {
                    break;
                }
                if allocation.range().end() > hole.offset {
                    let allocations_path = path_sibling_allocations(path);
                    return Err(self.error(
                        &path.index(hole_index),
                        format!(
                            "hole [{}, {}) overlaps {allocations_path}[{index}] (uid {}, [{}, {}))",
                            hole.offset,
                            hole.end(),
                            format_id(allocation.uid),
                            allocation.offset,
                            allocation.range().end()
                        ),
                    ));
                }
            }
        }
        Ok(holes.into_iter().map(|(hole, _)| hole).collect())
    }

    pub(super) fn failed_request(&mut self, value: &Json, path: &Path) -> Result<FailedRequest> {
        let map = self.object(value, path)?;
        self.check_known(
            map,
            &[
                "size",
                "alignment",
                "kind",
                "provenance",
                "time_ns",
                "note",
                "device_free",
            ],
            path,
        )?;
        let size = self.positive_size(self.required(map, "size", path)?, &path.key("size"))?;
        let alignment = self.optional_size(map, "alignment", path)?;
        let kind = self.optional_sym(map, "kind", path)?;
        let provenance = self.optional_sym(map, "provenance", path)?;
        let time_ns = self.optional_integer(map, "time_ns", path, 0)?;
        let note = self.optional_sym(map, "note", path)?;
        let device_free = self.optional_size(map, "device_free", path)?;
        Ok(FailedRequest {
            device_free,
            size,
            alignment,
            kind,
            provenance,
            time_ns,
            note,
        })
    }

    /// A memory's segments: each inside the capacity, no two overlapping; sorted by offset.
    fn segments(&mut self, value: &Json, path: &Path, capacity: u64) -> Result<Vec<Segment>> {
        let mut segments = Vec::new();
        for (index, value) in self.array(value, path)?.iter().enumerate() {
            let path = path.index(index);
            let map = self.object(value, &path)?;
            self.check_known(
                map,
                &["offset", "size", "address", "pool", "stream", "expandable"],
                &path,
            )?;
            let offset = self.size(self.required(map, "offset", &path)?, &path.key("offset"))?;
            let size = self.positive_size(self.required(map, "size", &path)?, &path.key("size"))?;
            self.range_end(offset, size, capacity, &path)?;
            let address = self.id(self.required(map, "address", &path)?, &path.key("address"))?;
            let pool = self.optional_sym(map, "pool", &path)?;
            let stream = self.optional_integer(map, "stream", &path, 0)?;
            let expandable = match self.optional(map, "expandable") {
                None => false,
                Some(Json::Bool(flag)) => *flag,
                Some(other) => {
                    return Err(self.error(
                        &path.key("expandable"),
                        format!(
                            "expected true or false, found {}",
                            super::values::describe(other)
                        ),
                    ))
                }
            };
            segments.push((
                index,
                Segment {
                    offset,
                    size,
                    address,
                    pool,
                    stream,
                    expandable,
                },
            ));
        }
        segments.sort_by_key(|(_, segment)| segment.offset);
        for pair in segments.windows(2) {
            let ((first, a), (second, b)) = (&pair[0], &pair[1]);
            if a.offset.saturating_add(a.size) > b.offset {
                return Err(self.error(
                    &path.index(*second),
                    format!(
                        "overlaps segment {first} (offset {} + size {} passes offset {})",
                        a.offset, a.size, b.offset
                    ),
                ));
            }
        }
        Ok(segments.into_iter().map(|(_, segment)| segment).collect())
    }

    /// Rule 5 for allocations: uids are unique across all memories of the dump.
    pub(super) fn check_unique_uids(&self, memories: &[Memory]) -> Result<()> {
        let mut uids: Vec<(u64, usize, usize)> = memories
            .iter()
            .enumerate()
            .flat_map(|(m, memory)| {
                memory
                    .allocations
                    .iter()
                    .enumerate()
                    .map(move |(a, allocation)| (allocation.uid, m, a))
            })
            .collect();
        uids.sort_unstable();
        for pair in uids.windows(2) {
            if pair[0].0 == pair[1].0 {
                let (uid, m1, a1) = pair[0];
                let (_, m2, a2) = pair[1];
                let memories_path = Path::Root.key("memories");
                let second_memory = memories_path.index(m2);
                let second_allocations = second_memory.key("allocations");
                let second = second_allocations.index(a2);
                return Err(self.error(
                    &second.key("uid"),
                    format!(
                        "uid {} is also used by memories[{m1}].allocations[{a1}]",
                        format_id(uid)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `memories[1].holes` → `memories[1].allocations`, for messages that name an allocation.
fn path_sibling_allocations(holes_path: &Path) -> String {
    match holes_path {
        Path::Key(parent, _) => parent.key("allocations").to_string(),
        other => other.to_string(),
    }
}
