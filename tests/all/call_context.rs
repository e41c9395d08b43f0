//! `host.context()`: a tool learns who called and which call it is from the host's trusted
//! context, over every frontend, and never from its arguments; the idempotency key is stable
//! for one call (on a replay and on another host) and differs for another call; a component
//! built against `toolhost:tool@0.1.0` still loads and runs.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use toolhost_sandbox::idempotency_key;

use crate::support::{guest, toml_path, toolhost};

/// The real value of the `PAYMENTS_TOKEN` secret in these tests.
pub(crate) const SECRET: &str = "sk_live_51HtestSecretValue0042";

/// Arguments named like every context field: they must change nothing.
fn forged() -> Value {
    json!({
        "principal": "root", "tenant": "everyone", "run-id": "run-forged",
        "call-id": "call-forged", "idempotency-key": "0000"
    })
}

/// A config in `dir`: `top` (top-level keys and sections), then the downstream component with
/// network to `allow` and the secret `PAYMENTS_TOKEN` (value [`SECRET`], from a file) bound to
/// `secret_hosts`, then `extra` (more of the component's keys and tables).
pub(crate) fn downstream_config(
    dir: &Path,
    top: &str,
    allow: &[String],
    secret_hosts: &[String],
    extra: &str,
) -> PathBuf {
    std::fs::write(dir.join("token.txt"), format!("{SECRET}\n")).unwrap();
    let quoted = |v: &[String]| {
        v.iter()
            .map(|h| format!("{h:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "data_dir = {data}\n{top}\n\
         [[component]]\npath = {wasm}\nnetwork = {{ allow = [{allow}] }}\n\
         secrets = [{{ name = \"PAYMENTS_TOKEN\", file = \"token.txt\", hosts = [{hosts}] }}]\n{extra}",
        data = toml_path(&dir.join("data")),
        wasm = toml_path(&guest("downstream")),
        allow = quoted(allow),
        hosts = quoted(secret_hosts),
    );
    let path = dir.join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A config with the downstream component and nothing it can reach but a closed port.
fn whoami_config(dir: &Path, top: &str) -> PathBuf {
    let closed = ["127.0.0.1:9".to_string()];
    downstream_config(dir, top, &closed, &closed, "")
}

/// The context `whoami` reported, checked against the expected caller and call.
fn assert_context(ctx: &Value, principal: &str, tenant: &str, call_id: &str) {
    assert_eq!(ctx["principal"], principal, "{ctx}");
    assert_eq!(ctx["tenant"], tenant, "{ctx}");
    assert_eq!(ctx["call-id"], call_id, "{ctx}");
    let run = ctx["run-id"].as_str().unwrap();
    assert!(!run.is_empty() && run != "run-forged", "{ctx}");
    let key = idempotency_key(principal, tenant, run, call_id);
    assert_eq!(ctx["idempotency-key"], key.as_str(), "{ctx}");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let deadline = ctx["deadline-unix-ms"].as_u64().unwrap();
    // The default deadline is seconds away: after the call started, not days later.
    assert!(
        deadline > now - 60_000 && deadline < now + 3_600_000,
        "{ctx}"
    );
}

/// `toolhost call`: the CLI's principal, tenant, run and call id, whatever the arguments say;
/// a replay answers the same key, another call id another key.
#[test]
fn toolhost_call_gives_the_trusted_context() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = whoami_config(dir.path(), "");
    let call = |call_id: &str| {
        let out = toolhost(&[
            "call",
            "--config",
            cfg.to_str().unwrap(),
            "--principal",
            "alice",
            "--tenant",
            "acme",
            "--run-id",
            "run-7",
            "--call-id",
            call_id,
            "whoami",
            &forged().to_string(),
        ]);
        assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
        out.json()["output"].clone()
    };
    let first = call("c-1");
    assert_context(&first, "alice", "acme", "c-1");
    assert_eq!(first["run-id"], "run-7");
    assert_eq!(call("c-1"), first, "a replay answers the recorded context");
    let other = call("c-2");
    assert_ne!(other["idempotency-key"], first["idempotency-key"]);
}

/// MCP over stdio (a 2026-07-28 request) and over HTTP (a bearer token's principal): the
/// transport's identity, never the arguments'.
#[test]
fn mcp_gives_the_trusted_context_on_both_transports() {
    use crate::mcp_stateless::{call, modern, Stdio};
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let token = format!(
        "[serve]\nprincipal = \"stdio-user\"\n[[serve.token]]\nsha256 = \"{}\"\n\
         principal = \"alice\"\ntenant = \"alice-corp\"\n",
        hex::encode(Sha256::digest(b"alice-token"))
    );
    let cfg = whoami_config(dir.path(), &token);

    let mut stdio = Stdio::start(&cfg);
    let answer = stdio.ask(&call(1, "whoami", forged(), "c1"));
    let ctx = &answer["result"]["structuredContent"];
    assert_eq!(ctx["principal"], "stdio-user", "{answer}");
    // A client's call id is kept in the ledger's namespace for client-named ids.
    assert_context(ctx, "stdio-user", "default", "key:c1");
    drop(stdio);

    let http = crate::mcp_frames::Http::start(&cfg);
    let (status, answer) = modern(
        &http.addr,
        "alice-token",
        &call(2, "whoami", forged(), "c1"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_context(
        &answer["result"]["structuredContent"],
        "alice",
        "alice-corp",
        "key:c1",
    );
}

/// The agent loop: a model that proposes `whoami` with forged arguments gets the run's own
/// context back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_loop_gives_the_trusted_context() {
    use crate::openai::{scripted_run, text, tool_calls, Reply};
    let dir = tempfile::tempdir().unwrap();
    let cfg = whoami_config(dir.path(), "");
    let rt = crate::support::runtime(&cfg);
    let args = forged().to_string();
    let replies = vec![
        Reply::Stream(tool_calls(&[("call_1", "whoami", &args)], 8, 10)),
        Reply::Stream(text("done", 5)),
    ];
    let (summary, _) = scripted_run(&rt, replies, "agent-user", "agent-tenant").await;
    let run_id = summary.run_id.clone();
    assert_eq!(summary.tool_calls.get("completed"), Some(&1), "{summary:?}");
    let result = rt.ledger().outcome(&run_id, "p:call_1").unwrap().unwrap();
    let output = result.output.unwrap();
    assert_context(&output, "agent-user", "agent-tenant", "p:call_1");
    assert_eq!(output["run-id"], run_id.as_str());
}

/// A component built against `toolhost:tool@0.1.0` (before `context`) loads, runs, and its
/// embedded WIT still gives its tools their docs.
#[tokio::test]
async fn a_component_of_the_previous_version_still_runs() {
    let wasm = guest("legacy");
    let imports = wasmparser::Parser::new(0)
        .parse_all(&std::fs::read(&wasm).unwrap())
        .filter_map(Result::ok)
        .any(|p| {
            matches!(p, wasmparser::Payload::ComponentImportSection(s)
            if s.clone().into_iter().flatten().any(|i| i.name.name == "toolhost:tool/host@0.1.0"))
        });
    assert!(imports, "the fixture must import toolhost:tool/host@0.1.0");
    let dir = tempfile::tempdir().unwrap();
    let (_d, cfg) = crate::support::temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        toml_path(&dir.path().join("data")),
        toml_path(&wasm)
    ));
    let rt = crate::support::runtime(&cfg);
    let r = crate::support::run(&rt, "greet", json!({"name": "Ada"})).await;
    assert_eq!(r.output, Some(json!("Hello, Ada!")), "{r:?}");
    let registry = rt.registry();
    let tool = registry.get("greet").unwrap();
    assert!(
        tool.description.contains("friendly sentence"),
        "docs of 0.1.0 WIT still read"
    );
}

/// A retry on another host carries the same idempotency key: a call whose start the ledger
/// does not hold (risk `read`) runs again where it is retried, and the downstream API sees one
/// key for both attempts, the one `host.context()` derives from the caller, run and call id;
/// another call id gets another key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
async fn pg_a_retry_on_another_host_carries_the_same_key() {
    use crate::api_server::ApiServer;
    let schema = crate::multi_host::Schema::new();
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = downstream_config(
        dir.path(),
        &schema.ledger_section(),
        &[api.authority()],
        &[api.authority()],
        "[component.tools.charge]\nrisk = \"read\"\n",
    );
    let host = |call_id: &str, path: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "call",
                "--config",
                cfg.to_str().unwrap(),
                "--principal",
                "alice",
            ])
            .args(["--run-id", "R", "--call-id", call_id, "charge"])
            .arg(json!({"url": api.url(path), "amount-cents": 700}).to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = host("c1", "/hold");
    assert_eq!(api.wait_for(1).await.len(), 1, "host A's attempt arrives");
    let retry = host("c1", "/hold");
    assert_eq!(api.wait_for(2).await.len(), 2, "host B's retry arrives");
    api.release();
    for child in [first, retry] {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("\"status\""), "{stdout}");
    }
    let other = host("c2", "/charge");
    tokio::task::spawn_blocking(move || other.wait_with_output().unwrap())
        .await
        .unwrap();
    let keys: Vec<String> = api
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap())
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert_eq!(keys[0], idempotency_key("alice", "default", "R", "c1"));
    assert_eq!(keys[1], keys[0], "a retry carries the same key");
    assert_ne!(keys[2], keys[0], "another call, another key");
}
