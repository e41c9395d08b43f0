//! The model client: one POST per model request (HTTP/1.1, TLS for `https`) in the endpoint's
//! API (Chat Completions, Responses or Messages; see `wire/`), streamed (server-sent events)
//! or whole, every read bounded in bytes and time.
//!
//! The transport is [`reqwest`]: connections are kept alive and reused across the steps of a
//! run (one TCP + TLS handshake per run, not per request); `HTTPS_PROXY`/`HTTP_PROXY`/
//! `ALL_PROXY` and `NO_PROXY` are honoured as curl does; a server's certificate may chain to
//! Mozilla's roots (bundled) or to the system's (`/etc/ssl/certs`, `SSL_CERT_FILE` — where a
//! company's own CA goes). Redirects are not followed: the request carries the API key.
//!
//! Only the *model request* is ever retried — on a timeout, a 429 (honouring `retry-after-ms`
//! or `Retry-After`), a 5xx, a connection failure, a truncated stream or malformed JSON — at most
//! [`ProviderOptions::max_retries`] times. An exhausted quota, refused credentials and an
//! invalid request are never retried, whether a status or an event inside the stream said so.
//! A response past toolhost's own size caps is not retried (the same request would pull as much
//! again). A turn is handed to the loop only when
//! complete, so a retried request never re-runs a tool. Every attempt is reported
//! ([`Attempt`]), also when the run's deadline or a cancel cuts one short.
//!
//! Nothing of a response leaves this module unredacted: every error and every turn goes
//! through the provider's [`Redactor`] (see `redact.rs`), so an endpoint that echoes the API
//! key cannot put it into the summary or the ledger.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::endpoint::Endpoint;
pub use super::provider_error::ProviderError;
use super::provider_error::{classify, Origin};
use super::redact::Redactor;
use super::sse::SseParser;
use super::turn::{ModelTurn, TurnError};
use super::wire::{Api, Reader};

/// Largest whole (non-streamed) response body read.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;
/// Largest streamed response read in total.
pub const MAX_STREAM_BYTES: usize = 32 << 20;
pub use super::retry_after::MAX_RETRY_AFTER;
/// Bytes of an error response body kept for the operator's message (cut after redaction).
const ERROR_EXCERPT_BYTES: usize = 300;
/// Bytes of an error response body read at all.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// How long, and how many bytes, the end of a stream after `[DONE]` is read for.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(250);
const DRAIN_BYTES: usize = 64 << 10;
/// The Messages API version every request names (`anthropic-version`).
const ANTHROPIC_VERSION: &str = "2023-06-01";
/// How long an idle kept-alive connection to the endpoint is kept for the next step.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How to talk to the endpoint.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    /// Ask for `stream: true` (server-sent events).
    pub stream: bool,
    /// Retries of one model request after the first attempt.
    pub max_retries: u32,
    /// Connecting (TCP and TLS).
    pub connect_timeout: Duration,
    /// Longest silence between two reads of a response body.
    pub idle_timeout: Duration,
    /// Longest one attempt may take in all, the wait for the response head included.
    pub request_timeout: Duration,
    /// First retry delay (doubled per retry, at most 8 s) when the endpoint gives none.
    pub backoff: Duration,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        ProviderOptions {
            stream: true,
            max_retries: 3,
            connect_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(300),
            backoff: Duration::from_millis(500),
        }
    }
}

/// A model client for one endpoint.
pub struct Provider {
    url: reqwest::Url,
    api: Api,
    api_key: Option<String>,
    /// Takes the key (and credential echoes) out of everything a response gives back.
    redactor: Redactor,
    options: ProviderOptions,
    /// Keeps the connection of one step for the next.
    client: reqwest::Client,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Provider")
            .field("url", &self.url.as_str())
            .field("api", &self.api)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// One attempt of a model request, as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// `ok`, or the [`ProviderError::code`] it ended with.
    pub outcome: &'static str,
    /// The redacted error, for the operator (empty when ok).
    pub detail: String,
    pub elapsed_ms: u64,
}

/// A model request that failed for good, and every attempt it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub error: ProviderError,
    pub attempts: Vec<Attempt>,
}

/// What one successful model request took.
#[derive(Debug, Clone)]
pub struct Completion {
    pub turn: ModelTurn,
    /// Every attempt, the successful last one included.
    pub attempts: Vec<Attempt>,
    /// The response's bytes, for the transcript.
    pub response_bytes: u64,
    pub response_digest: String,
}

impl Provider {
    /// A client for `endpoint`. Fails only when the TLS roots or the proxy settings of the
    /// environment cannot be used.
    pub fn new(
        endpoint: Endpoint,
        api_key: Option<String>,
        options: ProviderOptions,
    ) -> Result<Self, ProviderError> {
        let url = reqwest::Url::parse(&endpoint.url())
            .map_err(|e| ProviderError::InvalidUrl(format!("{}: {e}", endpoint.url())))?;
        let client = reqwest::Client::builder()
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.connect_timeout)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .http1_only()
            .build()
            .map_err(|e| ProviderError::Setup(innermost(&e)))?;
        Ok(Provider {
            url,
            api: endpoint.api(),
            redactor: Redactor::new(api_key.as_deref()),
            api_key,
            options,
            client,
        })
    }

    /// The API the endpoint speaks.
    pub fn api(&self) -> Api {
        self.api
    }

    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// What this provider redacts (the loop applies it to the summary too).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Send one model request, retrying what may be retried, until a complete turn arrives,
    /// a non-retryable error, the retries run out, `deadline` or `cancel`. The turn and the
    /// errors come back redacted, with every attempt made.
    pub async fn complete(
        &self,
        body: &Value,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Completion, Failed> {
        let bytes = serde_json::to_vec(body).expect("a request body serializes");
        let mut attempts: Vec<Attempt> = Vec::new();
        let deadline = tokio::time::Instant::from_std(deadline);
        loop {
            let started = Instant::now();
            if !attempts.is_empty() {
                toolhost_telemetry::metrics().model_retry();
            }
            let span = tracing::debug_span!(
                "model_request",
                attempt = attempts.len() + 1,
                outcome = tracing::field::Empty,
            );
            let attempt = self.attempt(bytes.clone()).instrument(span.clone());
            let result = tokio::select! {
                r = tokio::time::timeout(self.options.request_timeout, attempt) => {
                    r.unwrap_or(Err(ProviderError::Timeout))
                }
                _ = cancel.cancelled() => Err(ProviderError::Cancelled),
                _ = tokio::time::sleep_until(deadline) => Err(ProviderError::Deadline),
            };
            let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let outcome = result.as_ref().map_or_else(|e| e.code(), |_| "ok");
            span.record("outcome", outcome);
            toolhost_telemetry::metrics().model_request(outcome);
            let (turn, raw) = match result {
                Ok(done) => done,
                Err(e) => {
                    let error = e.redacted(&self.redactor);
                    attempts.push(Attempt {
                        outcome: error.code(),
                        detail: error.to_string(),
                        elapsed_ms,
                    });
                    if !error.retryable() || attempts.len() > self.options.max_retries as usize {
                        return Err(Failed { error, attempts });
                    }
                    let wait = match &error {
                        ProviderError::RateLimited {
                            retry_after: Some(d),
                            ..
                        } => *d,
                        _ => self.backoff(attempts.len() as u32),
                    };
                    let stop = tokio::select! {
                        _ = tokio::time::sleep(wait) => None,
                        _ = cancel.cancelled() => Some(ProviderError::Cancelled),
                        _ = tokio::time::sleep_until(deadline) => Some(ProviderError::Deadline),
                    };
                    if let Some(error) = stop {
                        return Err(Failed { error, attempts });
                    }
                    continue;
                }
            };
            let mut turn = turn;
            self.redactor.redact_turn(&mut turn);
            attempts.push(Attempt {
                outcome: "ok",
                detail: String::new(),
                elapsed_ms,
            });
            return Ok(Completion {
                turn,
                attempts,
                response_bytes: raw.len() as u64,
                response_digest: toolhost_contract::canonical::digest_bytes(&raw),
            });
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(5);
        (self.options.backoff * factor).min(Duration::from_secs(8))
    }

    /// One attempt: the turn and the raw response bytes.
    async fn attempt(&self, body: Vec<u8>) -> Result<(ModelTurn, Vec<u8>), ProviderError> {
        let accept = if self.options.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut req = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept)
            .body(body);
        req = match (self.api, &self.api_key) {
            (Api::Messages, key) => {
                let req = req.header("anthropic-version", ANTHROPIC_VERSION);
                match key {
                    Some(key) => req.header("x-api-key", key),
                    None => req,
                }
            }
            (_, Some(key)) => req.bearer_auth(key),
            (_, None) => req,
        };
        // The endpoint may continue the trace (W3C trace context), when spans are exported.
        if let Some(parent) = toolhost_telemetry::traceparent() {
            req = req.header("traceparent", parent);
        }
        // No separate bound on the response head: a server may send it only after generating
        // (non-streamed) or after reading a long prompt; the attempt's own timeout applies.
        let mut resp = req.send().await.map_err(transport_error)?;
        let status = resp.status();
        let retry_after =
            super::retry_after::retry_after(resp.headers(), std::time::SystemTime::now());
        let streamed = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() {
            let raw = self
                .read_all(&mut resp, MAX_ERROR_BODY_BYTES, "an error response")
                .await
                .unwrap_or_default();
            // Redact the whole body first: a cut must not leave a piece of the key behind.
            let body = self.redactor.redact(&String::from_utf8_lossy(&raw));
            let excerpt = toolhost_contract::bounds::clip(&body, ERROR_EXCERPT_BYTES).to_string();
            let parsed: Option<Value> = serde_json::from_slice(&raw).ok();
            let at = Origin::Http(status.as_u16());
            return Err(classify(at, parsed.as_ref(), excerpt, retry_after));
        }
        let mut builder = Reader::new(self.api);
        if streamed {
            let mut parser = SseParser::default();
            let mut raw = Vec::new();
            loop {
                let chunk = tokio::time::timeout(self.options.idle_timeout, resp.chunk())
                    .await
                    .map_err(|_| ProviderError::Timeout)?;
                let Ok(Some(data)) = chunk else {
                    // The end, or the connection broke: whatever arrived decides (truncated
                    // or not).
                    break;
                };
                if raw.len() + data.len() > MAX_STREAM_BYTES {
                    return Err(TurnError::TooLarge("the stream").into());
                }
                raw.extend_from_slice(&data);
                for event in parser.push(&data)? {
                    builder.event(&event, Instant::now())?;
                }
                if builder.saw_done() {
                    self.drain(&mut resp).await;
                    break;
                }
            }
            Ok((builder.finish(Instant::now())?, raw))
        } else {
            let raw = self
                .read_all(&mut resp, MAX_RESPONSE_BYTES, "the response")
                .await?;
            builder.whole_body(&raw, Instant::now())?;
            Ok((builder.finish(Instant::now())?, raw))
        }
    }

    /// Read what follows `[DONE]` (the end of a chunked body, normally a few bytes), briefly
    /// and bounded, so the connection can go back to the pool for the next step. A body that
    /// does not end is dropped with its connection.
    async fn drain(&self, resp: &mut reqwest::Response) {
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
            let mut read = 0;
            while let Ok(Some(data)) = resp.chunk().await {
                read += data.len();
                if read > DRAIN_BYTES {
                    break;
                }
            }
        })
        .await;
    }

    async fn read_all(
        &self,
        resp: &mut reqwest::Response,
        max: usize,
        what: &'static str,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut raw = Vec::new();
        loop {
            let chunk = tokio::time::timeout(self.options.idle_timeout, resp.chunk())
                .await
                .map_err(|_| ProviderError::Timeout)?;
            let Some(data) = chunk.map_err(|_| TurnError::Truncated)? else {
                break;
            };
            if raw.len() + data.len() > max {
                return Err(TurnError::TooLarge(what).into());
            }
            raw.extend_from_slice(&data);
        }
        Ok(raw)
    }
}

/// A failure before a response: a timeout, or why the connection could not be made (the
/// innermost cause, which names it — "Connection refused", "invalid peer certificate" — and
/// no URL).
fn transport_error(e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout
    } else {
        ProviderError::Connect(innermost(&e))
    }
}

fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Backoff doubles and is capped.
    #[test]
    fn backoff_is_bounded() {
        let p = Provider::new(
            Endpoint::parse("http://127.0.0.1:1/v1").unwrap(),
            Some("sk-secret".into()),
            ProviderOptions::default(),
        )
        .unwrap();
        assert_eq!(p.backoff(1), Duration::from_millis(500));
        assert_eq!(p.backoff(2), Duration::from_secs(1));
        assert_eq!(p.backoff(30), Duration::from_secs(8));
        assert!(!format!("{p:?}").contains("sk-secret"));
    }
}
