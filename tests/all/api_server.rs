//! A loopback HTTP/1.1 server standing in for a downstream API: it records every request
//! (request line, headers, body) and answers by path:
//! - `/echo...`: the whole request back as the body, and its `authorization` header back in
//!   `x-echo-authorization` (a server that reflects credentials);
//! - `/forms...`: the credential of its `authorization` header (after `Bearer `) in every form
//!   an encoder might echo it in: each character `\u`-escaped, JSON-escaped as Go does,
//!   percent-encoded, upper-cased, as hex, as base64 and base64url behind 0, 1 and 2 other
//!   bytes, and as the name of a response header;
//! - `/compressed...`: the echo with `content-encoding: gzip`, whatever was asked; its body is
//!   the request reversed, which stands for a compression no search sees through;
//! - `/partial...`: a `206` with the credential's first 12 bytes, whatever was asked (a server
//!   that honours `range` or ignores its absence);
//! - `/slice-N`: a `200` with 12 bytes of the credential from byte N (an API that itself hands
//!   the value out in pieces, the gap no host closes);
//! - `/hold...`: `{"ok":true}` once [`ApiServer::release`] was called (a slow API);
//! - `/jwks...`: the key set it was started with ([`ApiServer::serving`]), as an issuer does;
//! - anything else: `{"ok":true}` at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request line and headers, as sent.
    pub head: String,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// Everything that arrived, as text.
    pub fn text(&self) -> String {
        format!("{}{}", self.head, String::from_utf8_lossy(&self.body))
    }
}

pub struct ApiServer {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    released: Arc<tokio::sync::Semaphore>,
    jwks: Fixed,
}

/// What a server answers on `/jwks...` (a key set it serves), if anything.
type Fixed = Arc<Mutex<Option<String>>>;

/// Most bytes of one request the server reads.
const MAX_REQUEST: usize = 64 * 1024;

impl ApiServer {
    pub async fn start() -> ApiServer {
        ApiServer::serving(None).await
    }

    /// A server that also answers `/jwks...` with `jwks` (a key set, as an issuer does).
    pub async fn serving(jwks: Option<String>) -> ApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let released = Arc::new(tokio::sync::Semaphore::new(0));
        let (seen, gate) = (requests.clone(), released.clone());
        let fixed: Fixed = Arc::new(Mutex::new(jwks));
        let served = fixed.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, seen.clone(), gate.clone(), served.clone()));
            }
        });
        ApiServer {
            port,
            requests,
            released,
            jwks: fixed,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `host:port` for a network grant.
    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Wait (bounded) until `n` requests arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Recorded> {
        for _ in 0..400 {
            if self.requests.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.requests()
    }

    /// Serve `jwks` on `/jwks...` from now on (an issuer rotating its keys).
    pub fn set_jwks(&self, jwks: String) {
        *self.jwks.lock().unwrap() = Some(jwks);
    }

    /// Let every held request (and every later one) be answered.
    pub fn release(&self) {
        self.released.add_permits(1_000);
    }
}

/// The data of a chunked body (chunk sizes and the last chunk taken out).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..line_end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        let start = line_end + 2;
        if size == 0 || raw.len() < start + size {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = raw.get(start + size + 2..).unwrap_or_default();
    }
    out
}

async fn serve(
    mut sock: tokio::net::TcpStream,
    seen: Arc<Mutex<Vec<Recorded>>>,
    gate: Arc<tokio::sync::Semaphore>,
    fixed: Fixed,
) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let read = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 && raw.len() < MAX_REQUEST => raw.extend_from_slice(&buf[..n]),
            _ => return,
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut req = Recorded {
        head,
        body: raw[head_end..].to_vec(),
    };
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let length: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let whole = |body: &[u8]| {
        if chunked {
            body.ends_with(b"0\r\n\r\n")
        } else {
            body.len() >= length
        }
    };
    while !whole(&req.body) && req.body.len() < MAX_REQUEST {
        let read = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => req.body.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    if chunked {
        req.body = dechunk(&req.body);
    }
    let path = req.head.split(' ').nth(1).unwrap_or("/").to_string();
    seen.lock().unwrap().push(req.clone());
    let mut extra = String::new();
    let jwks = fixed.lock().unwrap().clone();
    let credential = req
        .header("authorization")
        .map(|a| a.trim_start_matches("Bearer ").to_string())
        .unwrap_or_default();
    let mut status = "200 OK";
    let body = if let Some(jwks) = jwks.filter(|_| path.starts_with("/jwks")) {
        jwks
    } else if path.starts_with("/forms") {
        extra = format!("x-{credential}: 1\r\n");
        every_form(&credential)
    } else if path.starts_with("/compressed") {
        extra = "content-encoding: gzip\r\n".to_string();
        req.text().chars().rev().collect()
    } else if path.starts_with("/partial") {
        let piece = &credential[..credential.len().min(12)];
        extra = format!("content-range: bytes 0-11/{}\r\n", credential.len());
        status = "206 Partial Content";
        piece.to_string()
    } else if let Some(from) = path.strip_prefix("/slice-") {
        let from = from.parse::<usize>().unwrap_or(0).min(credential.len());
        credential[from..credential.len().min(from + 12)].to_string()
    } else if path.starts_with("/echo") {
        if let Some(auth) = req.header("authorization") {
            extra = format!("x-echo-authorization: {auth}\r\n");
        }
        req.text()
    } else {
        if path.starts_with("/hold") {
            let _ = tokio::time::timeout(Duration::from_secs(30), gate.acquire()).await;
        }
        "{\"ok\":true}".to_string()
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{extra}\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(reply.as_bytes()).await;
    let _ = sock.shutdown().await;
}

/// `value` in every form [`ApiServer`]'s `/forms` path sends, one per line.
pub fn every_form(value: &str) -> String {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    use base64::Engine as _;
    let unicode: String = value.bytes().map(|b| format!("\\u{b:04x}")).collect();
    let go: String = value
        .chars()
        .map(|c| match c {
            '<' | '>' | '&' => format!("\\u{:04x}", c as u32),
            '"' | '\\' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect();
    let percent: String = value.bytes().map(|b| format!("%{b:02X}")).collect();
    let mut forms = vec![
        format!("{{\"unicode\":\"{unicode}\",\"go\":\"{go}\"}}"),
        format!("https://example.com/?token={percent}"),
        value.to_ascii_uppercase(),
        value.to_ascii_lowercase(),
        hex::encode(value),
        hex::encode_upper(value),
    ];
    for pad in ["", "a", "ab"] {
        forms.push(STANDARD.encode(format!("{pad}{value}")));
        forms.push(URL_SAFE.encode(format!("{pad}{value}")));
    }
    forms.join("\n")
}
