//! File-system change events for the follower, when the platform and file system give them (it
//! scans either way).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// File-system change events, when the platform and file system give them.
pub(super) struct Watch {
    watcher: notify::RecommendedWatcher,
    watched: HashSet<PathBuf>,
}

impl Watch {
    pub(super) fn start(wake: mpsc::Sender<()>) -> std::result::Result<Watch, String> {
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Opening and reading files (this follower's own scans among them) is not a change:
            // waking on it made an idle follower scan without end.
            if event.is_ok_and(|event| !event.kind.is_access()) {
                let _ = wake.send(());
            }
        })
        .map_err(|error| format!("no file-system events here: {error}"))?;
        Ok(Watch {
            watcher,
            watched: HashSet::new(),
        })
    }

    /// Watch each path that exists and is not watched yet: a folder and all below it, or the
    /// folder holding a file (so a file written anew, by rename, is seen too).
    pub(super) fn add(&mut self, paths: &[String]) {
        use notify::{RecursiveMode, Watcher};
        for given in paths {
            let path = Path::new(given);
            let (target, mode) = if path.is_dir() {
                (path.to_path_buf(), RecursiveMode::Recursive)
            } else {
                match path.parent() {
                    Some(parent) if parent.as_os_str().is_empty() => {
                        (PathBuf::from("."), RecursiveMode::NonRecursive)
                    }
                    Some(parent) => (parent.to_path_buf(), RecursiveMode::NonRecursive),
                    None => continue,
                }
            };
            if !target.exists() || self.watched.contains(&target) {
                continue;
            }
            // A path that cannot be watched (too many watches, a file system without events) is
            // still scanned.
            if self.watcher.watch(&target, mode).is_ok() {
                self.watched.insert(target);
            }
        }
    }
}
