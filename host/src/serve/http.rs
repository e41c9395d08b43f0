//! MCP over Streamable HTTP: a hyper HTTP/1.1 listener in front of rmcp's service.
//!
//! Before any MCP processing a request must pass, in order: the connection cap, the path
//! (`/mcp`), and — when tokens are configured — a bearer token whose hash is in the config
//! (401 otherwise). rmcp then checks `Host` (and `Origin`) against the allowlists (403), which
//! stops DNS rebinding. Binding anything but loopback needs tokens.
//!
//! A POST body is read whole (at most [`MAX_REQUEST_BODY_BYTES`], 413 past it) and checked by
//! [`check_body`] like a stdio line before rmcp parses it: a bad message is answered 400 with
//! its JSON-RPC error as the body, never left to hang or to rmcp's plain-text 415. A body must
//! arrive within [`BODY_READ_TIMEOUT`] (408 otherwise). Every accepted socket has `TCP_NODELAY`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::{Identity, ServeConfig};
use super::frames::{check_body, Frame, FrameError, MAX_FRAME_BYTES};
use super::handler::{Session, Shared};
use super::ServeError;

/// The one path MCP is served on.
pub const MCP_PATH: &str = "/mcp";
/// Open connections at once; more wait in the listen backlog. Bounds the memory and tasks an
/// unauthenticated client can make the host hold.
pub const MAX_CONNECTIONS: usize = 256;
/// Time a client gets to send a request's headers (slow-loris bound).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client gets to send a whole POST body once its headers are in (a slow body would
/// otherwise hold a connection slot for ever); past it the answer is 408.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request body (one JSON-RPC message) accepted: the same bound as a stdio line
/// ([`MAX_FRAME_BYTES`], twice the pipeline's own 1 MiB argument cap).
pub const MAX_REQUEST_BODY_BYTES: usize = MAX_FRAME_BYTES;

/// Serve until `shutdown` is cancelled. `on_bound` learns the bound address (port 0 picks one).
pub async fn serve_http(
    shared: Shared,
    config: &ServeConfig,
    addr: SocketAddr,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    if !addr.ip().is_loopback() && config.tokens.is_empty() {
        return Err(ServeError::OpenBindWithoutAuth(addr));
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Bind(addr, e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ServeError::Bind(addr, e))?;
    on_bound(bound);

    let mut origins = config.allowed_origins.clone();
    origins.extend(own_origins(bound));
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    let fixed_identity = config.tokens.is_empty().then(|| config.local_identity());
    let factory_shared = shared.clone();
    let service = StreamableHttpService::new(
        move || Ok(Session::new(factory_shared.clone(), fixed_identity.clone())),
        Arc::new(LocalSessionManager::default()),
        rmcp_config,
    );
    let gate = Arc::new(Gate {
        config: config.clone(),
        service,
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|_| ServeError::Closed)?,
            _ = shutdown.cancelled() => return Ok(()),
        };
        let stream = tokio::select! {
            a = listener.accept() => match a.and_then(|(s, _)| accepted(s)) {
                Ok(s) => s,
                Err(_) => continue, // e.g. too many open files: drop this one, keep serving
            },
            _ = shutdown.cancelled() => return Ok(()),
        };
        let gate = gate.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| {
                let gate = gate.clone();
                async move { Ok::<_, Infallible>(gate.handle(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

/// The server's own origins on a loopback bind: `http://` + each loopback name + the bound
/// port. Only this server answers on that port and it serves no pages, so no page but its own
/// can carry one of these; a DNS-rebinding page carries its own name, another local page
/// another port. Nothing on any other bind.
fn own_origins(bound: SocketAddr) -> Vec<String> {
    if !bound.ip().is_loopback() {
        return Vec::new();
    }
    let port = bound.port();
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect()
}

/// An accepted connection made ready to serve: `TCP_NODELAY`, because a response is several
/// writes (SSE headers, the event, the end of the chunked body) and with Nagle's algorithm each
/// after the first waits for the client's delayed ACK — about 40 ms per request on a kept-alive
/// connection.
fn accepted(stream: TcpStream) -> std::io::Result<TcpStream> {
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Authentication in front of the MCP service.
struct Gate {
    config: ServeConfig,
    service: StreamableHttpService<Session, LocalSessionManager>,
}

type Body = BoxBody<Bytes, Infallible>;

impl Gate {
    async fn handle(&self, mut req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found; MCP is served on /mcp");
        }
        if !self.config.tokens.is_empty() {
            match bearer(&req).and_then(|t| self.config.identify(t)) {
                Some(identity) => {
                    req.extensions_mut().insert::<Identity>(identity);
                }
                None => {
                    let mut r = plain(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
                    r.headers_mut().insert(
                        hyper::header::WWW_AUTHENTICATE,
                        hyper::header::HeaderValue::from_static("Bearer"),
                    );
                    return r;
                }
            }
        }
        if req.method() != hyper::Method::POST {
            return self.service.handle(req).await;
        }
        match checked(req).await {
            Ok(req) => self.service.handle(req).await,
            Err(answer) => answer,
        }
    }
}

/// Read a POST body (bounded) and check it as one frame. A good one comes back as the request
/// rmcp gets, carrying the frame check's mark when its arguments repeat a key; anything else
/// comes back as the answer.
async fn checked(req: Request<Incoming>) -> Result<Request<Full<Bytes>>, Response<Body>> {
    let (mut parts, body) = req.into_parts();
    let too_large = || rpc_error(StatusCode::PAYLOAD_TOO_LARGE, &FrameError::too_large());
    if hyper::body::Body::size_hint(&body).lower() > MAX_REQUEST_BODY_BYTES as u64 {
        return Err(too_large());
    }
    let read = Limited::new(body, MAX_REQUEST_BODY_BYTES).collect();
    let Ok(read) = tokio::time::timeout(BODY_READ_TIMEOUT, read).await else {
        return Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        ));
    };
    let bytes = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
        Err(_) => {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            ))
        }
    };
    match check_body(&bytes) {
        Ok(Frame::Message {
            repeated_argument, ..
        }) => {
            if let Some(mark) = repeated_argument {
                parts.extensions.insert(mark);
            }
            Ok(Request::from_parts(parts, Full::new(bytes)))
        }
        // A notification nothing can use: accepted, as rmcp accepts notifications.
        Ok(Frame::Skip) => Err(plain(StatusCode::ACCEPTED, "")),
        Err(e) => Err(rpc_error(StatusCode::BAD_REQUEST, &e)),
    }
}

/// A JSON-RPC error as an HTTP answer.
fn rpc_error(status: StatusCode, e: &FrameError) -> Response<Body> {
    let body = serde_json::to_vec(&e.answer()).expect("a JSON value serializes");
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn bearer(req: &Request<Incoming>) -> Option<&str> {
    let value = req
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token.trim())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback bind admits its own origins (every loopback name, its port) and no other.
    #[test]
    fn own_origins_are_the_loopback_names_at_the_bound_port() {
        let o = own_origins("127.0.0.1:4242".parse().unwrap());
        assert_eq!(
            o,
            [
                "http://127.0.0.1:4242",
                "http://localhost:4242",
                "http://[::1]:4242"
            ]
        );
        assert_eq!(own_origins("[::1]:1".parse().unwrap()).len(), 3);
        assert!(own_origins("0.0.0.0:4242".parse().unwrap()).is_empty());
        assert!(own_origins("192.0.2.1:4242".parse().unwrap()).is_empty());
    }

    /// Every connection the listener hands to hyper has Nagle's algorithm off.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(TcpStream::connect(addr));
        let (stream, _) = listener.accept().await.unwrap();
        assert!(!stream.nodelay().unwrap(), "the default is Nagle on");
        assert!(accepted(stream).unwrap().nodelay().unwrap());
        drop(client.await.unwrap().unwrap());
    }
}
