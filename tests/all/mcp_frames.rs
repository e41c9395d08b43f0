//! Every MCP frame gets an answer, and repeated argument keys are refused everywhere.
//!
//! Raw bytes to the real binary over stdio and HTTP: each bad frame gets exactly one JSON-RPC
//! error with the right code and id, and the same session then completes a call. A repeated key
//! in a call's arguments ends `invalid_arguments` (recorded, never run) over MCP, `toolhost
//! call`, `toolhost batch` and the agent loop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::agent::{self, AgentConfig, Provider, ProviderOptions, StopReason};

use crate::openai::{scripted, text, tool_calls, Reply};
use crate::support::{line_reader, toolhost};

/// The longest any one answer may take before a test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// Arguments with the key `name` twice (`greet` would say hello to the last one).
const REPEATED: &str = r#"{"name": "first", "name": "second"}"#;

/// A config with the template tools (`greet`), in a fresh directory.
fn setup() -> (tempfile::TempDir, PathBuf) {
    crate::support::template_config()
}

/// A raw `toolhost serve` session over stdio, killed on drop.
pub(crate) struct Serve {
    child: Child,
    stdin: ChildStdin,
    out: Receiver<String>,
    err: Receiver<String>,
    next_id: u64,
}

impl Serve {
    pub(crate) fn start(config: &Path) -> Serve {
        Serve::start_declaring(config, json!({}))
    }

    /// [`Serve::start`] with these client `capabilities` in the `initialize`.
    pub(crate) fn start_declaring(config: &Path, capabilities: Value) -> Serve {
        let mut child = crate::support::serve_stdio(config);
        let mut s = Serve {
            stdin: child.stdin.take().unwrap(),
            out: line_reader(child.stdout.take().unwrap()),
            err: line_reader(child.stderr.take().unwrap()),
            child,
            next_id: 100,
        };
        s.frame(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "frames", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        let (before, init) = s.until_answer(&json!(0));
        assert!(before.is_empty(), "{before:?}");
        assert_eq!(init["result"]["serverInfo"]["name"], "toolhost", "{init}");
        s.frame(br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#);
        s
    }

    /// Write one frame and its newline.
    pub(crate) fn frame(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Every message up to the answer to `id`, and that answer.
    pub(crate) fn until_answer(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let until = Instant::now() + PATIENCE;
        let mut before = Vec::new();
        while Instant::now() < until {
            let Ok(line) = self.out.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return (before, v);
            }
            before.push(v);
        }
        let log: Vec<String> = self.err.try_iter().collect();
        panic!("no answer to {id}; before it: {before:?}; stderr: {log:?}");
    }

    /// Call `greet` with these argument bytes; every message before its answer, and the answer.
    fn greet(&mut self, arguments: &str) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = json!(self.next_id);
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"greet","arguments":{arguments}}}}}"#
        );
        self.frame(frame.as_bytes());
        self.until_answer(&id)
    }

    /// The session's run id (announced on stderr).
    fn run_id(&mut self) -> String {
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            if let Ok(line) = self.err.recv_timeout(Duration::from_millis(100)) {
                if let Some(rest) = line.split("MCP session ").nth(1) {
                    return rest.split_whitespace().next().unwrap().to_string();
                }
            }
        }
        panic!("the session announced no run id");
    }

    /// The peak resident memory of the server so far, in bytes (`VmHWM`).
    fn peak_rss(&self) -> u64 {
        crate::support::peak_rss(self.child.id())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The greeting of a completed `greet` answer.
fn greeting(answer: &Value) -> &str {
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    answer["result"]["structuredContent"]["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
}

/// `(code, id)` of a JSON-RPC error answer.
fn error_of(v: &Value) -> (i64, Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    let code = v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"));
    (code, v["id"].clone())
}

/// A `tools/call` result that ended `invalid_arguments` naming the repeated key.
fn assert_repeated_key_refused(answer: &Value) {
    let sc = &answer["result"]["_meta"]["toolhost/failure"];
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(sc["status"], "failed", "{answer}");
    assert_eq!(sc["code"], "invalid_arguments", "{answer}");
    assert_eq!(
        sc["message"], "the arguments repeat the key /name",
        "{answer}"
    );
}

/// The recorded calls of one run.
fn ledger(config: &Path, run: &str) -> Vec<Value> {
    let out = toolhost(&["ledger", "--config", config.to_str().unwrap(), "--run", run]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()["calls"].as_array().unwrap().clone()
}

/// The one recorded call with this id: refused as invalid_arguments, never executed.
fn assert_recorded_refusal(calls: &[Value], call_id: &str) {
    let c = calls
        .iter()
        .find(|c| c["call_id"] == call_id)
        .unwrap_or_else(|| panic!("{call_id} not recorded: {calls:?}"));
    assert_eq!(c["status"], "failed", "{c}");
    assert_eq!(c["code"], "invalid_arguments", "{c}");
    let stages: Vec<&Value> = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["stage"])
        .collect();
    assert!(!stages.contains(&&json!("execute")), "{c}");
    let reasons: Vec<&str> = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["detail"].as_str())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("repeat")),
        "the recorded reason does not say why: {c}"
    );
}

/// Over stdio each bad frame — not JSON, `1e400`, a lone surrogate, 10,000-deep nesting, a
/// 20 MB line, two `id` keys, a repeated key elsewhere, `params` neither an object nor usable —
/// gets exactly one JSON-RPC error with its code and id, and a call on the same session then
/// completes.
#[test]
fn stdio_every_bad_frame_gets_one_answer_and_the_session_goes_on() {
    let (_dir, config) = setup();
    let mut s = Serve::start(&config);
    let call = |id: u64, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    };
    let deep = format!(
        r#"{{"name":"greet","arguments":{{"name":{}"x"{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let mut huge =
        br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"greet","arguments":{"name":""#.to_vec();
    huge.resize(20 << 20, b'a');
    huge.extend_from_slice(br#""}}}"#);
    let cases: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        ("not JSON", b"this is not JSON".to_vec(), -32700, Value::Null),
        (
            "1e400",
            call(2, r#"{"name":"greet","arguments":{"name":1e400}}"#).into(),
            -32700,
            Value::Null,
        ),
        (
            "lone surrogate",
            call(3, r#"{"name":"greet","arguments":{"name":"\ud800"}}"#).into(),
            -32700,
            Value::Null,
        ),
        ("10,000 deep", call(4, &deep).into(), -32700, Value::Null),
        (
            "two ids",
            br#"{"jsonrpc":"2.0","id":5,"id":55,"method":"tools/list"}"#.to_vec(),
            -32700,
            Value::Null,
        ),
        ("20 MB line", huge, -32600, Value::Null),
        (
            "repeated key outside the arguments",
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"greet","name":"greet","arguments":{"name":"x"}}}"#.to_vec(),
            -32600,
            json!(7),
        ),
        ("params a number", call(8, "5").into(), -32600, json!(8)),
        ("params an array", call(9, r#"["greet"]"#).into(), -32602, json!(9)),
        (
            "params without a name",
            call(10, r#"{"arguments":{"name":"x"}}"#).into(),
            -32602,
            json!(10),
        ),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":11,"method":"tools/list"}]"#.to_vec(),
            -32600,
            Value::Null,
        ),
    ];
    for (what, frame, code, id) in cases {
        s.frame(&frame);
        let (before, answer) = s.greet(r#"{"name": "after"}"#);
        assert_eq!(before.len(), 1, "{what}: {before:?}");
        assert_eq!(error_of(&before[0]), (code, id), "{what}: {}", before[0]);
        assert_eq!(greeting(&answer), "Hello, after!", "{what}");
    }
}

/// A line of 50 MB that never ends before the cap is answered and skipped while it is read:
/// the server's peak memory grows by far less than the line, and it keeps serving.
#[test]
fn stdio_oversized_lines_are_discarded_in_bounded_memory() {
    /// What the line may add to the server's peak: the 2 MiB line buffer and its reader, with
    /// room for the allocator. A buffered line would add its 50 MB.
    const MAX_GROWTH: u64 = 16 << 20;
    let (_dir, config) = setup();
    let mut s = Serve::start(&config);
    let before = s.peak_rss();
    let chunk = vec![b'['; 1 << 20];
    for _ in 0..50 {
        s.stdin.write_all(&chunk).unwrap();
    }
    s.frame(b"");
    // A ping after the line: once it is answered the whole line has been read.
    s.frame(br#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#);
    let (answers, pong) = s.until_answer(&json!("ping"));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        error_of(&answers[0]),
        (-32600, Value::Null),
        "{}",
        answers[0]
    );
    assert_eq!(pong["result"], json!({}), "{pong}");
    let grown = s.peak_rss().saturating_sub(before);
    assert!(
        grown < MAX_GROWTH,
        "the server's peak grew by {grown} bytes"
    );
    let (_, done) = s.greet(r#"{"name": "after"}"#);
    assert_eq!(greeting(&done), "Hello, after!");
}

/// `initialize` is sent once per session: a second one on stdio is refused `-32600` (it used
/// to renegotiate, answering as if the session were new), and the session serves on.
#[test]
fn stdio_a_second_initialize_is_refused() {
    let (_dir, config) = setup();
    let mut s = Serve::start(&config);
    let again = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "again", "version": "0"}}});
    s.frame(again.to_string().as_bytes());
    let (before, answer) = s.until_answer(&json!(7));
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(error_of(&answer), (-32600, json!(7)), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("already initialized"), "{answer}");
    let (_, ok) = s.greet(r#"{"name": "after"}"#);
    assert_eq!(greeting(&ok), "Hello, after!");
}

/// Over stdio a `tools/call` whose arguments repeat a key ends `invalid_arguments` naming the
/// key, recorded in the session's run and never executed; the same call without it completes.
#[test]
fn stdio_repeated_argument_keys_are_invalid_arguments() {
    let (_dir, config) = setup();
    let mut s = Serve::start(&config);
    let run = s.run_id();
    let (before, refused) = s.greet(REPEATED);
    assert!(before.is_empty(), "{before:?}");
    assert_repeated_key_refused(&refused);
    let nested = r#"{"name": "x", "deep": {"a": 1, "a": 2}}"#;
    let (_, other) = s.greet(nested);
    assert_eq!(
        other["result"]["_meta"]["toolhost/failure"]["message"],
        "the arguments repeat the key /deep/a",
        "{other}"
    );
    let (_, ok) = s.greet(r#"{"name": "second"}"#);
    assert_eq!(greeting(&ok), "Hello, second!");
    drop(s);
    assert_recorded_refusal(&ledger(&config, &run), "rpc-n:101");
}

/// A `toolhost serve --http` process, killed on drop.
/// A `toolhost serve --http` process ([`crate::mcp::HttpServer`], killed on drop) and the
/// `host:port` it listens on.
pub(crate) struct Http {
    pub(crate) server: crate::mcp::HttpServer,
    pub(crate) addr: String,
}

impl Http {
    pub(crate) fn start(config: &Path) -> Http {
        Http::start_limited(config, None)
    }

    /// [`Http::start`] with the server's descriptor limit set to `nofile`.
    pub(crate) fn start_limited(config: &Path, nofile: Option<u32>) -> Http {
        let server = crate::mcp::http_serve_limited(config, nofile);
        let addr = server
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string();
        Http { server, addr }
    }

    /// POST `body` to /mcp; the status, the session id header and the body.
    pub(crate) fn post(&self, body: &[u8], session: Option<&str>) -> (u16, Option<String>, String) {
        self.post_as(&self.addr, None, body, session)
    }

    /// The same with this `Host` header and, when given, this `Origin` header.
    fn post_as(
        &self,
        host: &str,
        origin: Option<&str>,
        body: &[u8],
        session: Option<&str>,
    ) -> (u16, Option<String>, String) {
        let mut sock = TcpStream::connect(&self.addr).unwrap();
        sock.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            body.len()
        );
        if let Some(o) = origin {
            head.push_str(&format!("Origin: {o}\r\n"));
        }
        if let Some(s) = session {
            head.push_str(&format!(
                "Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        head.push_str("\r\n");
        sock.write_all(head.as_bytes()).unwrap();
        // The server may answer (413) and close before the whole body is written.
        let _ = sock.write_all(body);
        let mut raw = Vec::new();
        let _ = sock.read_to_end(&mut raw);
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status: {raw}"));
        let session = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        });
        (status, session, body.to_string())
    }
}

/// DNS rebinding (the conformance suite's `dns-rebinding-protection`): a foreign `Host` or
/// `Origin` is 403, and so is another local page (another port); the server's own origin, under
/// any loopback name, is served.
#[test]
fn http_admits_its_own_origin_and_refuses_every_other() {
    let (_dir, config) = setup();
    let http = Http::start(&config);
    let port = http.addr.rsplit(':').next().unwrap().to_string();
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"o","version":"0"}}}"#;
    let other_port = if port == "1" { "2" } else { "1" };
    let cases: [(String, Option<String>, u16); 7] = [
        (http.addr.clone(), None, 200),
        (
            http.addr.clone(),
            Some(format!("http://127.0.0.1:{port}")),
            200,
        ),
        (
            format!("localhost:{port}"),
            Some(format!("http://localhost:{port}")),
            200,
        ),
        (
            http.addr.clone(),
            Some(format!("http://127.0.0.1:{other_port}")),
            403,
        ),
        (
            http.addr.clone(),
            Some("http://evil.example.com".into()),
            403,
        ),
        (http.addr.clone(), Some("null".into()), 403),
        (
            "evil.example.com".into(),
            Some("http://evil.example.com".into()),
            403,
        ),
    ];
    for (host, origin, want) in cases {
        let (status, _, body) = http.post_as(&host, origin.as_deref(), init, None);
        assert_eq!(status, want, "Host {host}, Origin {origin:?}: {body}");
    }
}

/// The JSON-RPC message with this id in an SSE (or chunked) response body.
fn sse_message(body: &str, id: &Value) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id") == Some(id))
        .unwrap_or_else(|| panic!("no message {id} in {body}"))
}

/// Over Streamable HTTP a bad body gets 400 with its JSON-RPC error (413 past the cap), never
/// a hang or rmcp's plain-text answer; a repeated argument key in a session's `tools/call` ends
/// `invalid_arguments`, and the session's next call completes.
#[test]
fn http_bad_bodies_get_json_rpc_errors() {
    let (_dir, config) = setup();
    let server = Http::start(&config);
    for (body, status, code, id) in [
        (&b"this is not JSON"[..], 400, -32700, Value::Null),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","x":1e400}"#,
            400,
            -32700,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/list"}"#,
            400,
            -32700,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":5}"#,
            400,
            -32600,
            json!(4),
        ),
        (&vec![b' '; 3 << 20][..], 413, -32600, Value::Null),
    ] {
        let (got, _, answer) = server.post(body, None);
        let what = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        assert_eq!(got, status, "{what}: {answer}");
        let answer: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {answer}"));
        assert_eq!(error_of(&answer), (code, id), "{what}: {answer}");
    }
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "frames", "version": "0"}}});
    let (status, session, body) = server.post(init.to_string().as_bytes(), None);
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(server.post(note, Some(&session)).0, 202);
    let greet = |id: u64, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"greet","arguments":{args}}}}}"#
        )
    };
    let (status, _, body) = server.post(greet(5, REPEATED).as_bytes(), Some(&session));
    assert_eq!(status, 200, "{body}");
    assert_repeated_key_refused(&sse_message(&body, &json!(5)));
    let (status, _, body) = server.post(greet(6, r#"{"name":"after"}"#).as_bytes(), Some(&session));
    assert_eq!(status, 200, "{body}");
    assert_eq!(greeting(&sse_message(&body, &json!(6))), "Hello, after!");
}

/// A POST whose body stalls after a few bytes is answered 408 once the body timeout (10 s)
/// passes, instead of holding its connection for ever, and the server serves on meanwhile.
#[test]
fn http_slow_body_is_answered_408() {
    let (_dir, config) = setup();
    let server = Http::start(&config);
    let mut slow = TcpStream::connect(&server.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        server.addr
    );
    let started = Instant::now();
    slow.write_all(head.as_bytes()).unwrap();
    let (status, _, _) = server.post(b"this is not JSON", None);
    assert_eq!(status, 400, "the server serves while one body stalls");
    let mut raw = Vec::new();
    let _ = slow.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with("HTTP/1.1 408"), "{raw}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(50),
        "{waited:?}"
    );
}

/// `toolhost call` refuses repeated argument keys as `invalid_arguments` (exit 1), naming the
/// key; in `toolhost batch` only the proposal that repeats one is refused, and it is recorded.
#[test]
fn cli_repeated_argument_keys_are_invalid_arguments() {
    let (dir, config) = setup();
    let cfg = config.to_str().unwrap();
    let out = toolhost(&["call", "--config", cfg, "greet", REPEATED]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let r = out.json();
    assert_eq!(
        (&r["status"], &r["code"]),
        (&json!("failed"), &json!("invalid_arguments")),
        "{r}"
    );
    assert_eq!(r["message"], "the arguments repeat the key /name", "{r}");

    let run = format!("frames-batch-{}", uuid_ish());
    let file = dir.path().join("proposals.json");
    std::fs::write(
        &file,
        format!(
            r#"[{{"call_id":"ok","name":"greet","arguments":{{"name":"a"}}}},
                {{"call_id":"twice","name":"greet","arguments":{REPEATED}}}]"#
        ),
    )
    .unwrap();
    let out = toolhost(&[
        "batch",
        "--config",
        cfg,
        "--run-id",
        &run,
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let results = out.json();
    assert_eq!(results[0]["status"], "completed", "{results}");
    assert_eq!(results[1]["code"], "invalid_arguments", "{results}");
    assert_eq!(results[1]["call_id"], "twice", "{results}");
    assert_recorded_refusal(&ledger(&config, &run), "twice");
}

/// A run id no earlier test run used.
fn uuid_ish() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{nanos:x}-{}", std::process::id())
}

/// The agent loop refuses a proposed call whose arguments repeat a key: the model is told
/// `invalid_arguments` naming the key, and the tool never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_repeated_argument_keys_are_invalid_arguments() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", REPEATED)], 5, 10)),
            Reply::Stream(text("done", 5)),
        ],
        None,
    )
    .await;
    let (_dir, config) = setup();
    let rt = crate::support::runtime(&config);
    let provider = Provider::new(
        agent::Endpoint::parse(&server.base_url()).unwrap(),
        None,
        ProviderOptions::default(),
    )
    .unwrap();
    let agent_config = AgentConfig::default();
    let messages = agent::prompt_messages("greet twice", &agent_config);
    let ctx = rt.context("frames", "default");
    let summary = agent::run_agent(&rt, &provider, "m", messages, &agent_config, ctx).await;
    assert_eq!(summary.stopped_by, StopReason::Finished, "{summary:?}");
    assert_eq!(
        summary.failures.get("invalid_arguments"),
        Some(&1),
        "{summary:?}"
    );
    assert_eq!(rt.executions(), 0, "the tool ran");
    let second = &server.requests()[1].body["messages"];
    let tool = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    let content = tool["content"].as_str().unwrap();
    assert!(
        content.contains("the arguments repeat the key /name"),
        "{content}"
    );
}

/// Stdin that is not a pipe (a file here; a terminal alike) is served through the blocking
/// handles: the same answers, and the server exits at the end of its input. (Pipes, as every
/// other test and MCP clients use, are read non-blocking on the reactor.)
#[test]
fn stdio_from_a_file_is_served_too() {
    let (dir, config) = setup();
    let input = dir.path().join("requests.jsonl");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "file", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "greet", "arguments": {"name": "file"}}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to the call: {stdout}"));
    assert_eq!(greeting(&answer), "Hello, file!");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
