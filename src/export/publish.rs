//! Publishing a node partition whole: a reader sees each (run, node) as one export wrote it, the
//! one before or the new one, never some tables of each, whatever happens to the export.
//!
//! A node's six tables live in six folders (`<table>/run=R/node=N/`), and no file system renames
//! six files at once, so each export call writes its files under a version of its own
//! (`part-<version>.parquet`) and the switch is one file: the node's manifest,
//! `_memstate_nodes/run=R/node=N.json`, naming the six files that are the partition, written
//! whole and renamed over the old one. Readers that follow manifests (`scripts/parquet-query`)
//! see old or new; the files a manifest no longer names are removed right after the switch, so a
//! reader that globs `*.parquet` sees one set too, but for the moment between the six files
//! becoming visible and the old ones going.
//!
//! Around that:
//! - Two exports of one (run, node) take its lock (`node=N.lock` beside the manifest, flock, so
//!   the kernel drops it when a process dies): the second waits for the first and then replaces
//!   its partition whole.
//! - Each export call leaves a record in `_memstate_exports/<version>.json` listing the
//!   partitions it means to write, flock-held while it runs and removed when it has written them
//!   all. A record whose lock is free belongs to an export that died or failed (a kill, a full
//!   disk): the runner refuses the dataset by naming it, until later exports have written the
//!   partitions it names (each commit strikes its partition from such records) or the user
//!   removes it.
//! - Leftovers (staged files, another writer's `.tmp` files, visible files of a version no
//!   manifest names) are removed by the next export of that node, and, for the partitions a dead
//!   record names, by the next export of anything.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use super::dataset::{self, node_folder, run_folder};
use crate::error::{Because, Error, Result};

/// The folder of the node manifests and their locks.
pub const NODES: &str = "_memstate_nodes";

/// The folder of the records of exports at work (or that did not finish).
pub const EXPORTS: &str = "_memstate_exports";

/// The file name of a table's file at a version.
pub fn part_file(version: &str) -> String {
    format!("part-{version}.parquet")
}

/// The file of a node partition's manifest.
pub fn manifest_path(root: &Path, run: &str, node: i64) -> PathBuf {
    root.join(NODES)
        .join(run_folder(run))
        .join(format!("{}.json", node_folder(node)))
}

fn lock_path(root: &Path, run_folder: &str, node: i64) -> PathBuf {
    root.join(NODES)
        .join(run_folder)
        .join(format!("{}.lock", node_folder(node)))
}

/// flock `file`; `wait` false: whether it was taken.
fn flock(file: &File, mode: libc::c_int, wait: bool) -> std::io::Result<bool> {
    let mode = if wait { mode } else { mode | libc::LOCK_NB };
    loop {
        // SAFETY: flock on a file descriptor this process owns.
        if unsafe { libc::flock(file.as_raw_fd(), mode) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock if !wait => return Ok(false),
            _ => return Err(error),
        }
    }
}

fn open_lock(path: &Path) -> Result<File> {
    if let Some(folder) = path.parent() {
        fs::create_dir_all(folder).map_err(|error| Error::write(folder, error))?;
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|error| Error::write(path, error))
}

/// A version no other export call has: the clock, this process and a counter.
fn new_version() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    format!(
        "{nanos:x}-{:x}-{}",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A (run, node) as a record names it: the run's folder name and the node.
type Named = (String, i64);

/// The record of one export call, flock-held until the call has published everything.
pub struct Record {
    version: String,
    path: PathBuf,
    _file: File,
}

/// Start an export call over `partitions` (run, node) and `runs`: leftovers of dead exports are
/// cleaned, and the call's record written (before any partition file).
pub fn begin(root: &Path, partitions: &[(String, i64)], runs: &[String]) -> Result<Record> {
    let _lock = dataset::lock(root)?;
    let folder = root.join(EXPORTS);
    fs::create_dir_all(&folder).map_err(|error| Error::write(&folder, error))?;
    // The marker's temporary file of an export killed as it wrote it (written under this lock).
    remove_matching(root, |name| name.starts_with('.') && name.ends_with(".tmp"))?;
    for dead in dead_records(root)? {
        for (run, node) in &dead.partitions {
            sweep_if_free(root, run, *node, None)?;
        }
        for run in &dead.runs {
            sweep_run_folders(root, run)?;
        }
    }
    let version = new_version();
    let text = json!({
        "export": version,
        "pid": std::process::id(),
        "started_unix": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0),
        "partitions": partitions
            .iter()
            .map(|(run, node)| json!({"run": run, "folder": run_folder(run), "node": node}))
            .collect::<Vec<_>>(),
        "runs": runs.iter().map(|run| run_folder(run)).collect::<Vec<_>>(),
    });
    // Written under a hidden name and locked before it is renamed into place, so that no reader
    // ever finds the record unlocked while this export runs.
    let hidden = folder.join(format!(".{version}.json.tmp"));
    let path = folder.join(format!("{version}.json"));
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&hidden)
        .map_err(|error| Error::write(&hidden, error))?;
    flock(&file, libc::LOCK_EX, true).map_err(|error| Error::write(&hidden, error))?;
    let written = file
        .write_all(format!("{text:#}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&hidden, &path));
    if let Err(error) = written {
        let _ = fs::remove_file(&hidden);
        return Err(Error::write(&path, error));
    }
    Ok(Record {
        version,
        path,
        _file: file,
    })
}

impl Record {
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Every partition was published: the record goes, and the partitions this call wrote are
    /// struck from the records of exports that died.
    pub fn finish(self, root: &Path, written: &[(String, i64)]) -> Result<()> {
        let _lock = dataset::lock(root)?;
        let written: Vec<Named> = written
            .iter()
            .map(|(run, node)| (run_folder(run), *node))
            .collect();
        for dead in dead_records(root)? {
            let left: Vec<&Json> = dead
                .listed
                .iter()
                .filter(|entry| {
                    let named = (
                        entry["folder"].as_str().unwrap_or_default().to_string(),
                        entry["node"].as_i64().unwrap_or(i64::MIN),
                    );
                    !written.contains(&named)
                })
                .collect();
            if left.is_empty() {
                let _ = fs::remove_file(&dead.path);
            } else if left.len() < dead.listed.len() {
                let mut text = dead.text.clone();
                text["partitions"] = Json::Array(left.into_iter().cloned().collect());
                let bytes = format!("{text:#}\n");
                dataset::write_whole(&dead.path, |file| file.write_all(bytes.as_bytes()))?;
            }
        }
        fs::remove_file(&self.path).map_err(|error| Error::write(&self.path, error))
    }
}

/// A record of an export that is not running (its lock is free).
struct Dead {
    path: PathBuf,
    text: Json,
    listed: Vec<Json>,
    partitions: Vec<Named>,
    runs: Vec<String>,
}

/// The records whose export died; a half-written record of one (`.tmp`) is removed.
fn dead_records(root: &Path) -> Result<Vec<Dead>> {
    let folder = root.join(EXPORTS);
    let Ok(entries) = fs::read_dir(&folder) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if !flock(&file, libc::LOCK_EX, false).unwrap_or(false) {
            continue;
        }
        if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = fs::remove_file(&path);
            continue;
        }
        if !name.ends_with(".json") {
            continue;
        }
        let text: Json = fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Json::Null);
        let listed = text["partitions"].as_array().cloned().unwrap_or_default();
        let partitions = listed
            .iter()
            .filter_map(|entry| {
                Some((
                    entry["folder"].as_str()?.to_string(),
                    entry["node"].as_i64()?,
                ))
            })
            .collect();
        let runs = text["runs"]
            .as_array()
            .map(|runs| {
                runs.iter()
                    .filter_map(|run| run.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        found.push(Dead {
            path,
            text,
            listed,
            partitions,
            runs,
        });
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// Hidden temporary files of run-level merges that died (merges run under the dataset's lock,
/// which the caller holds, so none is in flight).
fn sweep_run_folders(root: &Path, run_folder: &str) -> Result<()> {
    for table in super::tables::ALL {
        if table.level == super::tables::Level::Node {
            continue;
        }
        let folder = root.join(table.name).join(run_folder);
        remove_matching(&folder, |name| {
            name.starts_with('.') && name.ends_with(".tmp")
        })?;
    }
    Ok(())
}

/// The files of the node tables' folders of a node that no manifest names: staged files, the
/// temporary files behind them, files of versions whose export died. Done only while holding the
/// node's lock (taken here unless `held`), so no export of it is under way.
fn sweep_if_free(root: &Path, run_folder: &str, node: i64, held: Option<&File>) -> Result<()> {
    let _lock = match held {
        Some(_) => None,
        None => {
            let lock = open_lock(&lock_path(root, run_folder, node))?;
            if !flock(&lock, libc::LOCK_EX, false).unwrap_or(false) {
                return Ok(());
            }
            Some(lock)
        }
    };
    let manifest = root
        .join(NODES)
        .join(run_folder)
        .join(format!("{}.json", node_folder(node)));
    let kept: Vec<String> = read_manifest(&manifest)
        .map(|files| files.into_values().collect())
        .unwrap_or_default();
    for table in node_tables() {
        let folder = root.join(table).join(run_folder).join(node_folder(node));
        remove_matching(&folder, |name| {
            let ours = name.starts_with("part-") || name.starts_with('.');
            // A folder without a manifest is a dataset of layout 1, whose file is part-0.
            let legacy = kept.is_empty() && name == dataset::PART_FILE;
            ours && !legacy && !kept.iter().any(|file| file.ends_with(&format!("/{name}")))
        })?;
    }
    // A manifest's own temporary file, left by an export killed as it switched.
    let hidden = format!(".{}.json.", node_folder(node));
    remove_matching(&root.join(NODES).join(run_folder), |name| {
        name.starts_with(&hidden) && name.ends_with(".tmp")
    })?;
    Ok(())
}

fn remove_matching(folder: &Path, remove: impl Fn(&str) -> bool) -> Result<()> {
    let Ok(entries) = fs::read_dir(folder) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if remove(&name) {
            let path = entry.path();
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(Error::write(&path, error)),
            }
        }
    }
    Ok(())
}

fn node_tables() -> impl Iterator<Item = &'static str> {
    super::tables::ALL
        .iter()
        .filter(|table| table.level == super::tables::Level::Node)
        .map(|table| table.name)
}

/// A manifest's files: table -> path inside the dataset.
fn read_manifest(path: &Path) -> Option<BTreeMap<String, String>> {
    let text: Json = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
    let files = text["files"].as_object()?;
    files
        .iter()
        .map(|(table, file)| Some((table.clone(), file.as_str()?.to_string())))
        .collect()
}

/// One node partition being written: its lock held, its files staged under hidden names until
/// [`NodeWrite::commit`].
pub struct NodeWrite<'a> {
    root: &'a Path,
    run: &'a str,
    node: i64,
    version: &'a str,
    lock: File,
    staged: Vec<(&'static str, PathBuf, PathBuf, u64)>,
}

impl<'a> NodeWrite<'a> {
    /// Take the node's lock (waiting for another export of it to finish).
    pub fn start(root: &'a Path, run: &'a str, node: i64, record: &'a Record) -> Result<Self> {
        let path = lock_path(root, &run_folder(run), node);
        let lock = open_lock(&path)?;
        flock(&lock, libc::LOCK_EX, true)
            .map_err(|error| Error::write(&path, Because::context("cannot lock", error)))?;
        Ok(NodeWrite {
            root,
            run,
            node,
            version: record.version(),
            lock,
            staged: Vec::new(),
        })
    }

    /// Where to write a table's file: a hidden name in its partition folder that does not end
    /// in `.parquet`, so that no reader's `*.parquet` pattern takes it.
    pub fn staging(&self, table: &str) -> PathBuf {
        dataset::node_partition(self.root, table, self.run, self.node)
            .join(format!(".{}.staged", part_file(self.version)))
    }

    /// A table's file was written at [`NodeWrite::staging`] with `rows`.
    pub fn staged(&mut self, table: &'static str, rows: u64) {
        let staged = self.staging(table);
        let visible = staged.with_file_name(part_file(self.version));
        self.staged.push((table, staged, visible, rows));
    }

    /// Make the staged files the partition: visible, then named by the manifest (the switch),
    /// then the files of the version before removed. Returns the visible files.
    pub fn commit(mut self) -> Result<Vec<(&'static str, PathBuf)>> {
        let staged = std::mem::take(&mut self.staged);
        for (index, (_, from, visible, _)) in staged.iter().enumerate() {
            if let Err(error) = fs::rename(from, visible) {
                for (_, from, _, _) in &staged[index..] {
                    let _ = fs::remove_file(from);
                }
                return Err(Error::write(visible, error));
            }
        }
        let inside = |path: &Path| {
            path.strip_prefix(self.root)
                .unwrap_or(path)
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        };
        let files: serde_json::Map<String, Json> = staged
            .iter()
            .map(|(table, _, visible, _)| (table.to_string(), Json::String(inside(visible))))
            .collect();
        let rows: serde_json::Map<String, Json> = staged
            .iter()
            .map(|(table, _, _, rows)| (table.to_string(), json!(rows)))
            .collect();
        let text = json!({
            "run": self.run,
            "node": self.node,
            "version": self.version,
            "files": files,
            "rows": rows,
            "written_by": format!("memstate {}", env!("CARGO_PKG_VERSION")),
        });
        let bytes = format!("{text:#}\n");
        let manifest = manifest_path(self.root, self.run, self.node);
        dataset::write_whole(&manifest, |file| file.write_all(bytes.as_bytes()))?;
        sweep_if_free(
            self.root,
            &run_folder(self.run),
            self.node,
            Some(&self.lock),
        )?;
        Ok(staged
            .into_iter()
            .map(|(table, _, visible, _)| (table, visible))
            .collect())
    }
}

impl Drop for NodeWrite<'_> {
    /// A write that did not commit removes what it staged (best effort; the next export of the
    /// node removes what is left).
    fn drop(&mut self) {
        for (_, staged, _, _) in &self.staged {
            let _ = fs::remove_file(staged);
        }
    }
}
