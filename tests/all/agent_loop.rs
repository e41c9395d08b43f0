//! The agent loop's fidelity to what providers really send, and the truth of its counts and
//! record: parallel calls streamed at one index, retries cut by the deadline, every attempt,
//! refused proposal and stop in the ledger, broken arguments shown back as sent, size caps
//! never retried, connections reused, SSE with bare CR and a BOM.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::agent::{self, AgentConfig, Provider, ProviderOptions, StopReason, Summary};
use toolhost::Runtime;
use toolhost_ledger::TranscriptEntry;

use crate::openai::{scripted, text, tool_calls, Reply, Scripted};

/// greet (read) from the template component, with a fresh ledger.
fn setup() -> (tempfile::TempDir, Runtime) {
    let (dir, path) = crate::support::template_config();
    let rt = crate::support::runtime(&path);
    (dir, rt)
}

fn provider(server: &Scripted, stream: bool, max_retries: u32) -> Provider {
    Provider::new(
        agent::Endpoint::parse(&server.base_url()).unwrap(),
        None,
        ProviderOptions {
            stream,
            max_retries,
            backoff: Duration::from_millis(10),
            ..ProviderOptions::default()
        },
    )
    .unwrap()
}

struct Run {
    summary: Summary,
    rt: Runtime,
    _dir: tempfile::TempDir,
}

impl Run {
    fn transcript(&self) -> Vec<TranscriptEntry> {
        self.rt
            .ledger()
            .transcript_entries(&self.summary.run_id)
            .unwrap()
    }

    /// The transcript entries of one kind, as `detail`.
    fn details(&self, kind: &str) -> Vec<String> {
        self.transcript()
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }

    /// Every recorded call of the run: (call id, status, code).
    fn calls(&self) -> Vec<(String, String, Option<String>)> {
        self.rt
            .ledger()
            .calls(Some(&self.summary.run_id))
            .unwrap()
            .into_iter()
            .map(|c| {
                (
                    c.call_id,
                    c.status.map(|s| s.as_str().to_string()).unwrap_or_default(),
                    c.code.map(|c| c.as_str().to_string()),
                )
            })
            .collect()
    }
}

async fn run(server: &Scripted, config: AgentConfig, stream: bool, retries: u32) -> Run {
    let (dir, rt) = setup();
    let p = provider(server, stream, retries);
    let messages = agent::prompt_messages("do the thing", &config);
    let ctx = rt.context("agent-tester", "default");
    let summary = agent::run_agent(&rt, &p, "scripted-model", messages, &config, ctx).await;
    Run {
        summary,
        rt,
        _dir: dir,
    }
}

fn chunk(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// A server that streams three parallel calls all at `"index": 0`, each with its own id:
/// three calls run, in order, each answered under its own id — none glued, none dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_calls_streamed_at_one_index_run_as_three() {
    let mut chunks = Vec::new();
    for (id, name) in [("call_a", "Ada"), ("call_b", "Bob"), ("call_c", "Cy")] {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": "greet", "arguments": ""}}]}),
        ));
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"name\":"}}]}),
        ));
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": format!("\"{name}\"}}")}}]}),
        ));
    }
    chunks.push(finish("tool_calls"));
    let server = scripted(
        vec![Reply::Stream(chunks), Reply::Stream(text("done", 5))],
        None,
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert_eq!(r.rt.executions(), 3);
    let second = &server.requests()[1].body["messages"];
    let tool: Vec<(String, String)> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let ids: Vec<&str> = tool.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"]);
    for ((_, content), name) in tool.iter().zip(["Ada", "Bob", "Cy"]) {
        assert!(content.contains(name), "{content}");
    }
    let calls = r.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|(_, s, _)| s == "completed"), "{calls:?}");
}

/// Two server errors, then a request the run's deadline cuts short: three model requests were
/// sent and the summary says three; the ledger has each attempt and why the run stopped
/// (real clock: a 1 s deadline against a 60 s stall).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_during_retries_counts_every_attempt() {
    let server = scripted(
        vec![
            Reply::Status(500, None),
            Reply::Status(503, None),
            Reply::Delay(
                Duration::from_secs(60),
                Box::new(Reply::Stream(text("late", 1))),
            ),
        ],
        None,
    )
    .await;
    let config = AgentConfig {
        deadline_secs: 1,
        ..AgentConfig::default()
    };
    let r = run(&server, config, true, 5).await;
    assert_eq!(r.summary.stopped_by, StopReason::Deadline);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(r.summary.model_requests, 3, "{:?}", r.summary);
    let attempts = r.details("model_attempt");
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert!(
        attempts[0].starts_with("attempt 1: server_error"),
        "{attempts:?}"
    );
    assert!(
        attempts[1].starts_with("attempt 2: server_error"),
        "{attempts:?}"
    );
    assert!(
        attempts[2].starts_with("attempt 3: deadline"),
        "{attempts:?}"
    );
    assert_eq!(r.details("run_stopped"), ["deadline"]);
}

/// A provider that keeps failing: every attempt is a ledger row, and so is the stop with its
/// reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_run_records_each_attempt() {
    let server = scripted(vec![], Some(Arc::new(|_| Reply::Status(502, None)))).await;
    let r = run(&server, AgentConfig::default(), true, 3).await;
    assert_eq!(r.summary.stopped_by, StopReason::ProviderError);
    assert_eq!(r.summary.model_requests, 4);
    assert_eq!(r.details("model_attempt").len(), 4);
    assert_eq!(r.details("model_request").len(), 1);
    let stop = r.details("run_stopped");
    assert_eq!(stop.len(), 1);
    assert!(
        stop[0].starts_with("provider_error: server_error"),
        "{stop:?}"
    );
}

/// The repeat guard refuses the repeat that reaches the limit *and records it* (failed,
/// `repeated_call`), and records the proposal after it in the same turn as cancelled; neither
/// runs. The stop is in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_proposals_are_recorded() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            Reply::Stream(tool_calls(
                &[
                    (&format!("same{n}"), "greet", r#"{"name":"again"}"#),
                    (
                        &format!("other{n}"),
                        "greet",
                        &format!(r#"{{"name":"n{n}"}}"#),
                    ),
                ],
                4,
                10,
            ))
        })),
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(r.summary.stopped_by, StopReason::RepeatedCall);
    // Steps 1 and 2 ran both calls; step 3 ran neither.
    assert_eq!(r.rt.executions(), 4);
    let calls = r.calls();
    assert_eq!(calls.len(), 6, "{calls:?}");
    assert_eq!(
        calls[4],
        (
            "p:same2".to_string(),
            "failed".to_string(),
            Some("repeated_call".to_string())
        )
    );
    assert_eq!(
        calls[5],
        (
            "p:other2".to_string(),
            "cancelled".to_string(),
            Some("cancelled".to_string())
        )
    );
    assert_eq!(r.summary.failures.get("repeated_call"), Some(&1));
    let stop = r.details("run_stopped");
    assert!(
        stop[0].starts_with("repeated_call: greet was proposed with the same arguments"),
        "{stop:?}"
    );
}

/// Three *different* unparseable argument strings are three different calls for the repeat
/// guard (each fed back as invalid_arguments), and the history shows the model what it sent,
/// not `{}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_arguments_are_keyed_and_shown_as_sent() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            if n < 3 {
                Reply::Stream(tool_calls(
                    &[(&format!("c{n}"), "greet", &format!("{{\"name\": oops{n}"))],
                    3,
                    10,
                ))
            } else {
                Reply::Stream(text("gave up", 2))
            }
        })),
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert_eq!(r.summary.failures.get("invalid_arguments"), Some(&3));
    assert_eq!(r.rt.executions(), 0);
    let history = &server.requests()[1].body["messages"];
    let assistant = history
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"name\": oops0"
    );
}

/// The same unparseable string three times is still a repeat, and the stop says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_broken_arguments_repeat() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            Reply::Stream(tool_calls(&[(&format!("c{n}"), "greet", "{oops")], 3, 10))
        })),
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(r.summary.stopped_by, StopReason::RepeatedCall);
    assert!(
        r.summary
            .detail
            .as_deref()
            .unwrap()
            .contains("the same unparseable arguments"),
        "{:?}",
        r.summary
    );
}

/// A response past toolhost's size caps is not retried (it would pull as much again): one
/// request on the wire, the run stops `provider_error` saying why. Streamed and whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_past_the_size_cap_is_not_retried() {
    let server = scripted(
        vec![],
        Some(Arc::new(|_| {
            Reply::Flood(toolhost::agent::provider::MAX_STREAM_BYTES + (1 << 20))
        })),
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 3).await;
    assert_eq!(r.summary.stopped_by, StopReason::ProviderError);
    assert!(
        r.summary
            .detail
            .as_deref()
            .unwrap()
            .starts_with("response_too_large"),
        "{:?}",
        r.summary
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(r.summary.model_requests, 1);

    let big = "x".repeat(toolhost::agent::provider::MAX_RESPONSE_BYTES);
    let server = scripted(
        vec![],
        Some(Arc::new(move |_| {
            Reply::Json(json!({"choices": [{"message": {"content": big}}]}))
        })),
    )
    .await;
    let r = run(&server, AgentConfig::default(), false, 3).await;
    assert_eq!(r.summary.stopped_by, StopReason::ProviderError);
    assert_eq!(server.requests().len(), 1);
}

/// Connections are kept alive across a run's steps, not one handshake per request. (The
/// client's pool checks a connection back in on a task of its own; on a loaded machine the
/// next step may start before that and open a second connection, which then carries the rest:
/// `[0, 1, 1]` was seen. So what is asserted is that one connection carried more than one
/// request, and no step needed a third; without keep-alive it is `[0, 1, 2]`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_serves_the_whole_run() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", r#"{"name":"a"}"#)], 4, 10)),
            Reply::Stream(tool_calls(&[("c2", "greet", r#"{"name":"b"}"#)], 4, 10)),
            Reply::Stream(text("done", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    let carried: Vec<usize> = server.requests().iter().map(|s| s.connection).collect();
    assert_eq!(carried.len(), 3, "{carried:?}");
    let mut distinct = carried.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let reused = distinct
        .iter()
        .any(|d| carried.iter().filter(|c| *c == d).count() >= 2);
    assert!(
        reused && distinct.len() <= 2,
        "each step on its own connection: {carried:?}"
    );
}

/// A stream with a byte-order mark and bare CR line endings (both allowed by the SSE format),
/// split into 3-byte reads, gives the same turn as LF.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_with_bom_and_bare_cr() {
    let mut raw = b"\xEF\xBB\xBF: hello\r".to_vec();
    for c in text("Hello there.", 4) {
        raw.extend_from_slice(format!("data: {c}\r\r").as_bytes());
    }
    raw.extend_from_slice(b"data: [DONE]\r\r");
    let server = scripted(vec![Reply::RawStream(raw)], None).await;
    let r = run(&server, AgentConfig::default(), true, 0).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert_eq!(r.summary.final_text.as_deref(), Some("Hello there."));
    assert_eq!(r.summary.tokens.total, 4);
}
