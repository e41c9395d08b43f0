//! Grants across calls, components and hosts: a granted directory is a handle opened once, so
//! swapping its path changes nothing; overlapping writable grants and grants over the host's
//! own files are refused at load; per-principal grants keep principals apart.

use std::path::Path;

use serde_json::{json, Value};

use crate::mcp::Raw;
use crate::support::{guest, hostile_component, toml_path, toolhost};

/// A config file in `dir` (which must be outside every grant), returned as a path string.
fn write_config(dir: &Path, text: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn fs_tools_config(grant: &Path, mode: &str) -> String {
    format!(
        "[[component]]\npath = {}\nfs = [{{ host = {}, guest = \"/workspace\", mode = \"{mode}\" }}]\n",
        toml_path(&guest("fs-tools")),
        toml_path(grant),
    )
}

fn call_tool(raw: &mut Raw, id: u64, name: &str, args: Value) -> Value {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": args}}));
    raw.response(&json!(id), &mut Vec::new())["result"].clone()
}

/// The grant-swap attack, across two hosts that share directories: a hostile tool with `rw` on
/// `outer` renames another host's granted `outer/victim` away and puts a symlink to `/` in its
/// place (and plants links to `/`, `/etc` and `/etc/passwd`). The victim host, serving since
/// before the swap, still reaches only its original directory and never a byte from outside
/// it, for reads and writes; a new `toolhost call` of the victim config is refused at load
/// because its grant path now holds a symlink.
#[test]
pub(crate) fn grant_swap_never_reaches_outside_the_grant() {
    let t = tempfile::tempdir().unwrap();
    let outer = t.path().join("outer");
    let victim = outer.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("secret.txt"), "victim data").unwrap();
    let victim_config = write_config(
        &t.path().join("victim-host"),
        &fs_tools_config(&victim, "rw"),
    );
    let attacker_config = write_config(
        &t.path().join("attacker-host"),
        &hostile_component(&format!(
            "[component.tools.swap-grant]\nfs = [{{ host = {}, guest = \"/outer\", mode = \"rw\" }}]\n",
            toml_path(&outer),
        )),
    );

    let mut serve = Raw::start(Path::new(&victim_config));
    serve.initialize("2025-11-25");
    let before = call_tool(&mut serve, 1, "read_text", json!({"path": "secret.txt"}));
    assert_eq!(
        before["structuredContent"]["result"],
        json!("victim data"),
        "{before}"
    );

    let attack = toolhost(&["call", "--config", &attacker_config, "swap_grant", "{}"]);
    let attempts = attack.json()["output"].clone();
    let attempts = attempts.as_array().expect("a list of attempts");
    let outcome = |i: usize| attempts[i]["outcome"].as_str().unwrap().to_string();
    // The rename and the relative links must work, or this test would prove nothing; WASI
    // itself refuses the absolute ones, so the test plants those as another process would.
    for i in [0, 1, 3] {
        assert!(
            outcome(i).starts_with("allowed"),
            "the attack did not set up: {attempts:?}"
        );
    }
    for (i, to, at) in [(2, "/", "link-root"), (4, "/etc/passwd", "link-passwd")] {
        if !outcome(i).starts_with("allowed") {
            std::os::unix::fs::symlink(to, outer.join("victim-moved").join(at)).unwrap();
        }
    }
    for i in [5, 6] {
        assert!(outcome(i).starts_with("denied"), "{attempts:?}");
    }
    assert!(std::fs::symlink_metadata(&victim)
        .unwrap()
        .file_type()
        .is_symlink());

    let pwned = t.path().join("pwned.txt");
    let through_root = format!("link-root{}", pwned.display());
    let mut id = 10;
    for path in [
        "etc/passwd",
        "link-passwd",
        "link-up/passwd",
        "link-root/etc/passwd",
        "../victim/etc/passwd",
        "/workspace/../etc/passwd",
    ] {
        id += 1;
        let r = call_tool(&mut serve, id, "read_text", json!({"path": path}));
        assert_eq!(r["isError"], json!(true), "{path} was readable: {r}");
        assert_eq!(
            r["_meta"]["toolhost/failure"]["code"],
            json!("tool_error"),
            "{path}: {r}"
        );
        assert!(!r.to_string().contains("root:"), "{path}: {r}");
    }
    for path in [through_root.as_str(), "../pwned.txt", "link-up/pwned.txt"] {
        id += 1;
        let r = call_tool(
            &mut serve,
            id,
            "write_text",
            json!({"path": path, "content": "pwned"}),
        );
        assert_eq!(r["isError"], json!(true), "{path} was writable: {r}");
    }
    assert!(!pwned.exists(), "a write escaped the grant");
    assert!(
        !outer.join("pwned.txt").exists(),
        "a write escaped the grant"
    );
    let after = call_tool(&mut serve, 99, "read_text", json!({"path": "secret.txt"}));
    assert_eq!(
        after["structuredContent"]["result"],
        json!("victim data"),
        "{after}"
    );

    let fresh = toolhost(&[
        "call",
        "--config",
        &victim_config,
        "read_text",
        r#"{"path": "secret.txt"}"#,
    ]);
    assert_eq!(fresh.status, 2, "{}", fresh.stdout);
    assert!(fresh.stderr.contains("symbolic link"), "{}", fresh.stderr);
    assert!(
        fresh.stderr.contains("component[0].fs[0]"),
        "{}",
        fresh.stderr
    );
    assert!(!fresh.stdout.contains("root:"));
}

/// The same two tools in one host: the writable grant that contains the other grant's
/// directory is refused at load, naming both keys, before anything runs.
#[test]
fn overlapping_writable_grants_are_refused_naming_both_keys() {
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("outer/victim");
    std::fs::create_dir_all(&victim).unwrap();
    let config = write_config(
        &t.path().join("host"),
        &format!(
            "{}\n{}",
            fs_tools_config(&victim, "ro"),
            hostile_component(&format!(
                "[component.tools.swap-grant]\nfs = [{{ host = {}, guest = \"/outer\", mode = \"rw\" }}]\n",
                toml_path(&t.path().join("outer")),
            )),
        ),
    );
    for args in [vec!["tools"], vec!["serve"]] {
        let mut argv = args.clone();
        argv.extend(["--config", config.as_str()]);
        let out = toolhost(&argv);
        assert_eq!(out.status, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("component[1].tools.swap-grant.fs[0]"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("component[0].fs[0]"), "{}", out.stderr);
        assert!(out.stderr.contains("writable"), "{}", out.stderr);
    }
    assert!(!t.path().join("host/.toolhost/ledger.sqlite").exists());
    // Equal directories overlap too.
    let same = write_config(
        &t.path().join("same"),
        &format!(
            "{}[component.tools.read-text]\nfs = [{{ host = {}, guest = \"/workspace\", mode = \"ro\" }}]\n",
            fs_tools_config(&victim, "rw"),
            toml_path(&victim),
        ),
    );
    let out = toolhost(&["tools", "--config", &same]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("component[0].tools.read-text.fs[0]"),
        "{}",
        out.stderr
    );
}

/// A grant (read-only or writable) over the data directory, inside it, over the config file or
/// over an approval key kept elsewhere is refused at load, naming the key and what it reaches,
/// and nothing is created.
#[test]
fn grants_over_the_hosts_own_files_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().join("host");
    std::fs::create_dir_all(base.join("keys")).unwrap();
    std::fs::create_dir_all(base.join("state/inner")).unwrap();
    std::fs::create_dir_all(base.join("work")).unwrap();
    let cases = [
        ("data_dir = \"state\"\n", "state", "ro", "data directory"),
        (
            "data_dir = \"state\"\n",
            "state/inner",
            "rw",
            "data directory",
        ),
        ("", ".", "ro", "data directory"),
        (
            "data_dir = \"state\"\n[policy]\ndefault = \"allow\"\napproval = { key_file = \"keys/approval.key\" }\n",
            "keys",
            "ro",
            "approval key",
        ),
    ];
    for (head, grant, mode, what) in cases {
        let text = format!(
            "{head}[[component]]\npath = {}\nfs = [{{ host = \"{grant}\", guest = \"/workspace\", mode = \"{mode}\" }}]\n",
            toml_path(&guest("fs-tools")),
        );
        let config = write_config(&base, &text);
        let out = toolhost(&["tools", "--config", &config]);
        assert_eq!(out.status, 2, "{grant}: {}", out.stdout);
        assert!(
            out.stderr.contains("component[0].fs[0]"),
            "{grant}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(what), "{grant}: {}", out.stderr);
        assert!(!base.join("state/ledger.sqlite").exists());
        assert!(!base.join("keys/approval.key").exists());
    }
    // The config file itself, with the data directory elsewhere.
    let text = format!(
        "data_dir = \"../elsewhere\"\n[[component]]\npath = {}\nfs = [{{ host = \"work/..\", guest = \"/w\" }}]\n",
        toml_path(&guest("fs-tools")),
    );
    let config = write_config(&base, &text);
    let out = toolhost(&["tools", "--config", &config]);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(out.stderr.contains("config file"), "{}", out.stderr);
}

/// A `{principal}` grant gives each principal its own directory, opened beneath the fixed
/// part: bob cannot read alice's file, a symlink planted where a principal's directory would be
/// is refused (`host_error`, nothing reached), and a principal that is not one plain name is
/// refused before anything is created.
#[test]
fn per_principal_grants_keep_principals_apart() {
    let t = tempfile::tempdir().unwrap();
    let users = t.path().join("users");
    std::fs::create_dir_all(&users).unwrap();
    let config = write_config(
        &t.path().join("host"),
        &fs_tools_config(&users.join("{principal}"), "rw"),
    );
    let call = |principal: &str, tool: &str, args: Value| {
        toolhost(&[
            "call",
            "--config",
            &config,
            "--principal",
            principal,
            tool,
            &args.to_string(),
        ])
        .json()
    };
    let w = call(
        "alice",
        "write_text",
        json!({"path": "note.txt", "content": "alice's"}),
    );
    assert_eq!(w["status"], json!("completed"), "{w}");
    assert_eq!(
        std::fs::read_to_string(users.join("alice/note.txt")).unwrap(),
        "alice's"
    );
    let r = call("alice", "read_text", json!({"path": "note.txt"}));
    assert_eq!(r["output"], json!("alice's"), "{r}");
    for path in [
        "note.txt",
        "../alice/note.txt",
        "/workspace/../alice/note.txt",
    ] {
        let r = call("bob", "read_text", json!({"path": path}));
        assert_eq!(r["status"], json!("failed"), "bob read {path}: {r}");
        assert_eq!(r["code"], json!("tool_error"), "{r}");
    }
    std::os::unix::fs::symlink("/", users.join("mallory")).unwrap();
    let r = call("mallory", "read_text", json!({"path": "etc/passwd"}));
    assert_eq!(r["status"], json!("failed"), "{r}");
    assert_eq!(r["code"], json!("host_error"), "{r}");
    assert!(!r.to_string().contains("root:"));
    let r = call(
        "../escape",
        "write_text",
        json!({"path": "x", "content": "x"}),
    );
    assert_eq!(r["code"], json!("host_error"), "{r}");
    assert!(!t.path().join("escape").exists());
    let mut made: Vec<String> = std::fs::read_dir(&users)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made, ["alice", "bob", "mallory"]);
}
