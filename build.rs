//! Embeds every canned query of queries/ into the binary (a generated list of include_str!),
//! rebuilds when a query or a migration changes, names the commit the binary is built from
//! (`memstate --version`), and tells the tests which outside programs this machine has
//! (`has_sqlite3`, `has_chromium`, ...): a test that needs a missing one is marked ignored with
//! the reason, so `cargo test` counts and names it, and with `CI` set every such test runs (and
//! fails when its program is missing: .ci/run installs them).

use std::fs;
use std::path::Path;
use std::process::Command;

/// The commit and its date, when built from a git checkout.
fn commit() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
            .filter(|text| !text.is_empty())
    };
    let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
    let date = git(&["show", "-s", "--format=%cs", "HEAD"]).unwrap_or_default();
    Some(format!("commit {hash} {date}"))
}

/// Whether `sh -c SCRIPT` succeeds (a program found, a Python module importable).
fn succeeds(script: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

/// The outside programs some tests need, each a cfg flag set when it is here (or under CI).
fn outside_programs() {
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=PATH");
    let ci = std::env::var_os("CI").is_some();
    for (flag, script) in [
        ("has_sqlite3", "command -v sqlite3"),
        ("has_strace", "command -v strace"),
        ("has_datasette", "command -v datasette"),
        (
            "has_chromium",
            "test -x /usr/bin/chromium || test -x /usr/bin/chromium-browser || test -x /usr/bin/google-chrome",
        ),
        ("has_pandas", "python3 -c 'import pandas, matplotlib'"),
        ("has_gxx", "command -v g++"),
        ("has_python3", "command -v python3"),
        ("has_duckdb", "python3 -c 'import duckdb'"),
        (
            "has_py_jsonschema",
            "python3 -c 'from jsonschema import Draft202012Validator'",
        ),
        (
            "has_spark",
            "python3 -c 'import pyspark' && command -v java",
        ),
        // A folder mounted read-only in a private mount namespace (root and `unshare -m`).
        (
            "has_private_mount",
            "d=$(mktemp -d) && unshare -m sh -c \"mount --bind $d $d && mount -o remount,bind,ro $d\"; r=$?; rmdir \"$d\"; exit $r",
        ),
    ] {
        println!("cargo::rustc-check-cfg=cfg({flag})");
        if ci || succeeds(script) {
            println!("cargo:rustc-cfg={flag}");
        }
    }
}

fn main() {
    outside_programs();
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=queries");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    // A new commit moves the branch HEAD points to: watch both (not the index, which changes on
    // every `git add` and would rebuild everything).
    let head = Path::new(&root).join(".git/HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Some(branch) = fs::read_to_string(&head).ok().and_then(|text| {
            text.strip_prefix("ref: ")
                .map(|name| name.trim().to_string())
        }) {
            println!("cargo:rerun-if-changed=.git/{branch}");
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let built_from = commit().unwrap_or_else(|| "built outside a git checkout".to_string());
    println!("cargo:rustc-env=MEMSTATE_VERSION={version} ({built_from})");
    let folder = Path::new(&root).join("queries");
    let mut names: Vec<String> = fs::read_dir(&folder)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut code = String::from("/// (name, SQL text) of every file in queries/, sorted by name.\npub static SOURCES: &[(&str, &str)] = &[\n");
    for name in names {
        let path = folder.join(&name);
        println!("cargo:rerun-if-changed={}", path.display());
        code.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            name.trim_end_matches(".sql"),
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("queries.rs");
    fs::write(out, code).expect("write the generated list of queries");
}
