//! The agent never prints or records its API key: a loopback provider that echoes the key (in a
//! 401 body, a 500 body, a cut excerpt, a streamed error event, a tool call and its answer)
//! leaves no piece of it in stdout, stderr, `toolhost ledger` or any file of the data directory.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::openai::{scripted, text, tool_calls, Reply, Scripted};
use crate::support::{guest, toml_path, toolhost};

/// The key the provider is given; its part after `sk-test-` is what must never leak.
const KEY: &str = "sk-test-Zq81k3VbW0x9LmQ4rT7yU2pA";

/// The template tool (greet), a fresh data directory recording content, no retries.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let text = format!(
        "data_dir = {data}\n[ledger]\nrecord_content = true\n[agent]\nmax_retries = 0\n\
         [[component]]\npath = {template}\n",
        data = toml_path(&data),
        template = toml_path(&guest("template")),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path, data)
}

/// Every 8-byte window of the key's secret part found in `text`, by name of where it was.
fn leaks(what: &str, text: &[u8]) -> Vec<String> {
    let secret = &KEY.as_bytes()["sk-test-".len()..];
    secret
        .windows(8)
        .filter(|w| text.windows(8).any(|t| t == *w))
        .map(|w| format!("{what}: {}", String::from_utf8_lossy(w)))
        .collect()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Run `toolhost agent` with the key against `server`; the summary, after checking that no
/// piece of the key is in stdout, stderr, the run's ledger or any file of `data`.
async fn run_cli(server: &Scripted, config: &Path, data: &Path) -> Value {
    let config = config.display().to_string();
    let base = server.base_url();
    let cfg = config.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "agent",
                "--config",
                &cfg,
                "--base-url",
                &base,
                "--model",
                "m",
            ])
            .args([
                "--api-key-env",
                "TOOLHOST_SECRET_TEST_KEY",
                "--prompt",
                "hi",
            ])
            .env("TOOLHOST_SECRET_TEST_KEY", KEY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // The key really went out, as the bearer token.
    let sent = format!("Bearer {KEY}");
    assert!(server
        .requests()
        .iter()
        .all(|s| s.authorization.as_deref() == Some(sent.as_str())));
    let run = summary["run_id"].as_str().unwrap();
    let ledger = toolhost(&["ledger", "--config", &config, "--run", run]);
    assert_eq!(ledger.status, 0, "{}", ledger.stderr);
    let mut found = leaks("stdout", &out.stdout);
    found.extend(leaks("stderr", &out.stderr));
    found.extend(leaks("ledger", ledger.stdout.as_bytes()));
    let mut all = Vec::new();
    files(data, &mut all);
    for f in &all {
        found.extend(leaks(&f.display().to_string(), &std::fs::read(f).unwrap()));
    }
    assert!(found.is_empty(), "the key leaked: {found:?}\n{summary}");
    summary
}

fn detail(summary: &Value) -> &str {
    summary["detail"].as_str().unwrap_or_default()
}

/// A 401 whose body echoes the key and the Authorization header ends `provider_error` with
/// a detail that still says what happened, without the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_echoing_the_key_is_redacted() {
    let body = json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}"),
        "headers": {"Authorization": format!("Bearer {KEY}")},
        "code": "invalid_api_key"}})
    .to_string();
    let server = scripted(vec![Reply::Body(401, body)], None).await;
    let (_dir, config, data) = setup();
    let s = run_cli(&server, &config, &data).await;
    assert_eq!(s["stopped_by"], "provider_error", "{s}");
    let d = detail(&s);
    assert!(d.starts_with("auth_failed: "), "{d}");
    assert!(
        d.contains("Incorrect API key provided: [redacted]") && d.contains("invalid_api_key"),
        "{d}"
    );
}

/// An echo placed where the excerpt is cut (byte 300), and one in a 500 body, leave no piece.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_cut_by_the_excerpt_or_in_a_5xx_is_redacted() {
    let (_dir, config, data) = setup();
    let cut = format!("{}{KEY} trailing text", "x".repeat(290));
    let server = scripted(vec![Reply::Body(401, cut)], None).await;
    let s = run_cli(&server, &config, &data).await;
    assert_eq!(s["stopped_by"], "provider_error", "{s}");
    assert!(detail(&s).starts_with("auth_failed: "), "{s}");

    let server = scripted(vec![Reply::Body(500, format!("upstream said {KEY}"))], None).await;
    let s = run_cli(&server, &config, &data).await;
    assert_eq!(s["stopped_by"], "provider_error", "{s}");
    assert_eq!(
        detail(&s),
        "server_error: the endpoint failed (HTTP 500): upstream said [redacted]"
    );
}

/// A streamed error event carrying the key, cut inside the key by the event's 300-byte excerpt
/// (21 bytes of JSON, 269 of text, then the key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_error_echoing_the_key_is_redacted() {
    let message = format!("{}{KEY}", "y".repeat(269));
    let server = scripted(
        vec![Reply::Stream(vec![json!({"error": {"message": message}})])],
        None,
    )
    .await;
    let (_dir, config, data) = setup();
    let s = run_cli(&server, &config, &data).await;
    assert_eq!(s["stopped_by"], "provider_error", "{s}");
    assert!(
        detail(&s).starts_with("server_error: the endpoint failed (an error event in the stream)"),
        "{s}"
    );
    assert!(detail(&s).ends_with("y[redacted]"), "{s}");
}

/// A reply that puts the key into a tool call and into the answer: the call runs with the key
/// redacted, the answer is printed redacted, and the content-recording ledger holds neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_echoed_into_a_turn_is_redacted() {
    let args = json!({ "name": KEY }).to_string();
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", &args)], 5, 10)),
            Reply::Stream(text(&format!("Your key is {KEY}"), 5)),
        ],
        None,
    )
    .await;
    let (_dir, config, data) = setup();
    let s = run_cli(&server, &config, &data).await;
    assert_eq!(s["stopped_by"], "finished", "{s}");
    assert_eq!(s["tool_calls"]["completed"], 1, "{s}");
    assert_eq!(s["final_text"], "Your key is [redacted]", "{s}");
    let tool_message = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("Hello, [redacted]!"),
        "{tool_message}"
    );
}
