//! Prose fitted to the terminal: the stories and headers memstate tells people are written
//! through [`Wrapping`], which breaks each line longer than the terminal at spaces and indents the
//! rest under the line's value column (`  request         270 MiB ...` goes on under `270`). A
//! word longer than the width (a link) stays whole on a line of its own; colour escapes take no
//! room.

use std::io::{self, Write};

/// The width of a line as the terminal shows it: characters, without colour escapes.
fn shown_width(line: &str) -> usize {
    let mut width = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-letter.
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            width += 1;
        }
    }
    width
}

/// Where the rest of a broken line starts: under its value when it opens with a short label
/// and two or more spaces (`  request         value`), else two in from its own indentation.
fn continuation_indent(line: &str, width: usize) -> usize {
    let leading = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[leading..];
    // A label is a word or two (`request`, `already freed`) before the gap.
    let under_value = rest.find("  ").and_then(|gap| {
        let value = gap + rest[gap..].len() - rest[gap..].trim_start_matches(' ').len();
        let words = rest[..gap].split(' ').count();
        (gap <= 24 && words <= 2 && value < rest.len()).then_some(leading + value)
    });
    let indent = under_value.unwrap_or(leading + 2);
    if indent * 2 > width {
        (leading + 2).min(width / 4)
    } else {
        indent
    }
}

/// Whether the space at `at` holds a number to its unit (`572 MiB`, `0.3 s`): no break there.
fn binds(line: &str, at: usize) -> bool {
    const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "s", "ms"];
    let number_before = line[..at].ends_with(|c: char| c.is_ascii_digit());
    let unit_after = line[at + 1..]
        .split([' ', ',', ';', ')', '.'])
        .next()
        .is_some_and(|word| UNITS.contains(&word));
    number_before && unit_after
}

/// One line broken to `width` columns (shorter lines as they are).
pub fn wrap_line(line: &str, width: usize) -> Vec<String> {
    if shown_width(line) <= width || width < 8 {
        return vec![line.to_string()];
    }
    let indent = continuation_indent(line, width);
    let mut lines = Vec::new();
    let mut rest = line.to_string();
    let mut first = true;
    while shown_width(&rest) > width {
        let start = if first {
            rest.len() - rest.trim_start_matches(' ').len()
        } else {
            indent
        };
        // The last space that leaves the line within the width; else the first one after it.
        let spaces: Vec<usize> = rest
            .char_indices()
            .filter(|&(at, c)| c == ' ' && at > start && !binds(&rest, at))
            .map(|(at, _)| at)
            .collect();
        let fitting = spaces
            .iter()
            .rev()
            .find(|&&at| shown_width(&rest[..at]) <= width);
        let Some(&cut) = fitting.or(spaces.first()) else {
            break;
        };
        lines.push(rest[..cut].trim_end().to_string());
        let next = rest[cut..].trim_start();
        // A word too long for the indentation (a link) moves left as far as it must.
        let word = next.split(' ').next().map_or(0, shown_width);
        let indent = indent.min(width.saturating_sub(word));
        rest = format!("{}{next}", " ".repeat(indent));
        first = false;
    }
    lines.push(rest);
    lines
}

/// A writer that fits each line it is given to a width.
pub struct Wrapping<'w> {
    out: &'w mut dyn Write,
    width: usize,
    line: Vec<u8>,
}

impl<'w> Wrapping<'w> {
    pub fn new(out: &'w mut dyn Write, width: usize) -> Wrapping<'w> {
        Wrapping {
            out,
            width,
            line: Vec::new(),
        }
    }

    fn write_line(&mut self, newline: bool) -> io::Result<()> {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        let lines = wrap_line(&text, self.width);
        let last = lines.len() - 1;
        for (index, line) in lines.iter().enumerate() {
            self.out.write_all(line.as_bytes())?;
            if newline || index < last {
                self.out.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    /// Write a last line that has no newline yet.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.line.is_empty() {
            self.write_line(false)?;
        }
        self.out.flush()
    }
}

impl Write for Wrapping<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            self.line.extend_from_slice(&rest[..end]);
            self.write_line(true)?;
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_break_at_spaces_under_their_value() {
        let line = "  request         270 MiB (283057664 bytes, aligned to 512), deferred_buffer";
        // 18 columns of label, then the value; at 45 columns the rest goes under `270`.
        assert_eq!(
            wrap_line(line, 45),
            [
                "  request         270 MiB (283057664 bytes,",
                "                  aligned to 512),",
                "                  deferred_buffer"
            ]
        );
        // Without a label, two in from the line's own indentation.
        assert_eq!(
            wrap_line("Out of memory in run node 0 seq 33, GPU_FB_MEM 0x1e:", 30),
            ["Out of memory in run node 0", "  seq 33, GPU_FB_MEM 0x1e:"]
        );
        // A word longer than the width stays whole at the left edge, one that fits only left
        // of the value column moves left; a short line is left as it is.
        assert_eq!(
            wrap_line("  map  file:///a/very/long/path/page.html#memory=0x1e", 20),
            ["  map", "file:///a/very/long/path/page.html#memory=0x1e"]
        );
        assert_eq!(
            wrap_line("  link   see map.html#memory=0x1e00", 24),
            ["  link   see", "  map.html#memory=0x1e00"]
        );
        assert_eq!(wrap_line("short", 20), ["short"]);
        // A number stays with its unit.
        assert_eq!(
            wrap_line("it freed 572 MiB in all", 13),
            ["it freed", "  572 MiB in", "  all"]
        );
        // Colour escapes take no room.
        assert_eq!(shown_width("\u{1b}[31mred\u{1b}[0m"), 3);
    }

    #[test]
    fn the_writer_wraps_what_it_is_given_in_any_pieces() {
        let mut out = Vec::new();
        let mut wrapping = Wrapping::new(&mut out, 12);
        wrapping.write_all(b"one two three ").unwrap();
        wrapping.write_all(b"four\nfive").unwrap();
        wrapping.finish().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "one two\n  three four\nfive"
        );
    }
}
