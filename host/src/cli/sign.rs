//! `toolhost keygen`, `sign` and `verify`: an author's and an operator's ends of component
//! signatures (`crates/registry/src/signature.rs` says what a signature is).

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::report::{usage_error, usage_message};
use super::EXIT_NOT_COMPLETED;
use crate::registry::signature::{self, PrivateKey, PublicKey};

/// Write a new key pair: `NAME.key` (private, mode 0600) and `NAME.pub`; never over a file.
pub(super) fn keygen(name: &Path) -> ExitCode {
    let private = name.with_extension("key");
    let public = name.with_extension("pub");
    for p in [&private, &public] {
        if p.exists() {
            return usage_message(format!(
                "{} exists; keygen never replaces a key",
                p.display()
            ));
        }
    }
    let (private_pem, public_pem) = match PrivateKey::generate() {
        Ok(k) => k,
        Err(e) => return usage_error(&e),
    };
    if let Err(e) =
        write_new(&private, &private_pem, 0o600).and(write_new(&public, &public_pem, 0o644))
    {
        return usage_message(e);
    }
    let fingerprint = match PublicKey::read("new", &public) {
        Ok(k) => k.fingerprint,
        Err(e) => return usage_error(&e),
    };
    out!(
        "{}",
        json!({
            "private_key": private.display().to_string(),
            "public_key": public.display().to_string(),
            "fingerprint": fingerprint.as_str(),
        })
    );
    ExitCode::SUCCESS
}

/// Create `path` (never replacing a file) with `text` and `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Sign `component` with the private key at `key`: its signature goes beside it (`.sig`).
pub(super) fn sign(key: &Path, component: &Path) -> ExitCode {
    let key = match PrivateKey::read(key) {
        Ok(k) => k,
        Err(e) => return usage_error(&e),
    };
    let bytes = match std::fs::read(component) {
        Ok(b) => b,
        Err(e) => return usage_message(format!("cannot read {}: {e}", component.display())),
    };
    let envelope = match key.sign(&bytes) {
        Ok(e) => e,
        Err(e) => return usage_error(&e),
    };
    match envelope.write_beside(component) {
        Ok(file) => {
            out!(
                "{}",
                json!({
                    "component": component.display().to_string(),
                    "digest": envelope.digest.as_str(),
                    "key": envelope.key.as_str(),
                    "signature": file.display().to_string(),
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(&e),
    }
}

/// Check that `component` is signed by one of the public keys at `keys`, as a load would:
/// exit 0 naming the key, 1 saying why not.
pub(super) fn verify(keys: &[std::path::PathBuf], component: &Path) -> ExitCode {
    let mut trusted = Vec::new();
    for path in keys {
        let name = path.display().to_string();
        match PublicKey::read(&name, path) {
            Ok(k) => trusted.push(k),
            Err(e) => return usage_error(&e),
        }
    }
    let bytes = match std::fs::read(component) {
        Ok(b) => b,
        Err(e) => return usage_message(format!("cannot read {}: {e}", component.display())),
    };
    let digest = crate::registry::Sha256Digest::of(&bytes);
    match signature::verify(component, &digest, &trusted) {
        Ok(key) => {
            out!(
                "{}",
                json!({"component": component.display().to_string(), "verified": true, "key": key})
            );
            ExitCode::SUCCESS
        }
        Err(refusal) => {
            out!(
                "{}",
                json!({
                    "component": component.display().to_string(),
                    "verified": false,
                    "why": refusal.to_string(),
                })
            );
            crate::telemetry::say(
                tracing::Level::ERROR,
                format!("{} is refused: {refusal}", component.display()),
            );
            ExitCode::from(EXIT_NOT_COMPLETED)
        }
    }
}
