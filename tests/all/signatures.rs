//! Component signatures: an author makes a key and signs, an operator trusts the key, and a
//! host refuses — before compiling anything — a component that is unsigned, signed by a key it
//! does not trust, or signed for other bytes, naming the component and why.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::{greet_ada as greet, guest, redescribe_greet, toml_path, toolhost};

/// A directory with a copy of the template component and two key pairs, `author` and
/// `stranger`: (dir guard, component path).
fn workshop() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("greet.wasm");
    std::fs::copy(guest("template"), &wasm).unwrap();
    for name in ["author", "stranger"] {
        let out = toolhost(&["keygen", dir.path().join(name).to_str().unwrap()]);
        assert_eq!(out.status, 0, "{}", out.stderr);
    }
    (dir, wasm)
}

fn sign(dir: &Path, key: &str, wasm: &Path) {
    let key = dir.join(format!("{key}.key"));
    let out = toolhost(&[
        "sign",
        "--key",
        key.to_str().unwrap(),
        wasm.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

/// A config trusting `author`, with `require` and the component's own `signed_by`.
fn config(dir: &Path, require: &str, signed_by: &str) -> PathBuf {
    let path = dir.join("toolhost.toml");
    let text = format!(
        "cache_dir = {cache}\n[trust]\nkeys = {{ author = \"author.pub\", stranger = \"stranger.pub\" }}\n\
         require = \"{require}\"\n[[component]]\npath = \"greet.wasm\"\n{signed_by}",
        cache = toml_path(&crate::support::shared_cache()),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `keygen` makes a key pair (the private key readable by its owner only) and never replaces
/// one; `sign` writes FILE.sig; `verify` names the key that signed, and says why not for a key
/// that did not.
#[test]
fn an_author_signs_and_anyone_verifies() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, wasm) = workshop();
    let key = dir.path().join("author.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let again = toolhost(&["keygen", dir.path().join("author").to_str().unwrap()]);
    assert_eq!(again.status, 2);
    assert!(
        again.stderr.contains("never replaces a key"),
        "{}",
        again.stderr
    );

    sign(dir.path(), "author", &wasm);
    assert!(dir.path().join("greet.wasm.sig").is_file());
    let public = dir.path().join("author.pub");
    let out = toolhost(&[
        "verify",
        "--key",
        public.to_str().unwrap(),
        wasm.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json()["verified"], json!(true));
    let stranger = dir.path().join("stranger.pub");
    let out = toolhost(&[
        "verify",
        "--key",
        stranger.to_str().unwrap(),
        wasm.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1);
    assert_eq!(out.json()["verified"], json!(false));
    assert!(
        out.stderr.contains("which [trust] does not trust"),
        "{}",
        out.stderr
    );
}

/// With `require = "signed"`: a component signed by a trusted key runs; unsigned, signed by a
/// key not trusted for it, and signed for other bytes are each refused with their reason,
/// and nothing runs.
#[test]
fn a_host_runs_only_what_a_trusted_key_signed() {
    let (dir, wasm) = workshop();
    let cfg = config(dir.path(), "signed", "");
    let out = greet(&cfg);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("greet.wasm is refused: it is not signed")
            && out.stderr.contains("toolhost sign"),
        "{}",
        out.stderr
    );

    sign(dir.path(), "author", &wasm);
    let out = greet(&cfg);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json()["output"], json!("Hello, Ada!"));
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_eq!(
        out.json()["component"][0]["verified_signer"],
        json!("author")
    );

    // Only `author` may sign this one: a `stranger` signature is refused.
    let cfg = config(dir.path(), "optional", "signed_by = [\"author\"]\n");
    sign(dir.path(), "stranger", &wasm);
    let out = greet(&cfg);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("which [trust] does not trust for it"),
        "{}",
        out.stderr
    );

    // The bytes change after signing (a rebuilt doc comment).
    sign(dir.path(), "author", &wasm);
    redescribe_greet(&wasm, "Changed.");
    let out = greet(&cfg);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("its signature is for other bytes"),
        "{}",
        out.stderr
    );
    // Without `signed_by` and with `require = "optional"`, no signature is asked for.
    let cfg = config(dir.path(), "optional", "");
    assert_eq!(greet(&cfg).status, 0);
}

/// `[trust]` mistakes are config problems at their keys: a `signed_by` naming no key,
/// `require = "signed"` with no key, and a key file that is not a public key.
#[test]
fn trust_mistakes_are_named() {
    let (dir, _) = workshop();
    let cfg = config(dir.path(), "optional", "signed_by = [\"nobody\"]\n");
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("component[0].signed_by[0]")
            && out
                .stderr
                .contains("\"nobody\" is not a key of [trust.keys]"),
        "{}",
        out.stderr
    );
    std::fs::write(&cfg, "[trust]\nrequire = \"signed\"\n").unwrap();
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert!(out.stderr.contains("trust.require"), "{}", out.stderr);
    std::fs::write(&cfg, "[trust]\nkeys = { k = \"author.key\" }\n").unwrap();
    let out = toolhost(&["check-config", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("give the .pub file"), "{}", out.stderr);
}
