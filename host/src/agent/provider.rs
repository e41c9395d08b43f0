//! The OpenAI-compatible chat-completions client: one POST per model request (HTTP/1.1, TLS
//! for `https`), streamed (server-sent events) or whole, every read bounded in bytes and time.
//!
//! Only the *model request* is ever retried — on a timeout, a 429 (honouring `Retry-After`), a
//! 5xx, a connection failure, a truncated stream or malformed JSON — at most
//! [`ProviderOptions::max_retries`] times. A turn is handed to the loop only when complete, so
//! a retried request never re-runs a tool.
//!
//! Nothing of a response leaves this module unredacted: every error and every turn goes
//! through the provider's [`Redactor`] (see `redact.rs`), so an endpoint that echoes the API
//! key cannot put it into the summary or the ledger.
//!
//! Longer than 500 lines: 40 of them are its unit tests, kept beside the code they test (the code is 470 lines).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::redact::Redactor;
use super::turn::{ModelTurn, SseParser, TurnBuilder, TurnError};

/// Largest whole (non-streamed) response body read.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;
/// Largest streamed response read in total.
pub const MAX_STREAM_BYTES: usize = 32 << 20;
/// Longest `Retry-After` honoured; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Bytes of an error response body kept for the operator's message (cut after redaction).
const ERROR_EXCERPT_BYTES: usize = 300;

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

/// Why a model request failed (after its retries, for the retryable ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the base URL is not usable: {0}")]
    InvalidUrl(String),
    #[error("cannot connect to the endpoint: {0}")]
    Connect(String),
    #[error("the endpoint did not answer in time")]
    Timeout,
    #[error("the endpoint is rate limiting (429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the endpoint failed with HTTP {status}: {excerpt}")]
    Server { status: u16, excerpt: String },
    #[error("the endpoint refused the request with HTTP {status}: {excerpt}")]
    Refused { status: u16, excerpt: String },
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error("the run was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Whether another attempt of the same model request may succeed.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::Connect(_)
                | ProviderError::Timeout
                | ProviderError::RateLimited { .. }
                | ProviderError::Server { .. }
                | ProviderError::Turn(_)
        )
    }

    /// A stable name for summaries.
    pub fn code(&self) -> &'static str {
        match self {
            ProviderError::InvalidUrl(_) => "invalid_url",
            ProviderError::Connect(_) => "connect_failed",
            ProviderError::Timeout => "timeout",
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Server { .. } => "server_error",
            ProviderError::Refused { .. } => "refused",
            ProviderError::Turn(TurnError::Truncated) => "truncated_stream",
            ProviderError::Turn(TurnError::Malformed(_)) => "malformed_response",
            ProviderError::Cancelled => "cancelled",
        }
    }

    /// The same error with every text it carries through [`Redactor::redact`].
    pub fn redacted(self, r: &Redactor) -> ProviderError {
        match self {
            ProviderError::InvalidUrl(s) => ProviderError::InvalidUrl(r.redact(&s)),
            ProviderError::Connect(s) => ProviderError::Connect(r.redact(&s)),
            ProviderError::Server { status, excerpt } => ProviderError::Server {
                status,
                excerpt: r.redact(&excerpt),
            },
            ProviderError::Refused { status, excerpt } => ProviderError::Refused {
                status,
                excerpt: r.redact(&excerpt),
            },
            ProviderError::Turn(TurnError::Malformed(s)) => {
                ProviderError::Turn(TurnError::Malformed(r.redact(&s)))
            }
            e @ (ProviderError::Timeout
            | ProviderError::RateLimited { .. }
            | ProviderError::Turn(TurnError::Truncated)
            | ProviderError::Cancelled) => e,
        }
    }
}

/// Where the chat-completions endpoint is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    tls: bool,
    host: String,
    port: u16,
    /// The request path, e.g. `/v1/chat/completions`.
    path: String,
}

impl Endpoint {
    /// `base_url` as OpenAI clients take it (`https://api.example.com/v1`,
    /// `http://127.0.0.1:8080/v1`); `/chat/completions` is appended.
    pub fn parse(base_url: &str) -> Result<Endpoint, ProviderError> {
        let uri: hyper::Uri = base_url
            .parse()
            .map_err(|e| ProviderError::InvalidUrl(format!("{base_url:?}: {e}")))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(ProviderError::InvalidUrl(format!(
                    "{base_url:?}: the scheme must be http or https"
                )))
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| ProviderError::InvalidUrl(format!("{base_url:?}: no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let base = uri.path().trim_end_matches('/');
        Ok(Endpoint {
            tls,
            host,
            port,
            path: format!("{base}/chat/completions"),
        })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A chat-completions client for one endpoint.
pub struct Provider {
    endpoint: Endpoint,
    api_key: Option<String>,
    /// Takes the key (and credential echoes) out of everything a response gives back.
    redactor: Redactor,
    options: ProviderOptions,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Provider")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// A model request that failed for good, and how many attempts it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub error: ProviderError,
    pub attempts: u32,
}

/// What one successful model request took.
#[derive(Debug, Clone)]
pub struct Completion {
    pub turn: ModelTurn,
    /// Attempts made (1 without retries).
    pub attempts: u32,
    /// The request body's bytes and the response's bytes, for the transcript.
    pub response_bytes: u64,
    pub response_digest: String,
}

impl Provider {
    pub fn new(endpoint: Endpoint, api_key: Option<String>, options: ProviderOptions) -> Self {
        let tls = endpoint.tls.then(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            tokio_rustls::TlsConnector::from(Arc::new(config))
        });
        Provider {
            endpoint,
            redactor: Redactor::new(api_key.as_deref()),
            api_key,
            options,
            tls,
        }
    }

    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// What this provider redacts (the loop applies it to the summary too).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Send one model request, retrying what may be retried, until a complete turn arrives,
    /// a non-retryable error, the retries run out, or `cancel`. The turn and the error come
    /// back redacted.
    pub async fn complete(
        &self,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<Completion, Failed> {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("a request body serializes"));
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let result = tokio::select! {
                r = tokio::time::timeout(self.options.request_timeout, self.attempt(bytes.clone())) => {
                    r.unwrap_or(Err(ProviderError::Timeout))
                }
                _ = cancel.cancelled() => Err(ProviderError::Cancelled),
            };
            match result {
                Ok((mut turn, raw)) => {
                    self.redactor.redact_turn(&mut turn);
                    return Ok(Completion {
                        turn,
                        attempts: attempt,
                        response_bytes: raw.len() as u64,
                        response_digest: crate::ledger::digest_bytes(&raw),
                    });
                }
                Err(e) if e.retryable() && attempt <= self.options.max_retries => {
                    let wait = match &e {
                        ProviderError::RateLimited {
                            retry_after: Some(d),
                        } => *d,
                        _ => self.backoff(attempt),
                    };
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => return Err(Failed {
                            error: ProviderError::Cancelled,
                            attempts: attempt,
                        }),
                    }
                }
                Err(error) => {
                    return Err(Failed {
                        error: error.redacted(&self.redactor),
                        attempts: attempt,
                    })
                }
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(5);
        (self.options.backoff * factor).min(Duration::from_secs(8))
    }

    /// One attempt: the turn and the raw response bytes.
    async fn attempt(&self, body: Bytes) -> Result<(ModelTurn, Vec<u8>), ProviderError> {
        let tcp = tokio::time::timeout(
            self.options.connect_timeout,
            TcpStream::connect((self.endpoint.host.as_str(), self.endpoint.port)),
        )
        .await
        .map_err(|_| ProviderError::Timeout)?
        .map_err(|e| ProviderError::Connect(e.kind().to_string()))?;
        match &self.tls {
            None => self.exchange(tcp, body).await,
            Some(tls) => {
                let name = rustls::pki_types::ServerName::try_from(self.endpoint.host.clone())
                    .map_err(|e| ProviderError::InvalidUrl(e.to_string()))?;
                let stream =
                    tokio::time::timeout(self.options.connect_timeout, tls.connect(name, tcp))
                        .await
                        .map_err(|_| ProviderError::Timeout)?
                        .map_err(|e| ProviderError::Connect(format!("TLS: {e}")))?;
                self.exchange(stream, body).await
            }
        }
    }

    async fn exchange<S>(
        &self,
        stream: S,
        body: Bytes,
    ) -> Result<(ModelTurn, Vec<u8>), ProviderError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| ProviderError::Connect(e.to_string()))?;
        let driver = tokio::spawn(conn);
        let _stop = AbortOnDrop(driver);
        let mut req = hyper::Request::post(self.endpoint.path.as_str())
            .header(hyper::header::HOST, self.endpoint.authority())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(
                hyper::header::ACCEPT,
                if self.options.stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
        if let Some(key) = &self.api_key {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| ProviderError::InvalidUrl(e.to_string()))?;
        // No separate bound on the response head: a server may send it only after generating
        // (non-streamed) or after reading a long prompt; the attempt's own timeout applies.
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| ProviderError::Connect(e.to_string()))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
        let streamed = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = resp.into_body();
        if !status.is_success() {
            let raw = self
                .read_all(&mut body, 64 * 1024)
                .await
                .unwrap_or_default();
            // Redact the whole body first: a cut must not leave a piece of the key behind.
            let body = self.redactor.redact(&String::from_utf8_lossy(&raw));
            let excerpt = crate::runtime::clip(&body, ERROR_EXCERPT_BYTES).to_string();
            return Err(match status.as_u16() {
                429 => ProviderError::RateLimited { retry_after },
                408 => ProviderError::Timeout,
                s if s >= 500 => ProviderError::Server { status: s, excerpt },
                s => ProviderError::Refused { status: s, excerpt },
            });
        }
        let mut builder = TurnBuilder::default();
        if streamed {
            let mut parser = SseParser::default();
            let mut raw = Vec::new();
            loop {
                let frame = tokio::time::timeout(self.options.idle_timeout, body.frame())
                    .await
                    .map_err(|_| ProviderError::Timeout)?;
                let Some(frame) = frame else { break };
                let Ok(frame) = frame else {
                    break; // the connection broke: whatever arrived decides (truncated or not)
                };
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if raw.len() + data.len() > MAX_STREAM_BYTES {
                    return Err(TurnError::Malformed("the stream is too large".into()).into());
                }
                raw.extend_from_slice(&data);
                for event in parser.push(&data)? {
                    builder.event(&event, Instant::now())?;
                }
                if builder.saw_done() {
                    break;
                }
            }
            Ok((builder.finish(Instant::now())?, raw))
        } else {
            let raw = self.read_all(&mut body, MAX_RESPONSE_BYTES).await?;
            builder.whole_body(&raw, Instant::now())?;
            Ok((builder.finish(Instant::now())?, raw))
        }
    }

    async fn read_all(
        &self,
        body: &mut hyper::body::Incoming,
        max: usize,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut raw = Vec::new();
        loop {
            let frame = tokio::time::timeout(self.options.idle_timeout, body.frame())
                .await
                .map_err(|_| ProviderError::Timeout)?;
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|_| TurnError::Truncated)?;
            if let Ok(data) = frame.into_data() {
                if raw.len() + data.len() > max {
                    return Err(TurnError::Malformed("the response is too large".into()).into());
                }
                raw.extend_from_slice(&data);
            }
        }
        Ok(raw)
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base URLs as OpenAI clients write them.
    #[test]
    fn endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080/v1").unwrap();
        assert_eq!(
            (e.tls, e.port, e.path.as_str()),
            (false, 8080, "/v1/chat/completions")
        );
        let e = Endpoint::parse("https://api.example.com/v1/").unwrap();
        assert_eq!(
            (e.tls, e.port, e.path.as_str()),
            (true, 443, "/v1/chat/completions")
        );
        let e = Endpoint::parse("http://[::1]:9000").unwrap();
        assert_eq!(
            (e.host.as_str(), e.authority()),
            ("::1", "[::1]:9000".to_string())
        );
        assert!(Endpoint::parse("ftp://x/v1").is_err());
    }

    /// Backoff doubles and is capped.
    #[test]
    fn backoff_is_bounded() {
        let p = Provider::new(
            Endpoint::parse("http://127.0.0.1:1/v1").unwrap(),
            Some("sk-secret".into()),
            ProviderOptions::default(),
        );
        assert_eq!(p.backoff(1), Duration::from_millis(500));
        assert_eq!(p.backoff(2), Duration::from_secs(1));
        assert_eq!(p.backoff(30), Duration::from_secs(8));
        assert!(!format!("{p:?}").contains("sk-secret"));
    }
}
