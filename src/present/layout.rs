//! A result laid out for people: each cell as they read it (sizes in binary units, offsets in
//! hex), the columns they see, and the table fitted to the terminal (columns hidden, text
//! shortened, and said so).

use std::io::{self, Write};

use prettytable::format::{Alignment, FormatBuilder, LinePosition, LineSeparator, TableFormat};

use super::cell::for_people;
use super::{Cell, Style, Table, Unit};

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

/// Shorten `text` to `width` characters, marking the cut. A place in a file (`dir/cg.py:49`) keeps
/// its end, file name and line number (`…/cg.py:49`): cut at its start, `script.py:1…` would read
/// as line 1.
fn shorten(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let keep = width.saturating_sub(1);
    if is_file_place(text) {
        let kept: String = text.chars().skip(count - keep).collect();
        return format!("…{kept}");
    }
    let kept: String = text.chars().take(keep).collect();
    format!("{kept}…")
}

/// Whether text is a place in a file: a name, `:` and a line number (`train.py:12`,
/// `/home/me/model.py:126`).
fn is_file_place(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((file, line)) => {
            !line.is_empty()
                && line.bytes().all(|byte| byte.is_ascii_digit())
                && file.contains('.')
                && !file.contains(char::is_whitespace)
        }
        None => false,
    }
}

pub(super) fn write_table(table: &Table, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    let (layout, cells) = Layout::plan(table, style);
    layout.print(true, &table.rows, cells, out)?;
    layout.write_footer(out)
}

/// How a table's columns are laid out: which are shown, their titles and widths, which can be
/// shortened, which were hidden to fit the terminal. Planned from the rows at hand (all of a
/// table, or the first rows of a stream) and then kept for every row.
struct Layout {
    shown: Vec<usize>,
    titles: Vec<String>,
    widths: Vec<usize>,
    /// Per shown column: text, which may be shortened (numbers are not).
    text: Vec<bool>,
    hidden: Vec<(usize, String)>,
    /// Fitted to a terminal of this width: later rows' text is shortened to the planned widths.
    width: Option<usize>,
}

impl Layout {
    /// The layout of `table`'s rows, and those rows as people read them, shortened to fit.
    fn plan(table: &Table, style: &Style) -> (Layout, Vec<Vec<String>>) {
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
        // Fit the terminal. Text columns can shrink to 12 characters; when the table would not
        // fit even so (and the user chose no columns), hide columns, text ones first, from the
        // right, keeping the first, and say which. Then shorten the widest text columns until it
        // fits.
        if let Some(width) = style.width {
            let mut widths = widest(&titles, &cells);
            let total = |widths: &[usize]| widths.iter().map(|width| width + 2).sum::<usize>();
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
                let Some(column) = text_column.or((widths.len() > 1).then(|| widths.len() - 1))
                else {
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
        let widths = widest(&titles, &cells);
        let layout = Layout {
            shown,
            titles,
            widths,
            text,
            hidden,
            width: style.width,
        };
        (layout, cells)
    }

    /// A row that came after the plan, as people read it, cut to the planned widths on a
    /// terminal (text only; a wider number is written whole).
    fn texts(&self, units: &[Unit], row: &[Cell]) -> Vec<String> {
        self.shown
            .iter()
            .enumerate()
            .map(|(column, &index)| {
                let text = for_people(&row[index], units[index]);
                if self.width.is_some() && self.text[column] {
                    shorten(&text, self.widths[column])
                } else {
                    text
                }
            })
            .collect()
    }

    /// Rows laid out (their texts fitted, their columns chosen), printed by prettytable: the
    /// titles and a line of dashes under them first when `titled`, then each row with one space
    /// after each column and one between, numbers to the right, text to the left.
    fn print(
        &self,
        titled: bool,
        rows: &[Vec<Cell>],
        texts: Vec<Vec<String>>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        // prettytable holds a copy of every cell it prints, so a long table goes to it a chunk
        // of rows at a time: widths are planned for the whole table and each text is padded to
        // them, so the chunks line up as one table, and memory stays that of one chunk (a
        // 40,000-row listing held twice cost 70 MiB more).
        let mut texts = texts.into_iter();
        let mut first = true;
        for chunk in rows.chunks(PRINTED_ROWS) {
            let titled = titled && first;
            self.print_chunk(titled, chunk, texts.by_ref().take(chunk.len()), out)?;
            first = false;
        }
        if first && titled {
            self.print_chunk(true, &[], std::iter::empty(), out)?;
        }
        Ok(())
    }

    /// One chunk of rows, as one prettytable table.
    fn print_chunk(
        &self,
        titled: bool,
        rows: &[Vec<Cell>],
        texts: impl Iterator<Item = Vec<String>>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut printed = prettytable::Table::init(
            rows.iter()
                .zip(texts)
                .map(|(row, texts)| self.printed_row(row, texts))
                .collect(),
        );
        printed.set_format(table_format(titled));
        if titled {
            printed.set_titles(prettytable::Row::new(
                self.titles
                    .iter()
                    .map(|title| prettytable::Cell::new(title))
                    .collect(),
            ));
        }
        // prettytable writes a cell at a time: gathered here, the chunk reaches `out` (standard
        // output, flushed at each line end) in one write. The buffer is sized to the chunk's
        // lines (each column's width and two spaces, a line end), not to the largest chunk: a
        // report of 40,000 small tables would take and free 64 KiB for each.
        let line: usize = self.widths.iter().map(|width| width + 2).sum::<usize>() + 1;
        let lines = rows.len() + if titled { 2 } else { 0 };
        let mut buffered =
            io::BufWriter::with_capacity(line.saturating_mul(lines).min(1 << 16), out);
        printed.print(&mut buffered)?;
        buffered.flush()
    }

    /// One row for prettytable; text after the plan is padded to the planned widths, so that a
    /// row printed on its own lines up with those before it.
    fn printed_row(&self, row: &[Cell], texts: Vec<String>) -> prettytable::Row {
        prettytable::Row::new(
            self.shown
                .iter()
                .zip(texts)
                .enumerate()
                .map(|(column, (&index, text))| {
                    let right = matches!(row[index], Cell::Integer(_) | Cell::Real(_));
                    let text = padded(text, self.widths[column], right);
                    let align = if right {
                        Alignment::RIGHT
                    } else {
                        Alignment::LEFT
                    };
                    prettytable::Cell::new_align(&text, align)
                })
                .collect(),
        )
    }

    /// The note naming the columns hidden to fit the terminal, if any were.
    fn write_footer(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.hidden.is_empty() {
            return Ok(());
        }
        let mut hidden = self.hidden.clone();
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
        for line in super::wrap::wrap_line(&note, self.width.unwrap_or(usize::MAX)) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

/// Each column's width: its widest cell or its title.
fn widest(titles: &[String], cells: &[Vec<String>]) -> Vec<usize> {
    let mut widths: Vec<usize> = titles.iter().map(|title| title.chars().count()).collect();
    for row in cells {
        for (column, text) in row.iter().enumerate() {
            widths[column] = widths[column].max(text.chars().count());
        }
    }
    widths
}

/// `text` filled with spaces to `width` characters (a longer text stays whole).
fn padded(text: String, width: usize, right: bool) -> String {
    let fill = width.saturating_sub(text.chars().count());
    if fill == 0 {
        return text;
    }
    let spaces = " ".repeat(fill);
    if right {
        spaces + &text
    } else {
        text + &spaces
    }
}

/// How prettytable prints memstate's tables: no borders, a space between columns and one after
/// each, and a line of dashes under the titles.
fn table_format(titled: bool) -> TableFormat {
    let mut format = FormatBuilder::new().column_separator(' ').padding(0, 1);
    if titled {
        format = format.separator(LinePosition::Title, LineSeparator::new('-', ' ', ' ', ' '));
    }
    format.build()
}

/// How many rows prettytable is given at a time.
const PRINTED_ROWS: usize = 1024;

/// How many rows a streamed table is laid out from: its first rows decide the widths.
pub const PLANNED_ROWS: usize = 1000;

/// A table for people written as its rows come (`memstate sql` of millions of rows): the first
/// [`PLANNED_ROWS`] are held to lay the columns out, then written with every row after them;
/// later text is cut to the planned widths on a terminal, so memory stays that of those rows.
pub struct TableStream<W: Write> {
    sample: Table,
    style: Style,
    layout: Option<Layout>,
    out: W,
    empty: String,
}

impl<W: Write> TableStream<W> {
    pub fn start(columns: &[String], units: &[Unit], style: &Style, out: W) -> TableStream<W> {
        TableStream {
            sample: Table::with_units(columns.to_vec(), units.to_vec(), Vec::new()),
            style: style.clone(),
            layout: None,
            out,
            empty: "(no rows)".to_string(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) -> io::Result<()> {
        match &self.layout {
            Some(layout) => {
                let texts = layout.texts(&self.sample.units, &cells);
                layout.print(false, &[cells], vec![texts], &mut self.out)
            }
            None => {
                self.sample.rows.push(cells);
                if self.sample.rows.len() >= PLANNED_ROWS {
                    self.lay_out()?;
                }
                Ok(())
            }
        }
    }

    /// Plan from the rows held, and write them.
    fn lay_out(&mut self) -> io::Result<()> {
        let (layout, cells) = Layout::plan(&self.sample, &self.style);
        layout.print(true, &self.sample.rows, cells, &mut self.out)?;
        self.sample.rows = Vec::new();
        self.layout = Some(layout);
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        if self.layout.is_none() {
            if self.sample.rows.is_empty() {
                writeln!(self.out, "{}", self.empty)?;
                return self.out.flush();
            }
            self.lay_out()?;
        }
        if let Some(layout) = &self.layout {
            layout.write_footer(&mut self.out)?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed table writes nothing until its first rows are planned, then every row as it
    /// comes; where later rows fit the planned widths it is the table written at once, and on a
    /// terminal a later, longer text is cut to its column.
    #[test]
    fn a_streamed_table_is_laid_out_from_its_first_rows() {
        let columns = vec!["n".to_string(), "label".to_string()];
        let row = |number: i64, label: &str| vec![Cell::Integer(number), Cell::text(label)];
        let rows: Vec<Vec<Cell>> = (0..PLANNED_ROWS as i64 + 5)
            .map(|number| row(number % 100, "abc"))
            .collect();
        let mut streamed = Vec::new();
        let mut stream = TableStream::start(
            &columns,
            &[Unit::Plain; 2],
            &Style::default(),
            &mut streamed,
        );
        for (index, cells) in rows.iter().enumerate() {
            stream.row(cells.clone()).unwrap();
            let written = !stream.out.is_empty();
            assert_eq!(written, index + 1 >= PLANNED_ROWS, "after row {index}");
        }
        stream.finish().unwrap();
        let mut whole = Vec::new();
        let table = Table::plain(columns.clone(), rows.clone());
        write_table(&table, &Style::default(), &mut whole).unwrap();
        assert_eq!(
            String::from_utf8(streamed).unwrap(),
            String::from_utf8(whole).unwrap()
        );
        // On a terminal of 30 columns, a label longer than the planned ones is cut to them.
        let style = Style {
            width: Some(30),
            ..Style::default()
        };
        let mut out = Vec::new();
        let mut narrow = TableStream::start(&columns, &[Unit::Plain; 2], &style, &mut out);
        for cells in rows.iter().take(PLANNED_ROWS) {
            narrow.row(cells.clone()).unwrap();
        }
        narrow.row(row(7, &"x".repeat(80))).unwrap();
        narrow.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let last = text.lines().last().unwrap();
        assert!(last.chars().count() <= 30, "{last:?}");
        assert!(
            last.ends_with('…') || last.trim_end().ends_with('…'),
            "{last:?}"
        );
    }

    /// A table far wider than the terminal: text columns are hidden from the right (and named)
    /// until the rest fits at 12 characters a text column, then the first is shortened to fit.
    #[test]
    fn a_cut_place_in_a_file_keeps_its_line_number() {
        // Issue 29, item 4: `script.py:126` was cut to `script.py:1…`, which reads as line 1.
        assert_eq!(
            shorten("/home/me/project/script.py:126", 14),
            "…script.py:126"
        );
        assert_eq!(
            shorten("/home/me/project/script.py:126", 12),
            "…ript.py:126"
        );
        assert_eq!(shorten("a long label that is no place", 10), "a long la…");
        assert_eq!(shorten("train.py:7", 20), "train.py:7");
    }

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
        let units = vec![
            Unit::Plain,
            Unit::Plain,
            Unit::Bytes,
            Unit::Offset,
            Unit::Bytes,
        ];
        let table = Table::with_units(columns, units, rows);
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
