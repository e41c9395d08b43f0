//! The approval console: pages on `serve --http` where an operator sees the calls that wait
//! for a human and approves or denies each in one click, follows a run's calls as a
//! timeline, and reads a call's signed receipt.
//!
//! What waits is read from the ledger (tasks whose call ended `approval_required`), so on
//! PostgreSQL every host's console shows every host's waiting calls. Approving mints the same
//! single-use token, bound to the call's digest, that `toolhost approve` prints, and runs the
//! approved call through the whole pipeline as the task's caller, on the path an approving
//! `tasks/update` takes (`task_update.rs`); denying ends it `approval_denied`. The ledger's
//! decision names the operator. The operator approves tools only the operator may approve
//! (`approvers = "operator"`) too.
//!
//! The console is served under [`CONSOLE_PATH`] only when `[serve.console]` names operators.
//! Every request passes, in order: the `Host` allowlist (403); for a form post, an `Origin`
//! that is this page's own and a `Sec-Fetch-Site` (when sent) of `same-origin` (403); a session
//! cookie of a signed-in operator (401, the sign-in page); and for a post, the session's own
//! CSRF token (403). Operators sign in with tokens of their own, never an MCP caller's
//! (`console/config.rs`), and sessions are this host's (`console/sessions.rs`). Every page
//! is escaped text (`console/html.rs`) under a Content-Security-Policy that allows no script,
//! no frame and nothing from another origin.
//!
//! # Layout
//!
//! - `console/config.rs`: the `[serve.console]` section.
//! - `console/sessions.rs`: operator sessions, CSRF tokens, the sign-in bound.
//! - `console/html.rs`: escaping and the page frame.
//! - `console/views.rs`: the pages (waiting calls, one call, a run, a receipt).
//! - `console/forms.rs`: reading a form post and the checks it passes.

pub mod config;
mod forms;
mod html;
mod sessions;
mod views;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};

pub use config::{ConsoleConfig, OperatorConfig};
pub use sessions::{Operator, COOKIE as SESSION_COOKIE, MAX_SESSIONS, SESSION_LIFETIME};

use super::{ServeConfig, ServeError, Shared};
use toolhost_runtime::evidence::ReceiptKey;

/// The path the console is served under.
pub const CONSOLE_PATH: &str = "/console";

/// The Content-Security-Policy of every console response: nothing but the console's own
/// stylesheet loads, no script runs, forms post only to the console, and no page frames it.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

type Body = BoxBody<Bytes, Infallible>;

/// The console of one host.
pub struct Console {
    config: ConsoleConfig,
    sessions: sessions::Sessions,
    receipt_key: Option<Arc<ReceiptKey>>,
    allowed_hosts: Vec<String>,
    shared: Shared,
}

impl Console {
    /// The console `serve` describes, if it names operators; its receipt key is loaded (made
    /// on first use) here, so a bad key stops the server at its start.
    pub fn new(shared: Shared, serve: &ServeConfig) -> Result<Option<Arc<Console>>, ServeError> {
        let Some(config) = serve.console.clone().filter(|c| !c.operators.is_empty()) else {
            return Ok(None);
        };
        let receipt_key = match &config.receipt_key {
            Some(path) => Some(Arc::new(
                ReceiptKey::load_or_create(path).map_err(|e| ServeError::Console(e.to_string()))?,
            )),
            None => None,
        };
        let idle = Duration::from_secs(config.session_idle_secs);
        Ok(Some(Arc::new(Console {
            sessions: sessions::Sessions::new(idle),
            config,
            receipt_key,
            allowed_hosts: serve.allowed_hosts.clone(),
            shared,
        })))
    }

    /// Whether `path` is the console's.
    pub fn owns(path: &str) -> bool {
        path == CONSOLE_PATH || path.starts_with("/console/")
    }

    /// Answer one request under [`CONSOLE_PATH`].
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(host) = forms::allowed_host(&req, &self.allowed_hosts) else {
            return refused(StatusCode::FORBIDDEN, "this Host is not served");
        };
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        if method != Method::GET && method != Method::POST {
            return refused(StatusCode::METHOD_NOT_ALLOWED, "GET or POST only");
        }
        if method == Method::GET && path == "/console/style.css" {
            return respond(
                StatusCode::OK,
                "text/css; charset=utf-8",
                html::STYLE.into(),
            );
        }
        if method == Method::POST {
            if let Err(why) = forms::same_origin(&req, &host) {
                return refused(StatusCode::FORBIDDEN, why);
            }
        }
        let now = Instant::now();
        if method == Method::POST && path == "/console/sign-in" {
            return self.sign_in(req, now).await;
        }
        let cookie = session_cookie(&req);
        let Some(operator) = cookie.as_deref().and_then(|c| self.sessions.find(c, now)) else {
            let page = html::sign_in(None);
            return respond(StatusCode::UNAUTHORIZED, HTML, page);
        };
        if method == Method::GET {
            let query = req.uri().query().unwrap_or("").to_owned();
            let found = forms::fields(query.as_bytes());
            return self.view(&operator, &path, &found).await;
        }
        let form = match forms::read(req).await {
            Ok(form) => form,
            Err(refusal) => return refused(refusal.0, refusal.1),
        };
        if !form.get("csrf").is_some_and(|c| operator.csrf_matches(c)) {
            return refused(
                StatusCode::FORBIDDEN,
                "this form is not from this session (its CSRF token is missing or another's)",
            );
        }
        match path.as_str() {
            "/console/sign-out" => {
                if let Some(c) = &cookie {
                    self.sessions.close(c);
                }
                let mut r = see_other(CONSOLE_PATH);
                let cleared = format!(
                    "{}=; Path={CONSOLE_PATH}; Max-Age=0; HttpOnly; SameSite=Strict",
                    sessions::COOKIE
                );
                set_cookie(&mut r, &cleared);
                r
            }
            "/console/task" => self.decide(&operator, &form).await,
            _ => refused(StatusCode::NOT_FOUND, "no such page"),
        }
    }

    /// A sign-in: an operator's token opens a session; anything else is refused, and past
    /// [`sessions::MAX_FAILED_SIGN_INS`] failures a minute every sign-in waits.
    async fn sign_in(&self, req: Request<Incoming>, now: Instant) -> Response<Body> {
        if !self.sessions.may_sign_in(now) {
            let page = html::sign_in(Some("too many failed sign-ins; try again in a minute"));
            return respond(StatusCode::TOO_MANY_REQUESTS, HTML, page);
        }
        let form = match forms::read(req).await {
            Ok(form) => form,
            Err(refusal) => return refused(refusal.0, refusal.1),
        };
        let token = form.get("token").map(String::as_str).unwrap_or("");
        let Some(name) = self.config.operator(token) else {
            self.sessions.failed_sign_in(now);
            let page = html::sign_in(Some("that is not an operator's token"));
            return respond(StatusCode::UNAUTHORIZED, HTML, page);
        };
        let Some(id) = self.sessions.open(name, now) else {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "no randomness for a session",
            );
        };
        tracing::info!(operator = name, "console: an operator signed in");
        let mut r = see_other(CONSOLE_PATH);
        set_cookie(
            &mut r,
            &format!(
                "{}={id}; Path={CONSOLE_PATH}; HttpOnly; SameSite=Strict",
                sessions::COOKIE
            ),
        );
        r
    }
}

/// The content type of every page.
const HTML: &str = "text/html; charset=utf-8";

/// The session id a request's cookies carry, if any.
fn session_cookie(req: &Request<Incoming>) -> Option<String> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == sessions::COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// `body` as `content_type`, with the console's security headers.
fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        // Not `no-referrer`: under it a browser posts forms with `Origin: null`, and the
        // origin check needs the page's own.
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// A refusal: `status` and a page that says why.
fn refused(status: StatusCode, why: &str) -> Response<Body> {
    let body = format!("<h1>{}</h1><p>{}</p>", status.as_u16(), html::text(why));
    respond(status, HTML, html::page("Refused", None, &body))
}

/// A redirect to `to` (after a post, so that a reload does not post again).
fn see_other(to: &str) -> Response<Body> {
    let mut r = respond(StatusCode::SEE_OTHER, HTML, String::new());
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

fn set_cookie(r: &mut Response<Body>, cookie: &str) {
    if let Ok(v) = HeaderValue::from_str(cookie) {
        r.headers_mut().insert(SET_COOKIE, v);
    }
}

/// `value` as one query-string value of a console link.
pub fn page_query(value: &str) -> String {
    html::query(value)
}
