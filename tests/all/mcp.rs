//! `toolhost serve` with real clients: the official Python MCP SDK over stdio and Streamable
//! HTTP (tests/mcp/client.py, one scenario per run), and raw JSON-RPC lines over stdio for
//! what an SDK will not send (unknown methods, repeated request ids, old protocol versions).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::{guest, http_server, line_reader, repo, toml_path};

/// The bearer token the HTTP tests use; the config stores only its hash.
pub(crate) const TOKEN: &str = "test-token-5b0c2f7e";
/// Longest any one client scenario may take before the test kills it.
const SCENARIO_LIMIT: Duration = Duration::from_secs(180);

/// The Python interpreter of the virtual environment `just test` prepares.
pub(crate) fn python() -> PathBuf {
    let p = repo().join(".venv/bin/python");
    assert!(
        p.is_file(),
        "{} is missing: `just test` creates it with the pinned MCP SDK (or run `just setup-mcp`)",
        p.display()
    );
    p
}

/// A config with the example tools, the hostile fixtures and approval on `write_text`, a
/// fresh workspace, and the repository's warm compile cache.
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) config: PathBuf,
}

pub(crate) fn fixture(http_port: u16) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("hello.txt"), "hello from the workspace\n").unwrap();
    let data = crate::support::own_data();
    let text = format!(
        r#"data_dir = {data}

[limits]
fuel = 2_000_000_000
deadline_ms = 5_000
memory_bytes = 33_554_432
output_bytes = 65_536

[[component]]
path = {template}

[[component]]
path = {measure}

[[component]]
path = {compute}

[[component]]
path = {fs_tools}
fs = [{{ host = {workspace}, guest = "/workspace", mode = "rw" }}]

[component.tools.write-text]
risk = "write"
approval = "required"

[[component]]
path = {http_get}
risk = "external"
network = {{ allow = ["127.0.0.1:{http_port}"] }}

[[component]]
path = {hostile}

[component.tools.spin]
limits = {{ fuel = 50_000_000, deadline_ms = 30_000 }}

[component.tools.spin-deadline]
limits = {{ fuel = 1_000_000_000_000, deadline_ms = 3_000 }}

[component.tools.sleep-forever]
limits = {{ fuel = 1_000_000_000_000, deadline_ms = 30_000 }}

[component.tools.write-readonly]
fs = [{{ host = {readonly}, guest = "/readonly", mode = "ro" }}]

[component.tools.exfiltrate]
network = {{ allow = ["127.0.0.1:47002"] }}

[serve]
principal = "mcp-tester"

[[serve.token]]
sha256 = "{hash}"
principal = "alice"
tenant = "acme"
"#,
        data = data,
        template = toml_path(&guest("template")),
        measure = toml_path(&guest("measure")),
        compute = toml_path(&guest("compute")),
        fs_tools = toml_path(&guest("fs-tools")),
        http_get = toml_path(&guest("http-get")),
        hostile = toml_path(&guest("hostile")),
        workspace = toml_path(&workspace),
        readonly = toml_path(&repo().join("tests/fixtures/readonly")),
        hash = hex::encode(Sha256::digest(TOKEN.as_bytes())),
    );
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, text).unwrap();
    Fixture { _dir: dir, config }
}

/// What one client run printed.
pub(crate) struct Outcome {
    pub(crate) facts: Value,
    stderr: String,
}

/// Run one scenario of the Python client to completion (bounded), asserting it passed.
pub(crate) fn client(scenario: &str, args: &[&str]) -> Outcome {
    let mut child = Command::new(python())
        .arg(repo().join("tests/mcp/client.py"))
        .arg(scenario)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Python client starts");
    let status = wait_bounded(&mut child, SCENARIO_LIMIT);
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status == Some(0),
        "client scenario {scenario} failed (exit {status:?})\nstdout: {stdout}\nstderr: {stderr}"
    );
    let facts = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("scenario {scenario} printed no JSON ({e}): {stdout}\nstderr: {stderr}")
    });
    Outcome { facts, stderr }
}

pub(crate) fn wait_bounded(child: &mut Child, limit: Duration) -> Option<i32> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn stdio_args(f: &Fixture) -> Vec<String> {
    vec![
        "--binary".into(),
        env!("CARGO_BIN_EXE_toolhost").into(),
        "--config".into(),
        f.config.display().to_string(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The run ids of the sessions a server announced on stderr.
pub(crate) fn run_ids(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split("MCP session ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The recorded calls of one run.
pub(crate) fn ledger(config: &Path, run: &str) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["ledger", "--config"])
        .arg(config)
        .args(["--run", run])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["calls"]
        .as_array()
        .unwrap()
        .clone()
}

/// A `toolhost serve --http` process, killed on drop.
pub(crate) struct HttpServer {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) stderr: std::sync::mpsc::Receiver<String>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn http_serve(config: &Path) -> HttpServer {
    http_serve_limited(config, None)
}

/// [`http_serve`] with the server's descriptor limit set to `nofile`.
pub(crate) fn http_serve_limited(config: &Path, nofile: Option<u32>) -> HttpServer {
    let mut command = crate::support::toolhost_command(nofile);
    let mut child = command
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = line_reader(child.stderr.take().unwrap());
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if let Some(addr) = line.split("serving MCP on ").nth(1) {
                return HttpServer {
                    child,
                    url: addr.trim().to_string(),
                    stderr: rx,
                };
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("toolhost serve --http did not announce its address");
}

/// Over stdio: tools/list is stable and complete, every example tool and hostile fixture
/// answers with the right result or code, invalid and unknown calls are tool errors, and
/// forged JSON-RPC on a guest's stdout never reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_tools_fixtures_and_forgery() {
    let web = http_server("hello from loopback").await;
    let f = fixture(web.port);
    let mut args = stdio_args(&f);
    args.extend(["--http-port".to_string(), web.port.to_string()]);
    let out = tokio::task::spawn_blocking(move || client("tools", &strs(&args)))
        .await
        .unwrap();
    assert!(out.facts["tools"].as_u64().unwrap() >= 20, "{}", out.facts);
    assert!(!out.stderr.contains("FORGED"), "{}", out.stderr);
}

/// Over stdio: guest progress arrives as bounded, increasing notifications without text.
#[test]
fn stdio_progress() {
    let f = fixture(1);
    let out = client("progress", &strs(&stdio_args(&f)));
    let n = out.facts["notifications"].as_u64().unwrap();
    assert!((1..=200).contains(&n), "{n}");
}

/// Over stdio: a cancelled call stops its guest long before the 30 s deadline, the ledger
/// records it `cancelled`, and the session serves on.
#[test]
fn stdio_cancellation_reaches_the_guest() {
    let f = fixture(1);
    let out = client("cancel", &strs(&stdio_args(&f)));
    assert!(
        out.facts["elapsed_ms"].as_u64().unwrap() < 10_000,
        "{}",
        out.facts
    );
    let runs = run_ids(&out.stderr);
    assert_eq!(runs.len(), 1, "{}", out.stderr);
    let calls = ledger(&f.config, &runs[0]);
    let sleeper = calls
        .iter()
        .find(|c| c["tool"] == "sleep_forever")
        .expect("the cancelled call is recorded");
    assert_cancelled_early(sleeper);
}

/// A recorded `sleep_forever` call that was cancelled, well before its 30 s deadline.
pub(crate) fn assert_cancelled_early(sleeper: &Value) {
    assert_eq!(sleeper["status"], "cancelled", "{sleeper}");
    assert_eq!(sleeper["code"], "cancelled", "{sleeper}");
    assert!(
        sleeper["usage"]["wall_ms"].as_u64().unwrap() < 10_000,
        "{sleeper}"
    );
}

/// Over stdio: two calls hanging until their deadline do not stall tools/list or a normal call.
#[test]
fn stdio_hanging_calls_stall_nothing() {
    let f = fixture(1);
    let out = client("concurrency", &strs(&stdio_args(&f)));
    let normal = out.facts["normal"].as_u64().unwrap();
    assert!(normal < out.facts["a"].as_u64().unwrap(), "{}", out.facts);
}

/// Over stdio: approval through elicitation (accept runs once, decline refuses), and
/// `approval_required` with a handle for a client that cannot be asked.
#[test]
fn stdio_approval_by_elicitation() {
    let f = fixture(1);
    let out = client("approve", &strs(&stdio_args(&f)));
    assert!(out.facts["handle"].as_str().unwrap().contains('.'));
}

/// The official Python SDK's 2026-07-28 client (it probes `server/discover`), over stdio and
/// over HTTP with a bearer token: a call, its resend answered from the ledger, a failure's
/// code, and approvals through `input_required` that the SDK answers and retries — the
/// accepted write runs once, the declined one never.
#[test]
fn the_sdks_2026_client_over_stdio_and_http() {
    let f = fixture(1);
    let workspace = f.config.parent().unwrap().join("workspace");
    client("modern", &strs(&stdio_args(&f)));
    assert_eq!(
        std::fs::read_to_string(workspace.join("modern.txt")).unwrap(),
        "2026"
    );
    std::fs::remove_file(workspace.join("modern.txt")).unwrap();
    let server = http_serve(&f.config);
    client("modern", &["--url", server.url.as_str(), "--token", TOKEN]);
    assert_eq!(
        std::fs::read_to_string(workspace.join("modern.txt")).unwrap(),
        "2026"
    );
    assert!(!workspace.join("declined-modern.txt").exists());
}

/// Over HTTP: bearer tokens (401 without), Host/Origin allowlists (403), then the same
/// tool, fixture, progress, cancellation and concurrency scenarios as over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_with_the_official_client() {
    let web = http_server("hello from loopback").await;
    let f = fixture(web.port);
    let server = http_serve(&f.config);
    let url = server.url.clone();
    let port = web.port.to_string();
    let binary = env!("CARGO_BIN_EXE_toolhost");
    let config = f.config.display().to_string();
    tokio::task::spawn_blocking(move || {
        let base = [
            "--url",
            url.as_str(),
            "--token",
            TOKEN,
            "--binary",
            binary,
            "--config",
            config.as_str(),
        ];
        let auth = client("auth", &base);
        assert_eq!(auth.facts["no_token"], 401);
        let mut with_port = base.to_vec();
        with_port.extend(["--http-port", port.as_str()]);
        // Each SDK client ends its session with a DELETE on exit, and logs a warning
        // ("Session termination failed: 202") unless the server answers 200 or 204.
        for out in [
            client("tools", &with_port),
            client("progress", &base),
            client("cancel", &base),
            client("concurrency", &base),
            client("approve", &base),
        ] {
            assert!(!out.stderr.contains("termination failed"), "{}", out.stderr);
        }
        // Two sessions at once, each with hanging and normal calls.
        std::thread::scope(|s| {
            let a = s.spawn(|| client("concurrency", &base));
            let b = s.spawn(|| client("concurrency", &base));
            a.join().unwrap();
            b.join().unwrap();
        });
    })
    .await
    .unwrap();
    let log: Vec<String> = server.stderr.try_iter().collect();
    assert!(!log.join("\n").contains("FORGED"));

    // Ending a session (DELETE) cancels its running call well before its 30 s deadline.
    let url = server.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        client("session_end", &["--url", url.as_str(), "--token", TOKEN])
    })
    .await
    .unwrap();
    assert!(
        out.facts["elapsed_ms"].as_u64().unwrap() < 20_000,
        "{}",
        out.facts
    );
    let log: Vec<String> = server.stderr.try_iter().collect();
    let runs = run_ids(&log.join("\n"));
    assert_eq!(runs.len(), 1, "{log:?}");
    // rmcp lets a closed session's calls finish for up to 5 s, then cancels them. A read
    // call is in the ledger only once its outcome is (durability by risk).
    let until = Instant::now() + Duration::from_secs(20);
    let mut calls = ledger(&f.config, &runs[0]);
    while calls.first().is_none_or(|c| c["status"].is_null()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        calls = ledger(&f.config, &runs[0]);
    }
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "sleep_forever");
    assert_eq!(calls[0]["status"], "cancelled", "{}", calls[0]);
    assert!(
        calls[0]["usage"]["wall_ms"].as_u64().unwrap() < 10_000,
        "{}",
        calls[0]
    );
}

/// A non-loopback bind without tokens is refused before listening.
#[test]
fn http_refuses_open_bind_without_tokens() {
    let (_dir, config) = crate::support::temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        crate::support::own_data(),
        toml_path(&guest("template"))
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--http", "0.0.0.0:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without authentication"), "{err}");
}

/// A raw JSON-RPC conversation with `toolhost serve` over stdio.
pub(crate) struct Raw {
    pub(crate) child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Raw {
    pub(crate) fn start(config: &Path) -> Raw {
        Raw::start_limited(config, None)
    }

    /// [`Raw::start`] with the server's descriptor limit set to `nofile`.
    pub(crate) fn start_limited(config: &Path, nofile: Option<u32>) -> Raw {
        Raw::start_with(config, nofile, &[])
    }

    /// [`Raw::start_limited`] with `extra` arguments after `serve`.
    pub(crate) fn start_with(config: &Path, nofile: Option<u32>, extra: &[&str]) -> Raw {
        let mut child = crate::support::serve_stdio_with(config, nofile, extra);
        let stdin = child.stdin.take();
        Raw {
            lines: line_reader(child.stdout.take().unwrap()),
            stderr: line_reader(child.stderr.take().unwrap()),
            child,
            stdin,
        }
    }

    pub(crate) fn send(&mut self, v: Value) {
        let w = self.stdin.as_mut().unwrap();
        writeln!(w, "{v}").unwrap();
        w.flush().unwrap();
    }

    /// The next message with this id (other messages are kept in `seen`).
    pub(crate) fn response(&mut self, id: &Value, seen: &mut Vec<Value>) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
                if v.get("id") == Some(id) && v.get("method").is_none() {
                    return v;
                }
                seen.push(v);
            }
        }
        let log: Vec<String> = self.stderr.try_iter().collect();
        panic!("no response to {id}; server stderr: {log:?}");
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's stderr lines so far.
    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        let r = self.response(&json!(0), &mut Vec::new());
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Version negotiation: 2025-11-25 as asked, an older supported version as asked, and an
/// unknown one answered with our newest; unknown methods get "method not found".
#[test]
fn raw_versions_and_unknown_methods() {
    let f = fixture(1);
    for (asked, expected) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut raw = Raw::start(&f.config);
        let init = raw.initialize(asked);
        assert_eq!(init["result"]["protocolVersion"], expected, "{init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "toolhost");
        raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "no/such_method", "params": {}}));
        let r = raw.response(&json!(1), &mut Vec::new());
        assert_eq!(r["error"]["code"], -32601, "{r}");
        raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let r = raw.response(&json!(2), &mut Vec::new());
        assert!(r["result"]["tools"].as_array().unwrap().len() > 10, "{r}");
    }
}

/// A repeated request id in one session is answered from the ledger (the tool runs once);
/// reused with other arguments it is `duplicate_call_id`. Forged lines from a guest's stdout
/// never appear on the protocol channel. Closing stdin cancels a running call and exits.
#[test]
fn raw_repeated_ids_forgery_and_stdin_close() {
    let f = fixture(1);
    let mut raw = Raw::start(&f.config);
    raw.initialize("2025-11-25");
    let mut seen = Vec::new();
    let call = |id: Value, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": args}})
    };
    raw.send(call(json!(7), "forge_stdout", json!({})));
    let first = raw.response(&json!(7), &mut seen);
    raw.send(call(json!(7), "forge_stdout", json!({})));
    let again = raw.response(&json!(7), &mut seen);
    assert_eq!(first["result"], again["result"], "{first} {again}");
    assert_eq!(first["result"]["isError"], false, "{first}");
    raw.send(call(json!(7), "greet", json!({"name": "x"})));
    let other = raw.response(&json!(7), &mut seen);
    assert_eq!(
        other["result"]["_meta"]["toolhost/failure"]["code"], "duplicate_call_id",
        "{other}"
    );
    // The same id as a string is another call.
    raw.send(call(json!("7"), "greet", json!({"name": "s"})));
    let s = raw.response(&json!("7"), &mut seen);
    assert_eq!(
        s["result"]["structuredContent"]["result"], "Hello, s!",
        "{s}"
    );
    for v in &seen {
        assert!(
            !v.to_string().contains("FORGED"),
            "forged line reached stdout: {v}"
        );
    }
    assert!(!first.to_string().contains("FORGED"));

    // A call that would run 30 s, then stdin closes: the server cancels it and exits.
    raw.send(call(json!(8), "sleep_forever", json!({})));
    // The server reads requests in order and hands each to its own task: once a ping sent
    // after the call is answered, the call is in hand (running, or cancelled before it
    // starts — recorded either way). No sleep stands in for that.
    raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
    raw.response(&json!(9), &mut seen);
    let closed_at = Instant::now();
    drop(raw.stdin.take());
    let status = wait_bounded(&mut raw.child, Duration::from_secs(15));
    assert_eq!(
        status,
        Some(0),
        "the server did not exit after stdin closed"
    );
    assert!(closed_at.elapsed() < Duration::from_secs(10));

    let log: Vec<String> = raw.stderr.try_iter().collect();
    let runs = run_ids(&log.join("\n"));
    assert_eq!(runs.len(), 1, "{log:?}");
    let calls = ledger(&f.config, &runs[0]);
    let forge: Vec<&Value> = calls
        .iter()
        .filter(|c| c["tool"] == "forge_stdout")
        .collect();
    assert_eq!(forge.len(), 1, "{calls:?}");
    let executions = forge[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["stage"] == "execute")
        .count();
    assert_eq!(
        executions, 1,
        "the repeated request executed again: {}",
        forge[0]
    );
    let sleeper = calls.iter().find(|c| c["tool"] == "sleep_forever").unwrap();
    assert_eq!(sleeper["status"], "cancelled", "{sleeper}");
}
