//! What a console request must show before its form is read: a `Host` of the allowlist,
//! and for a post its own page's `Origin`; then the form itself, bounded.

use std::collections::HashMap;
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST, ORIGIN};
use hyper::{Request, StatusCode};

/// Largest form accepted: a sign-in or a decision is a few hundred bytes.
pub const MAX_FORM_BYTES: usize = 4096;

/// Time a client gets to send a form once its headers are in.
pub const FORM_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The request's `Host`, if the allowlist admits it: an entry without a port admits the
/// name on any port, one with a port that port only.
pub fn allowed_host(req: &Request<Incoming>, allowed: &[String]) -> Option<String> {
    let host = req.headers().get(HOST)?.to_str().ok()?.trim();
    let (name, port) = split_host(host);
    allowed
        .iter()
        .any(|a| {
            let (an, ap) = split_host(a.trim());
            an.eq_ignore_ascii_case(name) && (ap.is_none() || ap == port)
        })
        .then(|| host.to_owned())
}

/// A `Host` value's name and port: `[::1]:8080` → (`::1`, `8080`), `localhost` →
/// (`localhost`, none), a bare IPv6 address → itself, no port.
fn split_host(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (name, after.strip_prefix(':'));
    }
    match host.split_once(':') {
        Some((name, port)) if !port.contains(':') => (name, Some(port)),
        _ => (host, None),
    }
}

/// Whether a post comes from a page of this very origin: `Origin` is `http(s)://` + the
/// request's `Host`, and `Sec-Fetch-Site`, when the browser sends it, is `same-origin`. A
/// post with no `Origin` is refused: every browser that runs the console sends one.
pub fn same_origin(req: &Request<Incoming>, host: &str) -> Result<(), &'static str> {
    let origin = req
        .headers()
        .get(ORIGIN)
        .and_then(|o| o.to_str().ok())
        .ok_or("a form post must carry its page's Origin")?;
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    if own != Some(host) {
        return Err("this form was posted from another origin");
    }
    let site = req
        .headers()
        .get("sec-fetch-site")
        .and_then(|s| s.to_str().ok());
    if site.is_some_and(|s| s != "same-origin") {
        return Err("this form was posted from another site");
    }
    Ok(())
}

/// Why a form could not be read: the status and what to say.
pub struct Unread(pub StatusCode, pub &'static str);

/// The fields of a form post (`application/x-www-form-urlencoded`, at most
/// [`MAX_FORM_BYTES`], within [`FORM_READ_TIMEOUT`]).
pub async fn read(req: Request<Incoming>) -> Result<HashMap<String, String>, Unread> {
    let form_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| {
            t.split(';').next().is_some_and(|m| {
                m.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        });
    if !form_type {
        return Err(Unread(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a form post is application/x-www-form-urlencoded",
        ));
    }
    let body = Limited::new(req.into_body(), MAX_FORM_BYTES);
    let bytes = match tokio::time::timeout(FORM_READ_TIMEOUT, body.collect()).await {
        Err(_) => {
            return Err(Unread(
                StatusCode::REQUEST_TIMEOUT,
                "the form came too slowly",
            ))
        }
        Ok(Err(_)) => {
            return Err(Unread(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the form is too large",
            ))
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    Ok(fields(&bytes))
}

/// The fields of a query string or form body; of a repeated name, the first.
pub fn fields(encoded: &[u8]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(encoded) {
        out.entry(k.into_owned()).or_insert_with(|| v.into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port is split from a name and from a bracketed IPv6 address, never from a bare one.
    #[test]
    fn ports_are_split() {
        assert_eq!(split_host("localhost:8080"), ("localhost", Some("8080")));
        assert_eq!(split_host("localhost"), ("localhost", None));
        assert_eq!(split_host("[::1]:8080"), ("::1", Some("8080")));
        assert_eq!(split_host("[::1]"), ("::1", None));
        assert_eq!(split_host("::1"), ("::1", None));
        assert_eq!(split_host("127.0.0.1:1"), ("127.0.0.1", Some("1")));
    }

    /// A form's fields are decoded; of a repeated name the first counts.
    #[test]
    fn fields_are_decoded() {
        let f = fields(b"a=1%2B1&b=x+y&a=2");
        assert_eq!(f["a"], "1+1");
        assert_eq!(f["b"], "x y");
    }
}
