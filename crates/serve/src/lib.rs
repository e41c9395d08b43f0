//! MCP frontends: every configured tool as an MCP tool, the whole pipeline behind each
//! `tools/call`, over stdio or Streamable HTTP (rmcp does the protocol).
//!
//! Both eras of the protocol are served on one endpoint, chosen per request as rmcp does: a
//! handshake-era session (2025-03-26 to 2025-11-25) is a run, with its own run id and budgets;
//! a 2026-07-28 request has no session, and names its run and call in `_meta` ([`stateless`]).
//! The identity comes from the config on stdio and from a bearer token over HTTP. Guest output never reaches the protocol channel: guest
//! stdout and stderr are captured in the sandbox, and nothing here prints to stdout.
//!
//! # Layout
//!
//! - [`config`]: the `[serve]` section (stdio identity, token hashes, Host/Origin allowlists).
//! - [`frames`]: the check every frame passes before rmcp sees it, and the answer to a bad one.
//! - [`stdio`]: the stdio transport (bounded lines, checked frames, whole-line writes).
//! - [`handler`]: one session — `tools/list`, `tools/call`, call ids, cancellation.
//! - [`mapping`]: definitions and results between toolhost and MCP.
//! - [`progress`]: guest progress → `notifications/progress`, bounded and content-free.
//! - [`elicit`]: approval through `elicitation/create`.
//! - [`approvals`]: where a call's approval comes from (a token in `_meta`, elicitation, `input_required`).
//! - [`stateless`]: the run and call id of a 2026-07-28 request, which has no session.
//! - [`mrtr`]: approval of a 2026-07-28 call through `input_required` and a sealed state.
//! - [`tasks`]: MCP tasks served from the ledger (`tasks/get`, `tasks/cancel`, `tasks/update`).
//! - [`http`]: the HTTP listener, bearer authentication.
//! - [`console`]: the operators' approval console on the HTTP listener.

pub mod approvals;
pub mod config;
pub mod console;
pub mod elicit;
pub mod frames;
pub mod handler;
pub mod http;
pub mod jwks;
pub mod list_changed;
pub mod logging;
pub mod mapping;
pub mod mrtr;
pub mod oauth;
pub mod pending;
pub mod progress;
pub mod sessions;
pub mod stateless;
pub mod stdio;
pub mod streams;
mod task_update;
mod task_view;
pub mod tasks;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio_util::task::TaskTracker;

pub use config::ServeConfig;
pub use handler::{Session, Shared, PROTOCOL_VERSIONS};

use toolhost_runtime::Runtime;

/// How long a stopping server waits for its cancelled calls to record their outcomes.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why a server could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("refusing to listen on {0} without authentication: add [[serve.token]] entries or a [serve.oauth] section to the config, or bind a loopback address")]
    OpenBindWithoutAuth(SocketAddr),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
    #[error("the MCP session could not start: {0}")]
    Handshake(String),
    #[error("the server closed")]
    Closed,
    #[error("cannot start the OAuth resource server: {0}")]
    OAuth(String),
    #[error("cannot start the approval console: {0}")]
    Console(String),
}

impl Shared {
    /// What every session of a server shares; MCP tasks are kept and bounded as `config`
    /// says. Starts the task watcher (`tasks.rs`) on the current runtime.
    pub fn new(runtime: Arc<Runtime>, config: &ServeConfig) -> Shared {
        let seal = mrtr::StateSeal::new(runtime.approvals().derived_key(mrtr::STATE_KEY_PURPOSE));
        let tasks = tasks::Tasks::new(config.task_ttl_secs, config.task_caps());
        tokio::spawn(tasks.clone().watch(runtime.clone()));
        Shared {
            runtime,
            tracker: TaskTracker::new(),
            seal: Arc::new(seal),
            tasks,
            listeners: Default::default(),
            tools_list_ttl_ms: config.tools_list_ttl_secs.saturating_mul(1000),
            console_url: config
                .console
                .as_ref()
                .filter(|c| !c.operators.is_empty())
                .and_then(|c| c.url.as_deref())
                .map(Arc::from),
        }
    }

    /// Wait (bounded) for every call task to record its outcome.
    pub async fn drain(&self) {
        self.tracker.close();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.tracker.wait()).await;
    }
}

/// Serve one session over stdin/stdout until stdin closes; then cancel what is still running,
/// wait for those calls to record their outcomes, and return. Every line is checked first
/// ([`stdio::CheckedStdio`]); a bad one is answered with a JSON-RPC error.
pub async fn serve_stdio(shared: Shared, config: &ServeConfig) -> Result<(), ServeError> {
    // On Linux, when both are pipes (as MCP clients start servers), rmcp reopens them
    // non-blocking on the reactor: no round trip through tokio's blocking pool per read and
    // write. Otherwise (a terminal, a file) the blocking handles, as before.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io(shared, config, stdin, stdout).await
}

/// [`serve_stdio`] over any byte streams: one session of the config's local identity, lines
/// read from `read` and answered on `write`, until `read` ends.
pub async fn serve_io<R, W>(
    shared: Shared,
    config: &ServeConfig,
    read: R,
    write: W,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let session = Session::new(shared.clone(), Some(config.local_identity()));
    let end = session.end_token();
    let running = session
        .serve(stdio::CheckedStdio::new(read, write))
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    let _ = running.waiting().await;
    end.cancel();
    shared.drain().await;
    Ok(())
}

pub use http::{serve_http, serve_ops, MAX_OPS_CONNECTIONS};
