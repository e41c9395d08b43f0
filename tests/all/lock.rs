//! `toolhost.lock`: what a config runs, pinned by digest. A component whose bytes or tool
//! definitions differ from the lock is refused by every command that runs tools, naming the
//! tool and what changed, until the operator accepts it with `toolhost lock --update`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{greet_ada as greet, guest, redescribe_greet, toml_path, toolhost};

/// A directory with a copy of the template component (`greet`) and a config for it:
/// (dir guard, config path, component path).
fn pinned_template(extra: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("greet.wasm");
    std::fs::copy(guest("template"), &wasm).unwrap();
    let config = dir.path().join("toolhost.toml");
    write_config(&config, extra);
    (dir, config, wasm)
}

fn write_config(config: &Path, extra: &str) {
    let cache = toml_path(&crate::support::shared_cache());
    let text = format!("cache_dir = {cache}\n[[component]]\npath = \"greet.wasm\"\n{extra}");
    std::fs::write(config, text).unwrap();
}

fn lock(config: &Path, update: bool) -> (i32, Value, String) {
    let mut args = vec!["lock", "--config", config.to_str().unwrap()];
    if update {
        args.push("--update");
    }
    let out = toolhost(&args);
    (out.status, out.json(), out.stderr)
}

/// A component rebuilt with one changed doc comment is refused by `call`, `serve`, `tools`
/// and `check-config`, naming the tool and "description"; `lock` says the same and exits 1;
/// `lock --update` accepts it, and it runs again.
#[test]
fn a_changed_description_is_refused_until_the_lock_is_updated() {
    let (dir, config, wasm) = pinned_template("");
    let (status, written, stderr) = lock(&config, false);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(written["state"], json!("written"));
    assert_eq!(
        (written["components"].clone(), written["tools"].clone()),
        (json!(1), json!(1))
    );
    assert!(dir.path().join("toolhost.lock").is_file());
    assert_eq!(greet(&config).status, 0);
    let (status, again, _) = lock(&config, false);
    assert_eq!((status, again["state"].clone()), (0, json!("unchanged")));

    redescribe_greet(&wasm, "Greets someone, in other words.");
    let out = greet(&config);
    assert_eq!(out.status, 2, "{}", out.stdout);
    for said in [
        "toolhost.lock does not match what the config loads",
        "component greet.wasm: its bytes changed",
        "component greet.wasm: tool `greet`: description changed",
        "toolhost lock --update",
    ] {
        assert!(out.stderr.contains(said), "{said:?} not in: {}", out.stderr);
    }
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
    let c = config.to_str().unwrap();
    for args in [
        vec!["tools", "--config", c],
        vec!["check-config", "--config", c],
        vec!["serve", "--config", c],
    ] {
        let out = toolhost(&args);
        assert_eq!(out.status, 2, "{args:?}: {}", out.stdout);
        assert!(
            out.stderr.contains("description changed"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let (status, differs, _) = lock(&config, false);
    assert_eq!(status, 1);
    assert_eq!(differs["state"], json!("differs"));
    assert_eq!(differs["changes"].as_array().unwrap().len(), 2, "{differs}");

    let (status, updated, _) = lock(&config, true);
    assert_eq!((status, updated["state"].clone()), (0, json!("updated")));
    let out = greet(&config);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = toolhost(&["tools", "--config", c]);
    assert_eq!(
        out.json()[0]["description"],
        json!("Greets someone, in other words.")
    );
}

/// A tool renamed in the config is a removed tool and an added one; a component added to the
/// config is not in the lock; one taken out of it is missing.
#[test]
fn added_removed_and_renamed_tools_are_named() {
    let (_dir, config, _) = pinned_template("");
    assert_eq!(lock(&config, false).0, 0);
    write_config(&config, "[component.tools.greet]\nname = \"hello\"\n");
    let out = greet(&config);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("tool `hello` added") && out.stderr.contains("tool `greet` removed"),
        "{}",
        out.stderr
    );
    write_config(
        &config,
        "[[component]]\npath = \"greet.wasm\"\n[component.tools.greet]\nname = \"again\"\n",
    );
    let (status, differs, _) = lock(&config, false);
    assert_eq!(status, 1);
    assert_eq!(
        differs["changes"],
        json!(["component greet.wasm: not in the lock"])
    );
    std::fs::write(&config, "").unwrap();
    let (_, differs, _) = lock(&config, false);
    assert_eq!(
        differs["changes"],
        json!(["component greet.wasm: in the lock, but the config does not load it"])
    );
}

/// Without a lock file a config runs as it always did, and `check-config` says that nothing
/// is pinned; with one that matches, it says pinned. A lock that does not read is refused,
/// named, and replaced only by `--update`.
#[test]
fn check_config_says_whether_what_runs_is_pinned() {
    let (dir, config, _) = pinned_template("");
    let c = config.to_str().unwrap();
    let out = toolhost(&["check-config", "--config", c]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lock_file = dir.path().join("toolhost.lock");
    assert_eq!(
        out.json()["lock"],
        json!({
            "file": lock_file.display().to_string(),
            "pinned": false,
            "note": "no lock file: components and tool definitions are not pinned; `toolhost lock` writes one",
        })
    );
    assert_eq!(greet(&config).status, 0);
    assert_eq!(lock(&config, false).0, 0);
    let out = toolhost(&["check-config", "--config", c]);
    assert_eq!(out.json()["lock"]["pinned"], json!(true));

    std::fs::write(&lock_file, "version = 2\n").unwrap();
    let out = greet(&config);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("is a version 2 lock"), "{}", out.stderr);
    let out = toolhost(&["lock", "--config", c]);
    assert_eq!(out.status, 2, "{}", out.stdout);
    let (status, replaced, _) = lock(&config, true);
    assert_eq!((status, replaced["state"].clone()), (0, json!("written")));
    assert_eq!(greet(&config).status, 0);
}

/// Each call's ledger row names the code it ran: the SHA-256 of the component's bytes and the
/// definition digest the lock pins, and `toolhost ledger` shows both.
#[test]
fn the_ledger_records_which_code_each_call_ran() {
    let (_dir, config, wasm) = pinned_template("");
    assert_eq!(lock(&config, false).0, 0);
    assert_eq!(greet(&config).status, 0);
    let out = toolhost(&["ledger", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let row = &out.json()[0];
    let sha = crate::support::sha256_of(&wasm);
    assert_eq!(row["component_digest"], json!(sha));
    let lock_text = std::fs::read_to_string(config.with_extension("lock")).unwrap();
    let definition = row["definition_digest"].as_str().unwrap();
    assert!(
        lock_text.contains(&format!("definition = \"{definition}\"")),
        "{definition} not in {lock_text}"
    );
    // A call of a tool that is not loaded names no code.
    let out = toolhost(&[
        "call",
        "--config",
        config.to_str().unwrap(),
        "nothing",
        "{}",
    ]);
    assert_eq!(out.status, 1);
    let out = toolhost(&["ledger", "--config", config.to_str().unwrap()]);
    let rows = out.json();
    assert_eq!(rows[1]["tool"], json!("nothing"));
    assert_eq!(rows[1]["component_digest"], Value::Null);
}

/// `write_text` calls through the CLI, and `toolhost approve` of their handles, on one config.
struct Approving<'a> {
    cfg: &'a str,
    args: &'a str,
}

impl Approving<'_> {
    /// `write_text` with the arguments, as call `id` of run R, with `token` if given.
    fn call(&self, id: &str, token: Option<&str>) -> Value {
        let mut a = vec![
            "call",
            "--config",
            self.cfg,
            "--run-id",
            "R",
            "--call-id",
            id,
        ];
        if let Some(t) = token {
            a.extend(["--approval-token", t]);
        }
        a.extend(["write_text", self.args]);
        toolhost(&a).json()
    }

    /// `toolhost approve --yes` of the handle in an `approval_required` result.
    fn approve(&self, asked: &Value) -> crate::support::Cli {
        let handle = asked["approval"]["handle"].as_str().unwrap();
        let (cfg, args) = (self.cfg, self.args);
        toolhost(&[
            "approve",
            "--config",
            cfg,
            "--yes",
            "--arguments",
            args,
            handle,
        ])
    }

    /// After a change, the token minted before (`token`) is `approval_mismatch` and writes no
    /// `note.txt` into `ws` (`ran` says what that would mean), and the handle asked before
    /// (`pending`) is refused with exit 2, nothing minted, saying `why`.
    fn old_approval_is_refused(
        &self,
        (token, pending): (&str, &Value),
        ws: &std::path::Path,
        ran: &str,
        why: &str,
    ) {
        let refused = self.call("3", Some(token));
        assert_eq!(
            (refused["status"].clone(), refused["code"].clone()),
            (json!("failed"), json!("approval_mismatch")),
            "{refused}"
        );
        assert!(!ws.join("note.txt").exists(), "{ran}");
        let out = self.approve(pending);
        assert_eq!(out.status, 2, "{}", out.stdout);
        assert!(out.stdout.is_empty(), "nothing minted: {}", out.stdout);
        assert!(out.stderr.contains(why), "{}", out.stderr);
    }

    /// The call proposed again is asked again, approved, and runs.
    fn proposed_again_runs(&self, id: (&str, &str)) -> Value {
        let fresh = self.approve(&self.call(id.0, None));
        assert_eq!(fresh.status, 0, "{}", fresh.stderr);
        self.call(id.1, Some(fresh.stdout.trim()))
    }
}

/// An approval binds the rules in force too: after a change to `[policy]` alone (a rule for
/// another tool), a token minted before is `approval_mismatch` and writes nothing, a handle
/// asked before cannot be approved, and the call proposed again is approved and runs.
#[test]
fn an_approval_does_not_survive_a_change_of_the_rules() {
    let (_dir, config, ws) = crate::support::approval_config(None);
    let a = Approving {
        cfg: config.to_str().unwrap(),
        args: r#"{"path":"note.txt","content":"approved"}"#,
    };
    let minted = a.approve(&a.call("1", None));
    assert_eq!(minted.status, 0, "{}", minted.stderr);
    let token = minted.stdout.trim().to_string();
    let pending = a.call("2", None);

    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "[policy]\ndefault = \"allow\"\n[[policy.rule]]\nname = \"no-listing\"\n\
         effect = \"deny\"\ntools = [\"list_dir\"]\n",
    );
    std::fs::write(&config, text).unwrap();
    a.old_approval_is_refused(
        (&token, &pending),
        &ws,
        "the old approval ran under new rules",
        "the rules in force changed",
    );

    let done = a.proposed_again_runs(("4", "5"));
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.join("note.txt")).unwrap(),
        "approved"
    );
}

/// An approval binds the tool's definition: after the tool changes (here its risk), a token
/// minted before is `approval_mismatch` and runs nothing, a handle asked before cannot be
/// approved, and a call proposed again is approved and runs.
#[test]
fn an_approval_does_not_survive_a_change_of_the_tool() {
    let (_dir, config, ws) = crate::support::approval_config(None);
    let a = Approving {
        cfg: config.to_str().unwrap(),
        args: r#"{"path":"note.txt","content":"approved"}"#,
    };
    let first = a.call("1", None);
    assert_eq!(first["code"], json!("approval_required"));
    let minted = a.approve(&first);
    assert_eq!(minted.status, 0, "{}", minted.stderr);
    let token = minted.stdout.trim().to_string();
    let pending = a.call("2", None);

    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("risk = \"write\"", "risk = \"destructive\""),
    )
    .unwrap();
    a.old_approval_is_refused(
        (&token, &pending),
        &ws,
        "the old approval ran the changed tool",
        "tool `write_text` is not the one this call asked approval for",
    );

    let done = a.proposed_again_runs(("4", "5"));
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.join("note.txt")).unwrap(),
        "approved"
    );
}
