//! The page `compare --html` writes: the verdict, both runs on one chart, the moments where a
//! matched memory's largest hole differs most with a link into each run's map there, and the
//! comparison's tables. One self-contained file (no script, no network); the maps it links to are
//! pages of their own written beside it.

use crate::present::html::{escape, table_html};
use crate::present::Table;
use crate::units::human;

/// A moment where the runs differ, with where each run's map shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    pub node: i64,
    pub kind: String,
    pub ordinal: i64,
    /// When, as the chart's x axis says it (`12.5 s` or `seq 40`).
    pub when: String,
    pub seq_a: i64,
    pub seq_b: i64,
    pub hole_a: Option<u64>,
    pub hole_b: Option<u64>,
    pub used_a: Option<u64>,
    pub used_b: Option<u64>,
    /// Relative links to A's map and B's map opened on that memory and snapshot.
    pub link_a: String,
    pub link_b: String,
}

/// Everything the page says, gathered by the command.
pub struct ComparePage<'a> {
    pub title: &'a str,
    pub run_a: &'a str,
    pub run_b: &'a str,
    pub verdict: &'a str,
    pub matching: &'a str,
    /// The chart of both runs (an SVG document), when there is anything to draw.
    pub chart_svg: Option<&'a str>,
    pub moments: &'a [Moment],
    /// Headed tables, in order.
    pub sections: &'a [(&'a str, &'a Table)],
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}\
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}p.verdict{font-size:1.15em;font-weight:600}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}.chart svg{max-width:100%;height:auto}";

fn size(value: Option<u64>) -> String {
    value.map_or_else(|| "unknown".to_string(), human)
}

/// The page, whole.
pub fn render(page: &ComparePage) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str(&format!("<title>{}</title>", escape(page.title)));
    out.push_str(&format!("<style>{STYLE}</style></head><body>\n"));
    out.push_str(&format!("<h1>{}</h1>\n", escape(page.title)));
    out.push_str(&format!(
        "<p class=\"verdict\">{}</p>\n<p>A = <b>{}</b>, B = <b>{}</b>. {}</p>\n",
        escape(page.verdict),
        escape(page.run_a),
        escape(page.run_b),
        escape(page.matching)
    ));
    out.push_str("<h2>Where the largest hole differs most</h2>\n");
    if page.moments.is_empty() {
        out.push_str("<p>No memory of both runs has a largest hole known in both at one moment, or they never differ.</p>\n");
    } else {
        out.push_str("<p>For each memory of both runs, the moment its largest hole differs most between them (each run as its latest snapshot at or before that moment showed it), largest difference first; each link opens that run's map on that memory and snapshot.</p>\n");
        out.push_str("<table id=\"moments\">\n<thead><tr><th>node</th><th>kind</th><th>ordinal</th><th>when</th><th>largest hole A</th><th>largest hole B</th><th>used A</th><th>used B</th><th>map of A</th><th>map of B</th></tr></thead>\n<tbody>\n");
        for moment in page.moments {
            out.push_str(&format!(
                "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td><a class=\"map-a\" href=\"{}\">seq {}</a></td><td><a class=\"map-b\" href=\"{}\">seq {}</a></td></tr>\n",
                moment.node,
                escape(&moment.kind),
                moment.ordinal,
                escape(&moment.when),
                size(moment.hole_a),
                size(moment.hole_b),
                size(moment.used_a),
                size(moment.used_b),
                escape(&moment.link_a),
                moment.seq_a,
                escape(&moment.link_b),
                moment.seq_b,
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    if let Some(svg) = page.chart_svg {
        out.push_str("<h2>Both runs over time (A solid, B dashed)</h2>\n<div class=\"chart\">");
        // The SVG document inline: its XML declaration, if any, has no place inside HTML.
        let body = svg.find("<svg").map_or(svg, |start| &svg[start..]);
        out.push_str(body);
        out.push_str("</div>\n");
    }
    for (heading, table) in page.sections {
        out.push_str(&format!("<h2>{}</h2>\n", escape(heading)));
        if table.rows.is_empty() {
            out.push_str("<p>None.</p>\n");
        } else {
            out.push_str(&table_html(table));
        }
    }
    out.push_str("</body></html>\n");
    out
}
