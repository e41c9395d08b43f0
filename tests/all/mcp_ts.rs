//! `toolhost serve` driven by the official TypeScript MCP SDK (tests/mcp/ts/client.mjs, one
//! scenario per run) over stdio and Streamable HTTP. This SDK checks `structuredContent`
//! against the listed `outputSchema` on every result, failures included, so it proves that
//! every failure reaches it as an `isError` result and never as a thrown -32602.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mcp::{fixture, http_serve, ledger, run_ids, wait_bounded, Fixture, TOKEN};
use crate::support::{line_reader, repo};

/// Longest any one client scenario may take before the test kills it.
const SCENARIO_LIMIT: Duration = Duration::from_secs(180);

/// The client script, once `just setup-mcp` has installed its pinned SDK.
fn ts_client() -> PathBuf {
    let dir = repo().join("tests/mcp/ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "{} is missing: `just setup-mcp` installs it (npm ci from the committed lock file)",
        dir.join("node_modules").display()
    );
    dir.join("client.mjs")
}

/// What one client run printed.
struct Outcome {
    facts: Value,
    stderr: String,
}

/// Run one scenario of the TypeScript client to completion (bounded), asserting it passed.
fn client(scenario: &str, transport: &[&str]) -> Outcome {
    let mut child = Command::new("node")
        .arg(ts_client())
        .arg(scenario)
        .args(transport)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts (Node 20 is needed for the TypeScript MCP SDK)");
    let stdout = line_reader(child.stdout.take().unwrap());
    let stderr = line_reader(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child, SCENARIO_LIMIT);
    // The pipes close with the process; a grandchild holding them is bounded too.
    let drain = |rx: std::sync::mpsc::Receiver<String>| {
        let mut lines = Vec::new();
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
            lines.push(line);
        }
        lines.join("\n")
    };
    let (stdout, stderr) = (drain(stdout), drain(stderr));
    assert!(
        status == Some(0),
        "TypeScript client scenario {scenario} failed (exit {status:?})\nstdout: {stdout}\nstderr: {stderr}"
    );
    let facts = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("scenario {scenario} printed no JSON ({e}): {stdout}\nstderr: {stderr}")
    });
    Outcome { facts, stderr }
}

fn stdio(f: &Fixture) -> Vec<String> {
    vec![
        "--binary".into(),
        env!("CARGO_BIN_EXE_toolhost").into(),
        "--config".into(),
        f.config.display().to_string(),
    ]
}

fn http(url: &str) -> Vec<String> {
    vec!["--url".into(), url.into(), "--token".into(), TOKEN.into()]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The `tools` facts: listed tools, and every failure code the fixture config produces.
fn assert_tools(facts: &Value) {
    assert!(facts["tools"].as_u64().unwrap() >= 20, "{facts}");
    // Five ordinary failures and the hostile fixtures: at least eight more.
    assert!(facts["failures"].as_u64().unwrap() >= 13, "{facts}");
    for code in [
        "invalid_arguments",
        "unknown_tool",
        "tool_error",
        "fuel_exhausted",
        "deadline_exceeded",
        "memory_exceeded",
        "output_too_large",
        "guest_trap",
    ] {
        assert!(
            facts["codes"][code].as_u64().unwrap_or(0) >= 1,
            "{code}: {facts}"
        );
    }
}

/// The `cancel` facts, then the ledger of the one session in `server_stderr`: the aborted
/// call is recorded `cancelled`, long before its 30 s deadline.
fn assert_cancelled(facts: &Value, f: &Fixture, server_stderr: &str) {
    assert!(facts["abort_ms"].as_u64().unwrap() < 1_000, "{facts}");
    assert!(facts["elapsed_ms"].as_u64().unwrap() < 10_000, "{facts}");
    let runs = run_ids(server_stderr);
    assert_eq!(runs.len(), 1, "{server_stderr}");
    let until = Instant::now() + Duration::from_secs(20);
    let sleeper = loop {
        let calls = ledger(&f.config, &runs[0]);
        let found = calls.into_iter().find(|c| c["tool"] == "sleep_forever");
        match found {
            Some(c) if !c["status"].is_null() => break c,
            other if Instant::now() > until => panic!("sleep_forever never ended: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    };
    crate::mcp::assert_cancelled_early(&sleeper);
}

/// Over stdio, after tools/list: successes pass the SDK's output-schema check and every
/// failure code (invalid, unknown, tool error, each hostile fixture) is an isError result.
#[test]
fn ts_stdio_failures_are_results_after_listing() {
    let f = fixture(1);
    let out = client("tools", &strs(&stdio(&f)));
    assert_tools(&out.facts);
}

/// Over stdio: an aborted call is cancelled in the host (recorded `cancelled`) and the
/// session serves on.
#[test]
fn ts_stdio_abort_cancels_the_call() {
    let f = fixture(1);
    let out = client("cancel", &strs(&stdio(&f)));
    assert_cancelled(&out.facts, &f, &out.stderr);
}

/// Over Streamable HTTP with a bearer token, the same as over stdio: every failure code is
/// an isError result after tools/list.
#[test]
fn ts_http_failures_are_results_after_listing() {
    let f = fixture(1);
    let server = http_serve(&f.config);
    let out = client("tools", &strs(&http(&server.url)));
    assert_tools(&out.facts);
}

/// Over Streamable HTTP: an aborted call is cancelled in the host and the session serves on.
#[test]
fn ts_http_abort_cancels_the_call() {
    let f = fixture(1);
    let server = http_serve(&f.config);
    let out = client("cancel", &strs(&http(&server.url)));
    let log: Vec<String> = server.stderr.try_iter().collect();
    assert_cancelled(&out.facts, &f, &log.join("\n"));
}
