//! The HTTP/1.1 that `memstate serve` speaks: just what a read-only explorer needs, with every
//! resource a client could make it hold bounded.
//!
//! One thread accepts; each connection gets a thread of its own, at most [`Limits::connections`]
//! at once (past that a connection is answered 503 at once and closed, without a thread); each
//! connection reads a request head of at most [`Limits::head_bytes`] (past that 414 or 431)
//! within [`Limits::head_time`], never reads a body (a request that declares one is answered and
//! the connection then closed, so a `Content-Length` of 100 GB costs nothing), hands the request
//! to the pool of workers that own the database connections, and writes the answer within
//! [`Limits::write_time`]. A client that stops reading its answer therefore holds its own
//! connection thread for that long at most, never a worker, and the answers so held are at most
//! [`Limits::answer_bytes`] together (past that, 503); an idle keep-alive connection is
//! closed after [`Limits::idle_time`]. An error from `accept` (out of file descriptors, say) is
//! waited out, not fatal: the server keeps listening.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// What one client may make the server hold, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; a thread each.
    pub connections: usize,
    /// The request line and headers together.
    pub head_bytes: usize,
    /// Headers in one request.
    pub headers: usize,
    /// From the first byte awaited to the end of the head.
    pub head_time: Duration,
    /// A keep-alive connection waiting for its next request.
    pub idle_time: Duration,
    /// Writing one answer.
    pub write_time: Duration,
    /// Requests on one connection before it is closed.
    pub requests_per_connection: usize,
    /// The bytes of answers held by connections at once, waiting to be taken by their clients;
    /// past it an answer is replaced by a 503 (clients that do not read cannot pile them up).
    pub answer_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 64,
            head_bytes: 32 << 10,
            headers: 100,
            head_time: Duration::from_secs(10),
            idle_time: Duration::from_secs(5),
            write_time: Duration::from_secs(20),
            requests_per_connection: 1000,
            answer_bytes: 128 << 20,
        }
    }
}

/// A request as read: its method, target (path and query) and headers; never a body.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// A header's value (the first of that name, whatever its case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The path and the query string (empty when none).
    pub fn path_and_query(&self) -> (&str, &str) {
        self.target
            .split_once('?')
            .unwrap_or((self.target.as_str(), ""))
    }
}

/// An answer to send: status, headers and the whole body (sent with its length).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A short plain-text refusal.
    pub fn plain(status: u16, text: &str) -> Response {
        Response {
            status,
            headers: vec![(
                "Content-Type".to_string(),
                "text/plain; charset=utf-8".to_string(),
            )],
            body: format!("{text}\n").into_bytes(),
        }
    }

    fn head(&self, keep_alive: bool) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            // A header that could split the answer is dropped, never sent.
            let clean = |text: &str| !text.bytes().any(|byte| byte == b'\r' || byte == b'\n');
            if clean(name) && clean(value) {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        head.push_str(if keep_alive {
            "Connection: keep-alive\r\n\r\n"
        } else {
            "Connection: close\r\n\r\n"
        });
        head.into_bytes()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// One request handed to the workers, with where its answer goes.
pub struct Job {
    pub request: Request,
    pub answer: mpsc::Sender<Response>,
}

/// The jobs the workers take, one at a time each.
#[derive(Clone)]
pub struct Jobs(Arc<Mutex<mpsc::Receiver<Job>>>);

impl Jobs {
    /// The next job, or `None` once the server stops (checked every `poll`).
    pub fn next(&self, stop: &AtomicBool, poll: Duration) -> Option<Job> {
        loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let receiver = self.0.lock().ok()?;
            match receiver.recv_timeout(poll) {
                Ok(job) => return Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

/// A listening socket, not yet accepting.
pub struct Listener {
    listener: TcpListener,
    pub address: SocketAddr,
}

impl Listener {
    pub fn bind(address: SocketAddr) -> std::io::Result<Listener> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        Ok(Listener { listener, address })
    }

    /// Accept until `stop`, in a thread of its own; the jobs go to the returned queue.
    pub fn start(
        self,
        limits: Limits,
        stop: Arc<AtomicBool>,
    ) -> (std::thread::JoinHandle<()>, Jobs) {
        // Each connection has at most one request in the queue, so it never fills.
        let (sender, receiver) = mpsc::sync_channel::<Job>(limits.connections.max(1));
        let accepting = std::thread::spawn(move || accept(self.listener, sender, limits, &stop));
        (accepting, Jobs(Arc::new(Mutex::new(receiver))))
    }
}

fn accept(
    listener: TcpListener,
    jobs: mpsc::SyncSender<Job>,
    limits: Limits,
    stop: &Arc<AtomicBool>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(AtomicU64::new(0));
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if open.load(Ordering::SeqCst) >= limits.connections {
                    refuse_busy(stream);
                    continue;
                }
                open.fetch_add(1, Ordering::SeqCst);
                let held = Held(Arc::clone(&open));
                let jobs = jobs.clone();
                let stop = Arc::clone(stop);
                let answers = Arc::clone(&answers);
                let spawned = std::thread::Builder::new()
                    .name("memstate-conn".to_string())
                    .stack_size(256 << 10)
                    .spawn(move || {
                        let _held = held;
                        serve_connection(stream, &jobs, limits, &stop, &answers);
                    });
                // A thread that cannot be made drops its connection (and its count).
                drop(spawned);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                wait_readable(&listener, Duration::from_millis(200));
            }
            // Out of descriptors, a connection reset before it was taken, and the like: they
            // pass; the listener is still there.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Counts a connection as open while it lives.
struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Past the connection limit: a 503 written without waiting (it fits any socket's buffer).
fn refuse_busy(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let answer = Response::plain(
        503,
        "memstate serve: too many connections open at once; try again shortly",
    );
    let mut bytes = answer.head(false);
    bytes.extend_from_slice(&answer.body);
    let _ = stream.write(&bytes);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Sleep until the listener has a connection waiting, or `timeout`.
fn wait_readable(listener: &TcpListener, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for a descriptor this listener owns, for the call's length.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    if ready < 0 {
        std::thread::sleep(timeout.min(Duration::from_millis(50)));
    }
}

/// What reading a head gave.
enum Head {
    Request(Request, Framing),
    /// The client closed (or went quiet) between requests: nothing to answer.
    Gone,
    /// A head refused: answered with this, then the connection closed.
    Refused(Response),
}

/// How the connection goes on after this request.
struct Framing {
    keep_alive: bool,
}

fn serve_connection(
    mut stream: TcpStream,
    jobs: &mpsc::SyncSender<Job>,
    limits: Limits,
    stop: &AtomicBool,
    answers: &AtomicU64,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let mut buffer: Vec<u8> = Vec::new();
    for served in 0..limits.requests_per_connection {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let wait = if served == 0 {
            limits.head_time
        } else {
            limits.idle_time
        };
        let (request, mut framing) = match read_head(&mut stream, &mut buffer, wait, &limits) {
            Head::Request(request, framing) => (request, framing),
            Head::Gone => break,
            Head::Refused(answer) => {
                write_answer(&mut stream, &answer, false, limits.write_time);
                close_gently(&mut stream);
                break;
            }
        };
        if served + 1 == limits.requests_per_connection || stop.load(Ordering::SeqCst) {
            framing.keep_alive = false;
        }
        let (answer_to, answered) = mpsc::channel();
        let job = Job {
            request,
            answer: answer_to,
        };
        let answer = match jobs.send(job) {
            Ok(()) => answered
                .recv()
                .unwrap_or_else(|_| Response::plain(503, "memstate serve is stopping")),
            Err(_) => Response::plain(503, "memstate serve is stopping"),
        };
        // Counted while held here, until written (or given up on).
        let size = answer.body.len() as u64;
        let (answer, counted) = if answers.fetch_add(size, Ordering::SeqCst) + size
            > limits.answer_bytes
        {
            answers.fetch_sub(size, Ordering::SeqCst);
            let busy = Response::plain(
                    503,
                    "memstate serve holds too many large answers that their clients have not taken yet; try again shortly",
                );
            (busy, 0)
        } else {
            (answer, size)
        };
        let written = write_answer(&mut stream, &answer, framing.keep_alive, limits.write_time);
        answers.fetch_sub(counted, Ordering::SeqCst);
        if !written {
            break;
        }
        if !framing.keep_alive {
            close_gently(&mut stream);
            break;
        }
    }
}

/// Read one request head into `buffer` (which keeps any bytes read past it, pipelined).
fn read_head(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    wait: Duration,
    limits: &Limits,
) -> Head {
    let mut deadline = Instant::now() + wait;
    let mut chunk = [0u8; 4096];
    let mut first_byte_seen = !buffer.is_empty();
    loop {
        if let Some(end) = find_head_end(buffer) {
            let head: Vec<u8> = buffer.drain(..end).collect();
            return parse_head(&head, limits);
        }
        if buffer.len() >= limits.head_bytes {
            return Head::Refused(too_long(buffer));
        }
        let now = Instant::now();
        if now >= deadline {
            return if first_byte_seen {
                Head::Refused(Response::plain(
                    408,
                    "the request head did not arrive in time",
                ))
            } else {
                Head::Gone
            };
        }
        let _ = stream.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))));
        let room = (limits.head_bytes - buffer.len()).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return Head::Gone,
            Ok(read) => {
                if !first_byte_seen {
                    // A request that starts on an idle keep-alive connection has the whole head
                    // time from its first byte.
                    first_byte_seen = true;
                    deadline = deadline.max(Instant::now() + limits.head_time);
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            Err(error) if passing(&error) => continue,
            Err(_) => return Head::Gone,
        }
    }
}

/// An error of a read or write that only says to try again (a signal, a timeout slice): the
/// caller's deadline decides when to stop.
fn passing(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::Interrupted
            | std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
    )
}

/// Where the head ends (after its blank line), if it has.
fn find_head_end(buffer: &[u8]) -> Option<usize> {
    let crlf = memchr::memmem::find(buffer, b"\r\n\r\n").map(|at| at + 4);
    let lf = memchr::memmem::find(buffer, b"\n\n").map(|at| at + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (found, None) | (None, found) => found,
    }
}

/// A head over the limit: 414 while the request line has not ended, else 431.
fn too_long(buffer: &[u8]) -> Response {
    if memchr::memchr(b'\n', buffer).is_none() {
        Response::plain(414, "the request line is too long")
    } else {
        Response::plain(431, "the request's headers are too large")
    }
}

fn parse_head(head: &[u8], limits: &Limits) -> Head {
    let bad = |text: &str| Head::Refused(Response::plain(400, text));
    let text = String::from_utf8_lossy(head);
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    let Some(request_line) = lines.next() else {
        return bad("no request line");
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad("the request line is not METHOD TARGET HTTP/1.1");
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) {
        return bad("the method is not a token");
    }
    if !target.starts_with('/') || target.bytes().any(|byte| byte.is_ascii_control()) {
        return bad("the target is not a path");
    }
    let keep_alive_by_default = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => {
            return Head::Refused(Response::plain(
                505,
                "only HTTP/1.0 and HTTP/1.1 are spoken",
            ))
        }
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return bad("folded header lines are not accepted");
        }
        let Some((name, value)) = line.split_once(':') else {
            return bad("a header line without a colon");
        };
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return bad("a header name that is not a token");
        }
        if headers.len() == limits.headers {
            return Head::Refused(Response::plain(431, "too many headers"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let request = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    };
    // A body is never read: a request that declares one (or declares it twice, or both ways,
    // as request smuggling does) is answered, and then its connection is closed.
    let lengths: Vec<&str> = request
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("Content-Length"))
        .map(|(_, value)| value.as_str())
        .collect();
    let has_body = request.header("Transfer-Encoding").is_some()
        || lengths.len() > 1
        || lengths.iter().any(|length| *length != "0");
    let connection = request
        .header("Connection")
        .unwrap_or("")
        .to_ascii_lowercase();
    let keep_alive = !has_body
        && if keep_alive_by_default {
            !connection.split(',').any(|word| word.trim() == "close")
        } else {
            connection
                .split(',')
                .any(|word| word.trim() == "keep-alive")
        };
    Head::Request(request, Framing { keep_alive })
}

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Write the answer within `limit`; false when it could not be written whole.
fn write_answer(
    stream: &mut TcpStream,
    answer: &Response,
    keep_alive: bool,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    let head = answer.head(keep_alive);
    for part in [head.as_slice(), answer.body.as_slice()] {
        let mut rest = part;
        while !rest.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let _ = stream.set_write_timeout(Some((deadline - now).max(Duration::from_millis(1))));
            match stream.write(rest) {
                Ok(0) => return false,
                Ok(written) => rest = &rest[written..],
                Err(error) if passing(&error) => continue,
                Err(_) => return false,
            }
        }
    }
    true
}

/// Close after an answer while the client may still be sending (a body never read): stop
/// writing, then read and drop a little of what comes (bounded in bytes and time), so that the
/// answer is not lost to a reset.
fn close_gently(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let started = Instant::now();
    let mut drained = 0usize;
    while drained < (256 << 10) && started.elapsed() < Duration::from_millis(500) {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => drained += read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Head {
        parse_head(text.as_bytes(), &Limits::default())
    }

    #[test]
    fn a_head_is_parsed_into_its_parts_and_framing() {
        let Head::Request(request, framing) =
            parsed("GET /api/sql?q=1 HTTP/1.1\r\nHost: a:1\r\nX-Y:  z \r\n\r\n")
        else {
            panic!("refused");
        };
        assert_eq!(request.method, "GET");
        assert_eq!(request.path_and_query(), ("/api/sql", "q=1"));
        assert_eq!(request.header("host"), Some("a:1"));
        assert_eq!(request.header("x-y"), Some("z"));
        assert!(framing.keep_alive);
    }

    #[test]
    fn a_declared_body_closes_the_connection_and_bad_heads_are_refused() {
        for head in [
            "GET / HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n",
            "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
            "GET / HTTP/1.0\r\n\r\n",
        ] {
            match parsed(head) {
                Head::Request(_, framing) => assert!(!framing.keep_alive, "{head:?}"),
                _ => panic!("refused: {head:?}"),
            }
        }
        for (head, status) in [
            ("GET / HTTP/2.0\r\n\r\n", 505),
            ("GET /\r\n\r\n", 400),
            ("GET http://x/ HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\n folded\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
            ("G(T / HTTP/1.1\r\n\r\n", 400),
        ] {
            match parsed(head) {
                Head::Refused(answer) => assert_eq!(answer.status, status, "{head:?}"),
                _ => panic!("accepted: {head:?}"),
            }
        }
        let many: String = (0..101).map(|n| format!("H{n}: v\r\n")).collect();
        match parsed(&format!("GET / HTTP/1.1\r\n{many}\r\n")) {
            Head::Refused(answer) => assert_eq!(answer.status, 431),
            _ => panic!("101 headers accepted"),
        }
    }

    #[test]
    fn a_header_that_would_split_the_answer_is_not_sent() {
        let answer = Response {
            status: 200,
            headers: vec![("X-A".to_string(), "1\r\nSet-Cookie: b".to_string())],
            body: Vec::new(),
        };
        let head = String::from_utf8(answer.head(true)).unwrap_or_default();
        assert!(!head.contains("Set-Cookie"), "{head}");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    }
}
