//! The operator's endpoints: `/healthz` (the process answers), `/readyz` (the ledger answers a
//! read and the tools are loaded) and `/metrics` (`telemetry::Metrics`, text format).
//!
//! `/healthz` and `/readyz` are also served on the MCP listener without authentication, for a
//! load balancer's checks; there they tell nothing but a status (`/readyz` says why it is not
//! ready only on the operator's listener). `/metrics` is served only on the
//! listener `serve --metrics ADDR` opens, never on the MCP port: its series name every tool,
//! and a caller of the MCP port may not learn the tools the policy hides from it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Body, HEADER_READ_TIMEOUT};
use crate::ServeError;
use toolhost_runtime::Runtime;

/// Connections the metrics listener serves at once; more wait in the backlog. A scraper needs
/// one; the bound keeps a flood of connections from holding tasks and descriptors. Each
/// connection answers one request and closes (no keep-alive), so an idle client cannot keep a
/// slot; the header read is bounded by `HEADER_READ_TIMEOUT`.
pub const MAX_OPS_CONNECTIONS: usize = 8;

/// The answer for an operator path, or `None` when `path` is not one. `metrics` says whether
/// `/metrics` is served here.
pub(super) async fn answer(
    path: &str,
    runtime: &Arc<Runtime>,
    metrics: bool,
) -> Option<Response<Body>> {
    match path {
        "/healthz" => Some(text(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "ok\n".into(),
        )),
        "/readyz" => Some(ready(runtime, metrics).await),
        "/metrics" if metrics => Some(text(
            StatusCode::OK,
            toolhost_telemetry::CONTENT_TYPE,
            toolhost_telemetry::metrics().encode(),
        )),
        _ => None,
    }
}

/// How long one ledger probe answers `/readyz`: unauthenticated requests on the MCP port reach
/// it, so a flood of them costs the ledger at most one read per this interval.
pub const READY_PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The last ledger probe and when it ran; one probe runs at a time, and others wait for it.
struct ReadyProbe {
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, bool)>>,
}

impl ReadyProbe {
    const fn new() -> ReadyProbe {
        ReadyProbe {
            last: tokio::sync::Mutex::const_new(None),
        }
    }

    /// The answer of a probe younger than [`READY_PROBE_INTERVAL`], else of `probe` run now on
    /// the blocking pool.
    async fn ledger_ok(&self, probe: impl FnOnce() -> bool + Send + 'static) -> bool {
        let mut last = self.last.lock().await;
        match *last {
            Some((at, ok)) if at.elapsed() < READY_PROBE_INTERVAL => ok,
            _ => {
                let ok = tokio::task::spawn_blocking(probe).await.unwrap_or(false);
                *last = Some((tokio::time::Instant::now(), ok));
                ok
            }
        }
    }
}

/// `/readyz`: 200 when the ledger answers a read and tools are loaded, else 503. The body
/// says why (`ledger`, `tools`) only on the operator's listener (`detail`); on the MCP port,
/// which anyone reaches, it says `ready` and nothing else: not how many tools there are.
async fn ready(runtime: &Arc<Runtime>, detail: bool) -> Response<Body> {
    static PROBE: ReadyProbe = ReadyProbe::new();
    let rt = runtime.clone();
    let ledger = PROBE
        .ledger_ok(move || match rt.ledger_reads() {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "not ready: the ledger did not answer a read");
                false
            }
        })
        .await;
    let (status, body) = readiness(ledger, runtime.registry().tools().count(), detail);
    text(status, "application/json", body)
}

/// The `/readyz` answer for a ledger that answered (or not) and `tools` loaded tools.
fn readiness(ledger: bool, tools: usize, detail: bool) -> (StatusCode, String) {
    let ready = ledger && tools > 0;
    let body = if detail {
        serde_json::json!({ "ledger": ledger, "tools": tools })
    } else {
        serde_json::json!({ "ready": ready })
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body.to_string())
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    r
}

/// Serve `/metrics`, `/healthz` and `/readyz` on `addr` until `shutdown`; `on_bound` gets the
/// bound address.
pub async fn serve_ops(
    runtime: Arc<Runtime>,
    addr: SocketAddr,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Bind(addr, e))?;
    toolhost_telemetry::enable_metrics();
    on_bound(
        listener
            .local_addr()
            .map_err(|e| ServeError::Bind(addr, e))?,
    );
    let slots = Arc::new(Semaphore::new(MAX_OPS_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|_| ServeError::Closed)?,
            _ = shutdown.cancelled() => return Ok(()),
        };
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(_) => {
                    // Out of descriptors, or a reset connection: try again shortly.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => return Ok(()),
        };
        let runtime = runtime.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let runtime = runtime.clone();
                async move {
                    let found = answer(req.uri().path(), &runtime, true).await;
                    Ok::<_, Infallible>(found.unwrap_or_else(|| {
                        super::plain(
                            StatusCode::NOT_FOUND,
                            "not found; this listener serves /metrics, /healthz and /readyz",
                        )
                    }))
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A ledger that does not answer, or no tool, is 503; on the MCP port the body says only
    /// that it is not ready, on the operator's listener which part is missing.
    #[test]
    fn readyz_is_503_without_a_ledger_or_tools() {
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(
            readiness(true, 3, false),
            (StatusCode::OK, r#"{"ready":true}"#.into())
        );
        assert_eq!(
            readiness(false, 3, false),
            (unavailable, r#"{"ready":false}"#.into())
        );
        assert_eq!(
            readiness(true, 0, false),
            (unavailable, r#"{"ready":false}"#.into())
        );
        assert_eq!(
            readiness(false, 3, true),
            (unavailable, r#"{"ledger":false,"tools":3}"#.into())
        );
        assert_eq!(
            readiness(true, 0, true),
            (unavailable, r#"{"ledger":true,"tools":0}"#.into())
        );
    }

    /// However often `/readyz` is asked, the ledger is read at most once per interval.
    #[tokio::test(start_paused = true)]
    async fn the_ledger_is_probed_once_per_interval() {
        let probe = ReadyProbe::new();
        let reads = Arc::new(AtomicUsize::new(0));
        let ask = || {
            let reads = reads.clone();
            move || {
                reads.fetch_add(1, Ordering::SeqCst);
                true
            }
        };
        for _ in 0..100 {
            assert!(probe.ledger_ok(ask()).await);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        tokio::time::advance(READY_PROBE_INTERVAL).await;
        for _ in 0..100 {
            probe.ledger_ok(ask()).await;
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }
}
