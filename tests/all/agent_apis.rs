//! `toolhost agent --api chat|responses|messages` against a third-party mock of all three
//! APIs: aimock (`@copilotkit/aimock` from npm, pinned in tests/models), scripted by a fixture
//! file per test and served by tests/models/serve.mjs. Each API, streamed and whole: a call and
//! its answer, parallel calls, an approval, every stop reason, the output limit in the API's own
//! field, and errors that are never retried. What each request carried is read back from the
//! mock's request journal.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::{json, Value};

use crate::support::{repo, toolhost};

const APIS: [&str; 3] = ["chat", "responses", "messages"];

/// One aimock server on loopback, stopped when dropped.
struct Mock {
    child: Child,
    stdin: Option<ChildStdin>,
    /// `127.0.0.1:PORT`
    addr: String,
    _fixtures: tempfile::NamedTempFile,
}

impl Drop for Mock {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mock {
    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests the mock received to `path`, oldest first (its journal, read over
    /// HTTP/1.0 so that the body comes whole, not chunked).
    fn requests(&self, path: &str) -> Vec<Value> {
        use std::io::{Read, Write};
        let mut sock = std::net::TcpStream::connect(&self.addr).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        write!(
            sock,
            "GET /__aimock/journal HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut raw = String::new();
        sock.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let all: Vec<Value> = serde_json::from_str(body).unwrap();
        let mut out: Vec<Value> = all.into_iter().filter(|e| e["path"] == path).collect();
        out.sort_by_key(|e| e["timestamp"].as_u64());
        out.into_iter().map(|e| e["body"].clone()).collect()
    }
}

/// Start aimock with these fixtures.
fn mock(fixtures: Value) -> Mock {
    let dir = repo().join("tests/models");
    assert!(
        dir.join("node_modules/@copilotkit/aimock").is_dir(),
        "{} is missing: `just setup-mcp` installs it (npm ci from the committed lock file)",
        dir.join("node_modules").display()
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), json!({ "fixtures": fixtures }).to_string()).unwrap();
    let mut child = Command::new(crate::mcp_modern::node())
        .arg(dir.join("serve.mjs"))
        .arg(file.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("aimock did not start: {line:?}"))
        .to_string();
    Mock {
        stdin: child.stdin.take(),
        child,
        addr,
        _fixtures: file,
    }
}

/// The path of an API's requests.
fn path(api: &str) -> &'static str {
    match api {
        "chat" => "/v1/chat/completions",
        "responses" => "/v1/responses",
        _ => "/v1/messages",
    }
}

/// greet (read) and write_text (write, approval required) with a fresh ledger and workspace.
fn setup() -> (tempfile::TempDir, String, std::path::PathBuf) {
    let (dir, path, ws) = crate::support::approval_config(None);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!(
        "[[component]]\npath = {}\n",
        crate::support::toml_path(&crate::support::guest("template"))
    ));
    std::fs::write(&path, text).unwrap();
    (dir, path.display().to_string(), ws)
}

/// `toolhost agent --config CONFIG --base-url BASE --model MODEL --api API FLAGS…`: exit status
/// and summary.
pub(crate) fn agent_cli(
    config: &str,
    (base, model): (&str, &str),
    api: &str,
    flags: &[&str],
) -> (i32, Value) {
    let mut args = vec![
        "agent",
        "--config",
        config,
        "--base-url",
        base,
        "--model",
        model,
        "--api",
        api,
    ];
    args.extend(flags);
    let out = toolhost(&args);
    (out.status, out.json())
}

/// `toolhost agent` over `api` against the mock, streamed or not, with `prompt` and `extra`
/// flags: exit status and summary.
fn agent(
    config: &str,
    m: &Mock,
    api: &str,
    stream: bool,
    prompt: &str,
    extra: &[&str],
) -> (i32, Value) {
    let mut flags = vec!["--prompt", prompt];
    if !stream {
        flags.push("--no-stream");
    }
    flags.extend(extra);
    agent_cli(config, (&m.base_url(), "mock-model"), api, &flags)
}

/// The results fed back in a request, as (call id, content). aimock's journal keeps every
/// request translated into Chat Completions form (a Responses `function_call_output` and a
/// Messages `tool_result` become `tool` messages), so one reading serves all three APIs.
fn results(body: &Value) -> Vec<(String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (s(&m["tool_call_id"]), s(&m["content"])))
        .collect()
}

/// A call in each API, streamed (its arguments in several deltas) and whole: it runs once, its
/// result goes back under the provider's call id, and the answer ends the run. The Responses
/// item id is kept in the ledger beside the call id.
#[test]
fn each_api_runs_a_call_and_answers() {
    let (_dir, config, _ws) = setup();
    let m = mock(json!([
        {"match": {"userMessage": "greet Ada", "hasToolResult": false},
         "response": {"toolCalls": [{"name": "greet", "arguments": "{\"name\":\"Ada Lovelace\"}",
                                     "id": "call_a1"}]}},
        {"match": {"toolCallId": "call_a1"}, "response": {"content": "Ada was greeted."}},
    ]));
    for api in APIS {
        for stream in [true, false] {
            let before = m.requests(path(api)).len();
            let (status, s) = agent(&config, &m, api, stream, "greet Ada", &[]);
            let what = format!("{api}, stream {stream}: {s}");
            assert_eq!(status, 0, "{what}");
            assert_eq!(s["stopped_by"], "finished", "{what}");
            assert_eq!(s["final_text"], "Ada was greeted.", "{what}");
            assert_eq!(s["tool_calls"], json!({"completed": 1}), "{what}");
            assert_eq!(s["replayed"], 0, "{what}");
            let sent = m.requests(path(api));
            assert_eq!(sent.len(), before + 2, "{what}");
            let first = &sent[before];
            assert_eq!(first["stream"], stream, "{what}");
            let fed = results(&sent[before + 1]);
            assert_eq!(fed.len(), 1, "{what}");
            assert_eq!(fed[0].0, "call_a1", "{what}");
            assert!(fed[0].1.contains("Ada Lovelace"), "{what}: {}", fed[0].1);
            let ledger = toolhost(&[
                "ledger",
                "--config",
                &config,
                "--run",
                s["run_id"].as_str().unwrap(),
            ])
            .json();
            let call = &ledger["calls"][0];
            assert_eq!(call["call_id"], "p:call_a1", "{what}: {ledger}");
            let ids: Vec<&str> = ledger["transcript"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "provider_ids")
                .map(|e| e["detail"].as_str().unwrap())
                .collect();
            if api == "responses" {
                assert_eq!(ids.len(), 1, "{what}: {ledger}");
                assert!(
                    ids[0].starts_with("call p:call_a1: provider call id call_a1, item id fc"),
                    "{}",
                    ids[0]
                );
            } else {
                assert!(ids.is_empty(), "{what}: {ledger}");
            }
        }
    }
}

/// Two calls in one turn, in each API: both run, and both results go back in the next request
/// under their own ids (that Messages puts them in one user message is
/// `wire::messages::tests::the_request`).
#[test]
fn each_api_runs_parallel_calls() {
    let (_dir, config, _ws) = setup();
    let m = mock(json!([
        {"match": {"userMessage": "greet both", "hasToolResult": false},
         "response": {"toolCalls": [
            {"name": "greet", "arguments": "{\"name\":\"Ada\"}", "id": "call_p1"},
            {"name": "greet", "arguments": "{\"name\":\"Grace\"}", "id": "call_p2"}]}},
        {"match": {"toolCallId": "call_p2"}, "response": {"content": "Both greeted."}},
    ]));
    for api in APIS {
        let (status, s) = agent(&config, &m, api, true, "greet both", &[]);
        assert_eq!(status, 0, "{api}: {s}");
        assert_eq!(s["tool_calls"], json!({"completed": 2}), "{api}: {s}");
        assert_eq!(s["final_text"], "Both greeted.", "{api}: {s}");
        let last = m.requests(path(api)).pop().unwrap();
        let fed = results(&last);
        let ids: Vec<&str> = fed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["call_p1", "call_p2"], "{api}: {last}");
        assert!(
            fed[0].1.contains("Ada") && fed[1].1.contains("Grace"),
            "{fed:?}"
        );
    }
}

/// A call that needs approval, in each API: the `--approve-with` command is asked, the write
/// happens once, and the run finishes.
#[test]
fn each_api_asks_for_approval() {
    let (_dir, config, ws) = setup();
    let m = mock(json!([
        {"match": {"userMessage": "write it", "hasToolResult": false},
         "response": {"toolCalls": [{"name": "write_text",
            "arguments": "{\"path\":\"note.txt\",\"content\":\"approved\"}", "id": "call_w1"}]}},
        {"match": {"toolCallId": "call_w1"}, "response": {"content": "Written."}},
    ]));
    for api in APIS {
        let _ = std::fs::remove_file(ws.join("note.txt"));
        let approve = ["--approve-with", "cat >/dev/null; echo approve"];
        let (status, s) = agent(&config, &m, api, true, "write it", &approve);
        assert_eq!(status, 0, "{api}: {s}");
        assert_eq!(s["tool_calls"], json!({"completed": 1}), "{api}: {s}");
        assert_eq!(
            std::fs::read_to_string(ws.join("note.txt")).unwrap(),
            "approved",
            "{api}"
        );
        // The same call refused by the approver ends approval_denied and writes nothing.
        let _ = std::fs::remove_file(ws.join("note.txt"));
        let deny = ["--approve-with", "cat >/dev/null; echo deny"];
        let (_, s) = agent(&config, &m, api, false, "write it", &deny);
        assert_eq!(s["failures"], json!({"approval_denied": 1}), "{api}: {s}");
        assert!(!ws.join("note.txt").exists(), "{api}");
    }
}

/// Each stop reason in each API: a response cut at its output limit (`length`, `max_tokens`,
/// an incomplete response) stops the run `output_limit` with a non-zero exit and runs nothing
/// (a call it proposed is recorded `cancelled`);
/// a withheld one (`content_filter`, `refusal`) stops it `content_filter`; the limit goes out in
/// each API's own field (`max_tokens`, `max_output_tokens`, `max_tokens`).
#[test]
fn each_api_stops_honestly() {
    let (_dir, config, _ws) = setup();
    let m = mock(json!([
        {"match": {"userMessage": "long story"},
         "response": {"content": "Once upon a", "finishReason": "length"}},
        {"match": {"userMessage": "long call"},
         "response": {"toolCalls": [{"name": "greet", "arguments": "{\"name\":\"A\"}",
            "id": "call_cut"}], "finishReason": "length"}},
        {"match": {"userMessage": "forbidden", "model": "chat-model"},
         "response": {"content": "Filtered.", "finishReason": "content_filter"}},
        {"match": {"userMessage": "forbidden", "model": "messages-model"},
         "response": {"content": "I can't help with that.", "finishReason": "refusal"}},
    ]));
    for api in APIS {
        for stream in [true, false] {
            let what = format!("{api}, stream {stream}");
            let limit = ["--max-output-tokens", "5"];
            let (status, s) = agent(&config, &m, api, stream, "long story", &limit);
            assert_eq!(status, 1, "{what}: {s}");
            assert_eq!(s["stopped_by"], "output_limit", "{what}: {s}");
            assert_eq!(s["final_text"], "Once upon a", "{what}: {s}");
            // The journal's translation carries a Responses request's `max_output_tokens` (and
            // only that field) as `max_tokens`.
            let sent = m.requests(path(api)).pop().unwrap();
            assert_eq!(sent["max_tokens"], 5, "{what}: {sent}");
            let (status, s) = agent(&config, &m, api, stream, "long call", &[]);
            assert_eq!(status, 1, "{what}: {s}");
            assert_eq!(s["stopped_by"], "output_limit", "{what}: {s}");
            // The cut proposal is recorded, cancelled, and never runs.
            assert_eq!(s["tool_calls"], json!({"cancelled": 1}), "{what}: {s}");
            assert!(
                s["detail"]
                    .as_str()
                    .unwrap()
                    .contains("1 proposed call(s) were not run"),
                "{what}: {s}"
            );
        }
    }
    // aimock renders a Responses content filter as a failed response without an error, so
    // that case is the scripted server's (agent_faults.rs).
    for (api, model) in [("chat", "chat-model"), ("messages", "messages-model")] {
        let (status, s) = agent_cli(
            &config,
            (&m.base_url(), model),
            api,
            &["--prompt", "forbidden"],
        );
        assert_eq!(status, 1, "{api}: {s}");
        assert_eq!(s["stopped_by"], "content_filter", "{api}: {s}");
    }
    // Without --max-output-tokens a Messages request still carries the field it requires.
    let (_, _) = agent(&config, &m, "messages", true, "long story", &[]);
    let sent = m.requests(path("messages")).pop().unwrap();
    assert_eq!(sent["max_tokens"], 8192, "{sent}");
}

/// In each API an exhausted quota, refused credentials and an invalid request end the run at
/// once, named (`quota_exhausted`, `auth_failed`, `invalid_request`), with one request each.
#[test]
fn each_api_names_errors_that_are_never_retried() {
    let (_dir, config, _ws) = setup();
    let error = |kind: &str, status: u16| {
        json!({"match": {"userMessage": kind},
            "response": {"status": status, "error": {"message": format!("{kind} says no"),
                "type": kind, "code": kind}}})
    };
    let m = mock(json!([
        error("insufficient_quota", 429),
        error("authentication_error", 401),
        error("invalid_request_error", 400),
    ]));
    for api in APIS {
        for (prompt, code) in [
            ("insufficient_quota", "quota_exhausted"),
            ("authentication_error", "auth_failed"),
            ("invalid_request_error", "invalid_request"),
        ] {
            let before = m.requests(path(api)).len();
            let (status, s) = agent(&config, &m, api, true, prompt, &[]);
            assert_eq!(status, 1, "{api} {prompt}: {s}");
            assert_eq!(s["stopped_by"], "provider_error", "{api} {prompt}: {s}");
            let detail = s["detail"].as_str().unwrap();
            assert!(detail.starts_with(code), "{api} {prompt}: {detail}");
            assert!(detail.contains("says no"), "{api} {prompt}: {detail}");
            assert_eq!(s["model_requests"], 1, "{api} {prompt}: {s}");
            assert_eq!(m.requests(path(api)).len(), before + 1, "{api} {prompt}");
        }
    }
}
