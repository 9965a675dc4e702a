//! The snapshot one Legate report tells: its instances placed (from their addresses when every
//! one has one and none overlaps, else end to end in stand-in places), the bytes reserved beyond
//! them as one `unlisted` allocation, the request, and what the report leaves unknown.

use std::collections::HashMap;

use serde_json::Value;

use super::{bad, Instance, Report};
use crate::dump::write;
use crate::error::Result;
use crate::import::source::{id_text, Found};

/// Where instances lie, when every one has an address and none overlaps another: the largest
/// gap between two of them; `None` otherwise.
fn largest_gap(instances: &[&Instance]) -> Option<u64> {
    let mut ranges: Vec<(u64, u64)> = instances
        .iter()
        .filter_map(|i| Some((i.address?, i.address?.checked_add(i.size)?)))
        .collect();
    if ranges.len() != instances.len() {
        return None;
    }
    ranges.sort_unstable();
    let mut largest = 0;
    for pair in ranges.windows(2) {
        largest = largest.max(pair[1].0.checked_sub(pair[0].1)?);
    }
    Some(largest)
}

/// A stand-in uid for the bytes reserved beyond the instances listed (stable per memory).
fn unlisted_uid(memory: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&[b"unlisted".as_slice(), &memory.to_le_bytes()].concat())
}

/// The snapshot a report tells of.
pub(super) fn snapshot(report: Report, display: &str) -> Result<Found> {
    // An instance listed under several stores is one allocation (its first listing).
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut instances: Vec<Instance> = Vec::new();
    for instance in report.instances {
        match seen.get(&instance.id) {
            Some(&index) => instances[index].multiple = true,
            None => {
                seen.insert(instance.id, instances.len());
                instances.push(instance);
            }
        }
    }
    instances.retain(|instance| instance.size > 0);
    let listed: u64 = instances
        .iter()
        .map(|i| i.size)
        .fold(0, u64::saturating_add);
    let unlisted = report
        .reserved
        .map_or(0, |reserved| reserved.saturating_sub(listed));
    let refs: Vec<&Instance> = instances.iter().collect();
    let gap = largest_gap(&refs);
    let listed_any = !instances.is_empty();
    let addressed = listed_any && gap.is_some();
    let mut unknown: Vec<&'static str> = Vec::new();
    let mut notes = vec!["Legate out-of-memory report".to_string()];
    if report.capacity.is_none() {
        unknown.push("capacity");
        notes.push("capacity not printed".to_string());
    }
    if report.reserved.is_none() {
        unknown.push("allocations");
        notes.push(if report.lists_nothing {
            "this form of the report (Legate before 24.11) does not list what the memory holds"
                .to_string()
        } else {
            "cut off before \"reserving\": the instances it holds are not all known".to_string()
        });
    }
    if (!addressed && !instances.is_empty()) || unlisted > 0 {
        unknown.push("placement");
        notes.push(if unlisted > 0 {
            format!("{unlisted} reserved bytes are not listed as instances: where they lie is not known")
        } else if instances.iter().any(|i| i.address.is_some()) {
            "instance addresses overlap: placement unknown, instances in stand-in places end to end".to_string()
        } else {
            "no addresses printed: placement unknown, instances in stand-in places end to end".to_string()
        });
    } else if addressed {
        notes.push("offsets from the lowest instance address (the memory's base is not printed); the holes may include Legate's eager pool, which the report does not list".to_string());
    }
    let base = instances
        .iter()
        .filter_map(|i| i.address)
        .min()
        .unwrap_or(0);
    let mut next = 0u64;
    let mut allocations = write::Allocations::default();
    // Consumed as they are written: the report's instances and the snapshot's text of a
    // million-instance report are not both held whole.
    for instance in instances {
        let offset = match instance.address {
            Some(address) if addressed => address - base,
            _ => next,
        };
        next = next.max(offset.saturating_add(instance.size));
        let mut attrs = write::Attrs::default();
        if let Some(address) = instance.address {
            attrs.insert("address", Value::from(format!("0x{address:x}")));
        }
        if let Some(store) = &instance.store {
            attrs.insert("store", Value::from(store.as_str()));
        }
        if let Some(elements) = instance.elements {
            attrs.insert("elements", Value::from(elements));
        }
        if instance.multiple {
            attrs.insert("multiple_stores", Value::from(true));
        }
        let mut allocation = write::Allocation::new(
            id_text(instance.id),
            "instance".into(),
            "valid",
            offset,
            instance.size,
        );
        allocation.handle = Some(id_text(instance.id));
        allocation.attrs = attrs;
        allocation.label = instance.store.map(write::Text::from);
        allocation.provenance = instance.provenance.map(write::Text::from);
        allocations.push(&allocation);
    }
    if unlisted > 0 {
        let mut allocation = write::Allocation::new(
            id_text(unlisted_uid(report.memory)),
            "unlisted".into(),
            "valid",
            next,
            unlisted,
        );
        allocation.label = Some("reserved by Legate, not listed in the report".into());
        allocations.push(&allocation);
        next = next.saturating_add(unlisted);
    }
    // The report is printed as the request fails: where, by what it lists, the request would
    // have fitted (a free range as large, all placement known), the failure itself proves the
    // listing short of what the memory held (Legate 26.06 lists no inline mapping among its
    // LogicalStores: "reserving 0 of the available" bytes beside four live 8 MiB mappings).
    // What the memory holds is then unknown, and no verdict is drawn from the listing.
    let placed = (!listed_any || addressed) && unlisted == 0;
    if let (Some(capacity), Some(_), true) = (report.capacity, report.reserved, placed) {
        let largest_free =
            capacity
                .saturating_sub(next)
                .max(if addressed { gap.unwrap_or(0) } else { 0 });
        if report.size > 0 && largest_free >= report.size && !unknown.contains(&"allocations") {
            unknown.push("allocations");
            notes.push(format!(
                "the report lists less than the memory held: by what it lists, a free range of {largest_free} bytes would have held the {}-byte request that failed",
                report.size
            ));
        }
    }
    let capacity = match report.capacity {
        Some(capacity) if capacity > 0 => capacity,
        // Unknown: the stand-in is the least the memory holds (format v1 wants one).
        _ => next.max(1),
    };
    if next > capacity {
        return Err(bad(
            display,
            report.line,
            format!("the instances listed reach {next} bytes past the lowest address, beyond the memory's {capacity} bytes: not a report memstate can place"),
        ));
    }
    let mut memory = write::Memory::new(
        id_text(report.memory),
        report.kind.as_str().into(),
        capacity,
    );
    memory.allocations = allocations;
    memory.unknown = unknown;
    if report.size > 0 {
        let mut asked = report.asked.clone();
        if !report.request_sites.is_empty() {
            asked.push_str(&format!(
                "; the LogicalStore allocated at {}",
                report.request_sites.join(", ")
            ));
        }
        memory.failed_requests.push(write::FailedRequest {
            size: report.size,
            kind: Some("instance".into()),
            time_ns: Some(report.time_ns),
            note: Some(asked.into()),
            provenance: report.provenance.clone().map(write::Text::from),
            ..write::FailedRequest::default()
        });
    }
    Ok(Found {
        calls: Default::default(),
        run: None,
        wall_time: None,
        line: report.line,
        node: report.node,
        time_ns: report.time_ns,
        reason: "oom",
        note: Some(notes.join("; ")),
        memories: vec![memory],
        strings: Vec::new(),
    })
}
