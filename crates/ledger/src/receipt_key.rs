//! A host's receipt key (Ed25519) and the envelope a receipt travels in.
//!
//! A receipt is an in-toto Statement (v1) in a DSSE envelope, the format of signed supply-chain
//! attestations (SLSA provenance, sigstore bundles): `{"payloadType", "payload", "signatures":
//! [{"keyid", "sig"}]}`, where `payload` is the base64 of the statement's bytes and `sig` the
//! base64 Ed25519 signature over DSSE's pre-authentication encoding of the type and the bytes.
//! The signature covers the exact bytes, so any change to any field of the statement, or to the
//! type, makes it fail.
//!
//! Keys are files: the private key a PEM `PRIVATE KEY` (PKCS#8), the public key a PEM `PUBLIC
//! KEY` (SubjectPublicKeyInfo). A key is named by its id, `sha256:` and the hex SHA-256 of its
//! 32 public bytes.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The payload type of a receipt's envelope (an in-toto statement).
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// The largest envelope `verify` reads: a receipt of a call with a full audit trail is well
/// under this.
pub const MAX_RECEIPT_BYTES: usize = 1024 * 1024;

/// The DER of an Ed25519 SubjectPublicKeyInfo up to its 32 key bytes: SEQUENCE { SEQUENCE {
/// id-Ed25519 }, BIT STRING (0 unused bits) }.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Why a receipt key or a receipt cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("receipt key {}: {why}", path.display())]
    Key { path: PathBuf, why: String },
    #[error("the receipt is not a DSSE envelope: {0}")]
    Envelope(String),
    #[error("the receipt is signed by key {found}, not by {expected}")]
    OtherKey { expected: String, found: String },
    #[error("the receipt's signature does not verify: it was altered after it was signed")]
    BadSignature,
    #[error("call {run_id}/{call_id} has no outcome yet; a receipt is of a finished call")]
    NotFinished { run_id: String, call_id: String },
    #[error(
        "call {run_id}/{call_id} does not match its chain, so no receipt is signed: {findings}"
    )]
    Tampered {
        run_id: String,
        call_id: String,
        findings: String,
    },
    #[error(transparent)]
    Ledger(#[from] crate::LedgerError),
}

/// A receipt as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// DSSE's pre-authentication encoding: what the signature is over.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

fn key_id(public: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(public)))
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn unpem(label: &str, text: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text
        .trim()
        .strip_prefix(&begin)
        .and_then(|t| t.strip_suffix(&end))
        .ok_or_else(|| format!("expected a PEM `{label}`"))?;
    let joined: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(joined)
        .map_err(|e| format!("its base64 does not decode: {e}"))
}

/// A host's private receipt key.
pub struct ReceiptKey {
    pair: Ed25519KeyPair,
}

impl ReceiptKey {
    /// The key at `path`, made there (mode 0600, never over a file) when there is none.
    pub fn load_or_create(path: &Path) -> Result<ReceiptKey, ReceiptError> {
        let bad = |why: String| ReceiptError::Key {
            path: path.to_path_buf(),
            why,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let der = unpem("PRIVATE KEY", &text).map_err(bad)?;
                let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
                    .map_err(|e| bad(format!("not an Ed25519 PKCS#8 key: {e}")))?;
                Ok(ReceiptKey { pair })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                    .map_err(|_| bad("the system's random source failed".into()))?;
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
                }
                write_new(path, &pem("PRIVATE KEY", der.as_ref())).map_err(bad)?;
                let pair = Ed25519KeyPair::from_pkcs8(der.as_ref())
                    .map_err(|e| bad(format!("the new key does not parse: {e}")))?;
                Ok(ReceiptKey { pair })
            }
            Err(e) => Err(bad(e.to_string())),
        }
    }

    /// The public key, as a PEM `PUBLIC KEY`.
    pub fn public_pem(&self) -> String {
        let mut der = ED25519_SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        pem("PUBLIC KEY", &der)
    }

    /// The key's id: `sha256:` and the hex SHA-256 of its public bytes.
    pub fn id(&self) -> String {
        key_id(self.pair.public_key().as_ref())
    }

    /// `statement` signed, in its envelope.
    pub fn seal(&self, statement: &[u8]) -> Envelope {
        let sig = self.pair.sign(&pae(PAYLOAD_TYPE, statement));
        let b64 = base64::engine::general_purpose::STANDARD;
        Envelope {
            payload_type: PAYLOAD_TYPE.to_owned(),
            payload: b64.encode(statement),
            signatures: vec![EnvelopeSignature {
                keyid: self.id(),
                sig: b64.encode(sig.as_ref()),
            }],
        }
    }
}

/// Write `text` to a new file `path`, readable by its owner only.
fn write_new(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

/// A public receipt key: what a verifier holds.
pub struct PublicReceiptKey {
    bytes: Vec<u8>,
}

impl PublicReceiptKey {
    /// The key in the PEM `PUBLIC KEY` at `path`.
    pub fn read(path: &Path) -> Result<PublicReceiptKey, ReceiptError> {
        let bad = |why: String| ReceiptError::Key {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let der = unpem("PUBLIC KEY", &text).map_err(bad)?;
        let bytes = der
            .strip_prefix(&ED25519_SPKI_PREFIX[..])
            .filter(|k| k.len() == 32)
            .ok_or_else(|| bad("not an Ed25519 public key".into()))?;
        Ok(PublicReceiptKey {
            bytes: bytes.to_vec(),
        })
    }

    /// The key's id.
    pub fn id(&self) -> String {
        key_id(&self.bytes)
    }

    /// The statement's bytes of `envelope` (JSON text), if this key signed exactly them.
    pub fn open(&self, envelope: &[u8]) -> Result<Vec<u8>, ReceiptError> {
        if envelope.len() > MAX_RECEIPT_BYTES {
            return Err(ReceiptError::Envelope(format!(
                "larger than {MAX_RECEIPT_BYTES} bytes"
            )));
        }
        let envelope: Envelope =
            serde_json::from_slice(envelope).map_err(|e| ReceiptError::Envelope(e.to_string()))?;
        if envelope.payload_type != PAYLOAD_TYPE {
            return Err(ReceiptError::Envelope(format!(
                "payloadType is {:?}, not {PAYLOAD_TYPE:?}",
                envelope.payload_type
            )));
        }
        let [signature] = envelope.signatures.as_slice() else {
            return Err(ReceiptError::Envelope(format!(
                "{} signatures; a receipt has one",
                envelope.signatures.len()
            )));
        };
        if signature.keyid != self.id() {
            return Err(ReceiptError::OtherKey {
                expected: self.id(),
                found: signature.keyid.clone(),
            });
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let payload = b64
            .decode(&envelope.payload)
            .map_err(|e| ReceiptError::Envelope(format!("payload: {e}")))?;
        let sig = b64
            .decode(&signature.sig)
            .map_err(|e| ReceiptError::Envelope(format!("sig: {e}")))?;
        UnparsedPublicKey::new(&ED25519, &self.bytes)
            .verify(&pae(&envelope.payload_type, &payload), &sig)
            .map_err(|_| ReceiptError::BadSignature)?;
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed statement opens with its key, and fails after any byte of the envelope's
    /// payload, type or signature is changed, or under another key.
    #[test]
    fn a_sealed_statement_opens_only_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let key = ReceiptKey::load_or_create(&dir.path().join("r.key")).unwrap();
        // The same file is read back, not made again.
        let again = ReceiptKey::load_or_create(&dir.path().join("r.key")).unwrap();
        assert_eq!(key.id(), again.id());
        std::fs::write(dir.path().join("r.pub"), key.public_pem()).unwrap();
        let public = PublicReceiptKey::read(&dir.path().join("r.pub")).unwrap();
        assert_eq!(public.id(), key.id());

        let statement = br#"{"_type":"https://in-toto.io/Statement/v1","n":1}"#;
        let sealed = serde_json::to_vec(&key.seal(statement)).unwrap();
        assert_eq!(public.open(&sealed).unwrap(), statement);

        let envelope: Envelope = serde_json::from_slice(&sealed).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut changed = envelope.clone();
        changed.payload = b64.encode(br#"{"_type":"https://in-toto.io/Statement/v1","n":2}"#);
        let open = |e: &Envelope| public.open(&serde_json::to_vec(e).unwrap());
        assert!(matches!(open(&changed), Err(ReceiptError::BadSignature)));
        let mut changed = envelope.clone();
        let mut sig = b64.decode(&changed.signatures[0].sig).unwrap();
        sig[0] ^= 1;
        changed.signatures[0].sig = b64.encode(sig);
        assert!(matches!(open(&changed), Err(ReceiptError::BadSignature)));
        let mut changed = envelope.clone();
        changed.payload_type = "application/json".into();
        assert!(matches!(open(&changed), Err(ReceiptError::Envelope(_))));

        let other = ReceiptKey::load_or_create(&dir.path().join("o.key")).unwrap();
        let sealed = serde_json::to_vec(&other.seal(statement)).unwrap();
        assert!(matches!(
            public.open(&sealed),
            Err(ReceiptError::OtherKey { .. })
        ));
    }

    /// An envelope past `MAX_RECEIPT_BYTES` is refused before it is parsed.
    #[test]
    fn an_oversized_envelope_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let key = ReceiptKey::load_or_create(&dir.path().join("r.key")).unwrap();
        std::fs::write(dir.path().join("r.pub"), key.public_pem()).unwrap();
        let public = PublicReceiptKey::read(&dir.path().join("r.pub")).unwrap();
        let sealed = serde_json::to_vec(&key.seal(&vec![b' '; MAX_RECEIPT_BYTES])).unwrap();
        let refused = public.open(&sealed);
        assert!(
            matches!(&refused, Err(ReceiptError::Envelope(why)) if why.contains("larger than")),
            "{refused:?}"
        );
        let fits = serde_json::to_vec(&key.seal(b"{}")).unwrap();
        assert_eq!(public.open(&fits).unwrap(), b"{}");
    }

    /// A private key file is made readable by its owner only, and a file that is not a key
    /// is refused naming it.
    #[test]
    fn key_files_are_private_and_checked() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k").join("r.key");
        ReceiptKey::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join("bad.pub"), "not a key").unwrap();
        let err = PublicReceiptKey::read(&dir.path().join("bad.pub"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("bad.pub"), "{err}");
    }
}
