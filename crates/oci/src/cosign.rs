//! cosign's signatures in a registry: for the manifest `sha256:H` of `registry/repo`, the tag
//! `sha256-H.sig` in the same repository holds an OCI manifest whose layers are each one
//! signature: a "simple signing" payload (JSON naming the signed manifest's digest), with the
//! base64 signature over those bytes in the layer's `dev.cosignproject.cosign/signature`
//! annotation. This is what `cosign sign --key` writes (cosign 2's default, tag-based format);
//! keyless certificates, transparency-log bundles and the referrers-based bundle format are
//! not read.
//!
//! This file fetches and writes the material; the registry crate's trust check verifies it.

use reqwest::Method;
use serde::Deserialize;
use toolhost_contract::Sha256Digest;

use super::config::MANIFEST_CAP;
use super::error::OciError;
use super::reference::Reference;
use super::session::{read_capped, Body, Session};
use super::{OciClient, OCI_MANIFEST};

/// The media type of a simple signing payload.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation that holds a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The most signatures read for one manifest.
pub const MAX_SIGNATURES: usize = 16;
/// The largest payload read: a simple signing payload is about 250 bytes.
pub const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;

/// One signature as the registry holds it, not yet verified.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct CosignSignature {
    /// The signed bytes: a simple signing payload.
    pub payload: Vec<u8>,
    /// Base64 of the ASN.1 DER signature over `payload`.
    pub signature: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignatureManifest {
    #[serde(default)]
    layers: Vec<SignatureLayer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignatureLayer {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The tag cosign keeps the signatures of `manifest` at.
pub fn signature_tag(manifest: &Sha256Digest) -> String {
    format!("sha256-{}.sig", manifest.hex())
}

/// The payload that says "`r`'s repository at `manifest`", as cosign writes it.
pub fn simple_signing_payload(r: &Reference, manifest: &Sha256Digest) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{}", r.registry, r.repository)},
            "image": {"docker-manifest-digest": manifest.as_str()},
            "type": "cosign container image signature",
        },
        "optional": null,
    }))
    .expect("JSON")
}

/// The manifest digest a simple signing payload names, if it is one.
pub fn signed_manifest(payload: &[u8]) -> Option<Sha256Digest> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let critical = v.get("critical")?;
    if critical.get("type")?.as_str()? != "cosign container image signature" {
        return None;
    }
    let d = critical
        .get("image")?
        .get("docker-manifest-digest")?
        .as_str()?;
    Sha256Digest::try_from(d.to_string()).ok()
}

/// The signatures stored for `manifest` in `r`'s repository (none when the tag is absent).
pub(crate) async fn fetch(
    s: &mut Session,
    r: &Reference,
    manifest: &Sha256Digest,
    max_manifest: u64,
) -> Result<Vec<CosignSignature>, OciError> {
    let tag = signature_tag(manifest);
    let what = format!("signatures {}/{}:{tag}", r.registry, r.repository);
    let url = s.url(&format!("{}/manifests/{tag}", r.repository));
    let resp = match s
        .send(Method::GET, url, Some(OCI_MANIFEST), None, &what)
        .await
    {
        Ok(resp) => resp,
        Err(OciError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let bytes = read_capped(resp, max_manifest, &what, MANIFEST_CAP).await?;
    let m: SignatureManifest =
        serde_json::from_slice(&bytes).map_err(|e| OciError::NotAComponent {
            reference: what.clone(),
            message: format!("not a signature manifest ({e})"),
        })?;
    let mut out = Vec::new();
    for layer in m
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING)
        .take(MAX_SIGNATURES)
    {
        let Some(signature) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
            continue;
        };
        let Ok(digest) = Sha256Digest::try_from(layer.digest.clone()) else {
            continue;
        };
        if layer.size > MAX_PAYLOAD_BYTES {
            continue;
        }
        let what = format!("signature payload {digest} of {r}");
        let url = s.url(&format!("{}/blobs/{digest}", r.repository));
        let resp = s.send(Method::GET, url, None, None, &what).await?;
        let payload = read_capped(
            resp,
            MAX_PAYLOAD_BYTES,
            &what,
            "fixed for a signature payload",
        )
        .await?;
        if Sha256Digest::of(&payload) != digest {
            return Err(OciError::DigestMismatch {
                what,
                expected: digest.to_string(),
                got: Sha256Digest::of(&payload).to_string(),
            });
        }
        out.push(CosignSignature {
            payload,
            signature: signature.chars().take(1024).collect(),
        });
    }
    Ok(out)
}

impl OciClient {
    /// Add `signature` (base64, over `payload`) to the signatures of `r` (a reference by
    /// digest), keeping the ones already there.
    pub async fn push_signature(
        &self,
        r: &Reference,
        payload: &[u8],
        signature: &str,
    ) -> Result<(), OciError> {
        let manifest = r.digest.clone().ok_or_else(|| OciError::TagNotPinned {
            reference: r.to_string(),
        })?;
        let mut s = self.session(&r.registry)?;
        let tag = signature_tag(&manifest);
        let what = format!("signatures {}/{}:{tag}", r.registry, r.repository);
        let url = s.url(&format!("{}/manifests/{tag}", r.repository));
        let mut layers: Vec<serde_json::Value> = match s
            .send(Method::GET, url.clone(), Some(OCI_MANIFEST), None, &what)
            .await
        {
            Ok(resp) => {
                let bytes =
                    read_capped(resp, self.config.max_manifest_bytes(), &what, MANIFEST_CAP)
                        .await?;
                // Signatures already there are kept; a manifest that does not read is never
                // replaced, or they would be lost.
                let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
                match v.get("layers") {
                    Some(serde_json::Value::Array(layers)) => layers.clone(),
                    None if v.is_object() => Vec::new(),
                    _ => {
                        return Err(OciError::NotAComponent {
                            reference: what,
                            message: "not a signature manifest; nothing was added".into(),
                        })
                    }
                }
            }
            Err(OciError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let payload_digest = Sha256Digest::of(payload);
        super::push::push_blob(&mut s, r, payload, &payload_digest).await?;
        layers.push(serde_json::json!({
            "mediaType": SIMPLE_SIGNING,
            "digest": payload_digest.as_str(),
            "size": payload.len(),
            "annotations": {SIGNATURE_ANNOTATION: signature},
        }));
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "", "os": "", "config": {},
            "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l["digest"].clone()).collect::<Vec<_>>()},
        }))
        .expect("JSON");
        let config_digest = Sha256Digest::of(&config);
        super::push::push_blob(&mut s, r, &config, &config_digest).await?;
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest.as_str(), "size": config.len()},
            "layers": layers,
        }))
        .expect("JSON");
        let body = Body {
            content_type: OCI_MANIFEST,
            bytes: manifest,
        };
        s.send(Method::PUT, url, None, Some(&body), &what).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload written for a manifest names that manifest, and nothing else reads as one.
    #[test]
    fn a_payload_names_the_manifest_it_signs() {
        let r: Reference = "ghcr.io/team/tool:1".parse().unwrap();
        let m = Sha256Digest::of(b"manifest");
        assert_eq!(
            signed_manifest(&simple_signing_payload(&r, &m)),
            Some(m.clone())
        );
        assert_eq!(signed_manifest(b"{}"), None);
        assert_eq!(signature_tag(&m), format!("sha256-{}.sig", m.hex()));
    }
}
