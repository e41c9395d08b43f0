//! Inputs that must be refused exactly (issue 12, item 6): integers written as floats or past
//! the 64-bit range never reach a guest rounded; oversized tool names and ids end with their
//! code before anything is written (the ledger does not grow) and the host keeps serving; a
//! `{principal}/` prefix constraint cannot be passed with a non-canonical path.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::contract::bounds::{MAX_CALL_ID_BYTES, MAX_TOOL_NAME_CHARS};
use toolhost::{Code, RunContext, Runtime, Status, ToolCall};

use crate::support::{guest, runtime, toml_path, toolhost};

/// Ten megabytes: the size the issue's attack used.
const HUGE: usize = 10 << 20;

/// Most bytes the ledger may grow by while it refuses oversized calls ("a few KB"; it should
/// not grow at all).
const MAX_GROWTH: u64 = 4096;

/// A fresh data directory, the template (greet), types and fs tools, and a policy that lets
/// alice read only under `alice/`.
struct Env {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("alice")).unwrap();
        std::fs::create_dir_all(ws.join("bob")).unwrap();
        std::fs::write(ws.join("alice/notes.txt"), "alice's").unwrap();
        std::fs::write(ws.join("bob/secret.txt"), "bob's").unwrap();
        let text = format!(
            r#"data_dir = {data}
[serve]
principal = "alice"
tenant = "acme"

[policy]
default = "deny"
[[policy.rule]]
effect = "allow"
principals = ["alice", "local"]
tools = ["greet", "echo_scalars"]
[[policy.rule]]
effect = "allow"
principals = ["alice"]
tools = ["read_text"]
[[policy.rule.constraint]]
argument = "path"
prefix = "{{principal}}/"

[[component]]
path = {template}

[[component]]
path = {types}

[[component]]
path = {fs}
fs = [{{ host = {ws}, guest = "/workspace" }}]
"#,
            data = toml_path(&dir.path().join("data")),
            template = toml_path(&guest("template")),
            types = toml_path(&guest("types")),
            fs = toml_path(&guest("fs-tools")),
            ws = toml_path(&ws),
        );
        let config = dir.path().join("toolhost.toml");
        std::fs::write(&config, text).unwrap();
        Env { dir, config }
    }

    /// Bytes of the ledger on disk: the database and its write-ahead log.
    fn ledger_bytes(&self) -> u64 {
        let db = self.dir.path().join("data/ledger.sqlite");
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        [db, wal]
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum()
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

/// The scalars the types guest echoes, with `field` parsed from the JSON text `number` (as a
/// frontend parses it: serde_json, no arbitrary precision).
fn scalars_with(field: &str, number: &str) -> Value {
    let mut v = json!({"v": {
        "b": true, "i8v": -128, "u8v": 255, "i16v": -32768, "u16v": 65535,
        "i32v": -2147483648i64, "u32v": 4294967295u64, "i64v": i64::MIN, "u64v": u64::MAX,
        "f32v": 1.5, "f64v": 0.1, "c": "é", "s": "t"
    }});
    v["v"][field] = serde_json::from_str(number).unwrap();
    v
}

/// An integer parameter accepts only a number written as that integer: floats, exponents and
/// literals past the 64-bit range are `invalid_arguments` naming the parameter, and the guest
/// never runs; an exact wide integer reaches the guest and comes back exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_are_exact_or_refused() {
    let e = Env::new();
    let rt = runtime(&e.config);
    let ctx = rt.context("alice", "acme");
    let refused = [
        ("u64v", "9007199254740993.0"),
        ("u64v", "1e19"),
        ("u64v", "1.0e2"),
        ("u64v", "3.0"),
        ("u64v", "18446744073709551616"),
        ("i64v", "-9223372036854775809"),
        ("i64v", "9007199254740993.0"),
        ("u8v", "255.0"),
    ];
    for (i, (field, number)) in refused.iter().enumerate() {
        let c = call(
            &format!("int-{i}"),
            "echo_scalars",
            scalars_with(field, number),
        );
        let r = rt.run_call(&ctx, &c, None).await;
        assert_eq!(
            (r.status, r.code),
            (Status::Failed, Some(Code::InvalidArguments)),
            "{field}={number}: {r:?}"
        );
        assert!(
            r.message.contains(&format!("/v/{field}")),
            "{field}={number}: {}",
            r.message
        );
    }
    assert_eq!(rt.executions(), 0, "a guest ran with a refused integer");
    let exact = call(
        "int-exact",
        "echo_scalars",
        scalars_with("u64v", "9007199254740993"),
    );
    let r = rt.run_call(&ctx, &exact, None).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(r.output.unwrap()["u64v"], json!(9_007_199_254_740_993u64));
}

/// The JSON the binary prints carries 64-bit results digit for digit (no float on the way out).
#[test]
fn wide_integer_results_are_printed_exactly() {
    let e = Env::new();
    let args = scalars_with("u64v", "9007199254740993").to_string();
    let config = e.config.display().to_string();
    let out = toolhost(&["call", "--config", &config, "echo_scalars", &args]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("\"u64v\":9007199254740993"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\"i64v\":-9223372036854775808"),
        "{}",
        out.stdout
    );
}

/// A 10 MB tool name is `unknown_tool`, a 10 MB call id or run id `invalid_arguments`, a 10 MB
/// principal `unauthorized` — each answered small, nothing written (the ledger does not grow)
/// — and the same runtime keeps serving. An empty name is an ordinary, recorded unknown tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_names_and_ids_are_refused_before_the_ledger() {
    let e = Env::new();
    let rt = runtime(&e.config);
    let ctx = rt.context("alice", "acme");
    let greet = |id: &str| call(id, "greet", json!({"name": "x"}));
    let warm = rt.run_call(&ctx, &greet("warm"), None).await;
    assert_eq!(warm.status, Status::Completed, "{warm:?}");
    let before = e.ledger_bytes();
    let huge = "x".repeat(HUGE);
    let long_principal = rt.context(&huge, "acme");
    let long_run = rt.context("alice", "acme").with_run_id(huge.clone());
    let cases: [(&RunContext, ToolCall, Code); 5] = [
        (&ctx, call("n", &huge, json!({})), Code::UnknownTool),
        (&ctx, greet(&huge), Code::InvalidArguments),
        (&ctx, call(&huge, &huge, json!({})), Code::UnknownTool),
        (&long_principal, greet("p"), Code::Unauthorized),
        (&long_run, greet("r"), Code::InvalidArguments),
    ];
    for (i, (cx, c, code)) in cases.iter().enumerate() {
        let r = rt.run_call(cx, c, None).await;
        assert_eq!(
            (r.status, r.code),
            (Status::Failed, Some(*code)),
            "case {i}"
        );
        assert!(r.tool.chars().count() <= MAX_TOOL_NAME_CHARS, "case {i}");
        assert!(r.call_id.len() <= MAX_CALL_ID_BYTES, "case {i}");
        assert!(serde_json::to_vec(&r).unwrap().len() < 2048, "case {i}");
    }
    let grown = e.ledger_bytes().saturating_sub(before);
    assert!(grown < MAX_GROWTH, "the ledger grew by {grown} bytes");
    assert_eq!(rt.ledger().calls(None).unwrap().len(), 1);
    let empty = rt.run_call(&ctx, &call("empty", "", json!({})), None).await;
    assert_eq!(empty.code, Some(Code::UnknownTool), "{empty:?}");
    let after = rt.run_call(&ctx, &greet("after"), None).await;
    assert_eq!(after.status, Status::Completed, "{after:?}");
    assert_eq!(rt.executions(), 2);
    assert_eq!(rt.ledger().calls(None).unwrap().len(), 3);
}

/// The binary's batch frontend: a proposal with a 10 MB name and one with a 10 MB call id end
/// `unknown_tool` and `invalid_arguments`, and the ledger file does not grow.
#[test]
fn batch_refuses_oversized_proposals_without_growing_the_ledger() {
    let e = Env::new();
    let config = e.config.display().to_string();
    let file = e.dir.path().join("proposals.json");
    let batch = |proposals: Value| {
        std::fs::write(&file, proposals.to_string()).unwrap();
        let file = file.display().to_string();
        toolhost(&["batch", "--config", &config, "--principal", "alice", &file])
    };
    let warm = batch(json!([{"call_id": "w", "name": "greet", "arguments": {"name": "x"}}]));
    assert_eq!(warm.status, 0, "{}", warm.stderr);
    let before = e.ledger_bytes();
    let huge = "y".repeat(HUGE);
    let out = batch(json!([
        {"call_id": "a", "name": huge, "arguments": {}},
        {"call_id": huge, "name": "greet", "arguments": {"name": "x"}},
    ]));
    let results = out.json();
    let codes: Vec<&Value> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["code"])
        .collect();
    assert_eq!(codes, [&json!("unknown_tool"), &json!("invalid_arguments")]);
    assert!(
        out.stdout.len() < 4096,
        "{} bytes printed",
        out.stdout.len()
    );
    let grown = e.ledger_bytes().saturating_sub(before);
    assert!(grown < MAX_GROWTH, "the ledger grew by {grown} bytes");
}

/// A raw JSON-RPC conversation with `toolhost serve` over stdio (bounded waits).
struct McpStdio {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl McpStdio {
    fn start(config: &Path) -> McpStdio {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["serve", "--config"])
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = crate::support::line_reader(stdout);
        McpStdio {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The response to request `id`, within a minute.
    fn response(&mut self, id: &Value) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let v: Value = serde_json::from_str(&line).unwrap();
                if v.get("id") == Some(id) && v.get("method").is_none() {
                    return v;
                }
            }
        }
        panic!("no response to request {}", clip(&id.to_string()));
    }

    fn call(&mut self, id: Value, name: &str) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": name, "arguments": {"name": "x"}}}));
        self.response(&id)
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clip(s: &str) -> &str {
    &s[..s.len().min(80)]
}

/// Over MCP stdio, one `serve` process: a 1 MiB tool name is `unknown_tool`, a 1 MiB request
/// id `invalid_arguments` (both `isError` results), the ledger does not grow, and the next call
/// completes. (1 MiB, not 10: a whole frame is one line, and lines have their own bound.)
#[test]
fn mcp_refuses_oversized_names_and_ids_and_keeps_serving() {
    let e = Env::new();
    let mut s = McpStdio::start(&e.config);
    s.send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bounds", "version": "0"}}}),
    );
    s.response(&json!(0));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let warm = s.call(json!(1), "greet");
    assert_eq!(warm["result"]["isError"], false, "{warm}");
    let before = e.ledger_bytes();
    let big = "z".repeat(1 << 20);
    let by_name = s.call(json!(2), &big);
    let by_id = s.call(json!(big.clone()), "greet");
    for (r, code) in [(&by_name, "unknown_tool"), (&by_id, "invalid_arguments")] {
        assert_eq!(r["result"]["isError"], true, "{}", clip(&r.to_string()));
        let content = &r["result"]["_meta"]["toolhost/failure"];
        assert_eq!(content["code"], code, "{}", clip(&r.to_string()));
        assert_eq!(content["status"], "failed");
    }
    let grown = e.ledger_bytes().saturating_sub(before);
    assert!(grown < MAX_GROWTH, "the ledger grew by {grown} bytes");
    let after = s.call(json!(3), "greet");
    assert_eq!(after["result"]["isError"], false, "{after}");
}

/// A `{principal}/` prefix is checked exactly: alice reads `alice/notes.txt`, and every
/// non-canonical spelling — a leading `/`, `..`, `.`, empty segments, a trailing `/`,
/// backslashes, NUL, percent-escapes — is `unauthorized` before the tool runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_constraint_refuses_every_bypass() {
    let e = Env::new();
    let rt: Runtime = runtime(&e.config);
    let alice = rt.context("alice", "acme");
    let read = |id: String, path: &str| call(&id, "read_text", json!({ "path": path }));
    let ok = rt
        .run_call(&alice, &read("ok".into(), "alice/notes.txt"), None)
        .await;
    assert_eq!(ok.status, Status::Completed, "{ok:?}");
    let bypasses = [
        "/alice/notes.txt",
        "/alice/../bob/secret.txt",
        "alice/../bob/secret.txt",
        "alice//notes.txt",
        "./alice/notes.txt",
        "alice/./notes.txt",
        "alice/notes.txt/",
        "alice\\..\\bob\\secret.txt",
        "alice/notes.txt\0",
        "alice/%2e%2e/bob/secret.txt",
        "alice/%2E%2E/bob/secret.txt",
        "alice%2f..%2fbob%2fsecret.txt",
    ];
    for (i, path) in bypasses.iter().enumerate() {
        let r = rt
            .run_call(&alice, &read(format!("b{i}"), path), None)
            .await;
        assert_eq!(
            (r.status, r.code),
            (Status::Failed, Some(Code::Unauthorized)),
            "{path:?}: {r:?}"
        );
    }
    assert_eq!(rt.executions(), 1, "a bypass reached the tool");
}
