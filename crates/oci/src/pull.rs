//! Fetching one component: its manifest by digest (or, for `toolhost lock` alone, by tag), then
//! its one `application/wasm` layer, each checked against its digest and under its cap. The
//! store answers first, so a component fetched once needs no registry again.

use reqwest::Method;
use serde::Deserialize;
use toolhost_contract::Sha256Digest;

use super::config::{BLOB_CAP, MANIFEST_CAP};
use super::cosign::{self, CosignSignature};
use super::error::OciError;
use super::reference::Reference;
use super::session::{read_capped, Session};
use super::store::Store;
use super::{OciClient, Wanted, EMPTY_CONFIG, OCI_MANIFEST, WASM_CONFIG, WASM_LAYER};

/// A component fetched and checked, held in memory until [`Pulled::save`].
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The reference as the config wrote it.
    pub reference: Reference,
    /// The manifest's digest (what a lock pins for a tag).
    pub manifest: Sha256Digest,
    /// The component's digest: its layer's, checked against its bytes.
    pub component: Sha256Digest,
    pub bytes: Vec<u8>,
    /// Where the bytes came from.
    pub origin: Origin,
    /// The cosign signatures stored for the manifest, when they were wanted (unverified).
    pub signatures: Option<Vec<CosignSignature>>,
    manifest_bytes: Vec<u8>,
}

/// Where a pulled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The content-addressed store: no request was made.
    Store,
    Registry,
}

impl Pulled {
    /// Keep the manifest and the component in `store`, for restarts without the registry.
    pub fn save(&self, store: &Store) -> Result<(), OciError> {
        // Read from the store, signatures included: nothing to write back.
        if self.origin == Origin::Store {
            return Ok(());
        }
        if let Some(s) = &self.signatures {
            store.put_signatures(&self.manifest, s)?;
        }
        store.put(&self.manifest, &self.manifest_bytes)?;
        store.put(&self.component, &self.bytes)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
}

impl OciClient {
    /// The component `r` names: at `pinned` (a lock's manifest digest) or at its own digest,
    /// from the store when it is there; at its tag only when `resolve_tags` (for `toolhost
    /// lock`). A tag neither pinned nor resolved is refused.
    pub async fn pull(
        &self,
        w: &Wanted,
        resolve_tags: bool,
        store: Option<&Store>,
    ) -> Result<Pulled, OciError> {
        let (r, deadline) = (&w.reference, self.config.timeout());
        tokio::time::timeout(deadline, self.pull_now(w, resolve_tags, store))
            .await
            .unwrap_or_else(|_| {
                Err(OciError::TimedOut {
                    registry: r.registry.clone(),
                    secs: deadline.as_secs(),
                })
            })
    }

    async fn pull_now(
        &self,
        w: &Wanted,
        resolve_tags: bool,
        store: Option<&Store>,
    ) -> Result<Pulled, OciError> {
        let r = &w.reference;
        let by_digest = r.digest.as_ref().or(w.pinned.as_ref());
        let (max_manifest, max_blob) = (
            self.config.max_manifest_bytes(),
            self.config.max_blob_bytes(),
        );
        if let (Some(d), Some(store)) = (by_digest, store) {
            if let Some(manifest_bytes) = store.get(d, max_manifest) {
                let layer = wasm_layer(r, &manifest_bytes, max_blob)?;
                let signatures = match w.signatures {
                    true => store.signatures(d),
                    false => Some(Vec::new()),
                };
                if let (Some(bytes), Some(signatures)) = (store.get(&layer, max_blob), signatures) {
                    return Ok(Pulled {
                        reference: r.clone(),
                        manifest: d.clone(),
                        component: layer,
                        bytes,
                        origin: Origin::Store,
                        signatures: w.signatures.then_some(signatures),
                        manifest_bytes,
                    });
                }
            }
        }
        let at = match (by_digest, resolve_tags) {
            (Some(d), _) => d.to_string(),
            (None, true) => r.tag.clone().expect("a reference has a tag or a digest"),
            (None, false) => {
                return Err(OciError::TagNotPinned {
                    reference: r.to_string(),
                })
            }
        };
        let mut s = self.session(&r.registry)?;
        let what = format!("manifest {}", r.at_or_tag(&at));
        let url = s.url(&format!("{}/manifests/{at}", r.repository));
        let resp = s
            .send(Method::GET, url, Some(OCI_MANIFEST), None, &what)
            .await?;
        let manifest_bytes = read_capped(resp, max_manifest, &what, MANIFEST_CAP).await?;
        let manifest = Sha256Digest::of(&manifest_bytes);
        if let Some(d) = by_digest {
            check_digest(&what, d, &manifest)?;
        }
        let layer = wasm_layer(r, &manifest_bytes, max_blob)?;
        let what = format!("component {layer} of {r}");
        let url = s.url(&format!("{}/blobs/{layer}", r.repository));
        let resp = s.send(Method::GET, url, None, None, &what).await?;
        let bytes = read_capped(resp, max_blob, &what, BLOB_CAP).await?;
        check_digest(&what, &layer, &Sha256Digest::of(&bytes))?;
        let signatures = match w.signatures {
            true => Some(cosign::fetch(&mut s, r, &manifest, max_manifest).await?),
            false => None,
        };
        Ok(Pulled {
            reference: r.clone(),
            manifest,
            component: layer,
            bytes,
            origin: Origin::Registry,
            signatures,
            manifest_bytes,
        })
    }
}

impl Reference {
    /// `registry/repository@digest` or `…:tag`, for messages.
    fn at_or_tag(&self, at: &str) -> String {
        match at.starts_with("sha256:") {
            true => format!("{}/{}@{at}", self.registry, self.repository),
            false => format!("{}/{}:{at}", self.registry, self.repository),
        }
    }
}

fn check_digest(what: &str, expected: &Sha256Digest, got: &Sha256Digest) -> Result<(), OciError> {
    if expected == got {
        return Ok(());
    }
    Err(OciError::DigestMismatch {
        what: what.to_string(),
        expected: expected.to_string(),
        got: got.to_string(),
    })
}

/// The digest of the one Wasm layer of a Wasm component artifact, refused when the manifest
/// is anything else or declares a layer over the cap.
fn wasm_layer(r: &Reference, bytes: &[u8], max_blob: u64) -> Result<Sha256Digest, OciError> {
    let not = |message: String| OciError::NotAComponent {
        reference: r.to_string(),
        message,
    };
    let m: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| not(format!("its manifest is not an OCI image manifest ({e})")))?;
    if m.schema_version != 2 || m.media_type.as_deref().is_some_and(|t| t != OCI_MANIFEST) {
        return Err(not(format!(
            "its manifest is not an OCI image manifest (`{OCI_MANIFEST}`, schema version 2)"
        )));
    }
    if m.config.media_type != WASM_CONFIG && m.config.media_type != EMPTY_CONFIG {
        return Err(not(format!(
            "its config is `{}`, not `{WASM_CONFIG}`",
            m.config.media_type.chars().take(100).collect::<String>()
        )));
    }
    let [layer] = &m.layers[..] else {
        return Err(not(format!(
            "it has {} layers; a component artifact has exactly one, `{WASM_LAYER}`",
            m.layers.len()
        )));
    };
    if layer.media_type != WASM_LAYER {
        return Err(not(format!(
            "its layer is `{}`, not `{WASM_LAYER}`",
            layer.media_type.chars().take(100).collect::<String>()
        )));
    }
    if layer.size > max_blob {
        return Err(OciError::TooLarge {
            what: format!("component of {r} ({} bytes)", layer.size),
            cap: max_blob,
            limit: BLOB_CAP,
        });
    }
    Sha256Digest::try_from(layer.digest.clone())
        .map_err(|_| not("its layer's digest is not a SHA-256 digest".into()))
}

/// Just enough of a Session for the pull and push paths to share.
impl OciClient {
    pub(crate) fn session(&self, registry: &str) -> Result<Session, OciError> {
        let creds = super::docker::credentials(&self.config, &self.base_dir, registry)?;
        Session::new(&self.config, registry, creds)
    }
}
