//! Network policy: one allowlist of `host:port`, enforced for raw sockets (the WASI socket
//! address check) and for `wasi:http` outgoing requests (the send-request hook) alike.
//!
//! Everything not on the list is denied, including listening, accepting and UDP.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use serde::Deserialize;
use std::fmt;

use super::host_budget::{HTTP_BODY_CHUNK_BYTES, MAX_HTTP_REQUESTS_IN_FLIGHT};
use super::redact::RedactedBody;
use super::secrets::CallSecrets;

/// A `host:port` network allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPort {
    /// Lower-cased host name or IP literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
}

impl TryFrom<String> for HostPort {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let hint = || {
            format!("network entry {s:?} must be \"host:port\", like \"127.0.0.1:8080\", \"example.com:443\" or \"[::1]:80\"")
        };
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest.split_once("]:").ok_or_else(hint)?;
            h.parse::<std::net::Ipv6Addr>().map_err(|_| hint())?;
            (h.to_string(), p)
        } else {
            let (h, p) = s.rsplit_once(':').ok_or_else(hint)?;
            let valid = !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
            if !valid {
                return Err(hint());
            }
            (h.to_ascii_lowercase(), p)
        };
        let port: u16 = port.parse().map_err(|_| hint())?;
        if port == 0 {
            return Err(hint());
        }
        Ok(HostPort { host, port })
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The `host:port` entries a call may reach. Empty means no network at all.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    entries: Arc<Vec<HostPort>>,
}

impl Allowlist {
    pub fn new(entries: Vec<HostPort>) -> Self {
        Allowlist {
            entries: Arc::new(entries),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in config order.
    pub fn entries(&self) -> &[HostPort] {
        &self.entries
    }

    /// Whether `entry` is on the list (by [`Allowlist::allows_authority`]).
    pub fn allows(&self, entry: &HostPort) -> bool {
        self.allows_authority(&entry.host, entry.port)
    }

    /// Whether a request to `host:port` (a URL's authority) is allowed: the host must match an
    /// entry exactly (names case-insensitively, IP literals by value).
    pub fn allows_authority(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = host.parse::<IpAddr>().ok();
        self.entries.iter().any(|e| {
            e.port == port
                && match (ip, e.host.parse::<IpAddr>().ok()) {
                    (Some(a), Some(b)) => a == b,
                    (None, None) => e.host.eq_ignore_ascii_case(host),
                    _ => false,
                }
        })
    }

    /// Whether a raw socket may connect to `addr`: an IP entry must match it, or a name entry
    /// must resolve to it.
    pub async fn allows_socket(&self, addr: SocketAddr) -> bool {
        for e in self.entries.iter().filter(|e| e.port == addr.port()) {
            match e.host.parse::<IpAddr>() {
                Ok(ip) if ip == addr.ip() => return true,
                Ok(_) => {}
                Err(_) => {
                    if let Ok(mut addrs) = tokio::net::lookup_host((e.host.as_str(), e.port)).await
                    {
                        if addrs.any(|a| a.ip() == addr.ip()) {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    /// The socket address check for `WasiCtxBuilder::socket_addr_check`: connects only to the
    /// allowlist; binds only the implicit wildcard bind a connect performs; nothing else.
    pub fn socket_check(
        &self,
    ) -> impl Fn(SocketAddr, SocketAddrUse) -> Pin<Box<dyn Future<Output = bool> + Send + Sync>>
           + Send
           + Sync
           + 'static {
        let list = self.clone();
        move |addr, usage| {
            let list = list.clone();
            Box::pin(async move {
                match usage {
                    SocketAddrUse::TcpConnect => list.allows_socket(addr).await,
                    SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                    _ => false,
                }
            })
        }
    }
}

/// `wasi:http` hooks of one call: every request whose authority is not on the allowlist is
/// refused, at most [`MAX_HTTP_REQUESTS_IN_FLIGHT`] are in flight, and a body buffers at most
/// two writes of [`HTTP_BODY_CHUNK_BYTES`]. A request to a secret's host carries the secret's
/// value in place of its placeholder (headers only); every response has the call's secret
/// values redacted from its headers, body and trailers.
pub struct HttpPolicy {
    allow: Allowlist,
    secrets: CallSecrets,
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl HttpPolicy {
    pub fn new(allow: Allowlist, secrets: CallSecrets) -> Self {
        HttpPolicy {
            allow,
            secrets,
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_HTTP_REQUESTS_IN_FLIGHT)),
        }
    }

    /// Put the value of each secret bound to the request's destination in place of its
    /// placeholder, in every header value. Marked sensitive, so HPACK never indexes it.
    fn substitute(
        &self,
        request: &mut http::Request<WasiBody>,
        host: &str,
        port: u16,
        https: bool,
    ) {
        for value in request.headers_mut().values_mut() {
            if let Some(real) = self.secrets.substitute(value.as_bytes(), host, port, https) {
                if let Ok(mut v) = http::HeaderValue::from_bytes(&real) {
                    v.set_sensitive(true);
                    *value = v;
                }
            }
        }
    }
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = uri.host().unwrap_or_default().to_string();
        let allowed = !host.is_empty() && self.allow.allows_authority(&host, port);
        drop(fut);
        if !allowed {
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        if !self.secrets.is_empty() {
            self.substitute(&mut request, &host, port, https);
        }
        let secrets = self.secrets.clone();
        // The permit lives as long as the connection's I/O, which ends when the guest drops
        // the response (or the call ends).
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            return Box::new(async { Err(HttpError::ConnectionLimitReached) });
        };
        Box::new(async move {
            use http_body_util::BodyExt;
            let (mut res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            let io = async move {
                let _permit = permit;
                io.await
            };
            if !secrets.is_empty() {
                secrets.redact_headers(res.headers_mut());
                let res = res.map(|b| RedactedBody::new(b.boxed_unsync(), secrets).boxed_unsync());
                return Ok((res, Box::new(io) as Box<dyn Future<Output = _> + Send>));
            }
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        HTTP_BODY_CHUNK_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        Allowlist::new(
            entries
                .iter()
                .map(|e| HostPort::try_from(e.to_string()).unwrap())
                .collect(),
        )
    }

    /// Only exact host and port pairs pass; IPv6 literals compare by value.
    #[test]
    fn authority_matching_is_exact() {
        let l = list(&["127.0.0.1:8080", "Example.com:443", "[::1]:80"]);
        assert!(l.allows_authority("127.0.0.1", 8080));
        assert!(!l.allows_authority("127.0.0.1", 8081));
        assert!(!l.allows_authority("127.0.0.2", 8080));
        assert!(l.allows_authority("example.COM", 443));
        assert!(!l.allows_authority("evil.example.com", 443));
        assert!(l.allows_authority("[0:0:0:0:0:0:0:1]", 80));
        assert!(!list(&[]).allows_authority("127.0.0.1", 8080));
    }

    /// Raw sockets: connect only to the list, implicit wildcard binds only, never listen or UDP.
    #[tokio::test]
    async fn socket_check_denies_everything_else() {
        let l = list(&["127.0.0.1:8080"]);
        let check = l.socket_check();
        let ok: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let wildcard: SocketAddr = "0.0.0.0:0".parse().unwrap();
        assert!(check(ok, SocketAddrUse::TcpConnect).await);
        assert!(!check(other, SocketAddrUse::TcpConnect).await);
        assert!(check(wildcard, SocketAddrUse::TcpBind).await);
        assert!(!check(ok, SocketAddrUse::TcpBind).await);
        assert!(!check(wildcard, SocketAddrUse::TcpListen).await);
        assert!(!check(ok, SocketAddrUse::UdpSend).await);
    }
}
