//! Whole call stacks of PyTorch blocks and trace events: every frame a block or event carries
//! (`frames`, innermost first, as `torch/csrc/cuda/Module.cpp` writes them, each
//! `{filename, line, name}`), interned once per pickle (frames by file, line and name; stacks by
//! their frames), and what they weigh counted against the pickle's size, as every input is
//! bounded. A dump then carries the frames and stacks its blocks use (format v1's `frames` and
//! `stacks`).

// hashbrown's default hasher: a trace of 3M events looks its frame list up once an event.
use hashbrown::HashMap;

use super::pickle::{self, Pickle};
use crate::dump::write;
use crate::import::source::Calls;

/// One frame: file, line, name (the texts as the pickle gives them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Frame {
    file: String,
    line: Option<i64>,
    name: Option<String>,
}

/// The stacks of one pickle.
pub(super) struct Stacks {
    frames: Vec<Frame>,
    frame_index: HashMap<Frame, u32>,
    /// The frame of each (file, line, name) as the pickle holds them: a long file name the
    /// memo shares is compared and copied once, not once a reference.
    by_ids: HashMap<(pickle::Id, Option<i64>, Option<pickle::Id>), u32>,
    stacks: Vec<Vec<u32>>,
    stack_index: HashMap<Vec<u32>, u32>,
    /// The stack of each list of frames met (a list the pickle's memo shares is read once).
    by_list: HashMap<pickle::Id, Option<u32>>,
    bytes: usize,
    budget: usize,
}

impl Stacks {
    pub(super) fn new(pickle_bytes: usize) -> Stacks {
        Stacks {
            frames: Vec::new(),
            frame_index: HashMap::new(),
            by_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_index: HashMap::new(),
            by_list: HashMap::new(),
            bytes: 0,
            budget: pickle_bytes.saturating_add(32 << 20),
        }
    }

    /// The stack of a list of frames (`None` for an empty list or one without a frame memstate
    /// reads); an error when the stacks made would outweigh what a pickle of its size can say.
    pub(super) fn of(
        &mut self,
        pickle: &Pickle,
        list: pickle::Id,
    ) -> std::result::Result<Option<u32>, String> {
        if let Some(&known) = self.by_list.get(&list) {
            return Ok(known);
        }
        let mut stack = Vec::new();
        for &item in pickle.items(list).unwrap_or(&[]) {
            let Some(file_id) = pickle.get(item, "filename") else {
                continue;
            };
            let Some(file) = pickle.str(file_id) else {
                continue;
            };
            let line = pickle
                .get(item, "line")
                .and_then(|line| pickle.int(line))
                .and_then(|line| i64::try_from(line).ok())
                .filter(|&line| line >= 0);
            let name_id = pickle.get(item, "name");
            let name = name_id.and_then(|name| pickle.str(name));
            let ids = (file_id, line, name.and(name_id));
            if let Some(&index) = self.by_ids.get(&ids) {
                stack.push(index);
                continue;
            }
            let frame = Frame {
                file: file.to_string(),
                line,
                name: name.map(str::to_string),
            };
            let index = match self.frame_index.get(&frame) {
                Some(&index) => index,
                None => {
                    self.weigh(frame.file.len() + frame.name.as_ref().map_or(0, String::len) + 96)?;
                    let index = self.frames.len() as u32;
                    self.frame_index.insert(frame.clone(), index);
                    self.frames.push(frame);
                    index
                }
            };
            self.by_ids.insert(ids, index);
            stack.push(index);
        }
        let found = if stack.is_empty() {
            None
        } else {
            Some(match self.stack_index.get(&stack) {
                Some(&index) => index,
                None => {
                    self.weigh(stack.len() * 8 + 64)?;
                    let index = self.stacks.len() as u32;
                    self.stack_index.insert(stack.clone(), index);
                    self.stacks.push(stack);
                    index
                }
            })
        };
        self.by_list.insert(list, found);
        Ok(found)
    }

    /// The stack already made of a list of frames (by [`Stacks::of`]).
    pub(super) fn known(&self, list: Option<pickle::Id>) -> Option<u32> {
        list.and_then(|list| self.by_list.get(&list).copied().flatten())
    }

    fn weigh(&mut self, bytes: usize) -> std::result::Result<(), String> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.budget {
            return Err(format!(
                "its frames and stacks weigh more than a snapshot of its size could say ({} bytes made; memstate allows the pickle's size plus 32 MiB): not an allocator snapshot",
                self.bytes
            ));
        }
        Ok(())
    }
}

/// The frames and stacks a dump carries: those of the stacks its blocks use, numbered in the
/// order they are first asked for.
pub(super) struct DumpCalls<'s> {
    stacks: &'s Stacks,
    local_stack: HashMap<u32, usize>,
    local_frame: HashMap<u32, usize>,
    calls: Calls,
}

impl<'s> DumpCalls<'s> {
    pub(super) fn new(stacks: &'s Stacks) -> Self {
        DumpCalls {
            stacks,
            local_stack: HashMap::new(),
            local_frame: HashMap::new(),
            calls: Calls::default(),
        }
    }

    /// The dump's index of the pickle's stack `stack`.
    pub(super) fn stack(&mut self, stack: u32) -> Option<usize> {
        if let Some(&local) = self.local_stack.get(&stack) {
            return Some(local);
        }
        let frames = self.stacks.stacks.get(stack as usize)?;
        let mut local_frames = Vec::with_capacity(frames.len());
        for &frame in frames {
            let local = match self.local_frame.get(&frame) {
                Some(&local) => local,
                None => {
                    let found = self.stacks.frames.get(frame as usize)?;
                    let local = self.calls.frames.len();
                    self.calls.frames.push(write::Frame {
                        file: found.file.clone().into(),
                        line: found.line,
                        name: found.name.clone().map(write::Text::from),
                    });
                    self.local_frame.insert(frame, local);
                    local
                }
            };
            local_frames.push(local);
        }
        let local = self.calls.stacks.len();
        self.calls.stacks.push(local_frames);
        self.local_stack.insert(stack, local);
        Some(local)
    }

    pub(super) fn finish(self) -> Calls {
        self.calls
    }
}
