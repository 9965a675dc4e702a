//! The dataset's folder: where each partition's file goes, the file that marks a folder as a
//! memstate dataset, the lock that parallel exports take around run-level merges, and writing a
//! file whole or not at all.
//!
//! Partition folders follow Hive's convention, `run=<run>/node=<node>`, which DuckDB
//! (`hive_partitioning`) and Spark read back as columns. A run id is free text, so the folder
//! name escapes what a path or Hive's reader would misread (`/`, `=`, `%`, `:`, quotes, control
//! characters, ...) as `%XX`, the escape Hive, Spark and DuckDB undo; other text (letters of any
//! script, digits, `.`, `-`, `_`, spaces) stays as it is so the folders stay readable.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Because, Error, Result};

/// The file that marks a folder as a memstate dataset: a plain file, so it survives `cp -r`,
/// `rsync` and object storage, which keep no extended attributes. Readers skip it (DuckDB and
/// Spark read the table folders, and Spark skips names starting with `_`).
pub const MARKER: &str = "_memstate_dataset.json";

/// What the marker file holds (a test and the runner check its `format`).
pub const MARKER_FORMAT: &str = "memstate-parquet";

/// The dataset layout's version, written in the marker. Layout 1 had one `part-0.parquet` per
/// partition, replaced table by table; layout 2 publishes each node partition through its
/// manifest ([`super::publish`]). An export into a layout-1 dataset upgrades it, node by node:
/// a node without a manifest is read as layout 1 until it is exported again.
pub const LAYOUT_VERSION: i64 = 2;

/// The lock file parallel exports take while they merge run-level tables.
const LOCK: &str = "_memstate_export.lock";

/// The one file of each partition.
pub const PART_FILE: &str = "part-0.parquet";

/// `run=<run>` with the run id escaped for a folder name.
pub fn run_folder(run: &str) -> String {
    format!("run={}", escape(run))
}

/// The most bytes a folder name holds on the file systems a dataset goes to (ext4, XFS, object
/// storage's path segments as their clients map them).
pub const MAX_FOLDER_BYTES: usize = 255;

/// Whether a run can have a partition folder: `run=<run>` escaped must fit in one folder name.
/// A run id has no length limit, but Hive's layout keeps it whole in the folder's name (it is the
/// `run` column's value), so it cannot be shortened the way shard file names are.
pub fn check_run_folder(run: &str) -> std::result::Result<(), String> {
    // Hive's readers (DuckDB, Spark) take this one partition value for NULL: the run's rows would
    // come back without their run. No escape is undone before that comparison in every reader,
    // so the run is refused rather than renamed behind the user's back.
    if run == HIVE_NULL {
        return Err(format!(
            "the run id {HIVE_NULL} is the partition value Hive's readers (DuckDB, Spark) read as NULL, so its rows would lose their run; give the run another id (the dumps' `run.id`, or `import --run ID` for a log or a PyTorch snapshot) and import it again"
        ));
    }
    let bytes = run_folder(run).len();
    if bytes > MAX_FOLDER_BYTES {
        return Err(format!(
            "run id of {} bytes: its partition folder `run=...` would be {bytes} bytes, over the {MAX_FOLDER_BYTES} a folder name holds (Hive's layout keeps the run id whole in the name; characters escaped as %XX count three)",
            run.len()
        ));
    }
    Ok(())
}

/// The partition value Hive's layout reserves for NULL.
pub const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// `node=<node>`.
pub fn node_folder(node: i64) -> String {
    format!("node={node}")
}

/// Escape a partition value the way Hive's readers unescape it: `%XX` for each byte of a
/// character that a path or a reader would misread. Only ASCII is escaped (readers decode `%XX`
/// one byte per character, so escaping a multi-byte character would garble it).
pub fn escape(value: &str) -> String {
    let mut folder = String::with_capacity(value.len());
    for character in value.chars() {
        let unsafe_ascii = character.is_ascii()
            && (character.is_ascii_control()
                || matches!(
                    character,
                    '"' | '#'
                        | '%'
                        | '\''
                        | '*'
                        | '/'
                        | ':'
                        | '='
                        | '?'
                        | '\\'
                        | '{'
                        | '}'
                        | '['
                        | ']'
                        | '^'
                        | '<'
                        | '>'
                        | '|'
                        | '&'
                        | '$'
                        | '!'
                        | '`'
                        | '~'
                        | ','
                        | ';'
                        | '@'
                        | '+'
                ));
        // A leading dot would hide the folder (and `..` would climb out of it).
        if unsafe_ascii || (folder.is_empty() && character == '.') {
            folder.push_str(&format!("%{:02X}", character as u32));
        } else {
            folder.push(character);
        }
    }
    folder
}

/// The folder of a node partition of a table.
pub fn node_partition(root: &Path, table: &str, run: &str, node: i64) -> PathBuf {
    root.join(table)
        .join(run_folder(run))
        .join(node_folder(node))
}

/// The folder of a run partition of a table.
pub fn run_partition(root: &Path, table: &str, run: &str) -> PathBuf {
    root.join(table).join(run_folder(run))
}

/// Make `root` a memstate dataset, or check that it is one. A folder that exists and holds
/// anything but a memstate dataset is refused unless `force`, before anything is written in it.
/// Parallel exports into one new folder agree: the marker is written under the dataset's lock,
/// before any partition, and the lock file and hidden temporary files do not count as content.
pub fn prepare(root: &Path, force: bool) -> Result<()> {
    let shown = root.display().to_string();
    match fs::symlink_metadata(root) {
        Ok(meta) if !meta.is_dir() && !fs::metadata(root).is_ok_and(|meta| meta.is_dir()) => {
            return Err(Error::Usage(format!(
                "{shown}: not a folder; --out names the folder of the dataset"
            )))
        }
        Ok(_) => check_content(root, force)?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(root).map_err(|error| Error::write(root, error))?;
        }
        Err(error) => return Err(Error::write(root, error)),
    }
    let _lock = lock(root)?;
    check_content(root, force)?;
    let marker = root.join(MARKER);
    if marker.exists() && check_marker(&marker)? == LAYOUT_VERSION {
        return Ok(());
    }
    let text = serde_json::json!({
        "format": MARKER_FORMAT,
        "layout_version": LAYOUT_VERSION,
        "written_by": format!("memstate {}", env!("CARGO_PKG_VERSION")),
        "tables": super::tables::ALL.iter().map(|table| table.name).collect::<Vec<_>>(),
        "partitions": "Hive: <table>/run=<run>/node=<node>/part-<version>.parquet, the version a node's manifest _memstate_nodes/run=<run>/node=<node>.json names; run-level tables <table>/run=<run>/part-0.parquet",
    });
    let bytes = format!("{text:#}\n");
    write_whole(&marker, |file| file.write_all(bytes.as_bytes()))
}

/// A dataset (its marker checked), an empty folder, or (with `force`) anything.
fn check_content(root: &Path, force: bool) -> Result<()> {
    let marker = root.join(MARKER);
    if marker.exists() {
        return check_marker(&marker).map(drop);
    }
    let content = fs::read_dir(root)
        .map_err(|error| Error::write(root, error))?
        .filter_map(|entry| entry.ok())
        .any(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name != LOCK && !name.starts_with('.')
        });
    // Another export may have written the marker (and then partitions) since it was looked for.
    if marker.exists() {
        return check_marker(&marker).map(drop);
    }
    if content && !force {
        return Err(Error::Usage(format!(
            "{}: a folder that is not a memstate dataset (no {MARKER}); \
             name a new or empty folder, or give --force to export into it anyway",
            root.display()
        )));
    }
    Ok(())
}

/// The layout version of a dataset's marker, or why it is not one this memstate reads.
fn check_marker(marker: &Path) -> Result<i64> {
    let shown = marker.display().to_string();
    let text = fs::read_to_string(marker).map_err(|error| Error::database(&shown, error))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|error| {
        Error::database(
            &shown,
            Because::context("not a memstate dataset marker", error),
        )
    })?;
    if value.get("format").and_then(|format| format.as_str()) != Some(MARKER_FORMAT) {
        return Err(Error::database(
            shown,
            format!("not a memstate dataset marker (its \"format\" is not {MARKER_FORMAT:?})"),
        ));
    }
    match value.get("layout_version").and_then(|version| version.as_i64()) {
        Some(version) if version <= LAYOUT_VERSION => Ok(version),
        Some(version) => Err(Error::database(
            shown,
            format!("a dataset of layout version {version}, written by a newer memstate (this one writes {LAYOUT_VERSION})"),
        )),
        None => Err(Error::database(shown, "the marker has no \"layout_version\"")),
    }
}

/// Write `path` whole or not at all, creating its folder: through [`crate::files`]' temporary
/// file beside it (a hidden name no reader globbing `*.parquet` sees), renamed over it.
pub fn write_whole(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(folder).map_err(|error| Error::write(folder, error))?;
    crate::files::write_atomically_with(path, path, write)
}

/// An exclusive lock on the dataset, held until dropped (flock: released by the kernel when the
/// process dies, so a killed export leaves no stale lock).
pub struct Lock {
    _file: File,
}

pub fn lock(root: &Path) -> Result<Lock> {
    use std::os::fd::AsRawFd;
    let path = root.join(LOCK);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| Error::write(&path, error))?;
    // SAFETY: flock on a file descriptor this process owns; it blocks until the lock is free.
    loop {
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0;
        if taken {
            return Ok(Lock { _file: file });
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::write(&path, Because::context("cannot lock", error)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_escape_what_paths_and_hive_misread() {
        assert_eq!(escape("demo-seed1"), "demo-seed1");
        assert_eq!(escape("a/b=c:d%"), "a%2Fb%3Dc%3Ad%25");
        assert_eq!(escape(".."), "%2E.");
        assert_eq!(escape("job 7 ü"), "job 7 ü");
        assert_eq!(escape("x\ny"), "x%0Ay");
    }
}
