//! The wheel (issue 45): the one `maturin build --release` writes into target/wheels (.ci/run
//! builds it before the tests), installed into a fresh virtual environment, puts `memstate` on
//! PATH and `memstate.torch` on the Python path; a training loop run there against the stand-in
//! torch writes the snapshots the installed binary imports.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{have, needed, succeeds};

/// The newest wheel maturin wrote, if any.
fn wheel() -> Option<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/wheels");
    std::fs::read_dir(folder)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("memstate-"))
                && path.extension().is_some_and(|ext| ext == "whl")
        })
        .max_by_key(|path| {
            std::fs::metadata(path)
                .and_then(|meta| meta.modified())
                .ok()
        })
}

#[test]
fn the_wheel_installs_the_binary_and_the_recorder() {
    if !have("python3", "to install the wheel into a virtual environment") {
        return;
    }
    let Some(wheel) = wheel() else {
        needed(
            false,
            "a wheel in target/wheels (maturin build --release)",
            "to test the wheel",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    succeeds(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    // No index: the wheel needs nothing from PyPI.
    succeeds(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--no-index"])
            .arg(&wheel),
    );
    let version = succeeds(Command::new(venv.join("bin/memstate")).arg("--version"));
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(
        said.starts_with(&format!("memstate {}", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );
    // The installed binary is under the size target (< 40 MB).
    let size = std::fs::metadata(venv.join("bin/memstate")).unwrap().len();
    assert!(size < 40_000_000, "the installed binary is {size} bytes");
    // The Recorder from the installed package (only the stand-in torch added to the path).
    let runs = dir.path().join("exp2");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    succeeds(
        Command::new(venv.join("bin/python"))
            .arg(root.join("tests/python/train_with_recorder.py"))
            .arg(&runs)
            .env("PYTHONPATH", root.join("tests/python/standin")),
    );
    let db = dir.path().join("w.db");
    let imported = succeeds(
        Command::new(venv.join("bin/memstate"))
            .arg("--db")
            .arg(&db)
            .arg("import")
            .arg(&runs),
    );
    let said = String::from_utf8_lossy(&imported.stdout);
    assert!(said.starts_with("imported 6 dumps"), "{said}");
}
