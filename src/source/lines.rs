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
}
