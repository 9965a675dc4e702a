//! The JSON Schema (schema/dump-v1.schema.json) checked with a real validator against the same
//! cases as the reader, so the schema cannot drift from it: valid dumps pass both; structural
//! errors fail both; rules beyond JSON Schema fail only the reader.

use serde_json::Value;

use crate::common::data;
use crate::reader::{cases, Schema};

fn validator() -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/dump-v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

#[test]
fn valid_dumps_pass_the_schema_and_the_reader() {
    let validator = validator();
    for name in ["small.json", "figures.json"] {
        let bytes = std::fs::read(data(name)).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|error| format!("{} at {}", error, error.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        memstate::dump::parse_dump(&bytes, name, Default::default()).unwrap();
    }
}

#[test]
fn the_schema_agrees_with_the_reader_on_every_bad_case() {
    let validator = validator();
    let mut checked = 0;
    for case in cases() {
        if case.schema == Schema::NotJson {
            continue;
        }
        let value: Value = serde_json::from_slice(&case.bytes).unwrap();
        let schema_accepts = validator.is_valid(&value);
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
