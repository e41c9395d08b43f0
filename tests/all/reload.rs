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

pub(crate) fn greet(raw: &mut Raw, id: u64, seen: &mut Vec<Value>) -> Value {
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
            kill_hup(raw.pid());
        }
        if id > 105 && names(&mut raw, 10_000 + id, &mut seen).contains(&"sha256".to_string()) {
            after_reload += 1;
        }
    }
    assert_eq!(
        names(&mut raw, 2, &mut seen),
        ["greet", "json_pointer", "sha256"]
    );
    assert_eq!(told(&seen), 1, "the session is told once: {seen:?}");
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_text", "arguments": {"path": "x"}}}));
    let gone = raw.response(&json!(3), &mut seen);
    assert_eq!(gone["result"]["isError"], json!(true), "{gone}");

    std::fs::write(&config, "[[component]]\npath = \"no-such.wasm\"\n").unwrap();
    kill_hup(raw.pid());
    let said = refusal_logged(&raw);
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

/// Over HTTP, with a 2026-07-28 client: a call that started before a reload finishes on the
/// component it started with, although the reload removes that component; a token minted for
/// `write_text` before a reload that changes its definition (its risk) is `approval_mismatch`
/// after it and writes nothing; the listing's `ttlMs` is `[serve] tools_list_ttl_secs`; and
/// `/metrics` counts each reload by outcome.
#[test]
fn a_call_in_flight_keeps_its_component_and_an_old_approval_is_refused() {
    use crate::mcp_stateless::{call, code, modern, request};
    use crate::metrics::{scrape, start, value};

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = dir.path().join("toolhost.toml");
    let write = |risk: &str, conformance: bool| {
        let mut text = format!(
            "data_dir = \"data\"\ncache_dir = {}\n[serve]\ntools_list_ttl_secs = 5\n\
             [[component]]\npath = {}\n\
             fs = [{{ host = {}, guest = \"/workspace\", mode = \"rw\" }}]\n\
             [component.tools.write-text]\nrisk = \"{risk}\"\napproval = \"required\"\n",
            toml_path(&shared_cache()),
            toml_path(&guest("fs-tools")),
            toml_path(&ws),
        );
        if conformance {
            text.push_str(&format!(
                "[[component]]\npath = {}\n[component.tools.slow-compute]\n\
                 limits = {{ deadline_ms = 60_000 }}\n",
                toml_path(&guest("conformance"))
            ));
        }
        std::fs::write(&config, text).unwrap();
    };
    write("write", true);
    let server = start(&config);
    let mcp = server.mcp.clone();
    let reloads = |outcome: &str| {
        value(
            &scrape(&server.ops),
            "toolhost_reloads_total",
            json!({ "outcome": outcome }),
        )
    };
    assert_eq!((reloads("applied"), reloads("refused")), (0.0, 0.0));

    let (_, list) = modern(
        &mcp,
        "none",
        &request(1, "tools/list", json!({}), json!({})),
    );
    assert_eq!(list["result"]["ttlMs"], json!(5_000), "{list}");

    // A token for this write, minted before the reload (asked by a client that cannot be
    // asked, so the human approves with `toolhost approve`).
    let args = json!({"path": "note.txt", "content": "approved"});
    let mut unasked = call(2, "write_text", args.clone(), "w1");
    unasked["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let (_, asked) = modern(&mcp, "none", &unasked);
    assert_eq!(code(&asked["result"]), "approval_required", "{asked}");
    let handle = asked["result"]["_meta"]["toolhost/failure"]["approval"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle: {asked}"))
        .to_string();
    let minted = toolhost(&[
        "approve",
        "--config",
        config.to_str().unwrap(),
        "--yes",
        "--arguments",
        &args.to_string(),
        &handle,
    ]);
    assert_eq!(minted.status, 0, "{}", minted.stderr);
    let token = minted.stdout.trim().to_string();
    // And a question a client with elicitation was asked before the reload.
    let (_, question) = modern(&mcp, "none", &call(7, "write_text", args.clone(), "w3"));
    assert_eq!(
        question["result"]["resultType"],
        json!("input_required"),
        "{question}"
    );

    // A slow call is running (the in-flight gauge says so) when the reload lands.
    let slow = {
        let mcp = mcp.clone();
        std::thread::spawn(move || {
            modern(
                &mcp,
                "none",
                &call(3, "slow_compute", json!({"seconds": 3, "label": "x"}), "s1"),
            )
        })
    };
    let until = Instant::now() + Duration::from_secs(60);
    while value(&scrape(&server.ops), "toolhost_calls_in_flight", json!({})) < 1.0 {
        assert!(Instant::now() < until, "the slow call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    write("destructive", false);
    kill_hup(server.pid());
    wait_for(&server.log, "reloaded:");
    let (status, done) = slow.join().unwrap();
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "computed x in 3 s"}),
        "{done}"
    );
    let (_, gone) = modern(
        &mcp,
        "none",
        &call(4, "slow_compute", json!({"seconds": 0, "label": "y"}), "s2"),
    );
    assert_eq!(code(&gone["result"]), "unknown_tool", "{gone}");

    // The token approved the old `write_text`; the reloaded one is another tool.
    let mut retry = call(5, "write_text", args.clone(), "w2");
    retry["params"]["_meta"]["toolhost/approvalToken"] = json!(token);
    let (_, refused) = modern(&mcp, "none", &retry);
    assert_eq!(code(&refused["result"]), "approval_mismatch", "{refused}");
    // The question asked about the old `write_text`, answered yes after the reload, approves
    // nothing either.
    let mut answer = call(8, "write_text", args.clone(), "ignored-on-retry");
    answer["params"]["requestState"] = question["result"]["requestState"].clone();
    answer["params"]["inputResponses"] =
        json!({"approval": {"action": "accept", "content": {"approve": true}}});
    let (_, refused) = modern(&mcp, "none", &answer);
    assert_eq!(code(&refused["result"]), "approval_mismatch", "{refused}");
    assert!(!ws.join("note.txt").exists(), "an old approval ran");

    // A reload that fails is counted apart, and the reloaded set keeps serving.
    std::fs::write(&config, "[[component]]\npath = \"no-such.wasm\"\n").unwrap();
    kill_hup(server.pid());
    wait_for(&server.log, "reload refused");
    assert_eq!((reloads("applied"), reloads("refused")), (1.0, 1.0));
    let (_, list) = modern(
        &mcp,
        "none",
        &request(6, "tools/list", json!({}), json!({})),
    );
    let listed: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["list_dir", "read_text", "write_text"], "{list}");
    drop(server);

    write("destructive", false);
    let ledger = toolhost(&["ledger", "--config", config.to_str().unwrap()]);
    assert_eq!(ledger.status, 0, "{}", ledger.stderr);
    let rows = ledger.json();
    let slow: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["call_id"] == "key:s1")
        .collect();
    assert_eq!(slow.len(), 1, "{}", ledger.stdout);
    assert_eq!(slow[0]["status"], json!("completed"), "{}", ledger.stdout);
    assert_eq!(
        slow[0]["component_digest"],
        json!(sha256_of(&guest("conformance"))),
        "{}",
        ledger.stdout
    );
}

/// How many `notifications/tools/list_changed` the session has been sent.
fn told(seen: &[Value]) -> usize {
    seen.iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .count()
}

/// Ping (ids from `id`) until the session has been told `count` times (at most a minute).
fn until_told(raw: &mut Raw, seen: &mut Vec<Value>, count: usize, mut id: u64) {
    let until = Instant::now() + Duration::from_secs(60);
    while told(seen) < count {
        assert!(
            Instant::now() < until,
            "no list_changed: {:?}",
            raw.stderr_lines()
        );
        id += 1;
        raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        raw.response(&json!(id), seen);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The server's stderr lines until one says a reload was refused (at most a minute).
pub(crate) fn refusal_logged(raw: &Raw) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(60);
    let mut said = Vec::new();
    while !said.iter().any(|l: &String| l.contains("reload refused")) {
        assert!(Instant::now() < until, "no refusal logged: {said:?}");
        std::thread::sleep(Duration::from_millis(50));
        said.extend(raw.stderr_lines());
    }
    said
}

pub(crate) fn kill_hup(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Wait (at most a minute) for a line of `log` that contains `marker`.
fn wait_for(log: &std::sync::mpsc::Receiver<String>, marker: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    let mut said = Vec::new();
    while Instant::now() < until {
        if let Ok(line) = log.recv_timeout(Duration::from_millis(100)) {
            if line.contains(marker) {
                return;
            }
            said.push(line);
        }
    }
    panic!("no `{marker}` in the server's log: {said:?}");
}

/// A reload changes the rules with the tools: a deny rule added by a reload hides `greet` from
/// the session's listing and refuses its calls; a reload without it shows and runs it again.
#[test]
fn a_reload_changes_the_rules_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    write_config(&config, &[&guest("template")]);
    let base = std::fs::read_to_string(&config).unwrap();
    let mut raw = Raw::start(&config);
    raw.initialize("2025-11-25");
    let mut seen = Vec::new();
    assert_eq!(
        greet(&mut raw, 1, &mut seen)["result"]["isError"],
        json!(false)
    );

    let reload = |raw: &mut Raw, seen: &mut Vec<Value>, text: String, id: u64| {
        std::fs::write(&config, text).unwrap();
        let before = told(seen);
        kill_hup(raw.pid());
        until_told(raw, seen, before + 1, id);
    };
    let deny = format!(
        "{base}[policy]\ndefault = \"allow\"\n\
         [[policy.rule]]\nname = \"no-greeting\"\neffect = \"deny\"\ntools = [\"greet\"]\n"
    );
    reload(&mut raw, &mut seen, deny, 1_000);
    assert!(names(&mut raw, 2, &mut seen).is_empty());
    let refused = greet(&mut raw, 3, &mut seen);
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert_eq!(
        refused["result"]["_meta"]["toolhost/failure"]["code"],
        json!("unknown_tool"),
        "{refused}"
    );

    reload(&mut raw, &mut seen, base, 2_000);
    assert_eq!(names(&mut raw, 4, &mut seen), ["greet"]);
    assert_eq!(
        greet(&mut raw, 5, &mut seen)["result"]["isError"],
        json!(false)
    );
}

/// With `serve --watch`, no signal is needed: a config that names one more component is
/// reloaded, so is a component file replaced under its path, and a config written with an
/// error is refused with the running set kept.
#[test]
fn serve_watch_reloads_when_a_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("greet.wasm");
    std::fs::copy(guest("template"), &wasm).unwrap();
    let config = dir.path().join("toolhost.toml");
    write_config(&config, &[&wasm]);
    let mut raw = Raw::start_with(&config, None, &["--watch"]);
    raw.initialize("2025-11-25");
    let mut seen = Vec::new();
    assert_eq!(names(&mut raw, 1, &mut seen), ["greet"]);

    write_config(&config, &[&wasm, &guest("compute")]);
    until_told(&mut raw, &mut seen, 1, 1_000);
    assert_eq!(
        names(&mut raw, 2, &mut seen),
        ["greet", "json_pointer", "sha256"]
    );

    let next = dir.path().join("next.wasm");
    std::fs::copy(guest("template"), &next).unwrap();
    redescribe_greet(&next, "Greets someone, watched.");
    std::fs::rename(&next, &wasm).unwrap();
    until_told(&mut raw, &mut seen, 2, 2_000);
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let list = raw.response(&json!(3), &mut seen);
    let greet_tool = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "greet")
        .unwrap()
        .clone();
    assert_eq!(
        greet_tool["description"],
        json!("Greets someone, watched."),
        "{list}"
    );

    std::fs::write(&config, "[[component]]\npath = \"no-such.wasm\"\n").unwrap();
    refusal_logged(&raw);
    assert_eq!(
        names(&mut raw, 4, &mut seen),
        ["greet", "json_pointer", "sha256"]
    );
    assert_eq!(told(&seen), 2, "a refused reload tells nobody: {seen:?}");
}
