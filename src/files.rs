//! Files memstate writes for people (pages, charts, Datasette metadata): never over the data, never
//! half written.
//!
//! An output path is resolved first (links followed, relative parts made absolute) and refused
//! when it is the database, one of its companions (`-wal`, `-shm`, `-journal`), or a file the
//! database recorded as the source of a snapshot: `memstate map --html memstate.db` would
//! otherwise replace the database with a page. Files are compared by device and inode when they
//! exist (so hard links and links under other names are caught too) and by resolved path when
//! they do not (a `-wal` that is not there yet). The check runs before the command reads
//! anything, so a refusal costs nothing and writes nothing.
//!
//! A page is then written to a temporary file beside its target and renamed over it: a crash or
//! a full disk leaves the old file or none, never half a page. The target keeps its permissions.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// What an output must not overwrite.
#[derive(Debug, Default)]
pub struct Protected {
    /// Resolved paths of the database and its companions, existing or not.
    paths: Vec<(PathBuf, String)>,
    /// (device, inode) of every protected file that exists, with what it is.
    files: Vec<((u64, u64), String)>,
}

impl Protected {
    /// The database at `db` (as the user named it) and the sources it recorded (`snapshots.source`,
    /// a file name as given to `import`, with `:LINE` for a stream record, or `-`).
    pub fn new(db: &Path, sources: &[String]) -> Protected {
        let mut protected = Protected::default();
        let base = resolve(db);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = base.clone().into_os_string();
            name.push(suffix);
            let what = if suffix.is_empty() {
                "the database".to_string()
            } else {
                format!("the database's {suffix} file")
            };
            protected.add_file(Path::new(&name), &what);
            protected.paths.push((PathBuf::from(name), what));
        }
        let folder = db.parent().filter(|parent| !parent.as_os_str().is_empty());
        let mut seen = HashSet::new();
        for source in sources {
            let file = strip_line(source);
            if file == "-" || !seen.insert(file) {
                continue;
            }
            let what = format!("a dump the database imported ({file})");
            // Sources were named relative to where `import` ran: here, or the database's folder.
            protected.add_file(Path::new(file), &what);
            if let Some(folder) = folder {
                protected.add_file(&folder.join(file), &what);
            }
        }
        protected
    }

    fn add_file(&mut self, path: &Path, what: &str) {
        if let Ok(metadata) = fs::metadata(path) {
            if metadata.is_file() {
                self.files
                    .push(((metadata.dev(), metadata.ino()), what.to_string()));
            }
        }
    }

    /// The file to write for `output`, or a refusal (exit 2) when it is something protected.
    pub fn check(&self, output: &Path) -> Result<PathBuf> {
        let target = resolve(output);
        let refuse = |what: &str| {
            Error::Usage(format!(
                "{}: this is {what}; refusing to write over it (choose another output file)",
                output.display()
            ))
        };
        if let Some((_, what)) = self.paths.iter().find(|(path, _)| *path == target) {
            return Err(refuse(what));
        }
        if let Ok(metadata) = fs::metadata(&target) {
            let id = (metadata.dev(), metadata.ino());
            if let Some((_, what)) = self.files.iter().find(|(file, _)| *file == id) {
                return Err(refuse(what));
            }
            if metadata.is_dir() {
                return Err(Error::write(output, "is a folder"));
            }
        }
        Ok(target)
    }
}

/// A source as recorded, without the `:LINE` of a stream record.
fn strip_line(source: &str) -> &str {
    match source.rsplit_once(':') {
        Some((file, line))
            if !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) =>
        {
            file
        }
        _ => source,
    }
}

/// The path `path` names once links are followed and it is made absolute, whether or not the
/// file exists (a dangling link resolves to where it points).
pub fn resolve(path: &Path) -> PathBuf {
    resolve_within(path, 40)
}

fn resolve_within(path: &Path, links_left: u32) -> PathBuf {
    if let Ok(resolved) = fs::canonicalize(path) {
        return resolved;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if links_left > 0 {
        if let Ok(link) = fs::read_link(&absolute) {
            let pointed = match absolute.parent() {
                Some(parent) => parent.join(link),
                None => link,
            };
            return resolve_within(&pointed, links_left - 1);
        }
    }
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => {
            resolve_within(parent, links_left.saturating_sub(1)).join(name)
        }
        _ => lexical(&absolute),
    }
}

/// `a/./b/../c` as `a/c`, for a path none of whose parts exist.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Write `bytes` to `target` (a path [`Protected::check`] returned) through a temporary file in
/// the same folder, renamed over it once complete. `shown` is the path as the user gave it.
pub fn write_atomically(target: &Path, bytes: &[u8], shown: &Path) -> Result<()> {
    write_atomically_with(target, shown, |file| file.write_all(bytes))
}

/// [`write_atomically`] with the content streamed by `write` into the temporary file (a Parquet
/// file of millions of rows is never held whole): synced, given the target's permissions, then
/// renamed over it; on any error the temporary file is removed and the target left as it was.
pub fn write_atomically_with(
    target: &Path,
    shown: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    let folder = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    let permissions = fs::metadata(target)
        .ok()
        .map(|metadata| metadata.permissions());
    let mut attempt = 0u32;
    let (temporary, mut file) = loop {
        let temporary = folder.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
        {
            Ok(file) => break (temporary, file),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1
            }
            Err(error) => return Err(Error::write(shown, error)),
        }
    };
    let written = write(&mut file)
        .and_then(|()| file.sync_all())
        .and_then(|()| match &permissions {
            Some(permissions) => fs::set_permissions(&temporary, permissions.clone()),
            None => Ok(()),
        })
        .and_then(|()| fs::rename(&temporary, target));
    if let Err(error) = written {
        let _ = fs::remove_file(&temporary);
        return Err(Error::write(shown, error));
    }
    Ok(())
}

/// How much of a run id a file name keeps (the rest is told apart by the hash).
pub const STEM_CHARS: usize = 100;

/// A run id (free text) made safe for the start of a file name: letters, digits, `-`, `_` and `.`
/// kept, anything else `_`, no leading dot, at most [`STEM_CHARS`] of it; when that changed
/// anything, a hash of the whole id is added so two ids that differ only there still name
/// different files. (A file name holds 255 bytes on most file systems; a run id has no limit.)
pub fn safe_stem(text: &str) -> String {
    let safe: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(STEM_CHARS)
        .collect();
    // Neither a hidden file nor one a command would take for an option (`-n0.db`).
    let safe = safe.trim_start_matches(['.', '-']);
    if safe == text && !safe.is_empty() {
        safe.to_string()
    } else {
        let hash = xxhash_rust::xxh3::xxh3_64(text.as_bytes());
        let stem = if safe.is_empty() { "run" } else { safe };
        format!("{stem}-{:08x}", hash >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_of_any_length_names_a_file() {
        let long = "r".repeat(1000);
        let other = format!("{}s", "r".repeat(999));
        let (a, b) = (safe_stem(&long), safe_stem(&other));
        // 100 kept characters, a dash and 8 hex digits of the hash: well within 255 bytes.
        assert_eq!(a.len(), 109, "{a}");
        assert!(a.starts_with(&"r".repeat(100)) && !a.starts_with(&"r".repeat(101)));
        assert_ne!(
            a, b,
            "ids that differ past the kept part name different files"
        );
        assert_eq!(safe_stem("job-7.a"), "job-7.a");
        assert!(safe_stem("job/7").starts_with("job_7-"));
        assert!(safe_stem("..x").starts_with("x-"));
    }

    #[test]
    fn a_stream_record_names_its_file() {
        assert_eq!(strip_line("dumps/run.ndjson:12"), "dumps/run.ndjson");
        assert_eq!(strip_line("dumps/run.json"), "dumps/run.json");
        assert_eq!(strip_line("odd:name.json"), "odd:name.json");
        assert_eq!(strip_line(":12"), ":12");
    }

    #[test]
    fn paths_resolve_whether_or_not_they_exist() {
        let dir = std::env::temp_dir().join(format!("memstate-files-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub")).unwrap();
        let real = fs::canonicalize(&dir).unwrap();
        assert_eq!(resolve(&dir.join("sub/../x.db-wal")), real.join("x.db-wal"));
        std::os::unix::fs::symlink(real.join("target.db"), dir.join("link")).unwrap();
        assert_eq!(resolve(&dir.join("link")), real.join("target.db"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
