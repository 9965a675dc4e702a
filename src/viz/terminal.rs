//! The memory map in a terminal: one proportional bar per memory, each cell showing what fills
//! most of its bytes, coloured on a terminal or lettered (`--no-color`, or when not a terminal).

use std::io::{self, Write};

use super::{cells, segments, Fill};
use crate::analysis::Layout;
use crate::units::{hex_offset, human, ratio, visible};

/// How to draw the bars.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub width: usize,
    pub color: bool,
}

/// A figure, or "unknown" when the input does not say it.
fn known(figure: Option<u64>) -> String {
    figure.map_or_else(|| "unknown".to_string(), human)
}

fn letter(fill: Option<Fill>) -> char {
    match fill {
        Some(Fill::Valid) => 'V',
        Some(Fill::Collectable) => 'c',
        Some(Fill::PendingFree) => 'f',
        Some(Fill::PendingAlloc) => 'a',
        Some(Fill::Hole) => '.',
        Some(Fill::Unaccounted) => 'x',
        None => ' ',
    }
}

/// ANSI colours: red valid, yellow collectable, blue pending_free, magenta pending_alloc,
/// green holes, grey unaccounted.
fn colour(fill: Option<Fill>) -> &'static str {
    match fill {
        Some(Fill::Valid) => "\x1b[31m█",
        Some(Fill::Collectable) => "\x1b[33m█",
        Some(Fill::PendingFree) => "\x1b[34m█",
        Some(Fill::PendingAlloc) => "\x1b[35m█",
        Some(Fill::Hole) => "\x1b[32m·",
        Some(Fill::Unaccounted) => "\x1b[90m▒",
        None => " ",
    }
}

/// The legend, on as many lines as the width needs.
pub fn legend(style: Style) -> String {
    let mut parts = Vec::new();
    for fill in Fill::ALL {
        let mark = if style.color {
            format!("{}\x1b[0m", colour(Some(fill)))
        } else {
            letter(Some(fill)).to_string()
        };
        parts.push((
            format!("{mark} {}", fill.name()),
            2 + fill.name().chars().count(),
        ));
    }
    // Items two spaces apart, on as many lines as the width (the bars' and their frame's) needs.
    let room = style.width + 2;
    let mut lines: Vec<(String, usize)> = Vec::new();
    for (part, width) in parts {
        match lines.last_mut() {
            Some((line, used)) if *used + 2 + width <= room => {
                line.push_str("  ");
                line.push_str(&part);
                *used += 2 + width;
            }
            _ => lines.push((part, width)),
        }
    }
    lines
        .into_iter()
        .map(|(line, _)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Draw one memory over `[start, end)` (the whole memory when `None`).
pub fn draw(
    layout: &Layout,
    range: Option<(u64, u64)>,
    style: Style,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (start, end) = range.unwrap_or((0, layout.capacity));
    let end = end.min(layout.capacity);
    writeln!(
        out,
        "{} {} (node {}, seq {}): {} capacity, {} free in {} holes, largest hole {}, fragmentation {}, largest after collection {}",
        layout.handle,
        visible(&layout.kind),
        layout.node,
        layout.seq,
        known(layout.known_capacity()),
        known(layout.known_free()),
        if layout.unknown.holes_known() { layout.holes.len().to_string() } else { "unknown".to_string() },
        known(layout.known_largest_hole()),
        if layout.unknown.holes_known() { ratio(layout.fragmentation()) } else { "unknown".to_string() },
        known(layout.known_largest_reclaimable()),
    )?;
    if layout.unknown.any() {
        writeln!(
            out,
            "  unknown: {} (the input does not say){}",
            layout.unknown.names().join(", "),
            if layout.unknown.placement {
                "; the allocations are drawn in stand-in places (their sizes are known, not where they lie)"
            } else {
                ""
            }
        )?;
    }
    let painted = segments(layout);
    let row: String = cells(&painted, start, end, style.width.max(1))
        .into_iter()
        .map(|fill| {
            if style.color {
                colour(fill).to_string()
            } else {
                letter(fill).to_string()
            }
        })
        .collect();
    let reset = if style.color { "\x1b[0m" } else { "" };
    writeln!(out, "|{row}{reset}|")?;
    let left = hex_offset(start as i64);
    let right = hex_offset(end as i64);
    let pad = (style.width + 2).saturating_sub(left.len() + right.len());
    writeln!(out, "{left}{}{right}", " ".repeat(pad))
}
