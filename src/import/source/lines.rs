//! A log read as a stream of lines, in memory independent of its length: one line at a time in
//! one reused buffer, a line longer than [`MAX_LINE`] cut there (the rest of it skipped, never
//! held), bytes that are not UTF-8 replaced. What the log sources read their input through.

use std::borrow::Cow;
use std::io::{self, BufRead};

/// The longest line kept whole. Every line a producer memstate reads writes is far shorter; a
/// longer one (a binary file, a giant JSON line) is kept only this far.
pub const MAX_LINE: usize = 64 * 1024;

/// Lines of a reader, numbered from 1.
pub struct Lines<'r> {
    reader: &'r mut dyn BufRead,
    buffer: Vec<u8>,
    number: usize,
}

impl<'r> Lines<'r> {
    pub fn new(reader: &'r mut dyn BufRead) -> Lines<'r> {
        Lines {
            reader,
            buffer: Vec::with_capacity(1024),
            number: 0,
        }
    }

    /// The next line (without its end of line) and its number; `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<(usize, Cow<'_, str>)>> {
        self.buffer.clear();
        let mut any = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (taken, done) = match chunk.iter().position(|&byte| byte == b'\n') {
                Some(at) => (at + 1, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LINE.saturating_sub(self.buffer.len());
            let keep = if done { taken - 1 } else { taken };
            self.buffer.extend_from_slice(&chunk[..keep.min(room)]);
            self.reader.consume(taken);
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        if self.buffer.last() == Some(&b'\r') {
            self.buffer.pop();
        }
        Ok(Some((self.number, String::from_utf8_lossy(&self.buffer))))
    }
}

impl Lines<'_> {
    /// Skip the whole lines ahead that hold none of `markers`, as far as they are buffered, and
    /// stop before the first that holds one (the next [`Lines::next_line`] reads it). Lines are
    /// still counted. A log's readers call this while no line without a marker can change what
    /// they find: most of a long log is then passed over at the speed of a byte search.
    pub fn skip_lines_without(&mut self, markers: &[memchr::memmem::Finder<'_>]) -> io::Result<()> {
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            let first = markers.iter().filter_map(|marker| marker.find(chunk)).min();
            let before = &chunk[..first.unwrap_or(chunk.len())];
            // Up to the end of the last whole line before the marker: a line cut by the end of
            // the buffer, or holding the marker, is left to `next_line`.
            let Some(end) = memchr::memrchr(b'\n', before).map(|at| at + 1) else {
                return Ok(());
            };
            self.number += memchr::memchr_iter(b'\n', &chunk[..end]).count();
            self.reader.consume(end);
            if first.is_some() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8]) -> Vec<(usize, String)> {
        let mut reader: &[u8] = text;
        let mut lines = Lines::new(&mut reader);
        let mut out = Vec::new();
        while let Some((number, line)) = lines.next_line().unwrap() {
            out.push((number, line.into_owned()));
        }
        out
    }

    #[test]
    fn lines_are_numbered_and_cut_at_the_bound() {
        assert_eq!(
            all(b"a\r\nb\n\nc"),
            vec![
                (1, "a".to_string()),
                (2, "b".to_string()),
                (3, String::new()),
                (4, "c".to_string())
            ]
        );
        let mut long = vec![b'x'; MAX_LINE * 3];
        long.extend_from_slice(b"\nend\n");
        let lines = all(&long);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].1.len(), MAX_LINE);
        assert_eq!(lines[1], (2, "end".to_string()));
        assert!(all(b"").is_empty());
    }

    /// Skipping passes over lines without a marker, counts them, and leaves the line with one
    /// (even across small buffers, where a line is cut by the buffer's end) to be read whole.
    #[test]
    fn skipped_lines_are_counted_and_the_marked_one_is_read() {
        let text = b"one\ntwo\nthree has MARK in it\nfour\n";
        for capacity in [1, 2, 5, 8, 64] {
            let mut reader = std::io::BufReader::with_capacity(capacity, &text[..]);
            let mut lines = Lines::new(&mut reader);
            let marker = memchr::memmem::Finder::new("MARK");
            let mut seen = Vec::new();
            loop {
                lines
                    .skip_lines_without(std::slice::from_ref(&marker))
                    .unwrap();
                match lines.next_line().unwrap() {
                    Some((number, line)) => seen.push((number, line.into_owned())),
                    None => break,
                }
            }
            // Every line with the marker is read whole, with its own number; lines before it are
            // never lost from the count.
            let marked: Vec<_> = seen
                .iter()
                .filter(|(_, line)| line.contains("MARK"))
                .collect();
            assert_eq!(
                marked,
                [&(3, "three has MARK in it".to_string())],
                "capacity {capacity}"
            );
            assert!(seen.iter().all(|(number, line)| {
                ["one", "two", "three has MARK in it", "four"][number - 1] == line
            }));
        }
    }
}
