//! The trust check of an `oci =` component: cosign signatures stored beside it in its registry
//! (`toolhost_oci::cosign` fetched them), each a payload naming a manifest digest and an ECDSA
//! P-256 signature over the payload. A component is vouched for when a payload names the
//! manifest it was pulled at and its signature verifies under a key `[trust]` allows; the
//! manifest in turn names the component's digest, which the pull checked.
//!
//! cosign's signatures carry no key id, so a signature by an unknown key and one that does not
//! verify are one refusal here.

use toolhost_contract::Sha256Digest;
use toolhost_oci::cosign::{signature_tag, signed_manifest, CosignSignature};

use super::signature::{PublicKey, Refusal};

/// The name of the key that signed `manifest`, or why none did.
pub fn verify(
    manifest: &Sha256Digest,
    signatures: &[CosignSignature],
    keys: &[PublicKey],
) -> Result<String, Refusal> {
    if signatures.is_empty() {
        return Err(Refusal::UnsignedInRegistry {
            tag: signature_tag(manifest),
        });
    }
    let mut other = None;
    let mut ours = 0;
    for s in signatures {
        match signed_manifest(&s.payload) {
            Some(d) if &d == manifest => ours += 1,
            Some(d) => {
                other.get_or_insert(d);
                continue;
            }
            None => continue,
        }
        if let Some(k) = keys
            .iter()
            .find(|k| k.verifies_base64(&s.payload, &s.signature))
        {
            return Ok(k.name.clone());
        }
    }
    match (ours, other) {
        (0, Some(signed)) => Err(Refusal::OtherDigest {
            signed,
            found: manifest.clone(),
        }),
        (0, None) => Err(Refusal::NoTrustedSignature {
            count: signatures.len(),
        }),
        (count, _) => Err(Refusal::NoTrustedSignature { count }),
    }
}
