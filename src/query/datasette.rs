//! Datasette metadata written from the project's own documentation: every public view with its
//! description and each column's meaning (from docs/SCHEMA.md, embedded at build time), units for
//! byte columns, the private tables hidden, and every canned query of `queries/` with its
//! parameters (from the queries' own comments).
//!
//! Datasette passes canned-query parameters as text and an empty text for one left blank, so each
//! query's SQL is adapted: an integer parameter is cast to an integer, and one with a documented
//! default takes it when left blank. Otherwise the SQL is the file's, unchanged.

use serde_json::{json, Map, Value};

use super::canned::{self, Query};
use super::output::Unit;

const SCHEMA_DOC: &str = include_str!("../../docs/SCHEMA.md");

/// One view as docs/SCHEMA.md describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewDoc {
    pub name: String,
    pub description: String,
    /// Each column and its meaning, in the view's order.
    pub columns: Vec<(String, String)>,
    /// Whether the column's row of the document describes several columns at once.
    pub grouped: Vec<bool>,
}

/// The views of docs/SCHEMA.md: a `## \`name\`` heading, a paragraph, then a table of
/// `| \`column\`, \`column\` | meaning |` rows.
pub fn views() -> Vec<ViewDoc> {
    let mut views: Vec<ViewDoc> = Vec::new();
    let mut in_table = false;
    for line in SCHEMA_DOC.lines() {
        if let Some(name) = line
            .strip_prefix("## `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            views.push(ViewDoc {
                name: name.to_string(),
                description: String::new(),
                columns: Vec::new(),
                grouped: Vec::new(),
            });
            in_table = false;
            continue;
        }
        let Some(view) = views.last_mut() else {
            continue;
        };
        if line.starts_with("## ") {
            break;
        }
        if let Some(row) = line.strip_prefix('|') {
            in_table = true;
            let Some((names, meaning)) = row.split_once('|') else {
                continue;
            };
            let meaning = meaning.trim_end().trim_end_matches('|').trim().to_string();
            let names: Vec<&str> = names
                .split(',')
                .map(str::trim)
                .filter_map(|name| {
                    name.strip_prefix('`')
                        .and_then(|name| name.strip_suffix('`'))
                })
                .collect();
            for name in &names {
                view.columns.push((name.to_string(), meaning.clone()));
                view.grouped.push(names.len() > 1);
            }
        } else if !in_table && !line.trim().is_empty() {
            if !view.description.is_empty() {
                view.description.push(' ');
            }
            view.description.push_str(line.trim());
        }
    }
    views
}

/// Text for HTML: `&`, `<`, `>` escaped, and Markdown's `code` shown as code.
fn html(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut out = String::new();
    for (index, part) in escaped.split('`').enumerate() {
        if index % 2 == 1 {
            out.push_str(&format!("<code>{part}</code>"));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Markdown's `code` marks dropped, for plain text.
fn plain(text: &str) -> String {
    text.replace('`', "")
}

/// Each column's meaning. A row of the document that describes several columns at once (`run`,
/// `node`, `seq`: the snapshot) says less about each than a row of another view that describes
/// the same column alone; that one is taken when there is one.
fn column_meanings(views: &[ViewDoc], view: &ViewDoc) -> Vec<(String, String)> {
    let alone = |column: &str| -> Option<String> {
        views
            .iter()
            .flat_map(|other| other.columns.iter().zip(other.grouped.iter()))
            .find(|((name, _), grouped)| name == column && !**grouped)
            .map(|((_, meaning), _)| meaning.clone())
    };
    view.columns
        .iter()
        .zip(&view.grouped)
        .map(|((name, meaning), grouped)| {
            (
                name.clone(),
                if *grouped {
                    alone(name).unwrap_or_else(|| meaning.clone())
                } else {
                    meaning.clone()
                },
            )
        })
        .collect()
}

/// `memory_trend` → `Memory trend`.
fn title(name: &str) -> String {
    let spaced = name.replace(['_', '-'], " ");
    let mut chars = spaced.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Replace the parameter `:name` (a whole word) in `sql` with `with`.
fn replace_param(sql: &str, name: &str, with: &str) -> String {
    let token = format!(":{name}");
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find(&token) {
        let after = &rest[at + token.len()..];
        let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { with } else { &token });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A canned query's SQL as Datasette should run it (see the module's comment).
pub fn datasette_sql(query: &Query) -> String {
    let mut sql = query.sql.to_string();
    for param in &query.params {
        let value = match &param.default {
            Some(default) => format!(
                "coalesce(nullif(:{}, ''), '{}')",
                param.name,
                default.replace('\'', "''")
            ),
            None => format!(":{}", param.name),
        };
        let value = if param.kind == "integer" {
            format!("CAST({value} AS INTEGER)")
        } else {
            value
        };
        sql = replace_param(&sql, &param.name, &value);
    }
    sql
}

/// The metadata for a database served under `database` (Datasette names it after the file's
/// stem), hiding `hidden` tables.
pub fn metadata(database: &str, hidden: &[String]) -> Value {
    let mut tables = Map::new();
    let documented = views();
    for view in &documented {
        let columns: Map<String, Value> = column_meanings(&documented, view)
            .into_iter()
            .map(|(name, meaning)| (name, json!(plain(&meaning))))
            .collect();
        let units: Map<String, Value> = view
            .columns
            .iter()
            .filter(|(name, _)| Unit::of_column(name) == Unit::Bytes)
            .map(|(name, _)| (name.clone(), json!("B")))
            .collect();
        let mut table = json!({
            "title": title(&view.name),
            "description": plain(&view.description),
            "description_html": format!("<p>{}</p><p>Sizes and offsets are in bytes. Column by column: below, and docs/SCHEMA.md.</p>", html(&view.description)),
            "columns": columns,
        });
        if !units.is_empty() {
            table["units"] = Value::Object(units);
        }
        tables.insert(view.name.clone(), table);
    }
    for name in hidden {
        tables
            .entry(name.clone())
            .or_insert_with(|| json!({"hidden": true}));
    }
    let mut queries = Map::new();
    for query in canned::all() {
        let mut described = format!("<p>{}</p>", html(&query.description));
        if !query.params.is_empty() {
            described.push_str("<p>Parameters:</p><ul>");
            for param in &query.params {
                let blank = if param.default.is_some() {
                    "; leave blank for the default"
                } else {
                    ""
                };
                described.push_str(&format!(
                    "<li><b>{}</b> ({}): {}{blank}</li>",
                    html(&param.name),
                    html(&param.kind),
                    html(&param.doc)
                ));
            }
            described.push_str("</ul>");
        }
        described.push_str("<p>Columns:</p><ul>");
        for column in &query.columns {
            described.push_str(&format!(
                "<li><b>{}</b> ({}): {}</li>",
                html(&column.name),
                html(&column.unit),
                html(&column.doc)
            ));
        }
        described.push_str("</ul>");
        queries.insert(
            query.name.to_string(),
            json!({
                "title": title(query.name),
                "description": query.description,
                "description_html": described,
                "sql": datasette_sql(&query),
                "params": query.params.iter().map(|param| param.name.clone()).collect::<Vec<_>>(),
            }),
        );
    }
    json!({
        "title": "memstate",
        "description": "Memory state snapshots of a task runtime (Legion/Realm, Legate): memories, the allocations placed in them and the holes between, across a run's snapshots. The views are the public API; sizes are bytes, ids are 0x and 16 hex digits.",
        "databases": {
            database: {
                "description": "A memstate database: the views below, and the canned queries of memstate report.",
                "tables": tables,
                "queries": queries,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_replaced_as_whole_words_only() {
        assert_eq!(
            replace_param("a = :run AND b = :run_id AND c = :run", "run", "X"),
            "a = X AND b = :run_id AND c = X"
        );
    }

    #[test]
    fn the_schema_document_gives_each_view_its_columns() {
        let views = views();
        let trend = views
            .iter()
            .find(|view| view.name == "memory_trend")
            .expect("memory_trend is documented");
        assert!(
            trend.description.starts_with("`memory_stats` flattened"),
            "{}",
            trend.description
        );
        let names: Vec<&str> = trend
            .columns
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(
            &names[..6],
            ["run", "node", "seq", "time_ns", "time_s", "wall_time"]
        );
        assert_eq!(names.last(), Some(&"series"));
    }
}
