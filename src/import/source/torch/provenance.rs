//! Where a PyTorch block was allocated: the frame chosen from its frames (the user's own Python
//! first, as MemoryViz shows it), made into `file.py:LINE` text once per (file name, line), and
//! the weight of every text made counted against the pickle's size.

use std::collections::HashMap;
use std::sync::Arc;

use super::pickle::{self, Pickle};

/// The provenance texts made from a pickle's frames, each made once per (file name, line) and
/// shared by every block that names it, and what they weigh together: a file name of a megabyte
/// referred to by thousands of frames (through the memo) is one text, and the texts made may not
/// outweigh the pickle's own budget.
pub(super) struct Provenances {
    made: HashMap<(pickle::Id, i128), Arc<str>>,
    /// Whether each file name met is Python's, and a library's: looked at once per name.
    kinds: HashMap<pickle::Id, (bool, bool)>,
    /// The frame chosen from each list of frames (file name, line): a list is looked through
    /// once however many blocks refer to it.
    chosen: HashMap<pickle::Id, Option<(pickle::Id, i128)>>,
    bytes: usize,
    budget: usize,
}

impl Provenances {
    pub(super) fn new(pickle_bytes: usize) -> Provenances {
        Provenances {
            made: HashMap::new(),
            kinds: HashMap::new(),
            chosen: HashMap::new(),
            bytes: 0,
            budget: pickle_bytes.saturating_add(32 << 20),
        }
    }

    /// Where a block was allocated: `file.py:LINE` of its innermost frame in the user's code.
    /// The frames are the block's own, or (PyTorch 2.0's legacy form) those of its first
    /// `history` entry, as MemoryViz's `annotate_snapshot` reads them. The frame is chosen from
    /// the file names as they stand in the pickle; only its text is made.
    pub(super) fn of(
        &mut self,
        pickle: &Pickle,
        block: pickle::Id,
    ) -> std::result::Result<Option<Arc<str>>, String> {
        let Some(list) = frames_of(pickle, block) else {
            return Ok(None);
        };
        let chosen = match self.chosen.get(&list) {
            Some(&chosen) => chosen,
            None => {
                let chosen = self.choose(pickle, list);
                self.chosen.insert(list, chosen);
                chosen
            }
        };
        let Some((name, line)) = chosen else {
            return Ok(None);
        };
        if let Some(made) = self.made.get(&(name, line)) {
            return Ok(Some(Arc::clone(made)));
        }
        let text = pickle.str(name).unwrap_or_default();
        let made: Arc<str> = Arc::from(format!("{text}:{line}"));
        self.bytes = self.bytes.saturating_add(made.len() + 64);
        if self.bytes > self.budget {
            return Err(format!(
                "the blocks' frames name more text than a snapshot of {} bytes could ({} bytes of `file:line`, memstate allows the pickle's size plus 32 MiB): not an allocator snapshot",
                pickle.len(),
                self.bytes
            ));
        }
        self.made.insert((name, line), Arc::clone(&made));
        Ok(Some(made))
    }

    /// The frame of a list of frames a block's provenance names: its file name and line.
    fn choose(&mut self, pickle: &Pickle, list: pickle::Id) -> Option<(pickle::Id, i128)> {
        let frames = pickle.items(list)?;
        // Each frame's file name (a string), its kind, and its line.
        let mut found: Vec<(pickle::Id, (bool, bool), i128)> = Vec::new();
        for &index in frames {
            let Some(name) = pickle.get(index, "filename") else {
                continue;
            };
            let Some(line) = pickle.get(index, "line").and_then(|line| pickle.int(line)) else {
                continue;
            };
            let Some(bytes) = pickle.str_bytes(name) else {
                continue;
            };
            let kind = *self.kinds.entry(name).or_insert_with(|| {
                let library = [b"/site-packages/".as_slice(), b"/torch/"]
                    .iter()
                    .any(|part| memchr::memmem::find(bytes, part).is_some());
                (bytes.ends_with(b".py"), library)
            });
            found.push((name, kind, line));
        }
        // The innermost frame of the user's own Python, else any Python frame, else the
        // innermost. A file name is Python's when it ends in `.py` (the text made of it then
        // holds `.py:`).
        let chosen = found
            .iter()
            .find(|(_, (python, library), _)| *python && !library)
            .or_else(|| found.iter().find(|(_, (python, _), _)| *python))
            .or_else(|| found.first());
        chosen.map(|&(name, _, line)| (name, line))
    }
}

/// A block's frames: its own, or those of its first `history` entry (PyTorch 2.0).
pub(super) fn frames_of(pickle: &Pickle, block: pickle::Id) -> Option<pickle::Id> {
    match pickle.get(block, "frames") {
        Some(frames) => Some(frames),
        None => {
            let history = pickle.items(pickle.get(block, "history")?)?;
            pickle.get(*history.first()?, "frames")
        }
    }
}
