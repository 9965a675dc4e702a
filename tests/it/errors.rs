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

/// A selector that names nothing in the database is "not found", apart from one that is no
/// selector at all (a usage error): a server answers 404 for the one and 400 for the other.
#[test]
fn naming_what_is_not_there_is_not_found_and_a_malformed_name_is_usage() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    let database = memstate::db::open_read_only(&db).unwrap();
    let conn = database.connection();
    let missing = memstate::query::select::one_snapshot(conn, "9999").unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing:?}");
    let missing_run = memstate::query::select::check_run(conn, "no-such-run").unwrap_err();
    assert!(matches!(missing_run, Error::NotFound(_)), "{missing_run:?}");
    let malformed = memstate::query::select::one_snapshot(conn, "a:b").unwrap_err();
    assert!(matches!(malformed, Error::Usage(_)), "{malformed:?}");
    // Both are the user's to fix: exit status 2.
    assert_eq!((missing.exit_code(), malformed.exit_code()), (2, 2));
}

/// A refusal about a log's line as a whole names the line and no place inside it.
#[test]
fn an_error_about_a_whole_line_names_no_place() {
    let error = Error::whole_input("run.log:12", "a Realm status line's size");
    assert_eq!(error.to_string(), "run.log:12: a Realm status line's size");
    let at_root = Error::input("dump.json", "", "empty input");
    assert_eq!(at_root.to_string(), "dump.json: empty input");
}
