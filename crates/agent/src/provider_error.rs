//! Why a model request failed: one error for every endpoint and wire format, with a stable
//! code, whether another attempt may succeed, and its text redacted of the provider's secrets.
//!
//! An error reported inside a `200` stream is classified as the same error in an HTTP status
//! would be ([`classify`]): an exhausted quota, refused credentials or an invalid request are
//! named and never retried, wherever they were said.

use std::time::Duration;

use serde_json::Value;

use super::redact::Redactor;
use super::turn::TurnError;

/// Where an endpoint reported an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// As the response's HTTP status.
    Http(u16),
    /// As an error event inside a successful stream.
    Stream,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Http(s) => write!(f, "HTTP {s}"),
            Origin::Stream => f.write_str("an error event in the stream"),
        }
    }
}

/// Why a model request failed (after its retries, for the retryable ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the base URL is not usable: {0}")]
    InvalidUrl(String),
    #[error("the HTTP client cannot be set up: {0}")]
    Setup(String),
    #[error("cannot connect to the endpoint: {0}")]
    Connect(String),
    #[error("the endpoint did not answer in time")]
    Timeout,
    #[error("the endpoint is rate limiting ({at})")]
    RateLimited {
        at: Origin,
        retry_after: Option<Duration>,
    },
    /// A billing stop: the account's quota or credit is used up. Asking again cannot help.
    #[error("the account's quota or credit is used up ({at}): {excerpt}")]
    Quota { at: Origin, excerpt: String },
    /// The API key is missing, wrong, or lacks the permission.
    #[error("the endpoint refused the credentials ({at}): {excerpt}")]
    Auth { at: Origin, excerpt: String },
    /// The endpoint says the request itself is wrong (unknown model, bad parameter, too long).
    #[error("the endpoint called the request invalid ({at}): {excerpt}")]
    InvalidRequest { at: Origin, excerpt: String },
    #[error("the endpoint failed ({at}): {excerpt}")]
    Server { at: Origin, excerpt: String },
    /// Any other refusal (a 4xx not named above).
    #[error("the endpoint refused the request ({at}): {excerpt}")]
    Refused { at: Origin, excerpt: String },
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error("the run's deadline passed")]
    Deadline,
    #[error("the run was cancelled")]
    Cancelled,
}

/// Error types and codes of a billing stop (OpenAI's `insufficient_quota`, Anthropic's
/// `billing_error`).
const QUOTA: &[&str] = &[
    "insufficient_quota",
    "billing_error",
    "billing_hard_limit_reached",
    "quota_exceeded",
];
/// Error types and codes of refused credentials.
const AUTH: &[&str] = &[
    "authentication_error",
    "permission_error",
    "invalid_api_key",
    "unauthorized",
    "permission_denied",
];
/// Error types and codes of a request the endpoint calls wrong.
const INVALID: &[&str] = &[
    "invalid_request_error",
    "not_found_error",
    "request_too_large",
    "invalid_prompt",
    "context_length_exceeded",
    "model_not_found",
];
/// Error types and codes of rate limiting.
const RATE: &[&str] = &["rate_limit_error", "rate_limit_exceeded"];

/// The error types and codes a body names: `error.type`, `error.code` (both APIs), the
/// top-level `code` of a Responses `error` event and `response.error.code` of a failed
/// response.
fn kinds(body: &Value) -> Vec<&str> {
    let error = body.get("error");
    let failed = body.get("response").and_then(|r| r.get("error"));
    [
        error.and_then(|e| e.get("type")),
        error.and_then(|e| e.get("code")),
        body.get("code"),
        failed.and_then(|e| e.get("code")),
        failed.and_then(|e| e.get("type")),
    ]
    .into_iter()
    .filter_map(|v| v.and_then(Value::as_str))
    .collect()
}

/// The error an endpoint reported, at `at`, with `body` (parsed when it is JSON) and
/// `excerpt` (its redacted, bounded text): the HTTP status decides where it is unambiguous,
/// the error's type or code where it is not (a 429 that is a billing stop; anything said inside
/// a stream).
pub fn classify(
    at: Origin,
    body: Option<&Value>,
    excerpt: String,
    retry_after: Option<Duration>,
) -> ProviderError {
    let kinds = body.map(kinds).unwrap_or_default();
    let named = |set: &[&str]| kinds.iter().any(|k| set.contains(k));
    let status = match at {
        Origin::Http(s) => Some(s),
        Origin::Stream => None,
    };
    match status {
        Some(401 | 403) => ProviderError::Auth { at, excerpt },
        Some(402) => ProviderError::Quota { at, excerpt },
        _ if named(QUOTA) => ProviderError::Quota { at, excerpt },
        Some(429) => ProviderError::RateLimited { at, retry_after },
        Some(408) => ProviderError::Timeout,
        Some(s) if s >= 500 => ProviderError::Server { at, excerpt },
        Some(400 | 404 | 405 | 413 | 422) => ProviderError::InvalidRequest { at, excerpt },
        Some(_) => ProviderError::Refused { at, excerpt },
        None if named(AUTH) => ProviderError::Auth { at, excerpt },
        None if named(INVALID) => ProviderError::InvalidRequest { at, excerpt },
        None if named(RATE) => ProviderError::RateLimited { at, retry_after },
        // Overloaded, an API error, or a kind not known here: the provider failed mid-answer.
        None => ProviderError::Server { at, excerpt },
    }
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
                | ProviderError::Turn(TurnError::Truncated | TurnError::Malformed(_))
        )
    }

    /// A stable name for summaries and the ledger.
    pub fn code(&self) -> &'static str {
        match self {
            ProviderError::InvalidUrl(_) => "invalid_url",
            ProviderError::Setup(_) => "client_setup_failed",
            ProviderError::Connect(_) => "connect_failed",
            ProviderError::Timeout => "timeout",
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Quota { .. } => "quota_exhausted",
            ProviderError::Auth { .. } => "auth_failed",
            ProviderError::InvalidRequest { .. } => "invalid_request",
            ProviderError::Server { .. } => "server_error",
            ProviderError::Refused { .. } => "refused",
            ProviderError::Turn(TurnError::Truncated) => "truncated_stream",
            ProviderError::Turn(TurnError::Malformed(_)) => "malformed_response",
            ProviderError::Turn(TurnError::TooLarge(_)) => "response_too_large",
            ProviderError::Deadline => "deadline",
            ProviderError::Cancelled => "cancelled",
        }
    }

    /// The same error with every text it carries through [`Redactor::redact`].
    pub fn redacted(self, r: &Redactor) -> ProviderError {
        let x = |s: String| r.redact(&s);
        match self {
            ProviderError::InvalidUrl(s) => ProviderError::InvalidUrl(x(s)),
            ProviderError::Setup(s) => ProviderError::Setup(x(s)),
            ProviderError::Connect(s) => ProviderError::Connect(x(s)),
            ProviderError::Quota { at, excerpt } => ProviderError::Quota {
                at,
                excerpt: x(excerpt),
            },
            ProviderError::Auth { at, excerpt } => ProviderError::Auth {
                at,
                excerpt: x(excerpt),
            },
            ProviderError::InvalidRequest { at, excerpt } => ProviderError::InvalidRequest {
                at,
                excerpt: x(excerpt),
            },
            ProviderError::Server { at, excerpt } => ProviderError::Server {
                at,
                excerpt: x(excerpt),
            },
            ProviderError::Refused { at, excerpt } => ProviderError::Refused {
                at,
                excerpt: x(excerpt),
            },
            ProviderError::Turn(TurnError::Malformed(s)) => {
                ProviderError::Turn(TurnError::Malformed(x(s)))
            }
            e @ (ProviderError::Timeout
            | ProviderError::RateLimited { .. }
            | ProviderError::Turn(TurnError::Truncated | TurnError::TooLarge(_))
            | ProviderError::Deadline
            | ProviderError::Cancelled) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(status: u16, body: Value) -> &'static str {
        classify(Origin::Http(status), Some(&body), String::new(), None).code()
    }

    fn streamed(body: Value) -> &'static str {
        classify(Origin::Stream, Some(&body), String::new(), None).code()
    }

    /// A billing stop is named and final, in either API's words, also behind a 429.
    #[test]
    fn quota_is_named_and_never_retried() {
        let openai = json!({"error": {"message": "You exceeded your current quota",
            "type": "insufficient_quota", "code": "insufficient_quota"}});
        assert_eq!(at(429, openai.clone()), "quota_exhausted");
        assert_eq!(streamed(openai.clone()), "quota_exhausted");
        let anthropic = json!({"type": "error", "error": {"type": "billing_error"}});
        assert_eq!(at(400, anthropic), "quota_exhausted");
        assert_eq!(at(402, json!({})), "quota_exhausted");
        let e = classify(Origin::Http(429), Some(&openai), String::new(), None);
        assert!(!e.retryable());
        // A plain 429 is still a rate limit, retried.
        let limited = json!({"error": {"type": "rate_limit_error"}});
        assert_eq!(at(429, limited.clone()), "rate_limited");
        assert!(classify(Origin::Http(429), None, String::new(), None).retryable());
        assert_eq!(streamed(limited), "rate_limited");
    }

    /// Refused credentials and invalid requests are named and final, by status or, inside a
    /// stream, by type.
    #[test]
    fn auth_and_invalid_requests_are_final() {
        let key = json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key"}});
        assert_eq!(at(401, key.clone()), "auth_failed");
        assert_eq!(streamed(key), "auth_failed");
        assert_eq!(
            streamed(json!({"type": "error", "error": {"type": "authentication_error"}})),
            "auth_failed"
        );
        assert_eq!(at(403, json!({})), "auth_failed");
        for s in [400, 404, 413, 422] {
            assert_eq!(at(s, json!({})), "invalid_request", "{s}");
        }
        assert_eq!(
            streamed(json!({"type": "error", "code": "context_length_exceeded"})),
            "invalid_request"
        );
        assert_eq!(at(409, json!({})), "refused");
        for e in [
            classify(Origin::Http(401), None, String::new(), None),
            classify(Origin::Http(400), None, String::new(), None),
            classify(Origin::Http(409), None, String::new(), None),
        ] {
            assert!(!e.retryable(), "{e:?}");
        }
    }

    /// Overload and server errors are retried, in a status (529 included) or in a stream.
    #[test]
    fn server_errors_are_retried() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error"}});
        assert_eq!(at(529, overloaded.clone()), "server_error");
        assert_eq!(streamed(overloaded), "server_error");
        assert_eq!(
            streamed(json!({"type": "response.failed",
                "response": {"error": {"code": "server_error"}}})),
            "server_error"
        );
        assert!(classify(Origin::Stream, None, String::new(), None).retryable());
    }
}
