//! `memstate serve`: the run explored live in a browser. One read-only database, a few worker
//! threads each with a connection of its own, and every answer computed from what the screen
//! asks for (a memory's address range in at most so many bins, one snapshot's memories a page at
//! a time), so a run of any size stays explorable.
//!
//! Safe by default: it binds the loopback address; a request whose `Host` is not the address
//! served is refused (a page elsewhere cannot reach it through DNS rebinding); bound elsewhere it
//! needs a token on every request. The connections are read-only, attach nothing, and every
//! statement stops at its time limit. Bad parameters get 400, names of nothing 404; a failure of
//! memstate itself is a 500 that says so in one line, never a backtrace.
//!
//! [`api`] answers the questions (JSON); the pages are the app ([`APP`]) and the map and story
//! pages that `viz` renders, the same renderer as `map --html` and `oom --html`.

pub mod api;
mod guard;

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
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Serve until [`Running::stop`] is called from another thread (or forever).
    pub fn wait(self) {
        for worker in self.workers {
            let _ = worker.join();
        }
    }

    /// What stops the server: the workers finish the requests they hold and return.
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let server = Arc::clone(&self.server);
        let stop = Arc::clone(&self.stop);
        let workers = self.workers.len();
        move || {
            stop.store(true, Ordering::SeqCst);
            // Each call wakes one worker waiting for a request.
            for _ in 0..workers {
                server.unblock();
            }
        }
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
/// database is refused before anything listens.
pub fn start(db_path: &Path, options: Options) -> Result<Running> {
    let mut options = options;
    if !options.bind.is_loopback() && options.token.is_none() {
        options.token = Some(new_token()?);
    }
    let connections = (0..options.workers.max(1))
        .map(|_| open(db_path))
        .collect::<Result<Vec<_>>>()?;
    let address = SocketAddr::new(options.bind, options.port);
    let server = tiny_http::Server::http(address)
        .map_err(|error| Error::Usage(format!("cannot listen on {address}: {error}")))?;
    let address = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| Error::Usage("the server has no IP address".to_string()))?;
    let server = Arc::new(server);
    let stop = Arc::new(AtomicBool::new(false));
    let guard = Arc::new(Guard::new(address, options.token.clone()));
    let mut workers = Vec::new();
    for database in connections {
        let server = Arc::clone(&server);
        let stop = Arc::clone(&stop);
        let guard = Arc::clone(&guard);
        let options = options.clone();
        workers.push(std::thread::spawn(move || {
            work(&server, &stop, &guard, database, &options)
        }));
    }
    let host = match address.ip() {
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
        server,
        stop,
        workers,
    })
}

/// A worker's connection: read-only, nothing attached, each statement held to the time limit.
pub struct Connection {
    pub database: Database,
    deadline: Arc<std::sync::Mutex<Option<Instant>>>,
}

impl Connection {
    /// Start the clock for one request's statements.
    fn arm(&self, limit: Duration) {
        if let Ok(mut deadline) = self.deadline.lock() {
            *deadline = Some(Instant::now() + limit);
        }
    }
}

fn open(db_path: &Path) -> Result<Connection> {
    let mut database = db::open_read_only(db_path)?;
    let deadline: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let watched = Arc::clone(&deadline);
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
    crate::query::limit_statement_size(conn)?;
    Ok(Connection { database, deadline })
}

fn work(
    server: &tiny_http::Server,
    stop: &AtomicBool,
    guard: &Guard,
    connection: Connection,
    options: &Options,
) {
    while !stop.load(Ordering::SeqCst) {
        let request = match server.recv() {
            Ok(request) => request,
            Err(_) => break,
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        connection.arm(options.time_limit);
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answer(&request, guard, &connection, options)
        }))
        .unwrap_or_else(|_| api::Answer::failed("memstate failed on this request (a bug)"));
        let _ = request.respond(answer.into_response());
    }
}

fn answer(
    request: &tiny_http::Request,
    guard: &Guard,
    connection: &Connection,
    options: &Options,
) -> api::Answer {
    if let Err(refusal) = guard.check(request) {
        return refusal;
    }
    if request.method() != &tiny_http::Method::Get {
        return api::Answer::error(405, "only GET is served: memstate serve changes nothing");
    }
    let (path, query) = match request.url().split_once('?') {
        Some((path, query)) => (path, query),
        None => (request.url(), ""),
    };
    let params = api::Params::parse(query);
    let mut answer = api::route(path, &params, connection, options);
    if let Some(cookie) = guard.cookie_for(&params) {
        answer.headers.push(("Set-Cookie".to_string(), cookie));
    }
    answer
}
