//! A result laid out for people: each cell as they read it (sizes in binary units, offsets in
//! hex), the columns they see, and the table fitted to the terminal (columns hidden, text
//! shortened, and said so).

use std::io::{self, Write};

use super::{hex, Cell, Style, Table, Unit};
use crate::units;

/// A cell as people read it.
pub fn for_people(cell: &Cell, unit: Unit) -> String {
    match (cell, unit) {
        (Cell::Null, _) => String::new(),
        (Cell::Integer(number), Unit::Bytes) => units::human_size(*number),
        (Cell::Integer(number), Unit::Offset) => units::hex_offset(*number),
        (Cell::Integer(number), _) => number.to_string(),
        (Cell::Real(number), Unit::Ratio) => units::ratio(*number),
        (Cell::Real(number), Unit::Seconds) => units::seconds(*number),
        (Cell::Real(number), Unit::Bytes) => units::human_size_real(*number),
        (Cell::Real(number), _) => {
            let text = format!("{number:.3}");
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        (Cell::Text(text), _) => units::visible(text).into_owned(),
        (Cell::Blob(bytes), _) => hex(bytes),
        (Cell::Json(text), _) => units::visible(text).into_owned(),
    }
}

/// The indices of the columns people see.
fn shown_columns(table: &Table, style: &Style) -> Vec<usize> {
    let pick = |names: &[String]| -> Vec<usize> {
        names.iter().filter_map(|name| table.column(name)).collect()
    };
    match (&style.columns, &table.compact) {
        (Some(names), _) => pick(names),
        (None, Some(names)) if !style.wide => pick(names),
        _ => (0..table.columns.len()).collect(),
    }
}

/// Shorten `text` to `width` characters, marking the cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

pub(super) fn write_table(table: &Table, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    let mut shown = shown_columns(table, style);
    let mut cells: Vec<Vec<String>> = table
        .rows
        .iter()
        .map(|row| {
            shown
                .iter()
                .map(|&index| for_people(&row[index], table.units[index]))
                .collect()
        })
        .collect();
    let mut titles: Vec<String> = shown
        .iter()
        .map(|&index| table.columns[index].clone())
        .collect();
    let mut hidden: Vec<(usize, String)> = Vec::new();
    // Fit the terminal. Text columns can shrink to 12 characters; when the table would not fit
    // even so (and the user chose no columns), hide columns, text ones first, from the right,
    // keeping the first, and say which. Then shorten the widest text columns until it fits.
    if let Some(width) = style.width {
        let mut widths: Vec<usize> = titles.iter().map(|title| title.chars().count()).collect();
        for row in &cells {
            for (column, text) in row.iter().enumerate() {
                widths[column] = widths[column].max(text.chars().count());
            }
        }
        let total = |widths: &[usize]| widths.iter().map(|width| width + 2).sum::<usize>();
        // A column of text can be shortened; numbers (whatever their unit) cannot. Found once,
        // kept beside the other per-column lists as columns are hidden.
        let mut text: Vec<bool> = shown
            .iter()
            .map(|&index| {
                table.units[index] == Unit::Plain
                    && table.rows.iter().any(|row| {
                        matches!(row[index], Cell::Text(_) | Cell::Json(_) | Cell::Blob(_))
                    })
            })
            .collect();
        // The least a column can take: a text column 12 characters, or its title when longer.
        let least = |text: &[bool], titles: &[String], widths: &[usize], column: usize| {
            if text[column] {
                widths[column].min(titles[column].chars().count().max(12))
            } else {
                widths[column]
            }
        };
        let floor = |text: &[bool], titles: &[String], widths: &[usize]| -> usize {
            (0..widths.len())
                .map(|column| least(text, titles, widths, column) + 2)
                .sum()
        };
        // Text columns go first (they can be looked up), then figures from the right; the
        // first column (what a row is about) stays.
        while floor(&text, &titles, &widths) > width && style.columns.is_none() && !style.wide {
            let text_column = (1..widths.len()).rev().find(|&column| text[column]);
            let Some(column) = text_column.or((widths.len() > 1).then(|| widths.len() - 1)) else {
                break;
            };
            hidden.push((shown[column], titles.remove(column)));
            widths.remove(column);
            shown.remove(column);
            text.remove(column);
            for row in &mut cells {
                row.remove(column);
            }
        }
        while total(&widths) > width {
            let widest = (0..widths.len())
                .filter(|&column| widths[column] > least(&text, &titles, &widths, column))
                .max_by_key(|&column| widths[column]);
            let Some(column) = widest else { break };
            let excess = total(&widths) - width;
            let title = titles[column].chars().count().max(12);
            widths[column] = widths[column].saturating_sub(excess).max(title);
            for row in &mut cells {
                row[column] = shorten(&row[column], widths[column]);
            }
        }
    }
    // Columns padded to their widest cell, one space after each and one between: numbers to the
    // right, text to the left, a line of dashes under the titles. Written straight out (a table
    // a memory for 40,000 memories is a lot of small tables).
    let mut widths: Vec<usize> = titles.iter().map(|title| title.chars().count()).collect();
    for row in &cells {
        for (column, text) in row.iter().enumerate() {
            widths[column] = widths[column].max(text.chars().count());
        }
    }
    let mut line = String::new();
    let pad = |line: &mut String, text: &str, width: usize, right: bool| {
        let fill = width.saturating_sub(text.chars().count());
        if right {
            line.extend(std::iter::repeat_n(' ', fill));
            line.push_str(text);
        } else {
            line.push_str(text);
            line.extend(std::iter::repeat_n(' ', fill));
        }
        line.push(' ');
    };
    for (column, title) in titles.iter().enumerate() {
        if column > 0 {
            line.push(' ');
        }
        pad(&mut line, title, widths[column], false);
    }
    line.push('\n');
    for (column, width) in widths.iter().enumerate() {
        if column > 0 {
            line.push(' ');
        }
        line.extend(std::iter::repeat_n('-', width + 1));
    }
    line.push('\n');
    out.write_all(line.as_bytes())?;
    for (row, texts) in table.rows.iter().zip(&cells) {
        line.clear();
        for (column, (&index, text)) in shown.iter().zip(texts).enumerate() {
            if column > 0 {
                line.push(' ');
            }
            let right = matches!(row[index], Cell::Integer(_) | Cell::Real(_));
            pad(&mut line, text, widths[column], right);
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    if !hidden.is_empty() {
        hidden.sort();
        let hidden: Vec<String> = hidden.into_iter().map(|(_, title)| title).collect();
        let note = format!(
            "({} hidden to fit the terminal: {}; --wide shows every column)",
            if hidden.len() == 1 {
                "1 column"
            } else {
                "columns"
            },
            hidden.join(", ")
        );
        for line in crate::query::wrap::wrap_line(&note, style.width.unwrap_or(usize::MAX)) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table far wider than the terminal: text columns are hidden from the right (and named)
    /// until the rest fits at 12 characters a text column, then the first is shortened to fit.
    #[test]
    fn a_terminal_narrower_than_the_table_hides_then_shortens_text_columns() {
        let long = "a".repeat(30);
        let columns: Vec<String> = ["name", "other", "size", "offset", "capacity"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        let rows = vec![vec![
            Cell::text(long.clone()),
            Cell::text(long.clone()),
            Cell::Integer(1),
            Cell::Integer(2),
            Cell::Integer(3),
        ]];
        let table = Table::new(columns, rows);
        let mut out = Vec::new();
        // At the floor 14 + 14 + (4 + 2) + (6 + 2) + (8 + 2) = 52: "other" goes (text first);
        // 38 still exceeds 20: then figures from the right, capacity (28) and offset (20); the
        // first column is cut to 12 (14 + 6 = 20).
        let style = Style {
            width: Some(20),
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines()
                .nth(2)
                .unwrap()
                .matches(&format!("{}…", "a".repeat(11)))
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.lines().all(|line| line.chars().count() <= 20),
            "{text}"
        );
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            joined.contains(
                "(columns hidden to fit the terminal: other, offset, capacity; --wide shows every column)"
            ),
            "{text}"
        );
        // Wide enough for both at their floor: both kept, both shortened as little as needed.
        let mut out = Vec::new();
        let style = Style {
            width: Some(60),
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("hidden"), "{text}");
        // 88 wide: one cut by the excess of 28 (to its floor of 12), the other by the 10 still
        // in excess, to 20.
        let mut cut: Vec<usize> = text
            .lines()
            .nth(2)
            .unwrap()
            .split_whitespace()
            .take(2)
            .map(|word| word.chars().count())
            .collect();
        cut.sort_unstable();
        assert_eq!(cut, [12, 20], "{text}");
        // --wide: nothing hidden however narrow.
        let mut out = Vec::new();
        let style = Style {
            width: Some(20),
            wide: true,
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("hidden"));
    }
}
