//! One registry's HTTP session: requests with the registry's credentials (basic, or a bearer
//! token fetched on its challenge), redirects followed only to the registry's own host or the
//! hosts the operator named, and bodies read under a cap.
//!
//! Redirects are followed by hand (`reqwest`'s own policy is off) so that each refusal is a
//! named error and a credential never leaves for another host.

use base64::Engine as _;
use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE,
};
use reqwest::{Method, StatusCode, Url};

use super::config::{OciConfig, MAX_REDIRECTS};
use super::error::OciError;
use super::reference::is_loopback_host;

/// The largest token answer read: a token is a few KiB.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;

/// A user name and a password (or token) for one registry.
#[derive(Clone)]
pub(crate) struct Credentials {
    pub user: String,
    pub password: String,
}

/// The user only: a password never reaches a log or a message.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Requests to one registry.
pub(crate) struct Session {
    http: reqwest::Client,
    /// `host[:port]`, as the reference writes it.
    pub registry: String,
    base: Url,
    credentials: Option<Credentials>,
    redirect_hosts: Vec<String>,
    /// The `Authorization` value once a challenge was answered.
    auth: Option<HeaderValue>,
}

/// What a request sends beyond its method and URL.
pub(crate) struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Session {
    pub fn new(
        config: &OciConfig,
        registry: &str,
        credentials: Option<Credentials>,
    ) -> Result<Session, OciError> {
        let r = config.registry(registry);
        let scheme = if r.insecure && is_loopback_host(registry) {
            "http"
        } else {
            "https"
        };
        let base =
            Url::parse(&format!("{scheme}://{registry}/")).map_err(|e| OciError::Unreachable {
                registry: registry.to_string(),
                message: format!("not a host: {e}"),
            })?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.timeout())
            .build()
            .map_err(|e| OciError::Unreachable {
                registry: registry.to_string(),
                message: e.to_string(),
            })?;
        Ok(Session {
            http,
            registry: registry.to_string(),
            base,
            credentials,
            redirect_hosts: r.redirect_hosts,
            auth: None,
        })
    }

    /// `/v2/<path>` on the registry.
    pub fn url(&self, path: &str) -> Url {
        self.base
            .join(&format!("v2/{path}"))
            .expect("a path under the registry's base")
    }

    /// Send a request, answering an authentication challenge once and following redirects
    /// (GET only) as the operator allows; `what` names the object in errors.
    pub async fn send(
        &mut self,
        method: Method,
        url: Url,
        accept: Option<&str>,
        body: Option<&Body>,
        what: &str,
    ) -> Result<reqwest::Response, OciError> {
        let mut url = url;
        let mut challenged = false;
        for _ in 0..=MAX_REDIRECTS {
            let own_host = host_port(&url) == host_port(&self.base);
            let mut headers = HeaderMap::new();
            if let Some(a) = accept {
                headers.insert(ACCEPT, HeaderValue::from_str(a).expect("a media type"));
            }
            if own_host {
                if let Some(auth) = &self.auth {
                    headers.insert(AUTHORIZATION, auth.clone());
                }
            }
            let mut req = self
                .http
                .request(method.clone(), url.clone())
                .headers(headers);
            if let Some(b) = body {
                req = req
                    .header(CONTENT_TYPE, b.content_type)
                    .body(b.bytes.clone());
            }
            let resp = req.send().await.map_err(|e| self.transport(e))?;
            let status = resp.status();
            if status == StatusCode::UNAUTHORIZED && own_host && !challenged {
                challenged = true;
                let challenge = resp
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                self.answer(&challenge).await?;
                continue;
            }
            if status.is_redirection() && method == Method::GET {
                url = self.follow(&url, &resp, what)?;
                continue;
            }
            return match status {
                s if s.is_success() => Ok(resp),
                StatusCode::NOT_FOUND => Err(OciError::NotFound {
                    registry: self.registry.clone(),
                    what: what.to_string(),
                }),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(OciError::Unauthorized {
                    registry: self.registry.clone(),
                    status: status.as_u16(),
                }),
                s => Err(OciError::Status {
                    registry: self.registry.clone(),
                    what: what.to_string(),
                    status: s.as_u16(),
                }),
            };
        }
        Err(OciError::Redirect {
            registry: self.registry.clone(),
            what: what.to_string(),
            to: url.to_string(),
            why: "after too many redirects",
        })
    }

    /// Where a redirect leads, if the operator allows it.
    fn follow(&self, from: &Url, resp: &reqwest::Response, what: &str) -> Result<Url, OciError> {
        let refuse = |to: String, why| OciError::Redirect {
            registry: self.registry.clone(),
            what: what.to_string(),
            to,
            why,
        };
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| refuse("nowhere".into(), "without a Location"))?;
        let to = from
            .join(location)
            .map_err(|_| refuse(location.chars().take(200).collect(), "which is not a URL"))?;
        let host = to.host_str().unwrap_or("").to_string();
        if to.scheme() != "https" && !(to.scheme() == "http" && self.base.scheme() == "http") {
            return Err(refuse(host, "which is not HTTPS"));
        }
        let allowed = host_port(&to) == host_port(&self.base)
            || self
                .redirect_hosts
                .iter()
                .any(|h| h == &host || *h == host_port(&to));
        if !allowed {
            return Err(refuse(
                host,
                "another host; allow it with `redirect_hosts` in this registry's \
                 `[oci.registries]` entry if it serves the registry's blobs",
            ));
        }
        Ok(to)
    }

    /// Answer a `WWW-Authenticate` challenge: basic credentials, or a bearer token fetched
    /// from the realm it names.
    async fn answer(&mut self, challenge: &str) -> Result<(), OciError> {
        let unauthorized = || OciError::Unauthorized {
            registry: self.registry.clone(),
            status: 401,
        };
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let basic = self.credentials.as_ref().map(|c| {
            let raw = format!("{}:{}", c.user, c.password);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(raw)
            )
        });
        if scheme.eq_ignore_ascii_case("basic") {
            let b = basic.ok_or_else(unauthorized)?;
            self.auth = Some(HeaderValue::from_str(&b).map_err(|_| unauthorized())?);
            return Ok(());
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(unauthorized());
        }
        let params = challenge_params(params);
        let get = |k: &str| {
            params
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        let mut realm = get("realm")
            .and_then(|r| Url::parse(r).ok())
            .ok_or_else(unauthorized)?;
        let realm_host = host_port(&realm);
        if realm.scheme() != "https" && !(realm.scheme() == "http" && is_loopback_host(&realm_host))
        {
            return Err(OciError::Credentials {
                registry: self.registry.clone(),
                message: format!("the token service {realm_host} is not HTTPS"),
            });
        }
        for key in ["service", "scope"] {
            if let Some(v) = get(key) {
                realm.query_pairs_mut().append_pair(key, v);
            }
        }
        let mut req = self.http.get(realm);
        if let Some(b) = &basic {
            req = req.header(AUTHORIZATION, b);
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        if !resp.status().is_success() {
            return Err(OciError::Unauthorized {
                registry: self.registry.clone(),
                status: resp.status().as_u16(),
            });
        }
        let bytes = read_capped(
            resp,
            MAX_TOKEN_BYTES,
            "the token answer",
            "fixed for a token answer",
        )
        .await?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| unauthorized())?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .ok_or_else(unauthorized)?;
        self.auth =
            Some(HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| unauthorized())?);
        Ok(())
    }

    fn transport(&self, e: reqwest::Error) -> OciError {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message = format!("{message}: {s}");
            source = s.source();
        }
        OciError::Unreachable {
            registry: self.registry.clone(),
            message,
        }
    }
}

/// `host[:port]` of a URL, the port only when it is not the scheme's default.
fn host_port(u: &Url) -> String {
    let host = match u.host() {
        Some(url::Host::Ipv6(a)) => format!("[{a}]"),
        Some(h) => h.to_string(),
        None => String::new(),
    };
    match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

/// The `key="value"` pairs of a challenge (values may hold commas inside their quotes).
fn challenge_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(q) => match q.find('"') {
                Some(end) => (q[..end].to_string(), &q[end + 1..]),
                None => (q.to_string(), ""),
            },
            None => match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            },
        };
        out.push((key, value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// A response's body, refused past `cap` bytes (before reading, when the length is declared).
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    cap: u64,
    what: &str,
    limit: &'static str,
) -> Result<Vec<u8>, OciError> {
    let too_large = || OciError::TooLarge {
        what: what.to_string(),
        cap,
        limit,
    };
    if resp.content_length().is_some_and(|n| n > cap) {
        return Err(too_large());
    }
    let first = resp.content_length().unwrap_or(0).min(cap) as usize;
    let mut out = Vec::with_capacity(first);
    while let Some(chunk) = resp.chunk().await.map_err(|e| OciError::Unreachable {
        registry: resp.url().host_str().unwrap_or("").to_string(),
        message: e.to_string(),
    })? {
        if (out.len() + chunk.len()) as u64 > cap {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Docker Hub style challenge, with a comma inside a quoted scope.
    #[test]
    fn challenges_are_read_into_their_parameters() {
        let p = challenge_params(
            r#"realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            p,
            vec![
                ("realm".into(), "https://auth.example.com/token".into()),
                ("service".into(), "registry.example.com".into()),
                ("scope".into(), "repository:a/b:pull,push".into()),
            ]
        );
    }
}
