//! Who may ask: a request must name the server's own address in its `Host` header (a page on
//! another site that resolves its name to 127.0.0.1 sends its own name, and is refused), and,
//! when the server has a token, carry it: in the URL (`?token=`), which also sets a cookie for
//! the page's own requests, in that cookie, or in an `X-Memstate-Token` header.

use std::net::SocketAddr;

use super::api::{Answer, Params};

/// The checks every request passes.
pub struct Guard {
    hosts: Vec<String>,
    token: Option<String>,
}

const COOKIE: &str = "memstate_token";

impl Guard {
    pub fn new(address: SocketAddr, token: Option<String>) -> Guard {
        let port = address.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        let own = match address {
            SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
            SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
        };
        if !hosts.contains(&own) {
            hosts.push(own);
        }
        Guard { hosts, token }
    }

    /// Refuse a request from elsewhere (403) or without the token (401).
    pub fn check(&self, request: &tiny_http::Request) -> Result<(), Answer> {
        let header = |name: &'static str| header(request, name);
        let host = header("Host").unwrap_or_default().to_ascii_lowercase();
        if !self.hosts.contains(&host) {
            return Err(Answer::error(
                403,
                &format!("the Host header {host:?} is not this server's address ({}); open the URL memstate serve printed", self.hosts[0]),
            ));
        }
        let Some(token) = &self.token else {
            return Ok(());
        };
        let query = request.url().split_once('?').map_or("", |(_, query)| query);
        let given = Params::parse(query)
            .get("token")
            .map(str::to_string)
            .or_else(|| header("X-Memstate-Token"))
            .or_else(|| {
                header("Cookie").and_then(|cookies| {
                    cookies.split(';').find_map(|cookie| {
                        cookie
                            .trim()
                            .strip_prefix(COOKIE)
                            .and_then(|rest| rest.strip_prefix('='))
                            .map(str::to_string)
                    })
                })
            });
        match given {
            Some(given) if same(&given, token) => Ok(()),
            Some(_) => Err(Answer::error(401, "wrong token: open the URL memstate serve printed")),
            None => Err(Answer::error(401, "this server needs its token: open the URL memstate serve printed (it ends in ?token=...)")),
        }
    }

    /// The cookie that carries the token for the page's own requests, when the URL gave it.
    pub fn cookie_for(&self, params: &Params) -> Option<String> {
        let token = self.token.as_ref()?;
        params.get("token")?;
        Some(format!(
            "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
        ))
    }
}

/// A request header's value.
fn header(request: &tiny_http::Request, name: &'static str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|header| header.field.equiv(name))
        .map(|header| header.value.as_str().to_string())
}

/// Compare without stopping at the first difference (the time taken says nothing of the token).
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}
