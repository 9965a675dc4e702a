//! A [`Table`] as an HTML `<table>` for a page: each cell as people read it (the same words as the
//! terminal's table), escaped, numbers aligned right, NULL an empty cell.

use super::{for_people, Cell, Table};

/// Text made safe inside HTML (element content or a quoted attribute).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// The whole table, every column (a page has the room a terminal lacks).
pub fn table_html(table: &Table) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for column in &table.columns {
        out.push_str(&format!("<th>{}</th>", escape(column)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (cell, unit) in row.iter().zip(&table.units) {
            let numeric = matches!(cell, Cell::Integer(_) | Cell::Real(_));
            out.push_str(if numeric { "<td class=\"n\">" } else { "<td>" });
            out.push_str(&escape(&for_people(cell, *unit)));
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::present::Unit;

    #[test]
    fn cells_are_escaped_and_sized_for_people() {
        let table = Table::declared(
            &[("name", Unit::Plain), ("bytes", Unit::Bytes)],
            vec![vec![Cell::text("<a&b>"), Cell::Integer(3 << 20)]],
        );
        let html = table_html(&table);
        assert!(html.contains("<td>&lt;a&amp;b&gt;</td>"), "{html}");
        assert!(html.contains("<td class=\"n\">3 MiB</td>"), "{html}");
    }
}
