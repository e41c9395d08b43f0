//! `toolhost sign --oci` and `verify --oci`: cosign signatures of a component in a registry
//! (`crates/oci/src/cosign.rs` says where cosign keeps them), made and checked with the same
//! ECDSA P-256 keys as signatures of files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::push::{by_digest, client};
use super::report::{usage_error, usage_message};
use super::EXIT_NOT_COMPLETED;
use crate::oci::cosign::simple_signing_payload;
use crate::oci::Wanted;
use crate::registry::signature::{PrivateKey, PublicKey};

/// Add a signature by the key at `key` to the component at `reference` (by digest).
pub(super) fn sign(key: &Path, reference: &str, config: &Path) -> ExitCode {
    let key = match PrivateKey::read(key) {
        Ok(k) => k,
        Err(e) => return usage_error(&e),
    };
    let (r, client) = match (by_digest(reference), client(config)) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let manifest = r.digest.clone().expect("by_digest names one");
    let payload = simple_signing_payload(&r, &manifest);
    let signature = match key.sign_base64(&payload) {
        Ok(s) => s,
        Err(e) => return usage_error(&e),
    };
    match client.push_signature_blocking(&r, &payload, &signature) {
        Ok(()) => {
            out!(
                "{}",
                json!({
                    "component": r.to_string(),
                    "signature": format!("{}/{}:{}", r.registry, r.repository, crate::oci::cosign::signature_tag(&manifest)),
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            crate::telemetry::say(tracing::Level::ERROR, crate::contract::error_chain(&e));
            ExitCode::from(EXIT_NOT_COMPLETED)
        }
    }
}

/// Pull the component at `reference` with its signatures and check them as a load would:
/// exit 0 naming the key, 1 saying why not.
pub(super) fn verify(keys: &[PathBuf], reference: &str, config: &Path) -> ExitCode {
    let mut trusted = Vec::new();
    for path in keys {
        match PublicKey::read(&path.display().to_string(), path) {
            Ok(k) => trusted.push(k),
            Err(e) => return usage_error(&e),
        }
    }
    let (r, client) = match (by_digest(reference), client(config)) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let wanted = [Wanted {
        reference: r.clone(),
        pinned: None,
        signatures: true,
    }];
    let pulled = match client.pull_all_blocking(&wanted, false, None) {
        Ok(mut p) => p.remove(0),
        Err((_, e)) => return usage_message(crate::contract::error_chain(&e)),
    };
    let signatures = pulled.signatures.unwrap_or_default();
    match crate::registry::cosign::verify(&pulled.manifest, &signatures, &trusted) {
        Ok(key) => {
            out!(
                "{}",
                json!({"component": r.to_string(), "verified": true, "key": key})
            );
            ExitCode::SUCCESS
        }
        Err(refusal) => {
            out!(
                "{}",
                json!({"component": r.to_string(), "verified": false, "why": refusal.to_string()})
            );
            crate::telemetry::say(tracing::Level::ERROR, format!("{r} is refused: {refusal}"));
            ExitCode::from(EXIT_NOT_COMPLETED)
        }
    }
}
