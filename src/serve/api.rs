//! What the server answers: each path, its parameters read once into their types, and an
//! [`Answer`] (a status, a content type, a body). The questions are `query`'s; tables leave as
//! JSON written by `present` (`{"columns", "units", "rows"}`), pages as `viz` renders them.
//!
//! | path | answers |
//! |---|---|
//! | `/` | the app |
//! | `/api/overview?since=ID` | snapshots after ID (all without it) with their failed requests, and the failures |
//! | `/api/memories?snapshot=S&limit=N&offset=K` | one snapshot's memories with their figures, most fragmented first, a page at a time |
//! | `/api/trend?memory=M` | one memory's figures across its snapshots |
//! | `/api/window?snapshot=S&memory=M&from=A&to=B&bins=W` | what lies in `[A, B)`: each allocation and hole when at most W, else W bins |
//! | `/api/spans?snapshot=S&memory=M&from=A&to=B&since=T0&until=T1&limit=N` | the memory's allocation spans that cross `[A, B)` (in the time window `[T0, T1)` seconds, when given): each when at most N, else how many |
//! | `/api/stories?snapshot=S` | the OOM story of each failed request of a snapshot, as `oom` tells it |
//! | `/api/queries` | the canned queries with their parameters |
//! | `/api/query/NAME?KEY=VALUE...` | a canned query's answer |
//! | `/api/sql?q=SQL` | one read-only statement's first rows |
//! | `/api/limits` | each statement's time limit and the rows an answer holds |
//! | `/map?snapshot=S&memory=M` | the memory map page (as `map --html` draws it) |
//! | `/story?snapshot=S` | the failure page (as `oom --html` draws it) |

use serde_json::json;

use super::{Connection, Options};
use crate::error::Error;
use crate::present::Table;
use crate::query::{canned, context, explore, pages, select};

/// An answer: a status, its content type and body, and extra headers.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

impl Answer {
    fn json(body: String) -> Answer {
        Answer {
            status: 200,
            content_type: "application/json",
            body,
            headers: Vec::new(),
        }
    }

    fn html(body: String) -> Answer {
        Answer {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body,
            headers: Vec::new(),
        }
    }

    /// A refusal: `{"error": message}` with its status.
    pub fn error(status: u16, message: &str) -> Answer {
        Answer {
            status,
            content_type: "application/json",
            body: json!({ "error": message }).to_string(),
            headers: Vec::new(),
        }
    }

    /// memstate's own failure, said in one line.
    pub fn failed(message: &str) -> Answer {
        Answer::error(500, message)
    }

    /// An error of the library as the status it means: the user's request (400), a name of
    /// nothing (404), a statement stopped at its time limit (408), one that needed more memory
    /// or a larger value than the server allows (413), else the server's (500).
    fn of(error: &Error) -> Answer {
        match sqlite_code(error) {
            Some(rusqlite::ErrorCode::OperationInterrupted) => {
                return Answer::error(
                    408,
                    "the statement ran past its time limit and was stopped (narrow it: one snapshot, one memory)",
                )
            }
            Some(rusqlite::ErrorCode::OutOfMemory) => {
                return Answer::error(
                    413,
                    &format!(
                        "the statement needed more memory than memstate serve gives its statements ({} in all): narrow it, or run it with `memstate sql`",
                        crate::units::human_size(super::SQLITE_HEAP_BYTES)
                    ),
                )
            }
            Some(rusqlite::ErrorCode::AuthorizationForStatementDenied) => {
                return Answer::error(
                    403,
                    "memstate serve runs no statement that would change what later requests see: no PRAGMA that sets something, no BEGIN, COMMIT or SAVEPOINT, no ATTACH (PRAGMA table_info and the like may be read)",
                )
            }
            Some(rusqlite::ErrorCode::TooBig) => {
                return Answer::error(
                    413,
                    &format!(
                        "the statement made a value larger than memstate serve allows ({}): run it with `memstate sql`",
                        crate::units::human_size(i64::from(crate::query::SERVED_VALUE_BYTES))
                    ),
                )
            }
            _ => {}
        }
        let status = match error {
            Error::Usage(_) => 400,
            Error::NotFound(_) => 404,
            Error::Query { .. } => 400,
            _ => 500,
        };
        Answer::error(status, &error.to_string())
    }

    pub fn into_response(self) -> super::http::Response {
        let mut headers = vec![
            ("Content-Type".to_string(), self.content_type.to_string()),
            ("Cache-Control".to_string(), "no-store".to_string()),
            ("X-Content-Type-Options".to_string(), "nosniff".to_string()),
            // Framed only by its own pages (the app shows the map page in a frame).
            ("X-Frame-Options".to_string(), "SAMEORIGIN".to_string()),
        ];
        headers.extend(self.headers);
        super::http::Response {
            status: self.status,
            headers,
            body: self.body.into_bytes(),
        }
    }
}

/// The SQLite error behind `error`, if one is (a statement stopped at the worker's time limit
/// is `OperationInterrupted`; see `Database::stop_statements_when`).
fn sqlite_code(error: &Error) -> Option<rusqlite::ErrorCode> {
    let mut source = std::error::Error::source(error);
    while let Some(current) = source {
        if let Some(code) = current
            .downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
        {
            return Some(code);
        }
        source = current.source();
    }
    None
}

/// A request's query parameters, decoded.
#[derive(Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: &str) -> Params {
        Params(
            query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(key), decode(value))
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    fn required(&self, key: &str) -> Result<&str, Error> {
        self.get(key)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| Error::Usage(format!("parameter {key} is missing")))
    }

    /// An unsigned integer parameter, `default` when absent.
    fn number(&self, key: &str, default: Option<u64>) -> Result<u64, Error> {
        match (self.get(key), default) {
            (None | Some(""), Some(default)) => Ok(default),
            (None | Some(""), None) => Err(Error::Usage(format!("parameter {key} is missing"))),
            (Some(text), _) => text.parse::<u64>().map_err(|_| {
                Error::Usage(format!("parameter {key}={text:?}: expected a whole number"))
            }),
        }
    }

    /// A time in seconds (a finite number), `None` when absent.
    fn seconds(&self, key: &str) -> Result<Option<f64>, Error> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(text) => match text.parse::<f64>() {
                Ok(value) if value.is_finite() => Ok(Some(value)),
                _ => Err(Error::Usage(format!(
                    "parameter {key}={text:?}: expected a time in seconds"
                ))),
            },
        }
    }

    /// An integer id parameter (a snapshot or memory id), within SQLite's integers.
    fn id(&self, key: &str) -> Result<i64, Error> {
        let number = self.number(key, None)?;
        i64::try_from(number).map_err(|_| Error::Usage(format!("parameter {key}: too large")))
    }
}

/// Percent-decoding of a URL component (`+` is a space); malformed escapes are kept as written.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[index + 1..index + 3])
                    .ok()
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                {
                    Some(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The answer to one path.
pub fn route(path: &str, params: &Params, connection: &Connection, options: &Options) -> Answer {
    let conn = connection.database.connection();
    let answered = match path {
        "/" | "/index.html" => return Answer::html(super::APP.to_string()),
        "/api/overview" => overview(conn, params),
        "/api/memories" => memories(conn, params),
        "/api/trend" => params
            .id("memory")
            .and_then(|memory| explore::trend(conn, memory))
            .map(|table| table_answer(&table)),
        "/api/window" => window(conn, params),
        "/api/spans" => spans(conn, params),
        "/api/stories" => stories(conn, params),
        "/api/queries" => Ok(Answer::json(
            serde_json::to_string(&canned::all()).unwrap_or_else(|_| "[]".to_string()),
        )),
        "/api/sql" => sql(conn, params, options),
        "/api/limits" => Ok(Answer::json(
            json!({"time_limit_s": options.time_limit.as_secs_f64(), "row_limit": options.row_limit})
                .to_string(),
        )),
        "/map" => map_page(conn, params),
        "/story" => story_page(conn, params),
        _ => match path.strip_prefix("/api/query/") {
            Some(name) => canned_query(conn, name, params, options),
            None => Err(Error::NotFound(format!("no page {path:?} here"))),
        },
    };
    answered.unwrap_or_else(|error| Answer::of(&error))
}

fn table_answer(table: &Table) -> Answer {
    Answer::json(crate::present::table_json(table))
}

fn overview(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let since = i64::try_from(params.number("since", Some(0))?).unwrap_or(i64::MAX);
    let snapshots = explore::snapshots_since(conn, since)?;
    let failures = explore::failures_since(conn, since)?;
    Ok(Answer::json(format!(
        "{{\"snapshots\":{},\"failures\":{}}}",
        crate::present::table_json(&snapshots),
        crate::present::table_json(&failures)
    )))
}

fn memories(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let limit = params.number("limit", Some(100))?.clamp(1, 1000);
    let offset = params.number("offset", Some(0))?;
    let (table, total) = explore::memories_at(conn, snapshot, limit, offset)?;
    Ok(Answer::json(format!(
        "{{\"snapshot_id\":{snapshot},\"total\":{total},\"offset\":{offset},\"table\":{}}}",
        crate::present::table_json(&table)
    )))
}

/// The `snapshot` parameter in every form the command line takes (`latest`, an id, RUN:NODE:SEQ).
fn snapshot_of(conn: &rusqlite::Connection, params: &Params) -> Result<i64, Error> {
    select::one_snapshot(conn, params.required("snapshot")?)
}

/// The `memory` parameter, or `handle` on the node of the `snapshot` (as a map page names it).
fn memory_of(conn: &rusqlite::Connection, params: &Params, snapshot: i64) -> Result<i64, Error> {
    match params.get("handle").filter(|handle| !handle.is_empty()) {
        Some(handle) => explore::memory_at(conn, snapshot, handle),
        None => params.id("memory"),
    }
}

fn spans(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let memory = memory_of(conn, params, snapshot)?;
    let from = params.number("from", Some(0))?;
    let to = params.number("to", Some(i64::MAX as u64))?;
    if to <= from {
        return Err(Error::Usage(format!(
            "the range [{from}, {to}) is empty: give from < to"
        )));
    }
    let limit = params.number("limit", Some(8000))?.clamp(1, 20_000);
    let times = match (params.seconds("since")?, params.seconds("until")?) {
        (None, None) => None,
        (since, until) => {
            let (since, until) = (since.unwrap_or(f64::MIN), until.unwrap_or(f64::MAX));
            if until <= since {
                return Err(Error::Usage(format!(
                    "the time window [{since}, {until}) is empty: give since < until"
                )));
            }
            Some((since, until))
        }
    };
    let window = crate::query::history::spans_in(conn, memory, (from, to), times, limit)?;
    let spans = window.spans.map(|spans| {
        spans
            .iter()
            .map(|span| {
                json!({
                    "from_s": span.from_s, "to_s": span.to_s, "offset": span.offset,
                    "size": span.size, "state": span.state.as_str(), "kind": span.kind,
                    "provenance": span.provenance, "label": span.label, "uid": span.uid,
                    "objects": span.objects, "first_snapshot_id": span.first_snapshot_id,
                    "last_snapshot_id": span.last_snapshot_id,
                })
            })
            .collect::<Vec<_>>()
    });
    Ok(Answer::json(
        json!({"memory_id": memory, "from": window.from, "to": window.to, "since": window.since_s,
               "until": window.until_s, "total": window.total, "spans": spans})
        .to_string(),
    ))
}

fn window(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let memory = memory_of(conn, params, snapshot)?;
    let from = params.number("from", Some(0))?;
    let to = params.number("to", Some(u64::MAX))?;
    if to <= from {
        return Err(Error::Usage(format!(
            "the range [{from}, {to}) is empty: give from < to"
        )));
    }
    let bins = params.number("bins", Some(1000))?.clamp(1, 4000) as usize;
    let window = explore::window(conn, snapshot, memory, from, to, bins)?;
    Ok(Answer::json(
        serde_json::to_string(&window).unwrap_or_else(|_| "null".to_string()),
    ))
}

fn stories(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let stories = context::stories(conn, &[snapshot])?;
    Ok(table_answer(&crate::story::rows::story_table(&stories)))
}

fn canned_query(
    conn: &rusqlite::Connection,
    name: &str,
    params: &Params,
    options: &Options,
) -> Result<Answer, Error> {
    let query = canned::find(name).map_err(|error| Error::NotFound(error.to_string()))?;
    let given: Vec<(String, String)> = params
        .0
        .iter()
        .filter(|(key, _)| key != "token")
        .cloned()
        .collect();
    let (table, total) = canned::execute_first(conn, &query, &given, keep(options, true))?;
    Ok(Answer::json(format!(
        "{{\"total\":{total},\"row_limit\":{},\"table\":{}}}",
        options.row_limit,
        crate::present::table_json(&table)
    )))
}

fn sql(conn: &rusqlite::Connection, params: &Params, options: &Options) -> Result<Answer, Error> {
    let statement = params.required("q")?;
    let first = crate::query::first_rows(conn, statement, &[], keep(options, false))?;
    let (table, more) = (first.table, first.more);
    Ok(Answer::json(format!(
        "{{\"more\":{more},\"row_limit\":{},\"time_limit_s\":{},\"table\":{}}}",
        options.row_limit,
        options.time_limit.as_secs_f64(),
        crate::present::table_json(&table)
    )))
}

fn map_page(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let memory = match params.get("memory").filter(|value| !value.is_empty()) {
        Some(_) => Some(explore::memory_handle(conn, params.id("memory")?)?),
        None => None,
    };
    let parts = pages::map_page(
        conn,
        &[snapshot],
        true,
        memory.as_deref(),
        Some(SERVED_SPANS),
    )?;
    let title = format!(
        "memstate: snapshot {}",
        select::snapshot_name(conn, snapshot)?
    );
    Ok(Answer::html(parts.render_as(&title, Some(SERVED))))
}

fn story_page(conn: &rusqlite::Connection, params: &Params) -> Result<Answer, Error> {
    let snapshot = snapshot_of(conn, params)?;
    let stories = context::stories(conn, &[snapshot])?;
    if stories.is_empty() {
        return Err(Error::NotFound(format!(
            "snapshot {snapshot} holds no failed request"
        )));
    }
    let parts = pages::failure_page(conn, &stories, None, Some(SERVED_SPANS))?;
    let title = format!(
        "memstate: out of memory at snapshot {}",
        select::snapshot_name(conn, snapshot)?
    );
    Ok(Answer::html(parts.render_as(&title, Some(SERVED))))
}

/// The most the rows of one answer of the SQL box or a canned query may hold: with the JSON
/// written from them, a worker holds a few times this, and there are four workers.
pub const ANSWER_BYTES: usize = 16 << 20;

fn keep(options: &Options, count_all: bool) -> crate::query::Keep {
    crate::query::Keep {
        rows: options.row_limit,
        bytes: ANSWER_BYTES,
        count_all,
    }
}

/// The most history spans a served page keeps whole (a few times what a history's pixels
/// show); it asks `/api/spans` for those of the addresses and times it zooms to. 8,000 made the
/// map page of a 37,000-span memory 101 ms (median, benches/serve.rs); 4,000, about 55 ms.
const SERVED_SPANS: u64 = 4000;

/// How the pages are served: a few thousand allocations held (a few times what a screen shows),
/// the rest asked of the window endpoint as the view narrows.
const SERVED: crate::viz::html::Served<'static> = crate::viz::html::Served {
    window_api: "/api/window",
    detail_budget: 4000,
};
