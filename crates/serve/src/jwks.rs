//! The issuer's JSON Web Key Set: fetched (or read from a file) at start, and fetched again when
//! a token names a key it does not hold — at most once per refetch interval (default
//! [`MIN_REFETCH`]), so a flood of forged `kid`s costs the issuer one request per interval, not
//! one per token, and a key the issuer rotated in is found within one interval.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};

/// Shortest time between two loads of the key set, unless the config says otherwise.
pub const MIN_REFETCH: Duration = Duration::from_secs(60);
/// Largest key set accepted (bytes): a key set is a few keys.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the key set comes from.
#[derive(Debug, Clone)]
pub enum JwksSource {
    Url(String),
    File(PathBuf),
}

impl JwksSource {
    /// An `https://` URL, an `http://` URL to a loopback address (a local issuer), or a file
    /// relative to `base_dir`.
    pub fn parse(s: &str, base_dir: &Path) -> Result<Self, String> {
        if s.starts_with("https://") {
            return Ok(JwksSource::Url(s.to_string()));
        }
        if let Some(rest) = s.strip_prefix("http://") {
            let host = match rest.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or_default(),
                None => rest.split(['/', ':']).next().unwrap_or_default(),
            };
            let loopback = host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                return Err(format!(
                    "serve.oauth.jwks {s:?} is plain http to another machine; use https"
                ));
            }
            return Ok(JwksSource::Url(s.to_string()));
        }
        Ok(JwksSource::File(base_dir.join(s)))
    }

    async fn read(&self) -> Result<JwkSet, String> {
        let bytes = match self {
            JwksSource::File(p) => {
                let b = std::fs::read(p)
                    .map_err(|e| format!("cannot read the JWKS file {}: {e}", p.display()))?;
                if b.len() > MAX_JWKS_BYTES {
                    return Err(format!("the JWKS file {} is too large", p.display()));
                }
                b
            }
            JwksSource::Url(u) => fetch(u).await?,
        };
        serde_json::from_slice(&bytes).map_err(|e| format!("the JWKS is not a key set: {e}"))
    }
}

async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot fetch the JWKS: {e}"))?;
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot fetch the JWKS from {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the JWKS at {url} answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("cannot read the JWKS from {url}: {e}"))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_JWKS_BYTES {
            return Err(format!("the JWKS at {url} is too large"));
        }
    }
    Ok(body)
}

/// The key set and when it was last loaded.
pub struct Jwks {
    source: JwksSource,
    refetch: Duration,
    set: std::sync::RwLock<JwkSet>,
    /// When the set was last loaded; held while a load runs, so loads never overlap.
    loaded: tokio::sync::Mutex<Instant>,
}

impl Jwks {
    /// Load the key set now; load it again on an unknown `kid` at most once per `refetch`.
    pub async fn load(source: JwksSource, refetch: Duration) -> Result<Self, String> {
        let set = source.read().await?;
        Ok(Jwks {
            source,
            refetch,
            set: std::sync::RwLock::new(set),
            loaded: tokio::sync::Mutex::new(Instant::now()),
        })
    }

    fn pick(&self, kid: Option<&str>) -> Option<Jwk> {
        let set = self.set.read().unwrap_or_else(|e| e.into_inner());
        pick(&set, kid)
    }

    /// The key named `kid` (or the only key, for a token without one). An unknown `kid` loads
    /// the set again when the last load is one refetch interval old; lookups of known keys never
    /// wait for a load, and concurrent unknown ones wait for the one load in progress.
    pub async fn find(&self, kid: Option<&str>) -> Option<Jwk> {
        if let Some(k) = self.pick(kid) {
            return Some(k);
        }
        kid?;
        let mut loaded = self.loaded.lock().await;
        if let Some(k) = self.pick(kid) {
            return Some(k);
        }
        if loaded.elapsed() < self.refetch {
            return None;
        }
        *loaded = Instant::now();
        if let Ok(set) = self.source.read().await {
            *self.set.write().unwrap_or_else(|e| e.into_inner()) = set;
        }
        self.pick(kid)
    }
}

/// The key with this `kid`, or the only key when the token names none.
fn pick(set: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// https anywhere, plain http only to loopback, anything else is a file.
    #[test]
    fn sources() {
        let base = Path::new("/cfg");
        assert!(matches!(
            JwksSource::parse("https://id.example/jwks", base),
            Ok(JwksSource::Url(_))
        ));
        assert!(matches!(
            JwksSource::parse("http://127.0.0.1:8080/jwks", base),
            Ok(JwksSource::Url(_))
        ));
        assert!(matches!(
            JwksSource::parse("http://[::1]:8080/jwks", base),
            Ok(JwksSource::Url(_))
        ));
        assert!(JwksSource::parse("http://id.example/jwks", base).is_err());
        match JwksSource::parse("keys/jwks.json", base) {
            Ok(JwksSource::File(p)) => assert_eq!(p, Path::new("/cfg/keys/jwks.json")),
            other => panic!("{other:?}"),
        }
    }
}
