//! Publishing a component: its bytes and a small config as blobs, then a manifest in the Wasm
//! component artifact layout, at a tag or by digest alone. `toolhost push` is this, so that an
//! author needs no other tool.

use reqwest::header::LOCATION;
use reqwest::{Method, StatusCode};
use toolhost_contract::Sha256Digest;

use super::error::OciError;
use super::reference::Reference;
use super::session::{Body, Session};
use super::{OciClient, OCI_MANIFEST, WASM_CONFIG, WASM_LAYER};

impl OciClient {
    /// Push `component` to `r`'s repository, tagged with `r`'s tag when it has one; the
    /// manifest's digest is returned (what a config pins).
    pub async fn push(&self, component: &[u8], r: &Reference) -> Result<Sha256Digest, OciError> {
        let deadline = self.config.timeout();
        tokio::time::timeout(deadline, self.push_now(component, r))
            .await
            .unwrap_or_else(|_| {
                Err(OciError::TimedOut {
                    registry: r.registry.clone(),
                    secs: deadline.as_secs(),
                })
            })
    }

    async fn push_now(&self, component: &[u8], r: &Reference) -> Result<Sha256Digest, OciError> {
        let mut s = self.session(&r.registry)?;
        let layer = Sha256Digest::of(component);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer.as_str()],
        }))
        .expect("JSON");
        let config_digest = Sha256Digest::of(&config);
        push_blob(&mut s, r, &config, &config_digest).await?;
        push_blob(&mut s, r, component, &layer).await?;
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": WASM_CONFIG, "digest": config_digest.as_str(), "size": config.len()},
            "layers": [{"mediaType": WASM_LAYER, "digest": layer.as_str(), "size": component.len()}],
        }))
        .expect("JSON");
        let digest = Sha256Digest::of(&manifest);
        let at = r.tag.clone().unwrap_or_else(|| digest.to_string());
        let url = s.url(&format!("{}/manifests/{at}", r.repository));
        let body = Body {
            content_type: OCI_MANIFEST,
            bytes: manifest,
        };
        s.send(
            Method::PUT,
            url,
            None,
            Some(&body),
            &format!("manifest of {r}"),
        )
        .await?;
        Ok(digest)
    }
}

/// One blob, in one upload: `POST …/blobs/uploads/`, then `PUT` at the location it answers.
pub(crate) async fn push_blob(
    s: &mut Session,
    r: &Reference,
    bytes: &[u8],
    digest: &Sha256Digest,
) -> Result<(), OciError> {
    let what = format!("upload of {digest} to {r}");
    let url = s.url(&format!("{}/blobs/uploads/", r.repository));
    let resp = s.send(Method::POST, url.clone(), None, None, &what).await?;
    if resp.status() != StatusCode::ACCEPTED {
        return Err(OciError::Status {
            registry: r.registry.clone(),
            what,
            status: resp.status().as_u16(),
        });
    }
    let location = resp
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|l| url.join(l).ok())
        .ok_or_else(|| OciError::Status {
            registry: r.registry.clone(),
            what: format!("{what} (no upload location)"),
            status: 202,
        })?;
    let mut put = location;
    put.query_pairs_mut().append_pair("digest", digest.as_str());
    let body = Body {
        content_type: "application/octet-stream",
        bytes: bytes.to_vec(),
    };
    s.send(Method::PUT, put, None, Some(&body), &what).await?;
    Ok(())
}
