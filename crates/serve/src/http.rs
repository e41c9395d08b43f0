//! MCP over Streamable HTTP: a hyper HTTP/1.1 listener in front of rmcp's service.
//!
//! Before any MCP processing a request must pass, in order: the connection cap (at most
//! [`super::pending::MAX_UNAUTHENTICATED`] of them not yet authenticated), the path (`/mcp`;
//! `/console` and below go to the approval console, with checks of its own: `console.rs`),
//! when tokens are configured a bearer token whose hash is in the config (401 otherwise), the
//! caller's bounds at the door (`http/door.rs`: rate, requests in flight, and open connections,
//! charged to the first principal a request on the connection authenticated as; 429), and
//! the session's owner (`sessions.rs`: 404 for another identity's session, 400 for a
//! handshake-era request outside a session, 429 past the session caps). A 2026-07-28 request
//! has no session: it passes on to rmcp, which serves it statelessly (`stateless.rs`). GET
//! event streams are bounded by `streams.rs`. rmcp then checks `Host` (and `Origin`) against the allowlists (403), which
//! stops DNS rebinding. Binding anything but loopback needs tokens.
//!
//! A POST body is read whole (at most [`MAX_REQUEST_BODY_BYTES`], 413 past it) and checked by
//! `check_body` like a stdio line before rmcp parses it (`http/post.rs`, which also tells
//! `initialize`, a 2026-07-28 request and a session's request apart): a bad message is
//! answered 400 with its JSON-RPC error as the body, never left to hang or to rmcp's plain-text
//! 415. A body must arrive within [`BODY_READ_TIMEOUT`] (408 otherwise). Every accepted socket
//! has `TCP_NODELAY`.

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

use super::config::ServeConfig;
use super::frames::MAX_FRAME_BYTES;
use super::handler::{Session, Shared};
use super::oauth::ResourceServer;
use super::pending::{Admission, Pending};
use super::sessions::SessionOwners;
use super::streams::{Bounded, StreamBudget};
use super::ServeError;
use toolhost_contract::Caller;

mod accept;
mod auth;
pub(super) mod door;
mod ops;
mod post;
mod routing;
use accept::{accepted, is_resource_exhaustion, AcceptBackoff};
pub use ops::{serve_ops, MAX_OPS_CONNECTIONS};
use post::{checked, Kind};

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

/// Time past its deadline and its approval question a call may still hold its request (the
/// sandbox's grace, the recording of its outcome), for [`SessionOwners::new`].
const TIMEOUT_GRACE_MARGIN: Duration = Duration::from_secs(5);

/// Time a session outlives the longest call it may run.
const SESSION_IDLE_MARGIN: Duration = Duration::from_secs(10);

/// The idle lifetime of a session: `idle`, or longer than the longest tool deadline (rmcp
/// counts a session whose one request is a running call as idle, and closing the session
/// cancels the call).
fn session_idle_lifetime(idle: Duration, longest_deadline: Option<Duration>) -> Duration {
    longest_deadline
        .map(|d| d + SESSION_IDLE_MARGIN)
        .unwrap_or_default()
        .max(idle)
}

/// Serve until `shutdown` is cancelled. `on_bound` learns the bound address (port 0 picks one).
pub async fn serve_http(
    shared: Shared,
    config: &ServeConfig,
    addr: SocketAddr,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let oauth = match &config.oauth {
        Some(o) => Some(Arc::new(
            ResourceServer::start(o, std::path::Path::new(""))
                .await
                .map_err(ServeError::OAuth)?,
        )),
        None => None,
    };
    if !addr.ip().is_loopback() && config.tokens.is_empty() && oauth.is_none() {
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
    let open = config.tokens.is_empty() && oauth.is_none();
    let fixed_identity = open.then(|| config.local_identity());
    let factory_shared = shared.clone();
    let longest = shared
        .runtime
        .registry()
        .tools()
        .map(|t| t.limits.deadline)
        .max();
    let mut manager = LocalSessionManager::default();
    let idle = Duration::from_secs(config.session_idle_secs);
    manager.session_config.keep_alive = Some(session_idle_lifetime(idle, longest));
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || Ok(Session::new(factory_shared.clone(), fixed_identity.clone())),
        manager.clone(),
        rmcp_config,
    );
    let console = super::console::Console::new(shared.clone(), config)?;
    let gate = Arc::new(Gate {
        console,
        runtime: shared.runtime.clone(),
        config: config.clone(),
        oauth,
        door: door::Door::new(
            config.requests_per_second,
            config.request_burst,
            config.requests_in_flight,
            config.connections_per_principal,
        ),
        service,
        owners: SessionOwners::new(
            manager,
            longest.unwrap_or_default() + super::elicit::ELICITATION_TIMEOUT + TIMEOUT_GRACE_MARGIN,
        ),
        streams: StreamBudget::default(),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let pending = Arc::new(Pending::default());
    let mut backoff = AcceptBackoff::default();
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|_| ServeError::Closed)?,
            _ = shutdown.cancelled() => return Ok(()),
        };
        let stream = tokio::select! {
            a = listener.accept() => match a.and_then(|(s, _)| accepted(s)) {
                Ok(s) => {
                    backoff.reset();
                    s
                }
                // Out of descriptors (or kernel memory): the connection stays in the backlog and
                // accept would fail again at once, so wait before the next try instead of
                // spinning; the connections being served free descriptors meanwhile.
                Err(e) if is_resource_exhaustion(&e) => {
                    drop(permit);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.next_wait()) => {}
                        _ = shutdown.cancelled() => return Ok(()),
                    }
                    continue;
                }
                Err(_) => continue, // this connection failed (reset before accept): the next one
            },
            _ = shutdown.cancelled() => return Ok(()),
        };
        let gate = gate.clone();
        let stop = shutdown.clone();
        let admission = Arc::new(Conn {
            admission: pending.admit(),
            charged: std::sync::OnceLock::new(),
        });
        let evicted = admission.admission.evicted();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| {
                let gate = gate.clone();
                let admission = admission.clone();
                async move { Ok::<_, Infallible>(gate.handle(req, &admission).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
                // Still unauthenticated when newer connections needed its place: closed.
                _ = evicted.cancelled() => {}
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

/// One accepted connection: its place among the unauthenticated ones, then its charge to the
/// first principal a request on it authenticated as.
struct Conn {
    admission: Admission,
    charged: std::sync::OnceLock<door::Connection>,
}

/// Authentication and session ownership in front of the MCP service.
struct Gate {
    /// The approval console, when operators are configured.
    console: Option<Arc<super::console::Console>>,
    runtime: Arc<toolhost_runtime::Runtime>,
    config: ServeConfig,
    oauth: Option<Arc<ResourceServer>>,
    door: Arc<door::Door>,
    service: StreamableHttpService<Session, LocalSessionManager>,
    owners: SessionOwners,
    streams: StreamBudget,
}

/// The header that names a Streamable HTTP session.
const SESSION_HEADER: &str = "mcp-session-id";

type Body = BoxBody<Bytes, Infallible>;

impl Gate {
    async fn handle(&self, mut req: Request<Incoming>, conn: &Conn) -> Response<Body> {
        if let Some(r) = ops::answer(req.uri().path(), &self.runtime, false).await {
            return r;
        }
        if let Some(o) = self
            .oauth
            .as_ref()
            .filter(|_| auth::is_metadata_path(req.uri().path()))
        {
            return auth::json_response(&o.metadata());
        }
        if let Some(console) = self
            .console
            .as_ref()
            .filter(|_| super::console::Console::owns(req.uri().path()))
        {
            // The console's own sign-in, never a caller's bearer token; its connections stay
            // among the unauthenticated ones, which newer connections may close.
            return console.handle(req).await;
        }
        if req.uri().path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found; MCP is served on /mcp");
        }
        let (identity, scopes) = if self.config.tokens.is_empty() && self.oauth.is_none() {
            (self.config.local_identity(), None)
        } else {
            let token = bearer(&req).map(str::to_string);
            match self.authenticate(token.as_deref()).await {
                Ok((identity, scopes)) => {
                    req.extensions_mut().insert::<Caller>(identity.clone());
                    (identity, scopes)
                }
                Err(refused) => return self.unauthorized(token.is_some(), refused.as_ref()),
            }
        };
        conn.admission.authenticated();
        if conn.charged.get().is_none() {
            match self.door.connect(&identity.principal) {
                Ok(charge) => {
                    let _ = conn.charged.set(charge);
                }
                // Answered, then closed: the connection never holds a slot for this caller.
                Err(refused) => return closing(auth::too_many(refused)),
            }
        }
        let pass = match self.door.enter(&identity.principal) {
            Ok(pass) => pass,
            Err(refused) => return auth::too_many(refused),
        };
        let admitted = door::Admitted::new(
            self.door.clone(),
            &identity.principal,
            self.oauth.as_ref(),
            scopes.as_deref(),
        );
        req.extensions_mut().insert(admitted.clone());
        let session = req
            .headers()
            .get(SESSION_HEADER)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if let Some(id) = &session {
            if !self.owners.owned_by(id, &identity) {
                return plain(StatusCode::NOT_FOUND, "session not found");
            }
        }
        let method = req.method().clone();
        // The place an `initialize` took for its session, until the answer binds it.
        let mut reservation = None;
        let response = if method == hyper::Method::POST {
            match checked(req).await {
                Ok((_, Kind::InSession, _)) if session.is_none() => {
                    return plain(
                        StatusCode::BAD_REQUEST,
                        "an Mcp-Session-Id header is required: send initialize first, or \
                         (protocol 2026-07-28) carry io.modelcontextprotocol/protocolVersion \
                         and clientCapabilities in the request's _meta",
                    )
                }
                Ok((req, Kind::Initialize, _)) if session.is_none() => {
                    match self.owners.reserve(&identity).await {
                        Ok(place) => {
                            reservation = Some(place);
                            self.service.handle(req).await
                        }
                        Err(wait) => return too_many_sessions(wait),
                    }
                }
                // Only for a tool the caller may see: a hidden one is answered as an absent
                // one, by the handler, and a 403 would tell the two apart.
                Ok((_, _, Some(tool)))
                    if admitted.missing_scope(&tool).is_some()
                        && self.runtime.visibility(&identity).tool(&tool).is_some() =>
                {
                    return self.forbidden(admitted.missing_scope(&tool));
                }
                Ok((req, _, _)) => self.service.handle(req).await,
                Err(answer) => return answer,
            }
        } else if method == hyper::Method::GET {
            let Some(permit) = self.streams.open(&identity) else {
                return plain(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many open event streams: close one before opening another",
                );
            };
            let lifetime = Duration::from_secs(self.config.stream_lifetime_secs);
            self.service
                .handle(req)
                .await
                .map(|body| Bounded::new(body, lifetime, permit).boxed())
        } else {
            self.service.handle(req).await
        };
        match session {
            None => {
                if let (Some(new), Some(place)) =
                    (response.headers().get(SESSION_HEADER), reservation)
                {
                    let new = String::from_utf8_lossy(new.as_bytes()).into_owned();
                    place.bind(&new).await;
                }
            }
            Some(id) if method == hyper::Method::DELETE && response.status().is_success() => {
                self.owners.forget(&id);
                // The session is gone, not queued to go: 204, which the official clients
                // take as success (rmcp answers 202, which the Python SDK logs as a failure).
                let mut ended = response;
                *ended.status_mut() = StatusCode::NO_CONTENT;
                return ended;
            }
            Some(_) => {}
        }
        // In flight until the answer (a stream, perhaps) ends.
        response.map(|body| door::Held::new(body, pass).boxed())
    }
}

/// `response`, after which hyper closes the connection.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
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

/// The 429 of an `initialize` with no room for its session: when to try again.
fn too_many_sessions(wait: Duration) -> Response<Body> {
    let mut r = plain(
        StatusCode::TOO_MANY_REQUESTS,
        "too many open sessions, none idle long enough to close: end one (DELETE) or retry later",
    );
    r.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from(wait.as_secs().max(1)),
    );
    r
}

pub(super) fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
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

    /// A session outlives the longest call it may run, and is never shorter than the default.
    #[test]
    fn sessions_outlive_the_longest_call() {
        let idle = Duration::from_secs(1_800);
        assert_eq!(session_idle_lifetime(idle, None), idle);
        let short = Some(Duration::from_secs(10));
        assert_eq!(session_idle_lifetime(idle, short), idle);
        let long = idle + Duration::from_secs(330);
        assert_eq!(
            session_idle_lifetime(idle, Some(long)),
            long + SESSION_IDLE_MARGIN
        );
    }
}
