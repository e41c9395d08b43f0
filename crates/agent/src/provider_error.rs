//! Why a model request failed: one error for every endpoint, with a stable code, whether
//! another attempt may succeed, and its text redacted of the provider's secrets.

use std::time::Duration;

use super::redact::Redactor;
use super::turn::TurnError;

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
    #[error("the endpoint is rate limiting (429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the endpoint failed with HTTP {status}: {excerpt}")]
    Server { status: u16, excerpt: String },
    #[error("the endpoint refused the request with HTTP {status}: {excerpt}")]
    Refused { status: u16, excerpt: String },
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error("the run's deadline passed")]
    Deadline,
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
        match self {
            ProviderError::InvalidUrl(s) => ProviderError::InvalidUrl(r.redact(&s)),
            ProviderError::Setup(s) => ProviderError::Setup(r.redact(&s)),
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
            | ProviderError::Turn(TurnError::Truncated | TurnError::TooLarge(_))
            | ProviderError::Deadline
            | ProviderError::Cancelled) => e,
        }
    }
}
