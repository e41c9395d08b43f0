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
//!
//! [[serve.token]]
//! sha256 = "9f86d0…"                  # hex SHA-256 of the bearer token, never the token
//! principal = "alice"
//! tenant = "acme"
//! ```

use serde::Deserialize;
use sha2::{Digest, Sha256};

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
    /// Browser origins (scheme://host[:port]) allowed to call. Besides them, only the server's
    /// own origin on a loopback bind passes (`http::own_origins`); empty (the default): any
    /// other `Origin` header is refused.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Bearer tokens HTTP accepts, each bound to an identity. With none, HTTP binds loopback only.
    #[serde(default, rename = "token")]
    pub tokens: Vec<TokenConfig>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            principal: default_principal(),
            tenant: default_tenant(),
            allowed_hosts: default_hosts(),
            allowed_origins: Vec::new(),
            tokens: Vec::new(),
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

    /// Compare without an early exit on the first differing byte.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// Who a session acts as: from the config (stdio) or from the bearer token (HTTP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub principal: String,
    pub tenant: String,
}

impl ServeConfig {
    /// The identity of stdio (and tokenless HTTP) sessions.
    pub fn local_identity(&self) -> Identity {
        Identity {
            principal: self.principal.clone(),
            tenant: self.tenant.clone(),
        }
    }

    /// The identity a bearer token stands for, if any configured token matches.
    pub fn identify(&self, token: &str) -> Option<Identity> {
        let presented = TokenHash::of(token);
        let mut found = None;
        // Look at every entry so the time taken does not say which one matched.
        for t in &self.tokens {
            if t.sha256.matches(&presented) && found.is_none() {
                found = Some(Identity {
                    principal: t.principal.clone(),
                    tenant: t.tenant.clone(),
                });
            }
        }
        found
    }
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
            Some(Identity {
                principal: "alice".into(),
                tenant: "acme".into()
            })
        );
        assert_eq!(cfg.identify("s3cre"), None);
        assert_eq!(cfg.identify(""), None);
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
