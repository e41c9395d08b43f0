//! The ledger's evidence from the command line: `toolhost ledger verify` on a real host's
//! ledger (intact after real calls; an output edited in the file afterwards named by run, call
//! and chain position, with exit 1), and `toolhost receipt` issued by one process and checked
//! by another with the public key alone.

use super::support::*;

/// Run `sql` on the ledger file as someone with the file and no toolhost would: the chain's
/// triggers need toolhost's SQL functions, so they are dropped around the edit and made again.
fn edit_past_the_chain(ledger: &std::path::Path, sql: &str) {
    let set_aside = toolhost_ledger_sqlite::testing::edit_past_triggers(ledger, sql);
    assert!(set_aside >= 5, "{set_aside} triggers");
}

/// A config with the template component and a data directory of its own, and two calls of
/// `greet` recorded in it (run `R`, ids `c1` and `c2`): (dir guard, data directory, config).
fn greeted_twice() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let data = fresh_data_dir();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {}\ncache_dir = {}\n[[component]]\npath = {}\n",
            toml_path(&data),
            toml_path(&shared_cache()),
            toml_path(&guest("template")),
        ),
    )
    .unwrap();
    for id in ["c1", "c2"] {
        let out = toolhost(&[
            "call",
            "--config",
            config.to_str().unwrap(),
            "--principal",
            "alice",
            "--tenant",
            "acme",
            "--run-id",
            "R",
            "--call-id",
            id,
            "greet",
            r#"{"name":"Ada"}"#,
        ]);
        assert_eq!(out.status, 0, "{}", out.stderr);
    }
    (dir, data, config)
}

/// Two real calls verify; an output edited in the file is found, and so is an edit that goes
/// through the triggers without toolhost's functions (it fails: the file cannot be written).
#[test]
fn ledger_verify_finds_an_output_edited_in_the_file() {
    let (_dir, data, config) = greeted_twice();
    let cfg = config.to_str().unwrap();
    let verify = || toolhost(&["ledger", "verify", "--config", cfg]);
    let out = verify();
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(report["intact"], true);
    assert_eq!(report["chains"], 1);
    // A read call is written once, admitted with its outcome: one link each.
    assert_eq!(report["links"], 2, "{report}");

    let ledger = data.join("ledger.sqlite");
    // Without toolhost's functions, a write through the triggers fails: nothing changes.
    let plain = rusqlite::Connection::open(&ledger).unwrap();
    let refused = plain
        .execute_batch("UPDATE calls SET result_json = 'x' WHERE call_id = 'c2'")
        .unwrap_err();
    assert!(refused.to_string().contains("toolhost_"), "{refused}");
    drop(plain);
    assert_eq!(verify().status, 0);

    edit_past_the_chain(
        &ledger,
        "UPDATE calls SET result_json = replace(result_json, 'Ada', 'Eve') WHERE call_id = 'c2'",
    );
    let out = verify();
    assert_eq!(out.status, 1, "{}{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(report["intact"], false);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report}");
    let f = &findings[0];
    assert_eq!(f["finding"], "row_altered");
    assert_eq!(
        (f["run_id"].as_str(), f["key"].as_str()),
        (Some("R"), Some("c2"))
    );
    assert_eq!(f["seq"], 2, "{f}");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("\"c2\"") && message.contains("position"),
        "{message}"
    );
}

/// A receipt printed by one process verifies in another with the public key alone, names the
/// call and its caller, and fails once any byte of it is changed or another key is given.
#[test]
fn a_receipt_verifies_offline_and_not_once_changed() {
    let (dir, data, config) = greeted_twice();
    let cfg = config.to_str().unwrap();
    let out = toolhost(&["receipt", "--config", cfg, "R", "c1"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    // The key pair was made in the data directory, readable by its owner only.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(data.join("receipt.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let receipt = dir.path().join("c1.receipt.json");
    std::fs::write(&receipt, out.stdout.trim()).unwrap();
    let public = toolhost(&["receipt", "key", "--config", cfg]);
    assert_eq!(public.status, 0, "{}", public.stderr);
    assert!(
        public.stdout.starts_with("-----BEGIN PUBLIC KEY-----"),
        "{}",
        public.stdout
    );
    let key = dir.path().join("host.pub");
    std::fs::write(&key, &public.stdout).unwrap();

    // Offline: no config, no ledger, only the key and the file.
    let check = |file: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["receipt", "verify", "--key", key.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(file.to_str().unwrap());
        toolhost(&args)
    };
    let out = check(&receipt, &["--principal", "alice", "--tenant", "acme"]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let said = out.json();
    assert_eq!(said["valid"], true);
    assert_eq!(
        (said["run_id"].as_str(), said["call_id"].as_str()),
        (Some("R"), Some("c1"))
    );
    assert_eq!(said["tool"], "greet");
    assert_eq!(said["status"], "completed");
    let p = &said["statement"]["predicate"];
    assert!(
        p["definition_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{p}"
    );
    assert_eq!(p["chain"]["links"][0]["position"], 1);

    // Another caller is told apart by the receipt's caller tag.
    let out = check(&receipt, &["--principal", "mallory", "--tenant", "acme"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("not made by principal"),
        "{}",
        out.stderr
    );

    // One letter of the payload changed: the signature fails.
    let text = std::fs::read_to_string(&receipt).unwrap();
    let mut envelope: serde_json::Value = serde_json::from_str(&text).unwrap();
    let payload = envelope["payload"].as_str().unwrap().to_owned();
    let flipped = if payload.starts_with('e') { "f" } else { "e" };
    envelope["payload"] = format!("{flipped}{}", &payload[1..]).into();
    let changed = dir.path().join("changed.json");
    std::fs::write(&changed, envelope.to_string()).unwrap();
    let out = check(&changed, &[]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(out.stderr.contains("altered"), "{}", out.stderr);

    // Another host's key does not verify it.
    let other = toolhost(&[
        "receipt",
        "key",
        "--config",
        cfg,
        "--key",
        dir.path().join("other.key").to_str().unwrap(),
    ]);
    std::fs::write(&key, &other.stdout).unwrap();
    let out = check(&receipt, &[]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(out.stderr.contains("signed by key"), "{}", out.stderr);
}
