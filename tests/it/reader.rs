//! Bad input, each case refused with a message that names the place, and (through the CLI) the
//! database left exactly as it was. The same cases feed the JSON Schema test (schema.rs).

use memstate::dump::{parse_document, Options};
use serde_json::{json, Value};

use crate::common::{contents, data, import, on_db, remove, set, small, write};

/// What the JSON Schema is expected to say of a case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schema {
    /// Not JSON at all: no schema verdict.
    NotJson,
    /// A structural error the schema catches too.
    Rejects,
    /// A rule beyond JSON Schema (overlaps, capacity, uniqueness, index range): only the reader catches it.
    Accepts,
}

pub struct Case {
    pub name: String,
    pub bytes: Vec<u8>,
    /// The place the error must name (a JSON path, or "line" for syntax errors).
    pub place: String,
    /// Words the message must contain.
    pub message: String,
    pub schema: Schema,
}

fn case(name: &str, value: Value, place: &str, message: &str, schema: Schema) -> Case {
    Case {
        name: name.to_string(),
        bytes: serde_json::to_vec_pretty(&value).unwrap(),
        place: place.to_string(),
        message: message.to_string(),
        schema,
    }
}

fn raw(name: &str, bytes: &[u8], place: &str, message: &str) -> Case {
    Case {
        name: name.to_string(),
        bytes: bytes.to_vec(),
        place: place.to_string(),
        message: message.to_string(),
        schema: Schema::NotJson,
    }
}

/// A JSON pointer as the dotted path the reader reports: /memories/0/id → memories[0].id
fn dotted(pointer: &str) -> String {
    let mut path = String::new();
    for part in pointer.trim_start_matches('/').split('/') {
        if part.chars().all(|c| c.is_ascii_digit()) {
            path.push_str(&format!("[{part}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(part);
        }
    }
    path
}

/// Two overlapping allocations of the given states in memories[1] (its listed holes removed).
fn overlap(first: &str, second: &str) -> Value {
    let value = set(small(), "/memories/1/holes", Value::Null);
    set(
        value,
        "/memories/1/allocations",
        json!([
            {"uid": "0x1000", "kind": "instance", "state": first, "offset": 0, "size": 1024},
            {"uid": "0x1001", "kind": "instance", "state": second, "offset": 512, "size": 1024}
        ]),
    )
}

/// Every bad input of the reader tests, with where and what it is refused for.
pub fn cases() -> Vec<Case> {
    let mut cases = syntax_cases();
    cases.extend(missing_and_mistyped_cases());
    cases.extend(value_cases());
    cases.extend(layout_cases());
    cases.extend(id_overlap_and_unknown_cases());
    cases
}

/// Inputs that are no JSON, or no dump: truncated, not UTF-8, the wrong format or version.
fn syntax_cases() -> Vec<Case> {
    use Schema::*;
    let text = serde_json::to_vec_pretty(&small()).unwrap();
    vec![
        raw("truncated", &text[..text.len() / 2], "line ", "truncated"),
        raw(
            "not json",
            b"<html>not JSON</html>\n",
            "line 1, column 1",
            "expected value",
        ),
        raw("empty file", b"", "", "empty"),
        raw(
            "invalid utf-8",
            &String::from_utf8_lossy(&text)
                .replace("train.py:12", "train\u{1}")
                .into_bytes()
                .iter()
                .map(|&b| if b == 1 { 0xff } else { b })
                .collect::<Vec<u8>>(),
            "line ",
            "invalid",
        ),
        raw(
            "nul bytes",
            b"{\0\"format\": \"memstate-dump\"}",
            "line 1",
            "",
        ),
        raw(
            "nul inside a string",
            &String::from_utf8_lossy(&text)
                .replace("\"x\"", "\"\u{0}\"")
                .into_bytes(),
            "line ",
            "control character",
        ),
        case(
            "top-level array",
            json!([small()]),
            "top level",
            "expected an object",
            Rejects,
        ),
        case(
            "wrong format",
            set(small(), "/format", json!("memstate-dmp")),
            "format",
            "expected \"memstate-dump\"",
            Rejects,
        ),
        case(
            "newer version",
            set(small(), "/version", json!(2)),
            "version",
            "newer than this memstate reads (version 1)",
            Rejects,
        ),
        case(
            "version as text",
            set(small(), "/version", json!("1")),
            "version",
            "expected version 1",
            Rejects,
        ),
    ]
}

/// Each required field missing, and each number given as text.
fn missing_and_mistyped_cases() -> Vec<Case> {
    use Schema::*;
    let mut cases = Vec::new();
    for pointer in [
        "/format",
        "/version",
        "/run",
        "/run/id",
        "/run/node",
        "/snapshot",
        "/snapshot/seq",
        "/snapshot/time_ns",
        "/snapshot/reason",
        "/memories",
        "/memories/0/id",
        "/memories/0/kind",
        "/memories/0/capacity",
        "/memories/0/allocations",
        "/memories/0/allocations/2/uid",
        "/memories/0/allocations/2/kind",
        "/memories/0/allocations/2/state",
        "/memories/0/allocations/2/offset",
        "/memories/0/allocations/2/size",
        "/memories/0/failed_requests/0/size",
        "/memories/1/holes/0/offset",
        "/memories/1/holes/0/size",
        "/objects/0/id",
        "/memories/0/allocations/0/fields/0/id",
        "/memories/0/allocations/0/fields/0/object",
    ] {
        cases.push(case(
            &format!("missing {pointer}"),
            remove(small(), pointer),
            &dotted(pointer),
            "required field is missing",
            Rejects,
        ));
    }
    for pointer in [
        "/run/node",
        "/run/node_count",
        "/run/pid",
        "/snapshot/seq",
        "/snapshot/time_ns",
        "/memories/0/capacity",
        "/memories/0/alignment",
        "/memories/0/allocations/0/offset",
        "/memories/0/allocations/0/size",
        "/memories/0/allocations/0/alignment",
        "/memories/0/allocations/0/created_ns",
        "/memories/0/allocations/0/gc_priority",
        "/memories/0/allocations/0/fields/0/id",
        "/memories/0/allocations/0/fields/0/size",
        "/memories/0/failed_requests/0/size",
        "/memories/0/failed_requests/0/alignment",
        "/memories/0/failed_requests/0/time_ns",
        "/memories/1/holes/0/offset",
        "/memories/1/holes/0/size",
        "/objects/0/shape/0",
    ] {
        cases.push(case(
            &format!("text in {pointer}"),
            set(small(), pointer, json!("12")),
            &dotted(pointer),
            "found a string",
            Rejects,
        ));
    }
    cases
}

/// Figures out of range and values of the wrong kind.
fn value_cases() -> Vec<Case> {
    use Schema::*;
    let size = "/memories/0/allocations/2/size";
    vec![
        case(
            "size 2^63",
            set(small(), size, json!(9223372036854775808u64)),
            &dotted(size),
            "above the largest size",
            Rejects,
        ),
        case(
            "size 2^64",
            set(
                small(),
                size,
                serde_json::from_str("18446744073709551616").unwrap(),
            ),
            &dotted(size),
            "too large",
            Rejects,
        ),
        case(
            "negative size",
            set(small(), size, json!(-1)),
            &dotted(size),
            "non-negative integer",
            Rejects,
        ),
        case(
            "fractional size",
            set(small(), size, json!(1.5)),
            &dotted(size),
            "not an integer",
            Rejects,
        ),
        case(
            "zero size",
            set(small(), size, json!(0)),
            &dotted(size),
            "above 0",
            Rejects,
        ),
        case(
            "past capacity",
            set(small(), "/memories/0/allocations/5/offset", json!(1046528)),
            "memories[0].allocations[5]",
            "past the memory's capacity 1048576",
            Accepts,
        ),
        case(
            "offset + size near 2^64",
            set(
                set(
                    small(),
                    "/memories/0/allocations/5/offset",
                    json!(9223372036854775807u64),
                ),
                "/memories/0/allocations/5/size",
                json!(9223372036854775807u64),
            ),
            "memories[0].allocations[5]",
            "past the memory's capacity",
            Accepts,
        ),
        case(
            "hole past capacity",
            set(small(), "/memories/1/holes/0/offset", json!(4000)),
            "memories[1].holes[0]",
            "past the memory's capacity 4096",
            Accepts,
        ),
        case(
            "hole over an allocation",
            set(
                small(),
                "/memories/1/holes/0",
                json!({"offset": 512, "size": 1024}),
            ),
            "memories[1].holes[0]",
            "overlaps memories[1].allocations[0]",
            Accepts,
        ),
    ]
}

/// Holes and allocations that overlap or lie outside their memory, and other layouts.
fn layout_cases() -> Vec<Case> {
    use Schema::*;
    vec![
        case(
            "holes over each other",
            set(
                small(),
                "/memories/1/holes",
                json!([{"offset": 2048, "size": 1024}, {"offset": 2500, "size": 100}]),
            ),
            "memories[1].holes[1]",
            "overlaps memories[1].holes[0]",
            Accepts,
        ),
        case(
            "duplicate memory id",
            set(small(), "/memories/1/id", json!("0x1e00000000000003")),
            "memories[1].id",
            "also used by memories[0]",
            Accepts,
        ),
        case(
            "duplicate uid across memories",
            set(small(), "/memories/1/allocations/0/uid", json!("0x65")),
            "memories[1].allocations[0].uid",
            "uid 0x0000000000000065 is also used by memories[0].allocations[0]",
            Accepts,
        ),
        case(
            "duplicate uid in a memory",
            set(small(), "/memories/0/allocations/1/uid", json!(101)),
            "memories[0].allocations[1].uid",
            "also used by memories[0].allocations[0]",
            Accepts,
        ),
        case(
            "string index out of range",
            set(small(), "/memories/0/kind", json!(99)),
            "memories[0].kind",
            "string index 99 is out of range (strings has 5 entries)",
            Accepts,
        ),
        case(
            "bad state",
            set(small(), "/memories/0/allocations/1/state", json!("alive")),
            "memories[0].allocations[1].state",
            "expected one of valid",
            Rejects,
        ),
        case(
            "bad reason",
            set(small(), "/snapshot/reason", json!("crash")),
            "snapshot.reason",
            "expected one of periodic",
            Rejects,
        ),
        case(
            "bad wall time",
            set(small(), "/snapshot/wall_time", json!("yesterday")),
            "snapshot.wall_time",
            "RFC 3339",
            Accepts,
        ),
        case(
            "nested attrs",
            set(
                small(),
                "/memories/0/allocations/0/attrs",
                json!({"a": [1]}),
            ),
            "memories[0].allocations[0].attrs.a",
            "expected a string, number or boolean",
            Rejects,
        ),
        case(
            "duplicate object id",
            set(small(), "/objects/1", json!({"id": "store-17"})),
            "objects[1].id",
            "also used by objects[0]",
            Accepts,
        ),
        case(
            "string table entry not a string",
            set(small(), "/strings/2", json!(7)),
            "strings[2]",
            "expected a string",
            Rejects,
        ),
    ]
}

/// Malformed ids, overlapping states, and `unknown` lists.
fn id_overlap_and_unknown_cases() -> Vec<Case> {
    use Schema::*;
    let mut cases = Vec::new();
    for (name, id) in [
        ("0x alone", json!("0x")),
        ("not hex", json!("xyz")),
        ("17 digits", json!("0x12345678901234567")),
        ("negative", json!(-1)),
        ("fraction", json!(1.5)),
        ("boolean", json!(true)),
    ] {
        cases.push(case(
            &format!("malformed memory id ({name})"),
            set(small(), "/memories/0/id", id.clone()),
            "memories[0].id",
            "expected an id",
            Rejects,
        ));
        cases.push(case(
            &format!("malformed uid ({name})"),
            set(small(), "/memories/0/allocations/3/uid", id),
            "memories[0].allocations[3].uid",
            "expected an id",
            Rejects,
        ));
    }
    let states = ["valid", "collectable", "pending_free", "pending_alloc"];
    for (index, first) in states.iter().enumerate() {
        for second in &states[index..] {
            let allowed = matches!((*first, *second), ("pending_free", "pending_alloc"));
            if !allowed {
                cases.push(case(
                    &format!("{first} overlapping {second}"),
                    overlap(first, second),
                    "memories[1].allocations[1]",
                    "overlaps memories[1].allocations[0]",
                    Accepts,
                ));
            }
        }
    }
    // `unknown` (FORMAT.md, "What a dump does not know"): only its three names, each once.
    for (name, names, place, message) in [
        (
            "an unknown that is not a name",
            json!(["size"]),
            "memories[0].unknown[0]",
            "expected one of",
        ),
        (
            "an unknown that is a number",
            json!([1]),
            "memories[0].unknown[0]",
            "expected one of",
        ),
        (
            "an unknown named twice",
            json!(["capacity", "capacity"]),
            "memories[0].unknown[1]",
            "more than once",
        ),
        (
            "an unknown that is not an array",
            json!("capacity"),
            "memories[0].unknown",
            "expected an array",
        ),
    ] {
        let mut value = small();
        value["memories"][0]["unknown"] = names;
        cases.push(case(name, value, place, message, Rejects));
    }
    cases
}

#[test]
fn every_bad_input_is_refused_with_its_place() {
    for case in cases() {
        let error = match parse_document(&case.bytes, "case.json", Options::default()) {
            Ok(_) => panic!("{}: accepted", case.name),
            Err(error) => error.to_string(),
        };
        let expected_prefix = if case.place.is_empty() {
            "case.json: ".to_string()
        } else {
            format!("case.json: {}", case.place)
        };
        assert!(
            error.starts_with(&expected_prefix),
            "{}: error {error:?} does not start with {expected_prefix:?}",
            case.name
        );
        assert!(
            error.contains(&case.message),
            "{}: error {error:?} lacks {:?}",
            case.name,
            case.message
        );
    }
}

#[test]
fn the_allowed_overlap_is_accepted_in_both_orders() {
    for (first, second) in [
        ("pending_free", "pending_alloc"),
        ("pending_alloc", "pending_free"),
    ] {
        let bytes = serde_json::to_vec(&overlap(first, second)).unwrap();
        parse_document(&bytes, "ok.json", Options::default())
            .unwrap_or_else(|error| panic!("{first}/{second}: {error}"));
    }
}

#[test]
fn every_bad_input_leaves_the_database_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    // A different run first, so that a wrongly accepted case would land and show.
    import(&db, &[&data("figures.json")], 0);
    let before = contents(&db);
    for (index, case) in cases().into_iter().enumerate() {
        let file = write(dir.path(), &format!("case{index}.json"), &case.bytes);
        let output = on_db(&db).arg("import").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}: exit status; stderr {stderr}",
            case.name
        );
        let prefix = format!("error: {}: {}", file.display(), case.place);
        assert!(
            stderr.contains(&prefix),
            "{}: stderr {stderr:?} lacks {prefix:?}",
            case.name
        );
        assert!(
            stderr.contains(&case.message),
            "{}: stderr {stderr:?} lacks {:?}",
            case.name,
            case.message
        );
        assert_eq!(contents(&db), before, "{}: the database changed", case.name);
    }
}

#[test]
fn strict_mode_refuses_unknown_fields_that_are_otherwise_ignored() {
    let value = set(small(), "/memories/0/allocations/1/colour", json!("blue"));
    let bytes = serde_json::to_vec(&value).unwrap();
    parse_document(&bytes, "x.json", Options::default()).expect("unknown fields are ignored");
    let error = parse_document(&bytes, "x.json", Options { strict: true })
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("memories[0].allocations[1].colour: unknown field"),
        "{error}"
    );
}

#[test]
fn interned_and_inline_strings_read_the_same() {
    let mut inline = small();
    // Resolve every index by hand: the fixture's string values at these places are indices.
    let strings: Vec<String> = serde_json::from_value(inline["strings"].clone()).unwrap();
    for pointer in [
        "/memories/0/kind",
        "/memories/0/allocations/0/kind",
        "/memories/0/allocations/0/provenance",
        "/memories/0/allocations/0/fields/0/object",
        "/memories/0/failed_requests/0/provenance",
        "/objects/0/id",
        "/objects/0/provenance",
    ] {
        let index = inline
            .pointer(pointer)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{pointer} is an index")) as usize;
        inline = set(inline, pointer, json!(strings[index]));
    }
    inline = remove(inline, "/strings");
    let a = memstate::dump::parse_dump(
        &serde_json::to_vec(&small()).unwrap(),
        "a",
        Options::default(),
    )
    .unwrap();
    let b = memstate::dump::parse_dump(
        &serde_json::to_vec(&inline).unwrap(),
        "b",
        Options::default(),
    )
    .unwrap();
    assert_eq!(
        memstate::dump::content_digest(&a),
        memstate::dump::content_digest(&b)
    );
    let kind_a = a.text(a.memories[0].kind);
    assert_eq!(kind_a, "GPU_FB_MEM");
    assert_eq!(a.memories[0].id, 0x1e00000000000003);
    let pending_alloc = a.memories[0]
        .allocations
        .iter()
        .find(|allocation| allocation.state == memstate::dump::State::PendingAlloc)
        .unwrap();
    assert_eq!(
        pending_alloc.uid, 105,
        "the integer uid 105 is kept as given"
    );
}
