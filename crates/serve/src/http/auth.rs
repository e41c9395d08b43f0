//! Who a request is: a static bearer token or an OAuth access token (`serve/oauth.rs`), the
//! 401 and 403 answers that point an OAuth client at the metadata document, and the document.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

use super::{plain, Body, Gate, MCP_PATH};
use crate::oauth::{TokenError, METADATA_PATH};
use toolhost_contract::Caller;

impl Gate {
    /// The identity of a bearer token, and the scopes it grants: a configured static token's
    /// (every scope: `None`), else (with `[serve.oauth]`) a valid access token's.
    /// `Err(Some(_))`: why an access token was refused.
    pub(super) async fn authenticate(
        &self,
        token: Option<&str>,
    ) -> Result<Authenticated, Option<TokenError>> {
        let token = token.ok_or(None)?;
        if let Some(identity) = self.config.identify(token) {
            return Ok((identity, None));
        }
        match &self.oauth {
            Some(o) => o
                .authenticate(token)
                .await
                .map(|(identity, scopes)| (identity, Some(scopes)))
                .map_err(Some),
            None => Err(None),
        }
    }

    /// 403 for a token without the scope a call needs, naming it so a client can step up.
    pub(super) fn forbidden(&self, needed: Option<&str>) -> Response<Body> {
        let mut r = plain(
            StatusCode::FORBIDDEN,
            "the access token lacks the scope this call needs",
        );
        if let (Some(o), Some(scope)) = (&self.oauth, needed) {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&o.insufficient_scope(scope)) {
                r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, v);
            }
        }
        r
    }

    /// 401, with a `WWW-Authenticate` that points an OAuth client at the metadata document.
    pub(super) fn unauthorized(
        &self,
        presented: bool,
        refused: Option<&TokenError>,
    ) -> Response<Body> {
        let mut r = plain(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
        let challenge = match &self.oauth {
            Some(o) => o.challenge(refused.filter(|_| presented)),
            None => "Bearer".to_string(),
        };
        if let Ok(v) = hyper::header::HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

/// An authenticated caller and the scopes its access token grants (`None`: a static token).
pub(super) type Authenticated = (Caller, Option<Vec<String>>);

/// The metadata document's path, or the same with the resource's path appended (RFC 9728 §3.1).
pub(super) fn is_metadata_path(path: &str) -> bool {
    path == METADATA_PATH || path == format!("{METADATA_PATH}{MCP_PATH}")
}

pub(super) fn json_response(v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())).boxed());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// 429 for a caller past its rate or its requests in flight; try again in a second.
pub(super) fn too_many(refused: super::door::Refused) -> Response<Body> {
    let text = match refused {
        super::door::Refused::Rate => "too many requests from this caller; try again shortly",
        super::door::Refused::InFlight => {
            "too many requests of this caller in flight; wait for one to end"
        }
        super::door::Refused::Connections => {
            "too many open connections of this caller; reuse or close one"
        }
    };
    let mut r = plain(StatusCode::TOO_MANY_REQUESTS, text);
    r.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    r
}
