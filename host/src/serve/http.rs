//! MCP over Streamable HTTP: a hyper HTTP/1.1 listener in front of rmcp's service.
//!
//! Before any MCP processing a request must pass, in order: the connection cap, the path
//! (`/mcp`), and — when tokens are configured — a bearer token whose hash is in the config
//! (401 otherwise). rmcp then checks `Host` (and `Origin`) against the allowlists (403), which
//! stops DNS rebinding. Binding anything but loopback needs tokens.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::{Identity, ServeConfig};
use super::handler::{Session, Shared};
use super::ServeError;

/// The one path MCP is served on.
pub const MCP_PATH: &str = "/mcp";
/// Open connections at once; more wait in the listen backlog. Bounds the memory and tasks an
/// unauthenticated client can make the host hold.
pub const MAX_CONNECTIONS: usize = 256;
/// Time a client gets to send a request's headers (slow-loris bound).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request body (a JSON-RPC message) accepted; the pipeline's own input cap is 1 MiB.
pub const MAX_REQUEST_BODY_BYTES: usize = 2 << 20;

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

    let mut rmcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES);
    rmcp_config = if config.allowed_origins.is_empty() {
        rmcp_config.enforce_origin_validation()
    } else {
        rmcp_config.with_allowed_origins(config.allowed_origins.clone())
    };
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
        let (stream, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
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
        self.service.handle(req).await
    }
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
