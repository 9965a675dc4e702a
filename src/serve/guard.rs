//! Who may ask, and from where.
//!
//! - Without a token (loopback only) a request must name the server's own address in its
//!   `Host` header: a page elsewhere that resolves its own name to 127.0.0.1 (DNS rebinding)
//!   sends that name, and is refused.
//! - With a token (always, when bound beyond loopback) every request carries it: in the URL
//!   (`?token=`, which also sets a cookie for the page's own requests), in that cookie, or in an
//!   `X-Memstate-Token` header. Any `Host` is then served, so a browser on another machine that
//!   opens the printed URL by address or by name gets the page; a rebinding page has no token.
//! - Whatever the token, a request that a browser says comes from a page of another origin
//!   (`Sec-Fetch-Site: cross-site` or `same-site`, which is another port of this host, or an
//!   `Origin` or `Referer` of another origin) is refused unless it is a top-level navigation to
//!   a page: the API, the SQL box above all, answers only the page's own requests. Cookies are
//!   sent to every port of a host, so a page served on another port could otherwise use the
//!   cookie with `<img src=".../api/sql?q=...">`.

use std::net::SocketAddr;

use super::api::{Answer, Params};
use super::http::Request;

/// The checks every request passes.
pub struct Guard {
    hosts: Vec<String>,
    token: Option<String>,
    cookie: String,
}

/// The shortest token accepted: 16 characters (a made one has 32 hex digits).
pub const MIN_TOKEN_CHARS: usize = 16;

/// Why a token given on the command line is refused, if it is.
pub fn weak_token(token: &str) -> Option<String> {
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Some(format!(
            "--token must have at least {MIN_TOKEN_CHARS} characters (it guards the database against anyone who can reach the port); leave it out and one is made"
        ));
    }
    if !token
        .bytes()
        .all(|byte| byte.is_ascii_graphic() && !b";,\"\\%&=?#+".contains(&byte))
    {
        return Some(
            "--token may hold letters, digits and punctuation other than ; , \" \\ % & = ? # + (it travels in a URL and a cookie)"
                .to_string(),
        );
    }
    let mut distinct: Vec<char> = token.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 6 {
        return Some(format!(
            "--token {token:?} is too easy to guess (it uses {} different characters); leave it out and one is made",
            distinct.len()
        ));
    }
    None
}

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
        Guard {
            hosts,
            token,
            cookie: format!("memstate_token_{port}"),
        }
    }

    /// Refuse a request from elsewhere (403) or without the token (401).
    pub fn check(&self, request: &Request) -> Result<(), Answer> {
        let host = request
            .header("Host")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if let Some(token) = &self.token {
            self.check_token(request, token)?;
        } else if !self.hosts.contains(&host) {
            return Err(Answer::error(
                403,
                &format!("the Host header {host:?} is not this server's address ({}); open the URL memstate serve printed", self.hosts[0]),
            ));
        }
        self.check_origin(request, &host)
    }

    fn check_token(&self, request: &Request, token: &str) -> Result<(), Answer> {
        let (_, query) = request.path_and_query();
        let given = Params::parse(query)
            .get("token")
            .map(str::to_string)
            .or_else(|| request.header("X-Memstate-Token").map(str::to_string))
            .or_else(|| {
                request.header("Cookie").and_then(|cookies| {
                    cookies.split(';').find_map(|cookie| {
                        cookie
                            .trim()
                            .strip_prefix(self.cookie.as_str())
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

    /// Refuse what a page of another origin asks, but for opening a page (a link followed).
    fn check_origin(&self, request: &Request, host: &str) -> Result<(), Answer> {
        let (path, _) = request.path_and_query();
        let navigation = request
            .header("Sec-Fetch-Mode")
            .is_some_and(|mode| mode.eq_ignore_ascii_case("navigate"))
            && request
                .header("Sec-Fetch-Dest")
                .is_none_or(|dest| dest.eq_ignore_ascii_case("document"))
            && !path.starts_with("/api/");
        if navigation {
            return Ok(());
        }
        let own = format!("http://{host}");
        let foreign_site = request.header("Sec-Fetch-Site").is_some_and(|site| {
            site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
        });
        let foreign_origin = request
            .header("Origin")
            .is_some_and(|origin| !origin.eq_ignore_ascii_case(&own));
        let foreign_referer = request.header("Referer").is_some_and(|referer| {
            let origin_of = referer.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
            !origin_of.eq_ignore_ascii_case(&own)
        });
        if foreign_site || foreign_origin || foreign_referer {
            return Err(Answer::error(
                403,
                "a page of another origin (another host or port) asked this: memstate serve answers only its own page; open the URL memstate serve printed",
            ));
        }
        Ok(())
    }

    /// The cookie that carries the token for the page's own requests, when the URL gave it.
    pub fn cookie_for(&self, params: &Params) -> Option<String> {
        let token = self.token.as_ref()?;
        params.get("token")?;
        Some(format!(
            "{}={token}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie
        ))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_short_and_guessable_tokens_are_refused() {
        for weak in [
            "",
            "s3cret",
            "aaaaaaaaaaaaaaaaaaaa",
            "abababababababababab",
            "with space in it 1234",
        ] {
            assert!(weak_token(weak).is_some(), "{weak:?} accepted");
        }
        assert!(weak_token("0f3a9c1e77b2d4e5").is_none());
    }
}
