//! Datasette metadata written from the project's own documentation: every public view with its
//! description and each column's meaning (from docs/SCHEMA.md, embedded at build time), units for
//! byte columns, the private tables hidden, and every canned query of `queries/` with its
//! parameters (from the queries' own comments).
//!
//! Datasette passes canned-query parameters as text and an empty text for one left blank, so each
//! query's SQL is adapted, by the kind each parameter declares (see [`ParamKind`]): a limit or an
//! integer is cast to an integer, and one with a documented default takes it when left blank; a
//! snapshot and a memory take every form the command line takes (resolved in the SQL itself), and
//! a blank run is the only run. Otherwise the SQL is the
//! file's, unchanged. [`plugin`] writes the Datasette plugin that shows sizes as the CLI does.

use serde_json::{json, Map, Value};

use super::canned::{self, ParamKind, Query};
use crate::present::Unit;

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
    /// Each column's declared unit, in the view's order.
    pub units: Vec<Unit>,
}

/// The views of docs/SCHEMA.md: a `## \`name\`` heading, a paragraph, then a table of
/// `| \`column\`, \`column\` | unit | meaning |` rows: one unit for all the row's columns, or
/// one each (`-` for none).
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
                units: Vec::new(),
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
            let Some((names, rest)) = row.split_once('|') else {
                continue;
            };
            let Some((unit, meaning)) = rest.split_once('|') else {
                continue;
            };
            let meaning = meaning.trim_end().trim_end_matches('|').trim().to_string();
            let units: Vec<Unit> = unit
                .split(',')
                .map(|word| Unit::named(word.trim()).unwrap_or(Unit::Plain))
                .collect();
            let names: Vec<&str> = names
                .split(',')
                .map(str::trim)
                .filter_map(|name| {
                    name.strip_prefix('`')
                        .and_then(|name| name.strip_suffix('`'))
                })
                .collect();
            for (index, name) in names.iter().enumerate() {
                view.columns.push((name.to_string(), meaning.clone()));
                view.grouped.push(names.len() > 1);
                let unit = if units.len() == names.len() {
                    units[index]
                } else {
                    units[0]
                };
                view.units.push(unit);
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

/// Markdown links (`[FORMAT.md](FORMAT.md#derived-figures)`) as words a page shows: the label,
/// and the document it names under docs/ when that is not the label already. A page served by
/// Datasette cannot follow a link relative to docs/.
fn unlinked(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some((label, tail)) = after.split_once("](") else {
            break;
        };
        let Some((target, tail)) = tail.split_once(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        let document = target.split('#').next().unwrap_or_default();
        if document == label {
            out.push_str(&format!("docs/{document}"));
        } else {
            out.push_str(label);
            if !document.is_empty() {
                out.push_str(&format!(" (docs/{document})"));
            }
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Text for HTML: Markdown links unlinked, `&`, `<`, `>` escaped, and Markdown's `code` shown as
/// code.
fn html(text: &str) -> String {
    let text = unlinked(text);
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

/// Markdown's `code` marks dropped and its links unlinked, for plain text.
fn plain(text: &str) -> String {
    unlinked(text).replace('`', "")
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

/// Replace each parameter `:name` (a whole word) in `sql` with its SQL, in one pass: what a
/// parameter is replaced with may name parameters itself, and is left as it is.
fn replace_params(sql: &str, replacements: &[(String, String)]) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find(':') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let length = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        match replacements
            .iter()
            .find(|(name, _)| name.as_str() == &after[..length])
        {
            Some((_, with)) if length > 0 => out.push_str(with),
            _ => {
                out.push(':');
                out.push_str(&after[..length]);
            }
        }
        rest = &after[length..];
    }
    out.push_str(rest);
    out
}

/// The snapshot a parameter's text names, in SQL, as `memstate report` resolves it: a snapshot
/// id, `RUN:NODE:SEQ` (split from the right: a run id may hold `:`), or `latest` by the one rule
/// of the README ("Snapshot selectors"): the latest snapshot of the node of the memory given
/// (`memory`, SQL naming one memory whatever the snapshot, or NULL), else of the database's only
/// node. With several nodes and no memory to name one, the command line refuses `latest`; a
/// Datasette form cannot, so it answers no rows (its description says why). NULL, and no rows,
/// for anything else. Every branch finds its snapshot by an index.
fn snapshot_of(text: &str, memory: Option<&str>) -> String {
    let of_memory = memory.map_or(String::new(), |memory| {
        format!(
            "(SELECT s.id FROM memory m JOIN snapshot s ON s.run_id = m.run_id AND s.node = m.node
              WHERE m.id = {memory} ORDER BY s.seq DESC LIMIT 1)"
        )
    });
    let only_node = "(SELECT s.id FROM snapshot s
                      WHERE (SELECT count(*) FROM (SELECT DISTINCT run_id, node FROM snapshot)) = 1
                      ORDER BY s.seq DESC LIMIT 1)";
    let latest = if of_memory.is_empty() {
        only_node.to_string()
    } else {
        format!("coalesce({of_memory}, {only_node})")
    };
    let head = format!("rtrim({text}, '0123456789')");
    let run_node = format!("substr({head}, 1, length({head}) - 1)");
    let run_colon = format!("rtrim({run_node}, '0123456789')");
    format!(
        "(SELECT CASE
            WHEN {text} <> '' AND {text} NOT GLOB '*[^0-9]*' THEN CAST({text} AS INTEGER)
            WHEN {text} = 'latest' THEN {latest}
            WHEN {head} GLOB '*:' AND length({head}) < length({text}) AND {run_colon} GLOB '?*:' AND length({run_colon}) < length({run_node})
            THEN (SELECT s.id FROM snapshot s JOIN run r ON r.id = s.run_id
                  WHERE r.name = substr({run_colon}, 1, length({run_colon}) - 1)
                    AND s.node = CAST(substr({run_node}, length({run_colon}) + 1) AS INTEGER)
                    AND s.seq = CAST(substr({text}, length({head}) + 1) AS INTEGER))
          END)"
    )
}

/// The memory a parameter's text names, in SQL, as `memstate report` resolves it: a memory id,
/// or a Realm memory id (`0x` and up to 16 hex digits, or 16 bare ones), on the snapshot's node
/// when `snapshot` (SQL) is given; NULL when no memory, or several, have that id.
fn memory_of(text: &str, snapshot: Option<&str>) -> String {
    let digits =
        format!("lower(CASE WHEN lower({text}) GLOB '0x*' THEN substr({text}, 3) ELSE {text} END)");
    let node = snapshot.map_or(String::new(), |snapshot| {
        format!(
            " AND m.run_id = (SELECT run_id FROM snapshot WHERE id = {snapshot})
              AND m.node = (SELECT node FROM snapshot WHERE id = {snapshot})"
        )
    });
    format!(
        "(SELECT CASE
            WHEN {text} <> '' AND {text} NOT GLOB '*[^0-9]*' THEN CAST({text} AS INTEGER)
            WHEN {digits} NOT GLOB '*[^0-9a-f]*' AND length({digits}) BETWEEN 1 AND 16
                 AND (lower({text}) GLOB '0x*' OR length({text}) = 16)
            THEN (SELECT CASE WHEN count(*) = 1 THEN min(m.id) END FROM memory m
                  WHERE printf('0x%016x', m.handle) = '0x' || substr('0000000000000000' || {digits}, -16){node})
          END)"
    )
}

/// The run a blank `run` means: the database's only run (none when it holds several).
const ONLY_RUN: &str = "(SELECT CASE WHEN count(*) = 1 THEN min(name) END FROM run)";

/// A canned query's SQL as Datasette should run it (see the module's comment).
pub fn datasette_sql(query: &Query) -> String {
    let mut replacements = Vec::new();
    let given_of = |kind: ParamKind| {
        query
            .params
            .iter()
            .find(|param| param.kind == kind)
            .map(|param| format!(":{}", param.name))
    };
    let snapshot = given_of(ParamKind::Snapshot);
    // The memory its parameter names on its own, for `latest` to find its node. Each parameter
    // nests at most two resolutions: SQLite's parser refuses deeper ("parser stack overflow").
    let memory = given_of(ParamKind::Memory).map(|given| memory_of(&given, None));
    for param in &query.params {
        let given = format!(":{}", param.name);
        let resolved = match param.kind {
            ParamKind::Snapshot => Some(snapshot_of(&given, memory.as_deref())),
            // The memory its id names on its own, else the one with that id on the snapshot's
            // node (where `latest` is the only node: no memory says which).
            ParamKind::Memory => {
                let one = match (&memory, &snapshot) {
                    (Some(alone), Some(snapshot)) => format!(
                        "coalesce({alone}, {})",
                        memory_of(&given, Some(&snapshot_of(snapshot, None)))
                    ),
                    _ => memory_of(&given, None),
                };
                // Left blank (or `all`) where the query's default is every memory: -1, as
                // `memstate report` binds it.
                Some(if param.default.as_deref() == Some("all") {
                    format!("CASE WHEN coalesce({given}, '') IN ('', 'all') THEN -1 ELSE {one} END")
                } else {
                    one
                })
            }
            ParamKind::Run if param.default.is_none() => {
                Some(format!("coalesce(nullif({given}, ''), {ONLY_RUN})"))
            }
            _ => None,
        };
        if let Some(resolved) = resolved {
            replacements.push((param.name.clone(), resolved));
            continue;
        }
        let value = match &param.default {
            Some(default) => format!(
                "coalesce(nullif(:{}, ''), '{}')",
                param.name,
                default.replace('\'', "''")
            ),
            None => format!(":{}", param.name),
        };
        let value = if param.kind.is_integer() {
            format!("CAST({value} AS INTEGER)")
        } else {
            value
        };
        replacements.push((param.name.clone(), value));
    }
    replace_params(query.sql, &replacements)
}

const PLUGIN: &str = include_str!("../../dashboards/datasette/memstate_datasette.py");

/// The file name of the plugin [`plugin`] writes.
pub const PLUGIN_FILE: &str = "memstate_datasette.py";

/// Datasette's plugin for a database served under `database`: sizes in binary units and offsets
/// in hex in its HTML tables, as the command line prints them, and the SQL box opening on a
/// public view. The byte and offset columns are those the views and canned queries document.
pub fn plugin(database: &str) -> String {
    let mut bytes = std::collections::BTreeSet::new();
    let mut offsets = std::collections::BTreeSet::new();
    let mut sort = |name: &str, unit: Unit| match unit {
        Unit::Bytes => {
            bytes.insert(name.to_string());
        }
        Unit::Offset => {
            offsets.insert(name.to_string());
        }
        _ => {}
    };
    for view in views() {
        for ((name, _), unit) in view.columns.iter().zip(&view.units) {
            sort(name, *unit);
        }
    }
    for query in canned::all() {
        for column in &query.columns {
            sort(&column.name, column.shown_as);
        }
    }
    let literal = |value: Value| value.to_string();
    PLUGIN
        .replace("__DATABASE__", &literal(json!(database)))
        .replace("__BYTE_COLUMNS__", &literal(json!(bytes)))
        .replace("__OFFSET_COLUMNS__", &literal(json!(offsets)))
        .replace(
            "__FIRST_SQL__",
            &literal(json!(
                "select * from snapshots order by snapshot_id desc limit 100"
            )),
        )
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
            .zip(&view.units)
            .filter(|(_, unit)| **unit == Unit::Bytes)
            .map(|((name, _), _)| (name.clone(), json!("B")))
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
                let blank = match param.kind {
                    _ if param.default.is_some() => "; leave blank for the default",
                    ParamKind::Snapshot => "; or RUN:NODE:SEQ, or latest (the latest snapshot of the memory's node when a memory is given, else of the database's only node; with several nodes and no memory, no rows)",
                    ParamKind::Memory => "; or a Realm memory id (0x1e00000000000003)",
                    ParamKind::Run => "; leave blank for the database's only run",
                    _ => "",
                };
                described.push_str(&format!(
                    "<li><b>{}</b> ({}): {}{blank}</li>",
                    html(&param.name),
                    html(param.kind.name()),
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
    fn parameters_are_replaced_as_whole_words_only_and_once() {
        let replacements = [
            ("run".to_string(), "X".to_string()),
            ("top".to_string(), "(:run + 1)".to_string()),
        ];
        assert_eq!(
            replace_params(
                "a = :run AND b = :run_id AND c = :run, :top::text",
                &replacements
            ),
            "a = X AND b = :run_id AND c = X, (:run + 1)::text"
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
        assert_eq!(names[names.len() - 2..], ["series", "unknown"]);
    }
}
