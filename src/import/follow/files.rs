//! What `import --follow` keeps of each file between scans, and how it tells that a file changed:
//! its stamp (device, inode, length, modification time), how far a stream was read, and hashes of
//! a few KiB that tell a file grown at its end from one written anew in place.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::import::input::{Form, Input};

/// What identifies a version of a file: its inode, length and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) device: u64,
    pub(super) inode: u64,
    pub(super) len: u64,
    pub(super) modified: Option<SystemTime>,
}

pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        device: meta.dev(),
        inode: meta.ino(),
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// What is known of one file.
pub(super) enum Tracked {
    Document {
        /// The version last imported or refused.
        done: Option<Stamp>,
        /// The version that does not parse (yet), and since when it has been the same.
        failing: Option<(Stamp, Instant)>,
    },
    PlainStream(Position),
    PackedStream {
        /// Complete lines taken so far.
        lines: u64,
        done: Option<Stamp>,
        failing: Option<(Stamp, Instant)>,
        /// How many of the compressed file's first bytes were hashed when it was last read, and
        /// their hash: an appended member keeps them, a file written anew does not (its lines
        /// are then taken from the start).
        head: Option<(u64, u64)>,
    },
}

/// How far a plain stream has been read.
#[derive(Default)]
pub(super) struct Position {
    /// The file's device and inode: another file under the same name is read from its start.
    pub(super) file: Option<(u64, u64)>,
    /// Bytes read so far, and complete lines among them.
    pub(super) offset: u64,
    pub(super) line: u64,
    /// The start of a line whose newline is not written yet.
    pub(super) partial: Vec<u8>,
    /// The line being read is over the size limit: its bytes are dropped until its newline.
    pub(super) oversized: bool,
    /// The file's modification time, and hashes of its first bytes and of the bytes just before
    /// `offset`, when last read: a stream truncated and written again in place (same inode, as
    /// long or longer) changes them, and is then read again from its start.
    pub(super) modified: Option<SystemTime>,
    pub(super) marks: Option<(u64, u64)>,
}

/// How many bytes at the start of a file (and before a stream's read position) are hashed to
/// tell a file written anew in place from one that only grew.
pub(super) const MARK_BYTES: u64 = 4096;

/// The xxh3 hash of `length` bytes of a file from `start` (fewer when the file is shorter).
pub(super) fn hash_of(path: &Path, start: u64, length: u64) -> Option<u64> {
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::with_capacity(length as usize);
    file.take(length).read_to_end(&mut bytes).ok()?;
    Some(xxhash_rust::xxh3::xxh3_64(&bytes))
}

/// The marks of a file read up to `offset`: its first bytes and those just before `offset`.
pub(super) fn marks_of(path: &Path, offset: u64) -> Option<(u64, u64)> {
    let head = hash_of(path, 0, offset.min(MARK_BYTES))?;
    let before = offset.saturating_sub(MARK_BYTES);
    let tail = hash_of(path, before, offset - before)?;
    Some((head, tail))
}

/// Whether a file's first bytes are those of gzip or zstd.
pub(super) fn is_compressed(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    let read = File::open(path)
        .and_then(|mut file| file.read(&mut magic))
        .unwrap_or(0);
    magic[..read].starts_with(&[0x1f, 0x8b]) || magic[..read].starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

pub(super) fn tracked_for(input: &Input, path: &Path) -> Tracked {
    let name = input.display.to_ascii_lowercase();
    match input.form {
        Form::Stream if name.ends_with(".gz") || name.ends_with(".zst") || is_compressed(path) => {
            Tracked::PackedStream {
                lines: 0,
                done: None,
                failing: None,
                head: None,
            }
        }
        Form::Stream => Tracked::PlainStream(Position::default()),
        // A file named otherwise is read as one document: name streams .ndjson or .jsonl.
        Form::Document | Form::Sniff => Tracked::Document {
            done: None,
            failing: None,
        },
    }
}

/// Whether to read a file again, and its stamp: not when its version is the one done with, nor
/// while the version that failed has not had `settle` to change (`None`); else whether it has had
/// it (then a failure is final). Not when it cannot be looked at now.
pub(super) fn worth_reading(
    path: &Path,
    done: Option<Stamp>,
    failing: Option<(Stamp, Instant)>,
    settle: Duration,
) -> Option<(Stamp, bool)> {
    let now = stamp(path)?;
    if done == Some(now) {
        return None;
    }
    match failing {
        Some((seen, since)) if seen == now => (since.elapsed() >= settle).then_some((now, true)),
        _ => Some((now, false)),
    }
}
