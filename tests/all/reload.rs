//! Changing a running host's tools: `toolhost serve` reads its config again on `SIGHUP`, loads
//! and checks the new set first, then swaps it in. A client calling all the while loses no
//! call, the session is told `notifications/tools/list_changed`, the ledger shows which
//! component ran each call; a config that fails changes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::Raw;
use crate::support::{guest, redescribe_greet, sha256_of, shared_cache, toml_path, toolhost};

fn write_config(config: &Path, components: &[&Path]) {
    let mut text = format!(
        "data_dir = \"data\"\ncache_dir = {}\n",
        toml_path(&shared_cache())
    );
    for c in components {
        text.push_str(&format!("[[component]]\npath = {}\n", toml_path(c)));
    }
    std::fs::write(config, text).unwrap();
}

fn hangup(raw: &Raw) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &raw.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn names(raw: &mut Raw, id: u64, seen: &mut Vec<Value>) -> Vec<String> {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
    let r = raw.response(&json!(id), seen);
    let mut n: Vec<String> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

fn greet(raw: &mut Raw, id: u64, seen: &mut Vec<Value>) -> Value {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ada"}}}));
    raw.response(&json!(id), seen)
}

/// While a client calls `greet` one call after another, a reload replaces `greet`'s component,
/// removes fs-tools and adds compute: every call completes, the listing changes, and the ledger
/// shows the old component's digest for the calls before and the new one's after. A reload of
/// a config that does not load is refused and the host keeps serving the set it had.
#[test]
fn a_reload_under_calls_loses_nothing_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        dir.path().join("greet-1.wasm"),
        dir.path().join("greet-2.wasm"),
    );
    std::fs::copy(guest("template"), &old).unwrap();
    std::fs::copy(guest("template"), &new).unwrap();
    redescribe_greet(&new, "Greets someone, reloaded.");
    let config = dir.path().join("toolhost.toml");
    write_config(&config, &[&old, &guest("fs-tools")]);

    let mut raw = Raw::start(&config);
    let init = raw.initialize("2025-11-25");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        json!(true),
        "{init}"
    );
    let mut seen = Vec::new();
    assert_eq!(
        names(&mut raw, 1, &mut seen),
        ["greet", "list_dir", "read_text", "write_text"]
    );

    write_config(&config, &[&new, &guest("compute")]);
    let mut id = 100;
    let mut after_reload = 0;
    let until = Instant::now() + Duration::from_secs(60);
    while after_reload < 5 {
        assert!(
            Instant::now() < until,
            "the reload never applied: {:?}",
            raw.stderr_lines()
        );
        let r = greet(&mut raw, id, &mut seen);
        assert_eq!(
            r["result"]["isError"],
            json!(false),
            "call {id} failed: {r}"
        );
        id += 1;
        if id == 105 {
            hangup(&raw);
        }
        if id > 105 && names(&mut raw, 10_000 + id, &mut seen).contains(&"sha256".to_string()) {
            after_reload += 1;
        }
    }
    assert_eq!(
        names(&mut raw, 2, &mut seen),
        ["greet", "json_pointer", "sha256"]
    );
    let told = |seen: &[Value]| {
        seen.iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    };
    assert_eq!(told(&seen), 1, "the session is told once: {seen:?}");
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_text", "arguments": {"path": "x"}}}));
    let gone = raw.response(&json!(3), &mut seen);
    assert_eq!(gone["result"]["isError"], json!(true), "{gone}");

    std::fs::write(&config, "[[component]]\npath = \"no-such.wasm\"\n").unwrap();
    hangup(&raw);
    let until = Instant::now() + Duration::from_secs(30);
    let mut said = Vec::new();
    while !said.iter().any(|l: &String| l.contains("reload refused")) {
        assert!(Instant::now() < until, "no refusal logged: {said:?}");
        std::thread::sleep(Duration::from_millis(50));
        said.extend(raw.stderr_lines());
    }
    assert!(said.iter().any(|l| l.contains("no-such.wasm")), "{said:?}");
    assert_eq!(
        names(&mut raw, 4, &mut seen),
        ["greet", "json_pointer", "sha256"]
    );
    assert_eq!(
        greet(&mut raw, 5, &mut seen)["result"]["isError"],
        json!(false)
    );
    assert_eq!(told(&seen), 1, "a refused reload tells nobody: {seen:?}");
    drop(raw);

    write_config(&config, &[&new, &guest("compute")]);
    let ledger = toolhost(&["ledger", "--config", config.to_str().unwrap()]);
    assert_eq!(ledger.status, 0, "{}", ledger.stderr);
    let rows = ledger.json();
    let rows = rows.as_array().unwrap();
    let ran = |digest: &str| {
        rows.iter()
            .filter(|r| r["tool"] == "greet" && r["component_digest"] == digest)
            .count()
    };
    let (before, after) = (ran(&sha256_of(&old)), ran(&sha256_of(&new)));
    assert!(
        before >= 5 && after >= 5,
        "before {before}, after {after}: {}",
        ledger.stdout
    );
    assert_eq!(
        before + after,
        id as usize - 100 + 1,
        "every greet call is in the ledger once"
    );
}
