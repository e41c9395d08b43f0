//! Network policy: one allowlist of `host:port`, enforced for raw sockets (the WASI socket
//! address check) and for `wasi:http` outgoing requests (the send-request hook) alike.
//!
//! Everything not on the list is denied, including listening, accepting and UDP.

use std::future::Future;
use std::sync::Arc;

use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::allowlist::Allowlist;
use super::host_budget::{HTTP_BODY_CHUNK_BYTES, MAX_HTTP_REQUESTS_IN_FLIGHT};
use super::redact::RedactedBody;
use super::secrets::CallSecrets;

/// `wasi:http` hooks of one call: every request whose authority is not on the allowlist is
/// refused, at most [`MAX_HTTP_REQUESTS_IN_FLIGHT`] are in flight, and a body buffers at most
/// two writes of [`HTTP_BODY_CHUNK_BYTES`]. A request to a secret's host carries the secret's
/// value in place of its placeholder (headers only), asks for its answer whole and plain, and
/// has a compressed or partial answer refused; every response has the call's secret values
/// redacted from its header names and values, body and trailers. Redirects are not followed:
/// the guest sees a `3xx` (its `location` redacted) and a request it sends on to another host
/// never carries a value bound elsewhere.
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
        let shaped = self.secrets.bound_to(&host, port);
        if shaped {
            self.substitute(&mut request, &host, port, https);
            ask_for_whole_plain_answer(request.headers_mut());
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
            if shaped {
                refuse_unsearchable(&res)?;
            }
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

/// The request headers that choose the shape of an answer: a compressed or partial answer
/// holds a secret's echo in a form no search finds (gzip, 12-byte ranges), so a request to a
/// secret's host never carries them.
const SHAPING_HEADERS: [http::HeaderName; 4] = [
    http::header::ACCEPT_ENCODING,
    http::header::RANGE,
    http::header::IF_RANGE,
    http::header::TE,
];

/// Take the guest's shaping headers out of a request to a secret's host and ask for the
/// answer whole and as it is (`accept-encoding: identity`).
fn ask_for_whole_plain_answer(headers: &mut http::HeaderMap) {
    for name in SHAPING_HEADERS {
        headers.remove(name);
    }
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
}

/// Refuse an answer to a request to a secret's host that came compressed, with a transfer
/// coding other than chunked, or partial (a server that ignored the request's headers): what
/// the host cannot search for a value, the guest never reads.
fn refuse_unsearchable<B>(res: &http::Response<B>) -> Result<(), HttpError> {
    let h = res.headers();
    if let Some(coding) = coding_other_than(h, http::header::CONTENT_ENCODING, "identity") {
        return Err(HttpError::HttpResponseContentCoding(Some(coding)));
    }
    if let Some(coding) = coding_other_than(h, http::header::TRANSFER_ENCODING, "chunked") {
        return Err(HttpError::HttpResponseTransferCoding(Some(coding)));
    }
    if res.status() == http::StatusCode::PARTIAL_CONTENT
        || h.contains_key(http::header::CONTENT_RANGE)
    {
        return Err(HttpError::InternalError(Some(
            "a partial answer to a request to a secret's host is refused".to_string(),
        )));
    }
    Ok(())
}

/// The first value of header `name` that lists a coding other than `allowed`, if any.
fn coding_other_than(h: &http::HeaderMap, name: http::HeaderName, allowed: &str) -> Option<String> {
    h.get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .find(|text| {
            text.split(',')
                .any(|c| !c.trim().eq_ignore_ascii_case(allowed))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostPort;
    use std::net::SocketAddr;
    use wasmtime_wasi::sockets::SocketAddrUse;

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

    /// A request to a secret's host loses every header that shapes the answer and asks for
    /// it plain; a compressed, transfer-coded or partial answer is refused.
    #[test]
    fn a_secret_hosts_answer_is_whole_and_plain() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("accept-encoding", "gzip, br"),
            ("range", "bytes=0-11"),
            ("if-range", "\"x\""),
            ("te", "gzip"),
            ("x-other", "kept"),
        ] {
            h.append(k, v.parse().unwrap());
        }
        ask_for_whole_plain_answer(&mut h);
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(h["accept-encoding"], "identity");
        assert_eq!(h["x-other"], "kept");

        let answer = |status: u16, headers: &[(&str, &str)]| {
            let mut b = http::Response::builder().status(status);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            refuse_unsearchable(&b.body(()).unwrap())
        };
        assert!(answer(200, &[]).is_ok());
        assert!(answer(200, &[("content-encoding", "identity")]).is_ok());
        assert!(answer(200, &[("transfer-encoding", "chunked")]).is_ok());
        assert!(matches!(
            answer(200, &[("content-encoding", "gzip")]),
            Err(HttpError::HttpResponseContentCoding(Some(c))) if c == "gzip"
        ));
        assert!(matches!(
            answer(200, &[("content-encoding", "identity, br")]),
            Err(HttpError::HttpResponseContentCoding(_))
        ));
        assert!(matches!(
            answer(200, &[("transfer-encoding", "gzip, chunked")]),
            Err(HttpError::HttpResponseTransferCoding(_))
        ));
        assert!(matches!(answer(206, &[]), Err(HttpError::InternalError(_))));
        assert!(matches!(
            answer(200, &[("content-range", "bytes 0-11/40")]),
            Err(HttpError::InternalError(_))
        ));
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
