//! Why a component could not be fetched from, or sent to, a registry. Every variant names the
//! registry or the reference; none carries a credential.

/// One fetch's or push's failure.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("cannot reach registry {registry}: {message}")]
    Unreachable { registry: String, message: String },
    #[error("registry {registry} did not finish within {secs} s (`[oci] timeout_secs`)")]
    TimedOut { registry: String, secs: u64 },
    #[error("{what}: registry {registry} answered HTTP {status}")]
    Status {
        registry: String,
        what: String,
        status: u16,
    },
    #[error("{what}: not found in registry {registry}")]
    NotFound { registry: String, what: String },
    #[error(
        "registry {registry} refused access (HTTP {status}); give credentials in \
         `[oci.registries.\"{registry}\"]` or the Docker credential file"
    )]
    Unauthorized { registry: String, status: u16 },
    /// `limit` names the cap: an `[oci]` key, or a fixed one.
    #[error("{what} is larger than the {cap}-byte cap ({limit})")]
    TooLarge {
        what: String,
        cap: u64,
        limit: &'static str,
    },
    #[error("{what}: the registry sent bytes whose digest is {got}, not {expected}")]
    DigestMismatch {
        what: String,
        expected: String,
        got: String,
    },
    #[error("{what}: registry {registry} redirected to {to}, {why}")]
    Redirect {
        registry: String,
        what: String,
        to: String,
        why: &'static str,
    },
    #[error("{reference} is not a Wasm component artifact: {message}")]
    NotAComponent { reference: String, message: String },
    #[error(
        "{reference} names a tag, which can move; pin it with `toolhost lock`, or write its \
         digest (`…@sha256:…`)"
    )]
    TagNotPinned { reference: String },
    #[error("credentials for registry {registry}: {message}")]
    Credentials { registry: String, message: String },
    #[error("the OCI store {path}: {source}")]
    Store {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}
