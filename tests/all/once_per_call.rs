//! A call is prepared once — its tool resolved for its caller and its call put in canonical
//! form a single time — whichever front door it comes through: MCP over stdio, MCP over
//! Streamable HTTP (2026-07-28 requests), the agent loop. Each test counts the runtime's work
//! ([`Runtime::work`]) across a few calls of one read tool.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio_util::sync::CancellationToken;
use toolhost::agent::{self, AgentConfig, Provider, ProviderOptions, StopReason};
use toolhost::serve::Shared;
use toolhost::{Config, Runtime};
use toolhost_runtime::Work;
use toolhost_sandbox::EpochMode;

use crate::openai::{scripted, text, tool_calls, Reply};
use crate::support::{guest, toml_path};

/// Calls each test makes.
const CALLS: u64 = 3;

/// The longest any answer may take before a test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// The bearer token of the HTTP caller.
const TOKEN: &str = "counting-token";

/// A config with `greet` (template) and a bearer-token caller, and the runtime it makes.
fn host() -> (tempfile::TempDir, Arc<Runtime>, Config) {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "data_dir = {data}\n\
         [serve]\n[[serve.token]]\nsha256 = \"{hash}\"\nprincipal = \"alice\"\ntenant = \"acme\"\n\
         [[component]]\npath = {template}\n",
        data = crate::support::own_data(),
        hash = hex::encode(Sha256::digest(TOKEN.as_bytes())),
        template = toml_path(&guest("template")),
    );
    let path: PathBuf = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    let loaded = Config::load(&path).unwrap();
    let rt = loaded.start(EpochMode::Ticker).unwrap();
    (dir, Arc::new(rt), loaded)
}

/// What `calls` calls cost when each is prepared once.
fn once_each(calls: u64) -> Work {
    Work {
        resolutions: calls,
        canonical_forms: calls,
    }
}

/// The work done since `before`.
fn since(rt: &Runtime, before: Work) -> Work {
    let now = rt.work();
    Work {
        resolutions: now.resolutions - before.resolutions,
        canonical_forms: now.canonical_forms - before.canonical_forms,
    }
}

async fn send(to: &mut (impl AsyncWrite + Unpin), message: Value) {
    let mut line = message.to_string();
    line.push('\n');
    to.write_all(line.as_bytes()).await.unwrap();
}

async fn next<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> Value {
    let line = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("an answer in time")
        .unwrap()
        .expect("the server still answers");
    serde_json::from_str(&line).unwrap()
}

/// Over stdio (a 2025-11-25 session): each `tools/call` resolves its tool once and is put in
/// canonical form once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_prepares_each_call_once() {
    let (_dir, rt, config) = host();
    let shared = Shared::new(rt.clone(), &config.serve);
    let (client, server) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server);
    let serve = config.serve.clone();
    let served =
        tokio::spawn(async move { toolhost::serve::serve_io(shared, &serve, read, write).await });
    let (from_server, mut to_server) = tokio::io::split(client);
    let mut lines = BufReader::new(from_server).lines();
    let before = rt.work();
    send(
        &mut to_server,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "counting", "version": "0"}}}),
    )
    .await;
    let init = next(&mut lines).await;
    assert_eq!(init["id"], 0, "{init}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send(&mut to_server, initialized).await;
    for id in 1..=CALLS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": format!("n{id}")}}});
        send(&mut to_server, call).await;
        let answer = next(&mut lines).await;
        assert_eq!(answer["id"], id, "{answer}");
        let greeting = &answer["result"]["structuredContent"]["result"];
        assert_eq!(*greeting, format!("Hello, n{id}!"), "{answer}");
    }
    assert_eq!(since(&rt, before), once_each(CALLS));
    to_server.shutdown().await.unwrap();
    tokio::time::timeout(PATIENCE, served)
        .await
        .expect("the session ends with its input")
        .unwrap()
        .unwrap();
}

/// Over Streamable HTTP (2026-07-28, no session): each `tools/call` resolves its tool once and
/// is put in canonical form once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_prepares_each_call_once() {
    let (_dir, rt, config) = host();
    let shared = Shared::new(rt.clone(), &config.serve);
    let stop = CancellationToken::new();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let serve = config.serve.clone();
    let stopping = stop.clone();
    let served = tokio::spawn(async move {
        let addr = "127.0.0.1:0".parse().unwrap();
        toolhost::serve::serve_http(shared, &serve, addr, stopping, |a| {
            let _ = bound_tx.send(a);
        })
        .await
    });
    let addr = bound_rx.await.unwrap().to_string();
    let before = rt.work();
    for id in 1..=CALLS {
        let (addr, name) = (addr.clone(), format!("n{id}"));
        let message = crate::mcp_stateless::call(id, "greet", json!({"name": name}), &name);
        let (status, answer) = tokio::task::spawn_blocking(move || {
            crate::mcp_stateless::modern(&addr, TOKEN, &message)
        })
        .await
        .unwrap();
        assert_eq!(status, 200, "{answer}");
        let greeting = &answer["result"]["structuredContent"]["result"];
        assert_eq!(*greeting, format!("Hello, n{id}!"), "{answer}");
    }
    assert_eq!(since(&rt, before), once_each(CALLS));
    stop.cancel();
    tokio::time::timeout(PATIENCE, served)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}

/// In the agent loop: each proposed call resolves its tool once and is put in canonical form
/// once (the repeat guard reads the same canonical form the pipeline does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_loop_prepares_each_call_once() {
    let (_dir, rt, _config) = host();
    let names: Vec<String> = (1..=CALLS).map(|i| format!("call_{i}")).collect();
    let arguments: Vec<String> = (1..=CALLS)
        .map(|i| format!(r#"{{"name":"n{i}"}}"#))
        .collect();
    let calls: Vec<(&str, &str, &str)> = names
        .iter()
        .zip(&arguments)
        .map(|(id, args)| (id.as_str(), "greet", args.as_str()))
        .collect();
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&calls, 4, 30)),
            Reply::Stream(text("Greeted.", 5)),
        ],
        None,
    )
    .await;
    let provider = Provider::new(
        agent::Endpoint::parse(&server.base_url()).unwrap(),
        None,
        ProviderOptions::default(),
    )
    .unwrap();
    let config = AgentConfig::default();
    let messages = agent::prompt_messages("greet three", &config);
    let ctx = rt.context("agent-tester", "default");
    let before = rt.work();
    let summary = agent::run_agent(&rt, &provider, "scripted", messages, &config, ctx).await;
    assert_eq!(summary.stopped_by, StopReason::Finished, "{summary:?}");
    assert_eq!(
        summary.tool_calls.get("completed"),
        Some(&CALLS),
        "{summary:?}"
    );
    assert_eq!(since(&rt, before), once_each(CALLS));
}
