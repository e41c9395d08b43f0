//! The `[serve]` section: who stdio callers are, which bearer tokens HTTP accepts (as hashes),
//! and which `Host`/`Origin` values HTTP answers.
//!
//! ```toml
//! [serve]
//! principal = "local"                 # stdio identity (default "local")
//! tenant = "default"                  # (default "default")
//! allowed_hosts = ["localhost", "127.0.0.1", "::1"]   # HTTP Host allowlist (this default)
//! allowed_origins = []                # browser origins; besides them only the server's own
//!                                     # (loopback bind) pass an Origin check
//! task_ttl_secs = 3600                # how long an MCP task is kept (default 3600)
//! tools_list_ttl_secs = 60            # how long a 2026-07-28 client caches tools/list (default 60)
//! open_tasks_per_caller = 32          # open MCP tasks per principal and tenant (default 32)
//! task_bytes_per_caller = 8388608     # their arguments together, in bytes (default 8 MiB)
//! connections_per_principal = 64     # open HTTP connections per principal (default 64)
//!
//! [[serve.token]]
//! sha256 = "9f86d0…"                  # hex SHA-256 of the bearer token, never the token
//! principal = "alice"
//! tenant = "acme"
//! ```
//!
//! `[serve.console]` (the approval console's operators) is `console/config.rs`'s.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use toolhost_contract::{Caller, ConfigProblem, Origin};

/// What `toolhost serve` reads from the config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The principal of stdio sessions, and of HTTP sessions when no token is configured.
    #[serde(default = "default_principal")]
    pub principal: String,
    /// The tenant of stdio sessions (and tokenless HTTP sessions).
    #[serde(default = "default_tenant")]
    pub tenant: String,
    /// `Host` header values (host or host:port) HTTP answers; anything else gets 403, which
    /// stops DNS rebinding. Default: loopback names only.
    #[serde(default = "default_hosts")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) allowed to call. Besides them, only the server's
    /// own origin on a loopback bind passes (`http::own_origins`); empty (the default): any
    /// other `Origin` header is refused.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Bearer tokens HTTP accepts, each bound to an identity. With none, HTTP binds loopback only.
    #[serde(default, rename = "token")]
    pub tokens: Vec<TokenConfig>,
    /// Seconds a client's GET event stream stays open before the server ends it (the client
    /// reconnects); an idle stream otherwise holds a connection for ever. Default 300.
    #[serde(default = "default_stream_lifetime")]
    pub stream_lifetime_secs: u64,
    /// Seconds an HTTP session may go without a request before it is closed; never less than
    /// the longest tool deadline plus a minute, so a running call keeps its session. Default
    /// 1800.
    #[serde(default = "default_session_idle")]
    pub session_idle_secs: u64,
    /// Seconds an MCP task is kept after it is created (then pruned; its call stays in the
    /// ledger). From 1 to 86400; default 3600.
    #[serde(default = "default_task_ttl")]
    pub task_ttl_secs: u64,
    /// Seconds a 2026-07-28 client may keep a `tools/list` answer (its `ttlMs`): a reload is
    /// seen by such a client at most this late. From 0 (never cached) to 86400; default 60.
    #[serde(default = "default_tools_list_ttl")]
    pub tools_list_ttl_secs: u64,
    /// MCP tasks one caller (principal and tenant) may hold open at once, on every host of
    /// the ledger: a task is open until its call ends (other than waiting for approval), it
    /// is cancelled, or it expires. Past it, a call of a task tool is refused `rate_limited`.
    /// From 1 to 10000; default 32.
    #[serde(default = "default_open_tasks")]
    pub open_tasks_per_caller: u32,
    /// Bytes of arguments one caller's open tasks may hold together (the ledger keeps them
    /// while a call waits for approval, or under `record_content`). From 1024 to 1 GiB;
    /// default 8 MiB.
    #[serde(default = "default_task_bytes")]
    pub task_bytes_per_caller: u64,
    /// Access tokens from an OAuth 2.1 issuer, beside the static tokens (`serve/oauth.rs`).
    #[serde(default)]
    pub oauth: Option<super::oauth::OAuthConfig>,
    /// HTTP requests per second each principal may make (a token bucket), checked before any
    /// work; past it, 429. Every request counts, so a 2026-07-28 caller that names no run (a
    /// new run per request, which `[run] max_calls` cannot bound) is bounded here. Default
    /// 100.
    #[serde(default = "default_requests_per_second")]
    pub requests_per_second: f64,
    /// How many requests a principal may make at once above that rate. Default: twice the
    /// rate (at least 1).
    #[serde(default)]
    pub request_burst: Option<u32>,
    /// HTTP requests one principal may have in flight (a streamed answer counts until it
    /// ends); past it, 429. From 1 to 192; default 64.
    #[serde(default = "default_requests_in_flight")]
    pub requests_in_flight: usize,
    /// HTTP connections one principal may hold open (charged to the principal of the first
    /// request on each that passes authentication); a request on one more is answered 429 and
    /// its connection closed. From 1 to 192; default 64.
    #[serde(default = "default_connections_per_principal")]
    pub connections_per_principal: usize,
    /// The approval console on `serve --http` (`console.rs`): served when this names
    /// operators. Default: none.
    #[serde(default)]
    pub console: Option<super::console::ConsoleConfig>,
}

/// The default per-principal request rate at the HTTP door: far above what an agent loop or a
/// polling client sends, low enough that one principal cannot make calls without bound.
pub const DEFAULT_REQUESTS_PER_SECOND: f64 = 100.0;

fn default_requests_per_second() -> f64 {
    DEFAULT_REQUESTS_PER_SECOND
}

fn default_requests_in_flight() -> usize {
    64
}

fn default_connections_per_principal() -> usize {
    64
}

fn default_task_ttl() -> u64 {
    super::tasks::DEFAULT_TASK_TTL_SECS
}

fn default_tools_list_ttl() -> u64 {
    60
}

fn default_open_tasks() -> u32 {
    32
}

fn default_task_bytes() -> u64 {
    8 << 20
}

fn default_session_idle() -> u64 {
    1_800
}

fn default_stream_lifetime() -> u64 {
    300
}

/// The longest `stream_lifetime_secs` and `session_idle_secs` accepted (a day).
pub const MAX_STREAM_LIFETIME_SECS: u64 = 86_400;

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            principal: default_principal(),
            tenant: default_tenant(),
            allowed_hosts: default_hosts(),
            allowed_origins: Vec::new(),
            tokens: Vec::new(),
            stream_lifetime_secs: default_stream_lifetime(),
            session_idle_secs: default_session_idle(),
            task_ttl_secs: default_task_ttl(),
            tools_list_ttl_secs: default_tools_list_ttl(),
            open_tasks_per_caller: default_open_tasks(),
            task_bytes_per_caller: default_task_bytes(),
            oauth: None,
            requests_per_second: default_requests_per_second(),
            request_burst: None,
            requests_in_flight: default_requests_in_flight(),
            connections_per_principal: default_connections_per_principal(),
            console: None,
        }
    }
}

/// One accepted bearer token, stored as its hash.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Hex SHA-256 of the token (`printf %s "$TOKEN" | sha256sum`).
    pub sha256: TokenHash,
    pub principal: String,
    #[serde(default = "default_tenant")]
    pub tenant: String,
}

/// A validated token hash: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct TokenHash([u8; 32]);

impl TryFrom<String> for TokenHash {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let mut out = [0u8; 32];
        match hex::decode_to_slice(s.trim().to_ascii_lowercase(), &mut out) {
            Ok(()) => Ok(TokenHash(out)),
            Err(_) => Err(
                "a token's sha256 must be 64 hex digits: the SHA-256 of the token \
                 (printf %s \"$TOKEN\" | sha256sum), never the token itself"
                    .to_string(),
            ),
        }
    }
}

impl TokenHash {
    /// The hash of a presented token.
    pub fn of(token: &str) -> TokenHash {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// Compare in constant time (no early exit on the first differing byte).
    pub fn matches(&self, other: &TokenHash) -> bool {
        use subtle::ConstantTimeEq;
        self.0.ct_eq(&other.0).into()
    }
}

impl ServeConfig {
    /// What one caller may hold in open MCP tasks.
    pub fn task_caps(&self) -> toolhost_runtime::tasks::TaskCaps {
        toolhost_runtime::tasks::TaskCaps {
            open: self.open_tasks_per_caller,
            bytes: self.task_bytes_per_caller,
        }
    }

    /// Every problem of the `[serve]` section: an identity must name someone, the `Host`
    /// allowlist must admit something, and an origin must be `scheme://host[:port]`.
    pub fn validate(&self, problems: &mut Vec<ConfigProblem>) {
        let mut bad = |key: String, message: &str| problems.push(ConfigProblem::new(key, message));
        let empty = "is empty; name who these calls act as (the ledger and policy use it)";
        if self.principal.trim().is_empty() {
            bad("serve.principal".into(), empty);
        }
        if self.tenant.trim().is_empty() {
            bad("serve.tenant".into(), empty);
        }
        if self.allowed_hosts.is_empty() {
            bad(
                "serve.allowed_hosts".into(),
                "is empty, so HTTP would answer 403 to every request; leave it out for the \
                 loopback names, or list the Host values clients use",
            );
        }
        for (i, h) in self.allowed_hosts.iter().enumerate() {
            if !valid_host(h) {
                bad(
                    format!("serve.allowed_hosts[{i}]"),
                    "is not a host or host:port (like \"localhost\" or \"example.com:8080\")",
                );
            }
        }
        for (i, o) in self.allowed_origins.iter().enumerate() {
            if !valid_origin(o) {
                bad(
                    format!("serve.allowed_origins[{i}]"),
                    "is not an origin; write scheme://host[:port] with no path, like \
                     \"https://app.example.com\"",
                );
            }
        }
        if !(1..=MAX_STREAM_LIFETIME_SECS).contains(&self.stream_lifetime_secs) {
            bad(
                "serve.stream_lifetime_secs".into(),
                "must be from 1 to 86400 seconds: an event stream that never ends holds a \
                 connection for ever",
            );
        }
        if !(1..=MAX_STREAM_LIFETIME_SECS).contains(&self.session_idle_secs) {
            bad(
                "serve.session_idle_secs".into(),
                "must be from 1 to 86400 seconds: a session that never expires holds its run \
                 for ever",
            );
        }
        if !(1..=MAX_STREAM_LIFETIME_SECS).contains(&self.task_ttl_secs) {
            bad(
                "serve.task_ttl_secs".into(),
                "must be from 1 to 86400 seconds: a task is kept that long, then pruned",
            );
        }
        if self.tools_list_ttl_secs > MAX_STREAM_LIFETIME_SECS {
            bad(
                "serve.tools_list_ttl_secs".into(),
                "must be from 0 to 86400 seconds: a 2026-07-28 client may keep a tools/list \
                 that long, and sees a reload no sooner",
            );
        }
        if !(1..=10_000).contains(&self.open_tasks_per_caller) {
            bad(
                "serve.open_tasks_per_caller".into(),
                "must be from 1 to 10000: each open task holds a ledger row and may hold a run",
            );
        }
        if !(1024..=1 << 30).contains(&self.task_bytes_per_caller) {
            bad(
                "serve.task_bytes_per_caller".into(),
                "must be from 1024 to 1073741824 bytes (the arguments a caller's open tasks \
                 may hold together)",
            );
        }
        for (i, t) in self.tokens.iter().enumerate() {
            if t.principal.trim().is_empty() {
                bad(format!("serve.token[{i}].principal"), empty);
            }
            if t.tenant.trim().is_empty() {
                bad(format!("serve.token[{i}].tenant"), empty);
            }
        }
        if !(self.requests_per_second.is_finite() && self.requests_per_second > 0.0) {
            problems.push(ConfigProblem::new(
                "serve.requests_per_second",
                "must be a positive number of requests per second (each principal's rate at the HTTP door)",
            ));
        }
        if self.request_burst == Some(0) {
            problems.push(ConfigProblem::new(
                "serve.request_burst",
                "is 0, so no request could pass; give at least 1",
            ));
        }
        if !(1..=192).contains(&self.requests_in_flight) {
            problems.push(ConfigProblem::new(
                "serve.requests_in_flight",
                "must be from 1 to 192 (the host serves at most 192 authenticated requests at once)",
            ));
        }
        if !(1..=192).contains(&self.connections_per_principal) {
            problems.push(ConfigProblem::new(
                "serve.connections_per_principal",
                "must be from 1 to 192 (the host holds at most 192 authenticated connections at once)",
            ));
        }
        if let Some(c) = &self.console {
            c.validate(&self.tokens, problems);
        }
        if let Some(o) = &self.oauth {
            o.validate(problems);
            // A static identity in the issuer's namespace could be impersonated by a token.
            let clash = "starts with serve.oauth.principal_prefix, so an access token could \
                         name it; rename it or change the prefix";
            let taken =
                |p: &str| !o.principal_prefix.is_empty() && p.starts_with(&o.principal_prefix);
            if taken(&self.principal) {
                problems.push(ConfigProblem::new("serve.principal", clash));
            }
            for (i, t) in self.tokens.iter().enumerate() {
                if taken(&t.principal) {
                    let key = format!("serve.token[{i}].principal");
                    problems.push(ConfigProblem::new(key, clash));
                }
            }
        }
    }

    /// The identity of stdio (and tokenless HTTP) sessions.
    pub fn local_identity(&self) -> Caller {
        Caller::new(self.principal.clone(), self.tenant.clone())
    }

    /// The identity a bearer token stands for, if any configured token matches.
    pub fn identify(&self, token: &str) -> Option<Caller> {
        let presented = TokenHash::of(token);
        let mut found = None;
        // Look at every entry so the time taken does not say which one matched.
        for t in &self.tokens {
            if t.sha256.matches(&presented) && found.is_none() {
                let (principal, tenant) = (t.principal.clone(), t.tenant.clone());
                found = Some(Caller::with_origin(principal, tenant, Origin::Token));
            }
        }
        found
    }
}

/// A `Host` header value: a name, an IPv4 address or a bracketless IPv6 address, optionally with
/// a port (IPv6 then in brackets).
fn valid_host(h: &str) -> bool {
    if h.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let (host, port) = match h.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.starts_with('[') => (host, Some(port)),
        _ => (h, None),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host_ok = host.parse::<std::net::IpAddr>().is_ok()
        || (!host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            }));
    host_ok && port.is_none_or(|p| p.parse::<u16>().is_ok())
}

/// An origin: `http` or `https`, `://`, a valid host, an optional port, nothing after.
pub(crate) fn valid_origin(o: &str) -> bool {
    let Some((scheme, rest)) = o.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && !rest.contains('/') && valid_host(rest)
}

fn default_principal() -> String {
    "local".to_string()
}

fn default_tenant() -> String {
    "default".to_string()
}

fn default_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token is recognised by its hash only, and a wrong token by nothing.
    #[test]
    fn tokens_match_by_hash() {
        let cfg: ServeConfig = toml::from_str(&format!(
            "[[token]]\nsha256 = \"{}\"\nprincipal = \"alice\"\ntenant = \"acme\"\n",
            hex::encode(Sha256::digest(b"s3cret"))
        ))
        .unwrap();
        assert_eq!(
            cfg.identify("s3cret"),
            Some(Caller::with_origin("alice", "acme", Origin::Token))
        );
        assert_eq!(cfg.identify("s3cre"), None);
        assert_eq!(cfg.identify(""), None);
    }

    /// Every bad key of `[serve]` is reported, each by its path.
    #[test]
    fn every_serve_problem_is_reported() {
        let cfg: ServeConfig = toml::from_str(
            "principal = \"\"\nallowed_hosts = []\nallowed_origins = [\"not a url\", \"https://ok.example\", \"http://a/b\"]\n",
        )
        .unwrap();
        let mut p = Vec::new();
        cfg.validate(&mut p);
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "serve.principal",
                "serve.allowed_hosts",
                "serve.allowed_origins[0]",
                "serve.allowed_origins[2]"
            ]
        );
        let mut p = Vec::new();
        ServeConfig::default().validate(&mut p);
        assert!(p.is_empty(), "{p:?}");
        for ok in [
            "localhost",
            "127.0.0.1:8080",
            "::1",
            "[::1]:80",
            "mcp.example.com",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in ["", "a b", "host:port", "http://x"] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    /// A raw token where a hash belongs is refused with a message that says what to store.
    #[test]
    fn raw_token_is_refused() {
        let err =
            toml::from_str::<ServeConfig>("[[token]]\nsha256 = \"s3cret\"\nprincipal = \"a\"\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("64 hex digits"), "{err}");
    }
}
