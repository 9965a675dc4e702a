//! Errors keep what caused them (issue 28): the message the user reads is whole, and a caller of
//! the library can still reach the error of SQLite or of the file system behind it.

use std::error::Error as _;

use memstate::Error;

/// The error behind `error`, as a `T`, when it is one.
fn cause<T: std::error::Error + 'static>(error: &Error) -> Option<&T> {
    error.source().and_then(|source| source.downcast_ref::<T>())
}

#[test]
fn a_failed_query_keeps_sqlites_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    let database = memstate::db::open_read_only(&db).unwrap();
    let error = memstate::query::collect(database.connection(), "SELECT nope FROM snapshots", &[])
        .unwrap_err();
    assert!(matches!(error, Error::Query { .. }), "{error:?}");
    assert!(
        error.to_string().contains("no such column: nope"),
        "{error}"
    );
    let sqlite: &rusqlite::Error = cause(&error).expect("the SQLite error is kept");
    assert!(sqlite.to_string().contains("no such column"), "{sqlite}");
}

#[test]
fn a_missing_input_keeps_the_file_systems_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dump.json");
    let expanded = memstate::import::input::expand(&[missing.display().to_string()]);
    let [error] = expanded.errors.as_slice() else {
        panic!("one error for one missing path: {:?}", expanded.errors);
    };
    assert!(matches!(error, Error::Read { .. }), "{error:?}");
    let io: &std::io::Error = cause(error).expect("the I/O error is kept");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_database_that_cannot_be_created_keeps_sqlites_error() {
    let dir = tempfile::tempdir().unwrap();
    let inside_a_file = dir.path().join("plain-file");
    std::fs::write(&inside_a_file, b"not a folder").unwrap();
    let error = match memstate::db::open(&inside_a_file.join("t.db")) {
        Ok(_) => panic!("a database inside a file was opened"),
        Err(error) => error,
    };
    assert!(matches!(error, Error::Database { .. }), "{error:?}");
    assert!(error.source().is_some(), "the cause is kept: {error:?}");
}
