//! `serve --http` as an OAuth 2.1 resource server (MCP authorization, RFC 9728): access tokens
//! are JWTs from the team's issuer, checked against its JWKS; the principal and tenant come
//! from configured claims. Static bearer tokens (`[[serve.token]]`) keep working beside it.
//!
//! ```toml
//! [serve.oauth]
//! issuer = "https://id.example.com"                 # `iss`, compared exactly
//! audience = "https://mcp.example.com/mcp"          # `aud`, exactly; this server's resource id
//! jwks = "https://id.example.com/.well-known/jwks.json"   # or a file (relative to the config)
//! principal_claim = "sub"                           # default
//! principal_prefix = "oauth:"                       # default: `sub` alice is oauth:alice
//! tenant_claim = "org"                              # default: every caller's tenant is "default"
//! ```
//!
//! A token passes only with: an asymmetric algorithm of [`ALGORITHMS`] (`none` and HMAC never,
//! so a token signed with the public key as an HMAC secret fails); a `kid` of the JWKS (one
//! unknown `kid` refetches the JWKS at most once per `jwks_refetch_secs`, default 60); a valid
//! signature; `exp` and `iss` and `aud` present and exact, `exp`/`nbf` within [`LEEWAY_SECS`];
//! an `iat`, if present, a number no later than now (within the same leeway);
//! and a principal claim that is a non-empty string. Every refusal is a 401 whose
//! `WWW-Authenticate` names the metadata document; the token itself never reaches a tool.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::jwks::{Jwks, JwksSource};
use toolhost_contract::ConfigProblem;
use toolhost_contract::{Caller, Origin};

/// The signature algorithms a token may use: asymmetric only.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Seconds of clock skew allowed on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;

/// Longest principal or tenant taken from a claim (the ledger's bound).
const MAX_CLAIM_BYTES: usize = toolhost_contract::bounds::MAX_SUBJECT_BYTES;

/// Where the metadata document is served (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The `[serve.oauth]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The issuer's identifier, compared exactly with a token's `iss`.
    pub issuer: String,
    /// This server's resource identifier (its MCP endpoint URL), compared exactly with `aud`.
    pub audience: String,
    /// The issuer's JWKS: an `https://` URL (or `http://` to a loopback address), or a file.
    pub jwks: String,
    /// The claim that names the principal. Default `sub`.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// What every principal from this issuer starts with (the claim follows it), so that no
    /// token of the issuer can name a principal of a static token or of stdio: a static one
    /// that starts with it is refused at load. Default `oauth:` (`sub = "alice"` is principal
    /// `oauth:alice` in policies, runs and `{principal}` directories).
    #[serde(default = "default_principal_prefix")]
    pub principal_prefix: String,
    /// The claim that names the tenant; without it every caller's tenant is `default`.
    #[serde(default)]
    pub tenant_claim: Option<String>,
    /// Scopes a call needs, each with the tools (names or globs) it covers: a token without
    /// the scope of a tool gets 403 `insufficient_scope` for a call of it. Default: none.
    #[serde(default)]
    pub scopes: std::collections::BTreeMap<String, Vec<String>>,
    /// Seconds between two loads of the JWKS when tokens name a key it lacks (a rotated-in key
    /// is found after at most this long). From 1 to 86400; default 60.
    #[serde(default = "default_refetch")]
    pub jwks_refetch_secs: u64,
}

fn default_refetch() -> u64 {
    super::jwks::MIN_REFETCH.as_secs()
}

fn default_principal_prefix() -> String {
    "oauth:".into()
}

fn default_principal_claim() -> String {
    "sub".into()
}

impl OAuthConfig {
    /// Every problem of the section: an issuer and an audience that are URLs, a JWKS source.
    pub fn validate(&self, problems: &mut Vec<ConfigProblem>) {
        let mut bad = |key: &str, message: &str| {
            problems.push(ConfigProblem::new(format!("serve.oauth.{key}"), message))
        };
        if !is_url(&self.issuer) {
            bad(
                "issuer",
                "is not an http(s):// URL; write the issuer identifier its tokens carry in `iss`",
            );
        }
        if origin_of(&self.audience).is_none() {
            bad("audience", "is not an http(s):// URL; write this server's MCP endpoint URL, which tokens carry in `aud`");
        }
        if self.jwks.trim().is_empty() {
            bad(
                "jwks",
                "is empty; name the issuer's JWKS URL or a file that holds it",
            );
        }
        for (scope, tools) in &self.scopes {
            let token_chars = !scope.is_empty()
                && scope
                    .bytes()
                    .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
            if !token_chars {
                bad("scopes", "has a scope that is not a scope token (visible ASCII without spaces, `\"` or `\\`)");
            }
            if let Err(e) = tool_globs(tools) {
                bad("scopes", &e);
            }
        }
        if !(1..=86_400).contains(&self.jwks_refetch_secs) {
            bad("jwks_refetch_secs", "must be from 1 to 86400 seconds");
        }
        if self.principal_prefix.trim().is_empty() || self.principal_prefix.len() > 64 {
            bad(
                "principal_prefix",
                "must be 1 to 64 characters: it keeps the issuer's principals apart from the \
                 static ones (default \"oauth:\")",
            );
        }
        if self.principal_claim.trim().is_empty() {
            bad(
                "principal_claim",
                "is empty; name the claim that holds the principal (e.g. \"sub\")",
            );
        }
    }

    /// The URL of this server's metadata document: the audience's origin and
    /// [`METADATA_PATH`].
    pub fn metadata_url(&self) -> String {
        format!(
            "{}{METADATA_PATH}",
            origin_of(&self.audience).unwrap_or_default()
        )
    }
}

/// Tool names or globs as one matcher.
fn tool_globs(tools: &[String]) -> Result<globset::GlobSet, String> {
    let mut set = globset::GlobSetBuilder::new();
    for t in tools {
        set.add(globset::Glob::new(t).map_err(|e| format!("serve.oauth.scopes: {t:?}: {e}"))?);
    }
    set.build().map_err(|e| format!("serve.oauth.scopes: {e}"))
}

fn is_url(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("http://")
}

/// `scheme://authority` of a URL.
fn origin_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let end = rest.find('/').unwrap_or(rest.len());
    (end > 0).then(|| &url[..url.len() - rest.len() + end])
}

/// Whether a token's `iat` (optional) is a time no later than now, within [`LEEWAY_SECS`]: a
/// token issued in the future, or with an `iat` that is not a number, was not issued by an
/// issuer with a sane clock and is refused.
fn issued_in_the_past(iat: Option<&Value>) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match iat {
        None => true,
        Some(v) => v
            .as_f64()
            .is_some_and(|at| at.is_finite() && at <= now.saturating_add(LEEWAY_SECS) as f64),
    }
}

/// Why a token was refused (said in `error_description`; never the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a JWT")]
    Malformed,
    #[error("the token's algorithm is not accepted")]
    Algorithm,
    #[error("the token's key is not in the issuer's key set")]
    UnknownKey,
    #[error("the token is expired, not yet valid, for another issuer or audience, or its signature does not verify")]
    Invalid,
    #[error("the token does not name a principal")]
    NoPrincipal,
}

/// The resource server: its settings and the issuer's keys.
pub struct ResourceServer {
    config: OAuthConfig,
    keys: Jwks,
    /// Each scope and the tools it covers.
    scopes: Vec<(String, globset::GlobSet)>,
}

impl ResourceServer {
    /// Load the JWKS (fetched or read now; a server that cannot get it does not start).
    pub async fn start(config: &OAuthConfig, base_dir: &Path) -> Result<Self, String> {
        let source = JwksSource::parse(&config.jwks, base_dir)?;
        let refetch = std::time::Duration::from_secs(config.jwks_refetch_secs);
        let keys = Jwks::load(source, refetch).await?;
        let scopes = config
            .scopes
            .iter()
            .map(|(scope, tools)| Ok((scope.clone(), tool_globs(tools)?)))
            .collect::<Result<_, String>>()?;
        Ok(ResourceServer {
            config: config.clone(),
            keys,
            scopes,
        })
    }

    /// The scope a call of `tool` needs, if any (the first, in name order, that covers it).
    pub fn scope_for(&self, tool: &str) -> Option<&str> {
        self.scopes
            .iter()
            .find(|(_, tools)| tools.is_match(tool))
            .map(|(scope, _)| scope.as_str())
    }

    /// The `WWW-Authenticate` value of a 403 for a missing scope (RFC 6750 §3.1).
    pub fn insufficient_scope(&self, scope: &str) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\"",
            self.config.metadata_url()
        )
    }

    /// The identity a valid access token stands for, and the scopes it grants (`scope`, space
    /// separated, or `scp`, a list).
    pub async fn authenticate(&self, token: &str) -> Result<(Caller, Vec<String>), TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenError::Algorithm);
        }
        let jwk = self
            .keys
            .find(header.kid.as_deref())
            .await
            .ok_or(TokenError::UnknownKey)?;
        if jwk
            .common
            .key_algorithm
            .is_some_and(|a| a.to_string() != format!("{:?}", header.alg))
        {
            return Err(TokenError::Algorithm);
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| TokenError::UnknownKey)?;
        let mut v = Validation::new(header.alg);
        v.algorithms = vec![header.alg];
        v.leeway = LEEWAY_SECS;
        v.validate_nbf = true;
        v.set_issuer(&[&self.config.issuer]);
        v.set_audience(&[&self.config.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &v)
            .map_err(|_| TokenError::Invalid)?
            .claims;
        if !issued_in_the_past(claims.get("iat")) {
            return Err(TokenError::Invalid);
        }
        let claim = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty() && s.len() <= MAX_CLAIM_BYTES)
                .map(str::to_string)
        };
        // The bound is the principal's, prefix included: one past it could call nothing.
        let principal = claim(&self.config.principal_claim)
            .map(|sub| format!("{}{sub}", self.config.principal_prefix))
            .filter(|p| p.len() <= MAX_CLAIM_BYTES)
            .ok_or(TokenError::NoPrincipal)?;
        let tenant = match &self.config.tenant_claim {
            Some(c) => claim(c).ok_or(TokenError::NoPrincipal)?,
            None => "default".to_string(),
        };
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split_whitespace().map(str::to_string).collect(),
            (_, Some(Value::Array(a))) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        let origin = Origin::OAuth {
            issuer: self.config.issuer.clone(),
        };
        Ok((Caller::with_origin(principal, tenant, origin), scopes))
    }

    /// The `WWW-Authenticate` value of a 401: the metadata URL, and why a presented token was
    /// refused.
    pub fn challenge(&self, refused: Option<&TokenError>) -> String {
        let url = self.config.metadata_url();
        match refused {
            None => format!("Bearer resource_metadata=\"{url}\""),
            Some(e) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{e}\", resource_metadata=\"{url}\""
            ),
        }
    }

    /// The Protected Resource Metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": self.config.scopes.keys().collect::<Vec<_>>(),
            "resource_signing_alg_values_supported": ALGORITHMS
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata URL sits at the audience's origin.
    #[test]
    fn metadata_url_from_the_audience() {
        let c = OAuthConfig {
            issuer: "https://id.example.com".into(),
            audience: "https://mcp.example.com:8443/mcp".into(),
            jwks: "jwks.json".into(),
            principal_claim: "sub".into(),
            principal_prefix: "oauth:".into(),
            tenant_claim: None,
            scopes: Default::default(),
            jwks_refetch_secs: 60,
        };
        assert_eq!(
            c.metadata_url(),
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource"
        );
        let mut problems = Vec::new();
        c.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let bad = OAuthConfig {
            audience: "mcp".into(),
            ..c
        };
        bad.validate(&mut problems);
        assert_eq!(problems.len(), 1);
    }
}
