//! The JSON Schema (schema/dump-v1.schema.json) checked with a real validator against the same
//! cases as the reader, so the schema cannot drift from it: valid dumps pass both; structural
//! errors fail both; rules beyond JSON Schema fail only the reader.
//!
//! The validator is Python's `jsonschema` (the reference implementation of JSON Schema, draft
//! 2020-12), run once for all cases: the Rust validator crate cost more of a fresh test build
//! than any other dependency (issue 29), and .ci/run installs the Python one with the other test
//! tools.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::data;
use crate::reader::{cases, Schema};

/// Reads a JSON document per line on standard input and prints, per document, a JSON array of
/// the schema's complaints about it (empty when valid).
const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
with open(sys.argv[1]) as f:
    schema = json.load(f)
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
for line in sys.stdin:
    value = json.loads(line)
    errors = ["%s at /%s" % (e.message, "/".join(map(str, e.absolute_path))) for e in validator.iter_errors(value)]
    print(json.dumps(errors))
"#;

/// The schema's complaints about each value, in order.
fn complaints(values: &[Value]) -> Vec<Vec<String>> {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/dump-v1.schema.json");
    let mut child = Command::new("python3")
        .args(["-c", VALIDATE])
        .arg(schema)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut input = String::new();
    for value in values {
        input.push_str(&serde_json::to_string(value).unwrap());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "the validator failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdicts: Vec<Vec<String>> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(verdicts.len(), values.len(), "one verdict per value");
    verdicts
}

#[test]
#[cfg_attr(
    not(has_py_jsonschema),
    ignore = "needs Python's jsonschema (pip install jsonschema; .ci/run installs it)"
)]
fn valid_dumps_pass_the_schema_and_the_reader() {
    let names = ["small.json", "figures.json"];
    let files: Vec<Vec<u8>> = names
        .iter()
        .map(|name| std::fs::read(data(name)).unwrap())
        .collect();
    let values: Vec<Value> = files
        .iter()
        .map(|bytes| serde_json::from_slice(bytes).unwrap())
        .collect();
    for ((name, bytes), errors) in names.iter().zip(&files).zip(complaints(&values)) {
        assert!(errors.is_empty(), "{name}: {errors:?}");
        memstate::dump::parse_dump(bytes, name, Default::default()).unwrap();
    }
}

#[test]
#[cfg_attr(
    not(has_py_jsonschema),
    ignore = "needs Python's jsonschema (pip install jsonschema; .ci/run installs it)"
)]
fn the_schema_agrees_with_the_reader_on_every_bad_case() {
    let cases: Vec<_> = cases()
        .into_iter()
        .filter(|case| case.schema != Schema::NotJson)
        .collect();
    let values: Vec<Value> = cases
        .iter()
        .map(|case| serde_json::from_slice(&case.bytes).unwrap())
        .collect();
    let mut checked = 0;
    for (case, errors) in cases.iter().zip(complaints(&values)) {
        let schema_accepts = errors.is_empty();
        match case.schema {
            Schema::Rejects => assert!(
                !schema_accepts,
                "{}: the schema accepts what the reader refuses",
                case.name
            ),
            Schema::Accepts => assert!(
                schema_accepts,
                "{}: the schema refuses; mark it Rejects if the schema can express it",
                case.name
            ),
            Schema::NotJson => unreachable!(),
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} cases checked");
}
