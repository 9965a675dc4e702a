//! The difference between two snapshots: which allocations appeared, disappeared or changed
//! (state, place or size), matched by their memory's handle and their uid.

use serde::Serialize;

use super::AllocationInfo;
use crate::dump::State;

/// How an allocation differs between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Appeared,
    Disappeared,
    /// Its state, place or size changed.
    Changed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Appeared => "appeared",
            ChangeKind::Disappeared => "disappeared",
            ChangeKind::Changed => "changed",
        }
    }
}

/// An allocation of one snapshot, keyed for a diff by its memory's handle and its uid.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub handle: String,
    pub allocation: AllocationInfo,
}

/// How an allocation differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub change: ChangeKind,
    pub handle: String,
    pub uid: String,
    pub kind: String,
    pub provenance: Option<String>,
    pub size: u64,
    pub offset: u64,
    pub state_before: Option<State>,
    pub state_after: Option<State>,
}

/// Allocations that appeared, disappeared or changed (state, place or size) from `before` to
/// `after`, matched by memory handle and uid; sorted by handle, offset and uid.
pub fn diff(before: &[Placed], after: &[Placed]) -> Vec<Change> {
    use std::collections::BTreeMap;
    // Keyed by reference: a diff of two large snapshots (200,000 allocations each) spent a
    // third of its time copying every handle, uid and allocation into these maps.
    fn index(placed: &[Placed]) -> BTreeMap<(&str, &str), &AllocationInfo> {
        placed
            .iter()
            .map(|one| {
                (
                    (one.handle.as_str(), one.allocation.uid.as_str()),
                    &one.allocation,
                )
            })
            .collect()
    }
    let (old, new) = (index(before), index(after));
    let change = |kind: ChangeKind,
                  handle: &str,
                  shown: &AllocationInfo,
                  before: Option<&AllocationInfo>,
                  after: Option<&AllocationInfo>| Change {
        change: kind,
        handle: handle.to_string(),
        uid: shown.uid.clone(),
        kind: shown.kind.clone(),
        provenance: shown.provenance.clone(),
        size: shown.size,
        offset: shown.offset,
        state_before: before.map(|allocation| allocation.state),
        state_after: after.map(|allocation| allocation.state),
    };
    let mut changes = Vec::new();
    for (key, allocation) in &old {
        if !new.contains_key(key) {
            changes.push(change(
                ChangeKind::Disappeared,
                key.0,
                allocation,
                Some(allocation),
                None,
            ));
        }
    }
    for (key @ (handle, _), allocation) in &new {
        match old.get(key) {
            None => changes.push(change(
                ChangeKind::Appeared,
                handle,
                allocation,
                None,
                Some(allocation),
            )),
            Some(earlier)
                if (earlier.state, earlier.offset, earlier.size)
                    != (allocation.state, allocation.offset, allocation.size) =>
            {
                changes.push(change(
                    ChangeKind::Changed,
                    handle,
                    allocation,
                    Some(earlier),
                    Some(allocation),
                ))
            }
            Some(_) => {}
        }
    }
    changes.sort_by(|a, b| {
        (a.handle.as_str(), a.offset, a.uid.as_str()).cmp(&(
            b.handle.as_str(),
            b.offset,
            b.uid.as_str(),
        ))
    });
    changes
}
