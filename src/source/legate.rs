//! Legate's out-of-memory report: what the base mapper logs when an instance cannot be allocated
//! (legate `src/cpp/legate/mapping/detail/base_mapper.cc`, `report_failed_mapping`), in every
//! released form: the iostream one (sizes as plain numbers), the `fmt` one with digit-grouped
//! sizes (`1,048,576`), and instances with or without `at address 0x...`:
//!
//! ```text
//! Failed to allocate N bytes on memory HEX (of kind KIND) for region requirement(s) {..} of Task NAME[PROVENANCE] (UID U)
//!   corresponding to a LogicalStore allocated at SITE
//! There is not enough space because Legate is reserving T of the available C bytes for the following LogicalStores:
//! LogicalStore allocated at SITE:
//!   Instance HEX of size N [at address 0xA ]covering elements DOMAIN [of multiple stores]
//!     created for an operation launched at PROVENANCE
//! ```
//!
//! Each line may carry Realm's log prefix; the lines of one report are those of its node and
//! thread (ranks merged into one log interleave). One report is one snapshot (reason `oom`) of
//! the failed memory: its instances as valid allocations (an instance listed under several stores
//! once), the request as a failed request. The memory's base is not printed: offsets are from the
//! lowest address listed, the absolute address kept in `attrs`; without addresses the instances
//! are placed end to end and the snapshot's note says that offsets are unknown.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::log::{self, LogLine};
use super::{grouped_number, id_text, Found};
use crate::dump::parse::parse_id_text;
use crate::error::{Error, Result};

const FAILED: &str = "Failed to allocate ";

/// Whether a text holds a Legate out-of-memory report.
pub fn looks_like(text: &str) -> bool {
    text.lines()
        .any(|line| line.contains(FAILED) && line.contains(" bytes on memory "))
}

#[derive(Debug, Default)]
struct Instance {
    id: u64,
    size: u64,
    address: Option<u64>,
    store: Option<String>,
    provenance: Option<String>,
    elements: Option<String>,
    multiple: bool,
}

#[derive(Debug)]
struct Report {
    line: usize,
    node: i64,
    time_ns: i64,
    size: u64,
    memory: u64,
    kind: String,
    provenance: Option<String>,
    operation: String,
    request_sites: Vec<String>,
    capacity: Option<u64>,
    store: Option<String>,
    instances: Vec<Instance>,
}

/// The `Failed to allocate` line: size, memory, kind, and what asked.
fn failed_line(message: &str, line: &LogLine, number: usize) -> Option<Report> {
    let rest = &message[message.find(FAILED)? + FAILED.len()..];
    let (size, rest) = rest.split_once(" bytes on memory ")?;
    let size = grouped_number(size.trim())?;
    let (memory, rest) = rest.split_once(" (of kind ")?;
    let memory = parse_id_text(memory.trim())?;
    let (kind, rest) = rest.split_once(')')?;
    let asked = rest
        .trim_start()
        .strip_prefix("for ")
        .unwrap_or(rest)
        .trim();
    // `region requirement(s) {1} of Task NAME[PROVENANCE] (UID 8)`
    let (head, uid) = match asked.rfind(" (UID ") {
        Some(at) => (&asked[..at], asked[at + 6..].trim_end_matches(')')),
        None => (asked, ""),
    };
    let (operation, provenance) = match (head.rfind('['), head.ends_with(']')) {
        (Some(open), true) => (&head[..open], Some(&head[open + 1..head.len() - 1])),
        _ => (head, None),
    };
    let provenance = provenance
        .filter(|provenance| !provenance.is_empty() && *provenance != "unknown provenance")
        .map(str::to_string);
    let operation = if uid.is_empty() {
        operation.to_string()
    } else {
        format!("{operation} (UID {uid})")
    };
    Some(Report {
        line: number,
        node: line.node.unwrap_or(0),
        time_ns: log::time_ns(line.seconds),
        size,
        memory,
        kind: kind.trim().to_string(),
        provenance,
        operation,
        request_sites: Vec::new(),
        capacity: None,
        store: None,
        instances: Vec::new(),
    })
}

/// `Instance HEX of size N [at address 0xA ]covering elements DOMAIN [of multiple stores]`
fn instance_line(text: &str) -> Option<Instance> {
    let rest = text.strip_prefix("Instance ")?;
    let (id, rest) = rest.split_once(" of size ")?;
    let id = parse_id_text(id.trim())?;
    let (size, rest) = match rest.split_once(' ') {
        Some((size, rest)) => (size, rest),
        None => (rest, ""),
    };
    let size = grouped_number(size)?;
    let (address, rest) = match rest.strip_prefix("at address ") {
        Some(rest) => {
            let (address, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            (Some(parse_id_text(address.trim_end_matches(','))?), rest)
        }
        None => (None, rest),
    };
    let rest = rest.trim();
    let (elements, multiple) = match rest.strip_suffix("of multiple stores") {
        Some(elements) => (elements.trim(), true),
        None => (rest, false),
    };
    let elements = elements
        .strip_prefix("covering elements ")
        .unwrap_or(elements)
        .trim();
    Some(Instance {
        id,
        size,
        address,
        elements: (!elements.is_empty()).then(|| elements.to_string()),
        multiple,
        ..Instance::default()
    })
}

/// One line that belongs to an open report.
fn feed(report: &mut Report, message: &str) {
    let text = message.trim();
    const RESERVING: &str = "Legate is reserving ";
    if let Some(at) = text.find(RESERVING) {
        // `T of the available C bytes`
        let rest = &text[at + RESERVING.len()..];
        if let Some((_, after)) = rest.split_once(" of the available ") {
            if let Some((capacity, _)) = after.split_once(" bytes") {
                report.capacity = grouped_number(capacity.trim());
            }
        }
    }
    const CORRESPONDING: &str = "corresponding to a LogicalStore allocated at ";
    if let Some(at) = text.find(CORRESPONDING) {
        let site = &text[at + CORRESPONDING.len()..];
        // A report whose lines were joined goes on with `There is not enough space ...`.
        let site = site
            .split(" There is not enough space")
            .next()
            .unwrap_or(site);
        report.request_sites.push(site.trim().to_string());
        return;
    }
    if let Some(site) = text.strip_prefix("LogicalStore allocated at ") {
        report.store = Some(site.trim_end_matches(':').trim().to_string());
        return;
    }
    if let Some(mut instance) = instance_line(text) {
        instance.store = report.store.clone();
        report.instances.push(instance);
        return;
    }
    if let Some(provenance) = text.strip_prefix("created for an operation launched at ") {
        if let Some(last) = report.instances.last_mut() {
            last.provenance = Some(provenance.trim().to_string());
        }
    }
}

/// The snapshot a report tells of.
fn snapshot(report: Report, display: &str) -> Result<Found> {
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
    let addressed = !instances.is_empty() && instances.iter().all(|i| i.address.is_some());
    let base = instances
        .iter()
        .filter_map(|i| i.address)
        .min()
        .unwrap_or(0);
    let mut notes = Vec::new();
    let mut next = 0u64;
    let mut allocations = Vec::new();
    for instance in &instances {
        let offset = match instance.address {
            Some(address) if addressed => address - base,
            _ => {
                let offset = next;
                next = next.saturating_add(instance.size);
                offset
            }
        };
        let mut attrs = Map::new();
        if let Some(address) = instance.address {
            attrs.insert("address".into(), json!(format!("0x{address:x}")));
        }
        if let Some(store) = &instance.store {
            attrs.insert("store".into(), json!(store));
        }
        if let Some(elements) = &instance.elements {
            attrs.insert("elements".into(), json!(elements));
        }
        if instance.multiple {
            attrs.insert("multiple_stores".into(), json!(true));
        }
        let mut allocation = json!({
            "uid": id_text(instance.id),
            "handle": id_text(instance.id),
            "kind": "instance",
            "state": "valid",
            "offset": offset,
            "size": instance.size,
            "attrs": attrs,
        });
        if let Some(store) = &instance.store {
            allocation["label"] = json!(store);
        }
        if let Some(provenance) = &instance.provenance {
            allocation["provenance"] = json!(provenance);
        }
        allocations.push(allocation);
    }
    if !addressed && !instances.is_empty() {
        notes.push("offsets unknown: the report prints no addresses, so its instances are placed end to end".to_string());
    }
    let end = allocations
        .iter()
        .filter_map(|a| a["offset"].as_u64()?.checked_add(a["size"].as_u64()?))
        .max()
        .unwrap_or(0);
    let capacity = match report.capacity {
        Some(capacity) if capacity > 0 => capacity,
        _ => {
            notes.push("capacity not printed (the report was cut short): taken as the end of its last instance plus the request".to_string());
            end.saturating_add(report.size).max(1)
        }
    };
    if end > capacity {
        return Err(Error::input(
            format!("{display}:{}", report.line),
            "",
            format!("the instances listed reach {end} bytes past the lowest address, beyond the memory's {capacity} bytes: not a report memstate can place"),
        ));
    }
    let mut request = json!({
        "size": report.size,
        "kind": "instance",
        "time_ns": report.time_ns,
    });
    let mut asked = report.operation.clone();
    if !report.request_sites.is_empty() {
        asked.push_str(&format!(
            "; the LogicalStore allocated at {}",
            report.request_sites.join(", ")
        ));
    }
    request["note"] = json!(asked);
    if let Some(provenance) = &report.provenance {
        request["provenance"] = json!(provenance);
    }
    if report.size == 0 {
        request = Value::Null;
    }
    let mut memory = json!({
        "id": id_text(report.memory),
        "kind": report.kind,
        "capacity": capacity,
        "allocations": allocations,
    });
    if !request.is_null() {
        memory["failed_requests"] = json!([request]);
    }
    notes.insert(0, "Legate out-of-memory report".to_string());
    Ok(Found {
        line: report.line,
        node: report.node,
        time_ns: report.time_ns,
        reason: "oom",
        note: Some(notes.join("; ")),
        memories: vec![memory],
    })
}

/// Every report of a log, in file order.
pub fn read(text: &str, display: &str) -> Result<Vec<Found>> {
    let mut reports: Vec<Report> = Vec::new();
    let mut open: HashMap<(Option<i64>, Option<String>), usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = log::parse(raw);
        let key = (line.node, line.thread.map(str::to_string));
        if line.message.contains(FAILED) {
            if let Some(mut report) = failed_line(line.message, &line, index + 1) {
                // A report whose lines were joined into one goes on on this line (`feed` finds
                // its parts anywhere in a line).
                feed(&mut report, line.message);
                open.insert(key, reports.len());
                reports.push(report);
                continue;
            }
        }
        if let Some(&report) = open.get(&key) {
            feed(&mut reports[report], line.message);
        }
    }
    reports
        .into_iter()
        .map(|report| snapshot(report, display))
        .collect()
}
