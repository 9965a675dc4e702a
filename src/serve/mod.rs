//! `memstate serve`: the run explored live in a browser. One read-only database, a few worker
//! threads each with a connection of its own, and every answer computed from what the screen
//! asks for (a memory's address range in at most so many bins, one snapshot's memories a page at
//! a time), so a run of any size stays explorable.
//!
//! Safe by default, and no request stops it or changes what others get: [`http`] bounds what a
//! client can make it hold (head, body, connections, slow readers); [`guard`] refuses another
//! Host without a token (DNS rebinding), a missing token, and what pages of another origin ask;
//! the connections are read-only, refuse every statement that would change what later ones see
//! (settings, transactions, attachments), and hold each statement to its time limit (a watchdog
//! interrupts it even inside one long step), its values and answer to fixed sizes, and SQLite's
//! heap to [`SQLITE_HEAP_BYTES`] for all of them. Bad parameters get 400, names of nothing 404,
//! a statement past a bound 408 or 413; a failure of memstate itself is a 500 that says so in one
//! line, never a backtrace.
//!
//! [`api`] answers the questions (JSON); the pages are the app ([`APP`]) and the map and story
//! pages that `viz` renders, the same renderer as `map --html` and `oom --html`.

pub mod api;
mod guard;
pub mod http;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::{self, Database};
use crate::error::{Error, Result};

pub use guard::Guard;

/// The app's page: overview, failures, memories, trend, canned queries and the SQL box.
pub const APP: &str = include_str!("app.html");

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    /// Required on every request when set (always set when bound beyond loopback).
    pub token: Option<String>,
    /// The longest one SQL statement may run.
    pub time_limit: Duration,
    /// The most rows the SQL box and a canned query return.
    pub row_limit: usize,
    /// Worker threads, each with its own connection.
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 8642,
            token: None,
            time_limit: Duration::from_secs(5),
            row_limit: 1000,
            workers: 4,
        }
    }
}

/// A server that is listening.
pub struct Running {
    /// Where to open it, token included when one is needed.
    pub url: String,
    pub address: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Serve until [`Running::stop`] is called from another thread (or forever).
    pub fn wait(self) {
        for thread in self.threads {
            let _ = thread.join();
        }
    }

    /// What stops the server: the accepting thread and the workers see it within a fraction of
    /// a second, finish what they hold and return.
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let stop = Arc::clone(&self.stop);
        move || stop.store(true, Ordering::SeqCst)
    }
}

/// What SQLite may hold for all the workers together: their page caches, sorts before they
/// spill to files, the values a statement makes.
pub const SQLITE_HEAP_BYTES: i64 = 256 << 20;

/// Hold SQLite's heap to [`SQLITE_HEAP_BYTES`]. The limit is one for the process, so this is
/// for a process that only serves (`memstate serve`): a statement past it fails (a 413 that says
/// so) and the server goes on.
pub fn limit_sqlite_heap() {
    // SAFETY: sets SQLite's process-wide heap limit; it takes effect for later allocations.
    unsafe {
        rusqlite::ffi::sqlite3_hard_heap_limit64(SQLITE_HEAP_BYTES);
    }
}

/// A token of 128 random bits, in hex (from the system's random source).
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut bytes))
        .map_err(|error| Error::Usage(format!("cannot make a token ({error}); give --token")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Open the workers' connections, bind, and start the workers: a file that is no memstate
/// database, or a weak token, is refused before anything listens.
pub fn start(db_path: &Path, options: Options) -> Result<Running> {
    let mut options = options;
    if let Some(why) = options.token.as_deref().and_then(guard::weak_token) {
        return Err(Error::Usage(why));
    }
    if !options.bind.is_loopback() && options.token.is_none() {
        options.token = Some(new_token()?);
    }
    let connections = (0..options.workers.max(1))
        .map(|_| open(db_path))
        .collect::<Result<Vec<_>>>()?;
    let address = SocketAddr::new(options.bind, options.port);
    let listener = http::Listener::bind(address)
        .map_err(|error| Error::Usage(format!("cannot listen on {address}: {error}")))?;
    let address = listener.address;
    let stop = Arc::new(AtomicBool::new(false));
    let guard = Arc::new(Guard::new(address, options.token.clone()));
    let (accepting, jobs) = listener.start(http::Limits::default(), Arc::clone(&stop));
    let mut threads = vec![accepting];
    let deadlines: Vec<Deadline> = connections.iter().map(|c| c.deadline.clone()).collect();
    for connection in connections {
        let jobs = jobs.clone();
        let stop = Arc::clone(&stop);
        let guard = Arc::clone(&guard);
        let options = options.clone();
        threads.push(std::thread::spawn(move || {
            work(&jobs, &stop, &guard, connection, &options)
        }));
    }
    let watching = Arc::clone(&stop);
    threads.push(std::thread::spawn(move || watch(&deadlines, &watching)));
    let host = match address.ip() {
        // Bound to every address: the machine's name, which another machine can open.
        ip if ip.is_unspecified() => machine_name().unwrap_or_else(|| ip.to_string()),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let url = match &options.token {
        Some(token) => format!("http://{host}:{}/?token={token}", address.port()),
        None => format!("http://{host}:{}/", address.port()),
    };
    Ok(Running {
        url,
        address,
        stop,
        threads,
    })
}

/// This machine's host name, when it has one.
fn machine_name() -> Option<String> {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `name.len()` bytes into the buffer it is given.
    let done = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    if done != 0 {
        return None;
    }
    let end = name.iter().position(|byte| *byte == 0)?;
    let name = std::str::from_utf8(&name[..end]).ok()?.trim();
    (!name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)))
    .then(|| name.to_ascii_lowercase())
}

/// When a worker's running request must stop, and what stops it.
#[derive(Clone)]
struct Deadline {
    at: Arc<std::sync::Mutex<Option<Instant>>>,
    interrupter: Arc<db::Interrupter>,
}

/// A worker's connection: read-only, nothing attached, no statement that changes what later
/// statements see (settings, transactions), each request's statements held to the time limit.
pub struct Connection {
    pub database: Database,
    deadline: Deadline,
}

impl Connection {
    /// Start the clock for one request's statements.
    fn arm(&self, limit: Duration) {
        if let Ok(mut deadline) = self.deadline.at.lock() {
            *deadline = Some(Instant::now() + limit);
        }
    }

    fn disarm(&self) {
        if let Ok(mut deadline) = self.deadline.at.lock() {
            *deadline = None;
        }
    }
}

fn open(db_path: &Path) -> Result<Connection> {
    let mut database = db::open_read_only(db_path)?;
    let at: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let watched = Arc::clone(&at);
    // Past the deadline, the statement fails as interrupted and the worker is free again.
    database.stop_statements_when(move || {
        watched
            .lock()
            .map(|deadline| deadline.is_some_and(|at| Instant::now() > at))
            .unwrap_or(false)
    })?;
    let conn = database.connection();
    conn.pragma_update(None, "query_only", true)
        .map_err(|error| Error::database(database.display(), error))?;
    crate::query::limit_served_statements(conn)?;
    database.refuse_state_changes()?;
    let interrupter = Arc::new(database.interrupter());
    Ok(Connection {
        database,
        deadline: Deadline { at, interrupter },
    })
}

/// Interrupt a statement past its deadline even inside one long step of SQLite's machine (a
/// sort, a large value), where the progress handler is not asked.
fn watch(deadlines: &[Deadline], stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        for deadline in deadlines {
            if let Ok(at) = deadline.at.lock() {
                if at.is_some_and(|at| Instant::now() > at) {
                    deadline.interrupter.interrupt();
                }
            }
        }
    }
}

fn work(
    jobs: &http::Jobs,
    stop: &AtomicBool,
    guard: &Guard,
    connection: Connection,
    options: &Options,
) {
    while let Some(job) = jobs.next(stop, Duration::from_millis(200)) {
        connection.arm(options.time_limit);
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answer(&job.request, guard, &connection, options)
        }))
        .unwrap_or_else(|_| api::Answer::failed("memstate failed on this request (a bug)"));
        connection.disarm();
        let _ = job.answer.send(answer.into_response());
    }
}

fn answer(
    request: &http::Request,
    guard: &Guard,
    connection: &Connection,
    options: &Options,
) -> api::Answer {
    if let Err(refusal) = guard.check(request) {
        return refusal;
    }
    if request.method != "GET" {
        return api::Answer::error(405, "only GET is served: memstate serve changes nothing");
    }
    let (path, query) = request.path_and_query();
    let params = api::Params::parse(query);
    let mut answer = api::route(path, &params, connection, options);
    if let Some(cookie) = guard.cookie_for(&params) {
        answer.headers.push(("Set-Cookie".to_string(), cookie));
    }
    answer
}
