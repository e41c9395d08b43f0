//! Signatures of components: who vouches for the bytes a config loads, checked before they are
//! compiled.
//!
//! Keys are ECDSA P-256 (the kind cosign generates): a public key is a PEM `PUBLIC KEY` (its
//! SubjectPublicKeyInfo, as `cosign.pub` holds it), a private key a PEM `PRIVATE KEY` (PKCS#8,
//! as `toolhost keygen` writes it). A key is named by its fingerprint, the SHA-256 of its
//! SubjectPublicKeyInfo.
//!
//! A component's signature sits beside it, `NAME.wasm.sig`, as one JSON object:
//! `{"version": 1, "digest": "sha256:…", "key": "sha256:…", "signature": "…"}`: the component's
//! digest, the signing key's fingerprint, and the base64 of the ASN.1 DER ECDSA P-256 SHA-256
//! signature over [`SIGNED_PREFIX`] followed by the digest. Because the envelope says which
//! digest and which key it is for, a refusal can say why: no signature, an unknown key, a
//! signature for other bytes, or one that does not verify.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair as _, UnparsedPublicKey, ECDSA_P256_SHA256_ASN1,
    ECDSA_P256_SHA256_ASN1_SIGNING,
};
use serde::{Deserialize, Serialize};

use toolhost_contract::Sha256Digest;

/// What is signed: this, then the component's digest (`sha256:…`). The prefix keeps a
/// component signature from meaning anything else a key might sign.
pub const SIGNED_PREFIX: &str = "toolhost component signature v1\n";

/// The envelope format this host reads and writes.
pub const SIGNATURE_VERSION: u32 = 1;

/// The largest signature file read: an envelope is about 250 bytes.
pub const MAX_SIGNATURE_BYTES: u64 = 16 * 1024;

/// The DER of a P-256 SubjectPublicKeyInfo up to the key's point: SEQUENCE { SEQUENCE {
/// id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }. DER is canonical, so every P-256
/// key's SubjectPublicKeyInfo is exactly this prefix and the 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// Why a key or a signature cannot be used. Messages name the file and say how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not {what}: {problem}", path.display())]
    Key {
        path: PathBuf,
        what: &'static str,
        problem: String,
    },
    #[error("cannot sign: {0}")]
    Sign(&'static str),
}

/// Why a component's signature does not vouch for it: the refusals a load names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No signature file beside it.
    Unsigned { expected: PathBuf },
    /// The signature file is not an envelope this host reads.
    Unreadable { file: PathBuf, problem: String },
    /// Signed by a key the operator does not trust (for this component).
    UnknownKey { key: Sha256Digest },
    /// The signature is for other bytes.
    OtherDigest {
        signed: Sha256Digest,
        found: Sha256Digest,
    },
    /// Names a trusted key and these bytes, but the signature does not verify.
    Invalid { key: String },
    /// An `oci =` component with no signature in its registry (no cosign tag `tag`).
    UnsignedInRegistry { tag: String },
    /// An `oci =` component whose registry signatures for it verify under no allowed key.
    NoTrustedSignature { count: usize },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unsigned { expected } => write!(
                f,
                "it is not signed (no {}); sign it with `toolhost sign`",
                expected.display()
            ),
            Refusal::Unreadable { file, problem } => {
                write!(
                    f,
                    "its signature {} does not read: {problem}",
                    file.display()
                )
            }
            Refusal::UnknownKey { key } => write!(
                f,
                "it is signed by key {key}, which [trust] does not trust for it"
            ),
            Refusal::OtherDigest { signed, found } => write!(
                f,
                "its signature is for other bytes (signed sha256:{}…, the component is sha256:{}…)",
                signed.short(),
                found.short()
            ),
            Refusal::Invalid { key } => {
                write!(f, "its signature does not verify under key `{key}`")
            }
            Refusal::UnsignedInRegistry { tag } => write!(
                f,
                "it is not signed in its registry (no {tag}); sign it with `toolhost sign --oci`"
            ),
            Refusal::NoTrustedSignature { count } => write!(
                f,
                "its {count} signature(s) in the registry verify under none of the keys [trust] \
                 trusts for it"
            ),
        }
    }
}

/// A public key a component may be signed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// What the operator calls it (its `[trust.keys]` name).
    pub name: String,
    /// The uncompressed P-256 point.
    point: Vec<u8>,
    /// SHA-256 of its SubjectPublicKeyInfo.
    pub fingerprint: Sha256Digest,
}

impl PublicKey {
    /// Read a PEM `PUBLIC KEY` (P-256) from `path`.
    pub fn read(name: &str, path: &Path) -> Result<PublicKey, SignatureError> {
        let text = read_small(path, 64 * 1024)?;
        PublicKey::from_pem(name, &text).map_err(|problem| SignatureError::Key {
            path: path.to_path_buf(),
            what: "an ECDSA P-256 public key",
            problem,
        })
    }

    fn from_pem(name: &str, text: &[u8]) -> Result<PublicKey, String> {
        let pem = pem::parse(text).map_err(|e| e.to_string())?;
        if pem.tag() != "PUBLIC KEY" {
            return Err(format!(
                "it holds a `{}`, not a `PUBLIC KEY` (give the .pub file)",
                pem.tag()
            ));
        }
        let der = pem.contents();
        let point = der
            .strip_prefix(P256_SPKI_PREFIX.as_slice())
            .filter(|p| p.len() == 65 && p[0] == 0x04)
            .ok_or("it is not an ECDSA P-256 key (the kind `cosign generate-key-pair` and `toolhost keygen` make)")?;
        Ok(PublicKey {
            name: name.to_string(),
            point: point.to_vec(),
            fingerprint: Sha256Digest::of(der),
        })
    }

    /// Whether `signature` (base64 of ASN.1 DER) is this key's over `message`.
    pub fn verifies_base64(&self, message: &[u8], signature: &str) -> bool {
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature.as_bytes()) else {
            return false;
        };
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, &der)
            .is_ok()
    }

    /// Whether `signature` is this key's over `digest`.
    fn verifies(&self, digest: &Sha256Digest, signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(&signed_message(digest), signature)
            .is_ok()
    }
}

/// A signing key.
pub struct PrivateKey {
    pair: EcdsaKeyPair,
    fingerprint: Sha256Digest,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({}, redacted)", self.fingerprint)
    }
}

impl PrivateKey {
    /// A fresh key: (its PKCS#8 PEM, its public key's PEM).
    pub fn generate() -> Result<(String, String), SignatureError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| SignatureError::Sign("the system's random source failed"))?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| SignatureError::Sign("a generated key did not load"))?;
        let private = pem::encode(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref()));
        let public = pem::encode(&pem::Pem::new("PUBLIC KEY", spki(&pair)));
        Ok((private, public))
    }

    /// Read a PEM `PRIVATE KEY` (PKCS#8, P-256) from `path`.
    pub fn read(path: &Path) -> Result<PrivateKey, SignatureError> {
        let bad = |problem: String| SignatureError::Key {
            path: path.to_path_buf(),
            what: "an ECDSA P-256 private key (PKCS#8 PEM)",
            problem,
        };
        let text = read_small(path, 64 * 1024)?;
        let pem = pem::parse(&text).map_err(|e| bad(e.to_string()))?;
        if pem.tag() != "PRIVATE KEY" {
            return Err(bad(format!("it holds a `{}`", pem.tag())));
        }
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pem.contents(), &rng)
            .map_err(|e| bad(e.to_string()))?;
        let fingerprint = Sha256Digest::of(&spki(&pair));
        Ok(PrivateKey { pair, fingerprint })
    }

    /// This key's signature over `message` itself, as base64 of ASN.1 DER (what cosign stores).
    pub fn sign_base64(&self, message: &[u8]) -> Result<String, SignatureError> {
        let signature = self
            .pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| SignatureError::Sign("ECDSA signing failed"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(signature.as_ref()))
    }

    /// The envelope of this key's signature over `bytes`.
    pub fn sign(&self, bytes: &[u8]) -> Result<Envelope, SignatureError> {
        let digest = Sha256Digest::of(bytes);
        let signature = self
            .pair
            .sign(&SystemRandom::new(), &signed_message(&digest))
            .map_err(|_| SignatureError::Sign("ECDSA signing failed"))?;
        Ok(Envelope {
            version: SIGNATURE_VERSION,
            digest,
            key: self.fingerprint.clone(),
            signature: base64::engine::general_purpose::STANDARD.encode(signature.as_ref()),
        })
    }
}

/// The SubjectPublicKeyInfo DER of a key pair's public key.
fn spki(pair: &EcdsaKeyPair) -> Vec<u8> {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(pair.public_key().as_ref());
    der
}

fn signed_message(digest: &Sha256Digest) -> Vec<u8> {
    format!("{SIGNED_PREFIX}{digest}").into_bytes()
}

/// A signature file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub version: u32,
    /// The signed component's digest.
    pub digest: Sha256Digest,
    /// The signing key's fingerprint.
    pub key: Sha256Digest,
    /// Base64 of the ASN.1 DER signature.
    pub signature: String,
}

/// Where the signature of the component at `path` is: `path` + `.sig`.
pub fn signature_path(component: &Path) -> PathBuf {
    let mut name = component.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

impl Envelope {
    /// Write it as the signature of the component at `component`.
    pub fn write_beside(&self, component: &Path) -> Result<PathBuf, SignatureError> {
        let path = signature_path(component);
        let text = serde_json::to_string(self).expect("an envelope is JSON") + "\n";
        std::fs::write(&path, text).map_err(|source| SignatureError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// Check that the component at `component`, whose bytes have digest `found`, is signed by one of
/// `keys`: the key that signed it (by name), or why not.
pub fn verify(
    component: &Path,
    found: &Sha256Digest,
    keys: &[PublicKey],
) -> Result<String, Refusal> {
    let file = signature_path(component);
    let text = match read_small(&file, MAX_SIGNATURE_BYTES) {
        Ok(t) => t,
        Err(SignatureError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Err(Refusal::Unsigned { expected: file })
        }
        Err(e) => {
            return Err(Refusal::Unreadable {
                file,
                problem: e.to_string(),
            })
        }
    };
    let unreadable = |problem: String| Refusal::Unreadable {
        file: file.clone(),
        problem,
    };
    let envelope: Envelope =
        serde_json::from_slice(&text).map_err(|e| unreadable(e.to_string()))?;
    if envelope.version != SIGNATURE_VERSION {
        return Err(unreadable(format!(
            "version {} (this host reads version {SIGNATURE_VERSION})",
            envelope.version
        )));
    }
    let Some(key) = keys.iter().find(|k| k.fingerprint == envelope.key) else {
        return Err(Refusal::UnknownKey { key: envelope.key });
    };
    if &envelope.digest != found {
        return Err(Refusal::OtherDigest {
            signed: envelope.digest,
            found: found.clone(),
        });
    }
    let signature = base64::engine::general_purpose::STANDARD
        .decode(envelope.signature.as_bytes())
        .map_err(|e| unreadable(format!("its signature is not base64: {e}")))?;
    if key.verifies(found, &signature) {
        Ok(key.name.clone())
    } else {
        Err(Refusal::Invalid {
            key: key.name.clone(),
        })
    }
}

/// Read a file of at most `max` bytes.
fn read_small(path: &Path, max: u64) -> Result<Vec<u8>, SignatureError> {
    use std::io::Read as _;
    let read = |source| SignatureError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut text = Vec::new();
    file.take(max + 1).read_to_end(&mut text).map_err(read)?;
    if text.len() as u64 > max {
        return Err(read(std::io::Error::other(format!(
            "larger than {max} bytes"
        ))));
    }
    Ok(text)
}

#[cfg(test)]
#[path = "signature_tests.rs"]
mod tests;
