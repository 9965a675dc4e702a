//! Legate's out-of-memory report: what the base mapper logs when an instance cannot be allocated
//! (`report_failed_mapping`), in every released form. Read line by line; every line may carry
//! Realm's log prefix or not (a report pasted into an issue), and any other output may surround
//! it. The forms (quoted with their releases in `tests/it/sources.rs`):
//!
//! ```text
//! legate.core 23.x (one message, `%llx` memory id, the kind's description after a colon):
//! Mapper LIB on Node N failed to allocate N bytes on memory HEX (of kind KIND: DESC) for region requirement I of Task NAME[PROV] (UID U).
//! This means Legate was unable to reserve ouf of its memory pool ...
//! legate 24.03-24.06 (the same through LEGATE_ABORT, the memory id in decimal):
//! Legate called abort at FILE:LINE in report_failed_mapping_(): Mapper LIB on Node N failed to allocate ...
//! legate 24.11-25.08 (one logger line each), 25.10+ (fmt, sizes digit-grouped `1,048,576`):
//! Failed to allocate N bytes on memory HEX (of kind KIND) for region requirement(s) {0, 1} of Task NAME[PROV] (UID U)
//!   corresponding to a LogicalStore allocated at SITE
//! NOTE: Rerun with LEGATE_CONFIG="--provenance" to get more information on allocation sites.   (26.01+)
//! There is not enough space because Legate is reserving T of the available C bytes[ (minus the eager pool allocation)] for the following LogicalStores:
//! LogicalStore allocated at SITE:
//!   Instance HEX of size N covering elements DOMAIN [of multiple stores]                     (to 25.10)
//!   Instance HEX at address HEX of size N covering elements DOMAIN [of multiple stores]      (26.01+)
//!     created for an operation launched at PROV
//! ```
//!
//! The lines of one report are those of its node and thread (ranks merged into one log
//! interleave); lines without a prefix go with the report last read. A report's parts are found
//! anywhere in a line, so a copy that joined two lines into one reads the same.
//!
//! One report is one snapshot (reason `oom`) of the failed memory: its instances as valid
//! allocations (an instance listed under several stores once), the request as a failed request.
//! Only what the report prints is claimed; the rest is written as unknown (format v1's
//! `unknown`): the capacity without `of the available C bytes`; the placement without addresses
//! (or with addresses that overlap), the instances then in stand-in places end to end; the
//! allocations when the report is cut off before `reserving T`. Bytes reserved (`T`) beyond the
//! instances listed are one allocation of kind `unlisted`, placed nowhere known. The memory's base
//! is not printed: offsets are from the lowest address, the address kept in `attrs`.

use std::collections::HashMap;

mod snapshot;

use snapshot::snapshot;

use super::log::{self, LogLine};
use super::{grouped_number, Found, Kind, LineReader, Source};
use crate::error::{Error, Result};

/// The report's first line, as every release words it (`Failed` or `failed`).
const HEADER: &str = "ailed to allocate ";
const ON_MEMORY: &str = " bytes on memory ";

pub struct Legate;

impl Source for Legate {
    fn kind(&self) -> Kind {
        Kind::LegateOom
    }
    fn name(&self) -> &'static str {
        "legate-oom"
    }
    fn described(&self) -> &'static str {
        "a Legate out-of-memory report (no \"failed to allocate N bytes on memory M\" line)"
    }
    fn line_reader(&self) -> Option<Box<dyn LineReader>> {
        Some(Box::<Reader>::default())
    }
}

#[derive(Debug, Default, Clone)]
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
    asked: String,
    request_sites: Vec<String>,
    /// The 23.x-24.06 form (`Mapper NAME on Node N failed to allocate`), which lists nothing
    /// the memory holds.
    lists_nothing: bool,
    reserved: Option<u64>,
    capacity: Option<u64>,
    store: Option<String>,
    instances: Vec<Instance>,
}

/// The parts a report line holds, by the words that start them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    RequestSite,
    Note,
    Reserving,
    Store,
    Instance,
    CreatedFor,
    Advice,
}

const PARTS: &[(&str, Part)] = &[
    (
        "corresponding to a LogicalStore allocated at ",
        Part::RequestSite,
    ),
    ("NOTE: Rerun with", Part::Note),
    (
        "There is not enough space because Legate is reserving ",
        Part::Reserving,
    ),
    ("LogicalStore allocated at ", Part::Store),
    ("Instance ", Part::Instance),
    ("created for an operation launched at ", Part::CreatedFor),
    ("This means Legate was unable", Part::Advice),
];

/// Where each part starts in a text, in order: (start of its words, its text after them).
fn parts(text: &str) -> Vec<(usize, Part, &str)> {
    let mut found: Vec<(usize, usize, Part)> = Vec::new();
    for &(words, part) in PARTS {
        for (at, _) in text.match_indices(words) {
            let before = &text[..at];
            let ok = match part {
                Part::Store => !before.ends_with("corresponding to a "),
                Part::Instance => {
                    (before.is_empty() || before.ends_with(char::is_whitespace))
                        && text[at + words.len()..].starts_with(|c: char| c.is_ascii_hexdigit())
                }
                _ => true,
            };
            if ok {
                found.push((at, words.len(), part));
            }
        }
    }
    found.sort_by_key(|&(at, _, _)| at);
    let mut out = Vec::with_capacity(found.len());
    for (index, &(at, length, part)) in found.iter().enumerate() {
        let end = found.get(index + 1).map_or(text.len(), |next| next.0);
        out.push((at, part, &text[at + length..end]));
    }
    out
}

/// A memory id as the releases print it: hex (`%llx`, `{:x}`, `std::hex`, maybe `0x`), or, in
/// 24.03-24.06, decimal. A Realm memory id has its type tag (0x1e) in the top bits, so a decimal
/// one has 19 or 20 digits and a hex one at most 16.
fn memory_id(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return hex_id(hex);
    }
    if text.len() > 16 && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text.parse().ok();
    }
    hex_id(text)
}

fn hex_id(text: &str) -> Option<u64> {
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

/// The number a text starts with (digit-grouped or not), and the rest.
fn leading_number(text: &str) -> Option<(u64, &str)> {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '\''))
        .unwrap_or(text.len());
    let digits = text[..end].trim_end_matches([',', '\'']);
    Some((grouped_number(digits)?, &text[digits.len()..]))
}

/// What is wrong with a size that is not one: too many digits for 64 bits, or no number.
fn not_a_size(text: &str) -> &'static str {
    let text = text.trim();
    let grouped = !text.is_empty()
        && text.starts_with(|c: char| c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '\'');
    if grouped {
        "is past 2^64"
    } else {
        "is not a number"
    }
}

/// A figure at the start of `text`: `None` when there is none, an error naming `what` when
/// digits are there but no 64-bit number.
fn reported_number<'t>(
    text: &'t str,
    what: &str,
    display: &str,
    line: usize,
) -> Result<Option<(u64, &'t str)>> {
    let word = text.split_whitespace().next().unwrap_or("");
    match leading_number(text) {
        Some(found) => Ok(Some(found)),
        None if word.starts_with(|c: char| c.is_ascii_digit()) => Err(bad(
            display,
            line,
            format!("a Legate report's {what} {word:?} {}", not_a_size(word)),
        )),
        None => Ok(None),
    }
}

/// Which field of an instance line [`instance`] could not read.
fn instance_problem(text: &str) -> String {
    let text = text.trim_start();
    let id = text.split(' ').next().unwrap_or("");
    if hex_id(id).is_none() {
        return format!("its id {id:?} is not a 64-bit hex id");
    }
    if let Some((_, after)) = text.split_once("at address ") {
        let address = after.split(' ').next().unwrap_or("").trim_end_matches(',');
        if hex_id(address).is_none() {
            return format!("its address {address:?} is not a 64-bit hex address");
        }
    }
    let size = text
        .split_once("of size ")
        .map_or("", |(_, after)| after.split(' ').next().unwrap_or(""));
    format!("its size {size:?} {}", not_a_size(size))
}

fn bad(display: &str, line: usize, message: impl Into<String>) -> Error {
    Error::whole_input(format!("{display}:{line}"), message)
}

/// The report's first line: size, memory, kind, what asked, the node `on Node N` names.
fn header(
    message: &str,
    line: &LogLine,
    number: usize,
    display: &str,
) -> Result<Option<(Report, usize)>> {
    let Some(at) = message.find(HEADER) else {
        return Ok(None);
    };
    let rest = &message[at + HEADER.len()..];
    let Some((size, rest)) = rest.split_once(ON_MEMORY) else {
        return Ok(None);
    };
    let size = grouped_number(size.trim()).ok_or_else(|| {
        bad(
            display,
            number,
            format!(
                "a Legate report's request size {:?} {}",
                size.trim(),
                not_a_size(size)
            ),
        )
    })?;
    let id_end = rest.find([' ', '(', '.']).unwrap_or(rest.len());
    let memory = memory_id(&rest[..id_end]).ok_or_else(|| {
        bad(
            display,
            number,
            format!(
                "a Legate report's memory {:?} is not a memory id",
                &rest[..id_end]
            ),
        )
    })?;
    let rest = &rest[id_end..];
    let (kind, asked) = match rest.trim_start().strip_prefix("(of kind ") {
        Some(rest) => {
            let end = rest.find([':', ')']).unwrap_or(rest.len());
            let asked = rest
                .find(") for ")
                .map_or("", |at| &rest[at + ") for ".len()..]);
            (rest[..end].trim(), asked)
        }
        None => ("", ""),
    };
    // What asked ends where the next part (a joined line) or Legate's advice starts.
    let asked_end = parts(asked).first().map_or(asked.len(), |&(at, _, _)| at);
    let asked = asked[..asked_end].trim().trim_end_matches('.');
    let head = match asked.rfind(" (UID ") {
        Some(at) => &asked[..at],
        None => asked,
    };
    let provenance = match (head.rfind('['), head.ends_with(']')) {
        (Some(open), true) => Some(&head[open + 1..head.len() - 1]),
        _ => None,
    }
    .filter(|provenance| !provenance.is_empty() && *provenance != "unknown provenance")
    .map(str::to_string);
    let node = line.node.or_else(|| {
        let before = &message[..at];
        let after = &before[before.rfind(" on Node ")? + " on Node ".len()..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    let report = Report {
        line: number,
        node: node.unwrap_or(0),
        time_ns: log::time_ns(line.seconds),
        size,
        memory,
        kind: if kind.is_empty() { "unknown" } else { kind }.to_string(),
        provenance,
        asked: asked.to_string(),
        request_sites: Vec::new(),
        lists_nothing: message[..at].ends_with('f') && message[..at].contains("Mapper "),
        reserved: None,
        capacity: None,
        store: None,
        instances: Vec::new(),
    };
    let tail = parts(&message[at..])
        .first()
        .map_or(message.len(), |&(start, _, _)| at + start);
    Ok(Some((report, tail)))
}

/// `HEX [at address HEX] of size N covering elements DOMAIN [of multiple stores]`, after `Instance `.
fn instance(text: &str) -> Option<Instance> {
    let id_end = text.find(' ')?;
    let id = hex_id(&text[..id_end])?;
    let mut rest = text[id_end..].trim_start();
    let mut address = None;
    if let Some(after) = rest.strip_prefix("at address ") {
        let end = after.find(' ').unwrap_or(after.len());
        address = Some(hex_id(after[..end].trim_end_matches(','))?);
        rest = after[end..].trim_start();
    }
    let (size, mut rest) = leading_number(rest.strip_prefix("of size ")?)?;
    rest = rest.trim_start();
    // 22.x-era copies print the address after the size.
    if let Some(after) = rest.strip_prefix("at address ") {
        let end = after.find(' ').unwrap_or(after.len());
        address = address.or(hex_id(after[..end].trim_end_matches(',')));
        rest = after[end..].trim_start();
    }
    let rest = rest.trim();
    let (elements, multiple) = match rest.strip_suffix("of multiple stores") {
        Some(elements) => (elements.trim(), true),
        None => (rest, false),
    };
    let elements = elements
        .strip_prefix("covering elements")
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

/// Feed a report the parts of a text; whether the text held any.
fn feed(report: &mut Report, text: &str, number: usize, display: &str) -> Result<bool> {
    let found = parts(text);
    for &(_, part, body) in &found {
        match part {
            Part::RequestSite => report.request_sites.push(body.trim().to_string()),
            Part::Reserving => {
                if let Some((reserved, rest)) =
                    reported_number(body, "reserved bytes", display, number)?
                {
                    report.reserved = Some(reserved);
                    if let Some(rest) = rest.trim_start().strip_prefix("of the available ") {
                        report.capacity =
                            reported_number(rest, "available bytes", display, number)?
                                .map(|(capacity, _)| capacity);
                    }
                }
            }
            Part::Store => {
                let site = body.trim();
                report.store = Some(site.strip_suffix(':').unwrap_or(site).trim().to_string());
            }
            Part::Instance => match instance(body) {
                Some(mut instance) => {
                    instance.store = report.store.clone();
                    report.instances.push(instance);
                }
                None if body.contains(" of size ") => {
                    return Err(bad(
                        display,
                        number,
                        format!(
                            "a Legate report's instance line cannot be read, {}: \"Instance {}\"",
                            instance_problem(body),
                            body.trim()
                        ),
                    ))
                }
                None => {}
            },
            Part::CreatedFor => {
                if let Some(last) = report.instances.last_mut() {
                    last.provenance = Some(body.trim().to_string());
                }
            }
            Part::Note | Part::Advice => {}
        }
    }
    Ok(!found.is_empty())
}

/// Reports being read: open ones by (node, thread), the one unprefixed lines go with.
#[derive(Default)]
struct Reader {
    reports: Vec<Report>,
    open: HashMap<(i64, String), usize>,
    last: Option<usize>,
}

impl LineReader for Reader {
    fn line(&mut self, number: usize, line: &LogLine, display: &str) -> Result<()> {
        let message = line.message;
        let key = line
            .node
            .map(|node| (node, line.thread.unwrap_or("").to_string()));
        if message.contains(HEADER) {
            if let Some((mut report, tail)) = header(message, line, number, display)? {
                feed(&mut report, &message[tail..], number, display)?;
                let index = self.reports.len();
                self.reports.push(report);
                if let Some(key) = key {
                    self.open.insert(key, index);
                }
                self.last = Some(index);
                return Ok(());
            }
        }
        let target = match &key {
            Some(key) => self.open.get(key).copied(),
            None => self.last,
        };
        let Some(index) = target else {
            return Ok(());
        };
        if message.trim().is_empty() {
            return Ok(());
        }
        // A line of the report's own thread (or, unprefixed, any line) that is none of its
        // parts ends it.
        if !feed(&mut self.reports[index], message, number, display)? {
            match key {
                Some(key) => {
                    self.open.remove(&key);
                    // Its message is over: no unprefixed line goes on with it.
                    if self.last == Some(index) {
                        self.last = None;
                    }
                }
                None => self.last = None,
            }
        } else if key.is_some() {
            self.last = Some(index);
        }
        Ok(())
    }

    fn markers(&self) -> Option<&'static [&'static str]> {
        // Outside a report only its first line matters.
        (self.open.is_empty() && self.last.is_none()).then_some(&[HEADER])
    }

    fn finish(self: Box<Self>, display: &str) -> Result<Vec<Found>> {
        self.reports
            .into_iter()
            .map(|report| snapshot(report, display))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_ids_in_hex_and_in_decimal() {
        assert_eq!(memory_id("1e00000000000003"), Some(0x1e00000000000003));
        assert_eq!(memory_id("0x1e00000000000003"), Some(0x1e00000000000003));
        // 24.03-24.06 stream `target_memory.id` in decimal.
        assert_eq!(memory_id("2161727821137838083"), Some(0x1e00000000000003));
        assert_eq!(memory_id("zz"), None);
    }

    #[test]
    fn parts_are_found_in_joined_lines() {
        let text = "  corresponding to a LogicalStore allocated at a.py:3 LogicalStore allocated at b.py:5:   Instance 4000000000000001 of size 8 covering elements <0>..<1>";
        let found: Vec<Part> = parts(text).into_iter().map(|(_, part, _)| part).collect();
        assert_eq!(found, vec![Part::RequestSite, Part::Store, Part::Instance]);
        let instance = instance("4000000000000001 at address 7f00 of size 1,024 covering elements <0>..<127> of multiple stores").unwrap();
        assert_eq!(
            (
                instance.id,
                instance.address,
                instance.size,
                instance.multiple
            ),
            (0x4000000000000001, Some(0x7f00), 1024, true)
        );
    }
}
