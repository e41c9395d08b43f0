//! `toolhost agent` against the scripted OpenAI-compatible server: each scenario asserts the
//! guard that stopped the run (or its outcome) and how many times tools executed.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::agent::{self, AgentConfig, Provider, ProviderOptions, StopReason, Summary};
use toolhost::Runtime;

use crate::openai::{scripted, text, tool_calls, Reply, Scripted};
use crate::support::{guest, toml_path, toolhost};

/// The example tools the scenarios call: greet (read), read_text/list_dir (read) and
/// write_text (write) over a fresh workspace.
fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.join("b.txt"), "beta").unwrap();
    let text = format!(
        "data_dir = {data}\n\
         [[component]]\npath = {template}\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.write-text]\nrisk = \"write\"\n",
        data = crate::support::own_data(),
        template = toml_path(&guest("template")),
        fs = toml_path(&guest("fs-tools")),
        ws = toml_path(&ws),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn provider(server: &Scripted, stream: bool) -> Provider {
    Provider::new(
        agent::Endpoint::parse(&server.base_url()).unwrap(),
        None,
        ProviderOptions {
            stream,
            max_retries: 3,
            backoff: Duration::from_millis(10),
            ..ProviderOptions::default()
        },
    )
    .unwrap()
}

struct Run {
    summary: Summary,
    executions: u64,
    rt: Runtime,
}

async fn run_with(server: &Scripted, config: AgentConfig, stream: bool) -> Run {
    let (_dir, path) = setup();
    let rt = crate::support::runtime(&path);
    let p = provider(server, stream);
    let messages = agent::prompt_messages("do the thing", &config);
    let ctx = rt.context("agent-tester", "default");
    let summary = agent::run_agent(&rt, &p, "scripted-model", messages, &config, ctx).await;
    Run {
        executions: rt.executions(),
        summary,
        rt,
    }
}

async fn run(server: &Scripted) -> Run {
    run_with(server, AgentConfig::default(), true).await
}

/// The transcript of a run of two steps — a tool call, then the answer: per step the request,
/// its one attempt and the response; the tool result; why the run stopped.
const TOOL_THEN_ANSWER: [&str; 8] = [
    "model_request",
    "model_attempt",
    "model_response",
    "tool_result",
    "model_request",
    "model_attempt",
    "model_response",
    "run_stopped",
];

/// The tool messages of the n-th request, in order.
fn tool_messages(server: &Scripted, n: usize) -> Vec<Value> {
    server.requests()[n].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// A tool call, its result fed back under the provider's id, then the final answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_steps_tool_then_answer() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(
                &[("call_1", "greet", r#"{"name":"Ada"}"#)],
                4,
                30,
            )),
            Reply::Stream(text("Ada has been greeted.", 20)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert_eq!(r.summary.steps, 2);
    assert_eq!(r.executions, 1);
    assert_eq!(
        r.summary.final_text.as_deref(),
        Some("Ada has been greeted.")
    );
    assert_eq!(r.summary.tokens.total, 50);
    assert_eq!(r.summary.tool_calls.get("completed"), Some(&1));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["stream"], true);
    let names: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"greet") && names.contains(&"write_text"),
        "{names:?}"
    );
    let tools = tool_messages(&server, 1);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["tool_call_id"], "call_1");
    let content = tools[0]["content"].as_str().unwrap();
    assert!(
        content.contains("Hello, Ada!") && content.contains("trust=\"untrusted\""),
        "{content}"
    );
    // The whole run is in the ledger: model steps, tool results, and the call.
    let entries = r.rt.ledger().transcript_entries(&r.summary.run_id).unwrap();
    let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, TOOL_THEN_ANSWER);
    assert_eq!(
        entries[1].detail.split(" after ").next(),
        Some("attempt 1: ok")
    );
    assert_eq!(entries[7].detail, "finished");
    let calls = r.rt.ledger().calls(Some(&r.summary.run_id)).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].call_id, "p:call_1");
}

/// Arguments split into one-character fragments are assembled and run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_in_many_fragments() {
    let args = r#"{"name":"a fairly long name, sent one character per chunk"}"#;
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", args)], 1, 10)),
            Reply::Stream(text("done", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 1);
    let content = tool_messages(&server, 1)[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(content.contains("one character per chunk"), "{content}");
}

/// Malformed and never-finished arguments execute nothing; each is fed back as
/// invalid_arguments and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unfinished_arguments() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(
                &[
                    ("bad", "greet", r#"{"name" "x"}"#),
                    ("open", "greet", r#"{"name": "never clos"#),
                ],
                3,
                10,
            )),
            Reply::Stream(text("sorry", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 0);
    let tools = tool_messages(&server, 1);
    assert_eq!(tools.len(), 2);
    for t in &tools {
        assert!(
            t["content"].as_str().unwrap().contains("invalid_arguments"),
            "{t}"
        );
    }
    assert_eq!(tools[0]["tool_call_id"], "bad");
    assert_eq!(tools[1]["tool_call_id"], "open");
    let calls = r.rt.ledger().calls(Some(&r.summary.run_id)).unwrap();
    assert_eq!(calls.len(), 2);
    assert!(calls
        .iter()
        .all(|c| c.code == Some(toolhost::Code::InvalidArguments)));
    assert_eq!(r.summary.failures.get("invalid_arguments"), Some(&2));
}

/// A tool that does not exist is unknown_tool, fed back; nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tool_is_fed_back() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("x", "launch_missiles", "{}")], 8, 10)),
            Reply::Stream(text("ok", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 0);
    let content = tool_messages(&server, 1)[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(content.contains("unknown_tool"), "{content}");
}

/// Three calls in one message (two reads, one write) run as one batch; results come back in
/// proposal order under their provider ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_parallel_calls_mixing_reads_and_writes() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(
                &[
                    ("r1", "read_text", r#"{"path":"a.txt"}"#),
                    ("w1", "write_text", r#"{"path":"c.txt","content":"gamma"}"#),
                    ("r2", "read_text", r#"{"path":"b.txt"}"#),
                ],
                5,
                10,
            )),
            Reply::Stream(text("all done", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 3);
    let tools = tool_messages(&server, 1);
    let ids: Vec<&str> = tools
        .iter()
        .map(|t| t["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r1", "w1", "r2"]);
    assert!(tools[0]["content"].as_str().unwrap().contains("alpha"));
    assert!(tools[1]["content"]
        .as_str()
        .unwrap()
        .contains("bytes-written"));
    assert!(tools[2]["content"].as_str().unwrap().contains("beta"));
}

/// A model repeating the same call is stopped at the repeat limit; the repeat that reaches
/// the limit does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_forever_is_a_repeated_call() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            Reply::Stream(tool_calls(
                &[(&format!("c{n}"), "greet", r#"{"name":"again"}"#)],
                4,
                10,
            ))
        })),
    )
    .await;
    let r = run(&server).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::RepeatedCall,
        "{:?}",
        r.summary
    );
    assert_eq!(r.summary.steps, 3);
    assert_eq!(r.executions, 2);
}

/// A model that never stops (a new call every step) is stopped at max_steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_stops_hits_max_steps() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            Reply::Stream(tool_calls(
                &[(&format!("c{n}"), "greet", &format!(r#"{{"name":"n{n}"}}"#))],
                4,
                10,
            ))
        })),
    )
    .await;
    let config = AgentConfig {
        max_steps: 4,
        ..AgentConfig::default()
    };
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::MaxSteps);
    assert_eq!(r.summary.steps, 4);
    assert_eq!(server.requests().len(), 4);
    assert_eq!(r.executions, 4);
}

/// Tool-call budgets stop the run by name: in total, and per tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_budgets() {
    let fresh = |n: usize| {
        Reply::Stream(tool_calls(
            &[(&format!("c{n}"), "greet", &format!(r#"{{"name":"n{n}"}}"#))],
            4,
            10,
        ))
    };
    let server = scripted(vec![], Some(Arc::new(fresh))).await;
    let config = AgentConfig {
        max_tool_calls: 2,
        ..AgentConfig::default()
    };
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::MaxToolCalls);
    assert_eq!(r.executions, 2);

    let server = scripted(vec![], Some(Arc::new(fresh))).await;
    let config = AgentConfig {
        max_calls_per_tool: Some(1),
        ..AgentConfig::default()
    };
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::MaxCallsPerTool);
    assert_eq!(r.executions, 1);
}

/// The token budget (from the endpoint's usage) stops the run before the next step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_budget() {
    let server = scripted(
        vec![],
        Some(Arc::new(|n| {
            Reply::Stream(tool_calls(
                &[(&format!("c{n}"), "greet", &format!(r#"{{"name":"n{n}"}}"#))],
                4,
                100,
            ))
        })),
    )
    .await;
    let config = AgentConfig {
        max_tokens: Some(150),
        ..AgentConfig::default()
    };
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::TokenBudget);
    assert_eq!(r.summary.steps, 2);
    assert_eq!(r.summary.tokens.total, 200);
}

/// A completed call of the terminal tool ends the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_tool() {
    let server = scripted(
        vec![Reply::Stream(tool_calls(
            &[("t", "greet", r#"{"name":"end"}"#)],
            4,
            10,
        ))],
        None,
    )
    .await;
    let config = AgentConfig {
        terminal_tool: Some("greet".into()),
        ..AgentConfig::default()
    };
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::TerminalTool);
    assert_eq!(r.summary.steps, 1);
    assert_eq!(r.executions, 1);
}

/// A 429 with Retry-After, then success: the model request is retried, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_then_success() {
    let server = scripted(
        vec![
            Reply::Status(429, Some(1)),
            Reply::Stream(tool_calls(&[("c", "greet", r#"{"name":"x"}"#)], 4, 10)),
            Reply::Status(503, None),
            Reply::Stream(text("fine", 5)),
        ],
        None,
    )
    .await;
    let started = std::time::Instant::now();
    let r = run(&server).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured"
    );
    assert_eq!(r.summary.model_requests, 4);
    assert_eq!(r.summary.steps, 2);
    assert_eq!(r.executions, 1);
}

/// A stream cut in the middle of a tool call is retried; the call runs once, from the
/// complete retry, never from the cut prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_cut_mid_call() {
    let full = tool_calls(&[("c", "greet", r#"{"name":"whole"}"#)], 3, 10);
    let cut = full[..4].to_vec();
    let server = scripted(
        vec![
            Reply::Cut(cut),
            Reply::Stream(full),
            Reply::Stream(text("done", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(
        r.summary.stopped_by,
        StopReason::Finished,
        "{:?}",
        r.summary
    );
    assert_eq!(r.summary.model_requests, 3);
    assert_eq!(r.executions, 1);
}

/// An endpoint that keeps failing ends the run as provider_error after the retries, and no
/// tool ever runs; malformed JSON counts as a failed attempt like a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_give_up_after_retries() {
    let server = scripted(
        vec![
            Reply::Json(json!({"not": "a completion"})),
            Reply::Status(500, None),
            Reply::Status(502, None),
            Reply::Status(500, None),
        ],
        None,
    )
    .await;
    let r = run_with(&server, AgentConfig::default(), false).await;
    assert_eq!(r.summary.stopped_by, StopReason::ProviderError);
    assert_eq!(r.summary.model_requests, 4);
    assert_eq!(server.requests().len(), 4);
    assert_eq!(r.executions, 0);
    assert!(r
        .summary
        .detail
        .as_deref()
        .unwrap()
        .starts_with("server_error"));
}

/// A provider repeating one id for two identical calls gets one execution (the second is
/// answered from the ledger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_provider_id_runs_once() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(
                &[
                    ("same", "greet", r#"{"name":"twice"}"#),
                    ("same", "greet", r#"{"name":"twice"}"#),
                ],
                4,
                10,
            )),
            Reply::Stream(text("ok", 5)),
        ],
        None,
    )
    .await;
    let r = run(&server).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 1);
    // One decided here, one answered from the ledger: the summary counts them apart.
    assert_eq!(r.summary.tool_calls.get("completed"), Some(&1));
    assert_eq!(r.summary.replayed, 1);
    let tools = tool_messages(&server, 1);
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["content"], tools[1]["content"]);
}

/// Non-streamed responses work the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_responses() {
    let server = scripted(
        vec![
            Reply::Json(json!({"id": "x", "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "k", "type": "function",
                     "function": {"name": "greet", "arguments": "{\"name\":\"json\"}"}}]}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})),
            Reply::Json(json!({"id": "y", "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "done"}}]})),
        ],
        None,
    )
    .await;
    let r = run_with(&server, AgentConfig::default(), false).await;
    assert_eq!(r.summary.stopped_by, StopReason::Finished);
    assert_eq!(r.executions, 1);
    assert_eq!(server.requests()[0].body["stream"], false);
    assert_eq!(r.summary.final_text.as_deref(), Some("done"));
}

/// The run's deadline stops a model request that does not answer (real clock, wide margin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_stops_a_silent_endpoint() {
    let server = scripted(
        vec![Reply::Delay(
            Duration::from_secs(60),
            Box::new(Reply::Stream(text("late", 1))),
        )],
        None,
    )
    .await;
    let config = AgentConfig {
        deadline_secs: 1,
        ..AgentConfig::default()
    };
    let started = std::time::Instant::now();
    let r = run_with(&server, config, true).await;
    assert_eq!(r.summary.stopped_by, StopReason::Deadline);
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Cancellation (what Ctrl-C does) stops the run while the model is thinking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_the_run() {
    let server = scripted(
        vec![Reply::Delay(
            Duration::from_secs(60),
            Box::new(Reply::Stream(text("late", 1))),
        )],
        None,
    )
    .await;
    let (_dir, path) = setup();
    let rt = crate::support::runtime(&path);
    let p = provider(&server, true);
    let config = AgentConfig::default();
    let ctx = rt.context("agent-tester", "default");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let messages = agent::prompt_messages("hi", &config);
    let summary = agent::run_agent(&rt, &p, "m", messages, &config, ctx).await;
    assert_eq!(summary.stopped_by, StopReason::Cancelled);
}

/// The binary: the API key comes from the named environment variable, is sent as a bearer
/// token and appears nowhere in the output; `ledger --run` shows the whole run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_run_with_api_key_from_env() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(&[("c1", "greet", r#"{"name":"cli"}"#)], 4, 10)),
            Reply::Stream(text("Greeted.", 5)),
        ],
        None,
    )
    .await;
    let (_dir, path) = setup();
    let config = path.display().to_string();
    let base = server.base_url();
    let out = tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "agent",
                "--config",
                &config,
                "--base-url",
                &base,
                "--model",
                "m",
            ])
            .args([
                "--api-key-env",
                "TOOLHOST_TEST_API_KEY",
                "--prompt",
                "greet cli",
            ])
            .env("TOOLHOST_TEST_API_KEY", "sk-test-do-not-print")
            .output()
            .unwrap();
        (out, config)
    })
    .await
    .unwrap();
    let (out, config) = out;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("sk-test") && !stderr.contains("sk-test"));
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["stopped_by"], "finished");
    assert_eq!(summary["final_text"], "Greeted.");
    let seen = server.requests();
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer sk-test-do-not-print")
    );
    let run = summary["run_id"].as_str().unwrap();
    let ledger = toolhost(&["ledger", "--config", &config, "--run", run]);
    let l: Value = serde_json::from_str(&ledger.stdout).unwrap();
    let kinds: Vec<&str> = l["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, TOOL_THEN_ANSWER, "{l}");
    assert_eq!(l["stopped"], "finished");
    assert_eq!(l["calls"][0]["tool"], "greet");

    // A missing key variable is a usage error before anything is sent.
    let out = toolhost(&[
        "agent",
        "--config",
        &config,
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "TOOLHOST_NO_SUCH_VARIABLE",
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status, 2, "{}", out.stderr);
}

/// Ctrl-C (SIGINT) on the binary ends the run as `cancelled` with its summary, promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_cancels_a_cli_run() {
    let server = scripted(
        vec![Reply::Delay(
            Duration::from_secs(60),
            Box::new(Reply::Stream(text("late", 1))),
        )],
        None,
    )
    .await;
    let (_dir, path) = setup();
    let config = path.display().to_string();
    let base = server.base_url();
    let out = tokio::task::spawn_blocking(move || {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args([
                "agent",
                "--config",
                &config,
                "--base-url",
                &base,
                "--model",
                "m",
            ])
            .args(["--prompt", "wait"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded wait until the model request is in flight.
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while server.requests().is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = std::time::Instant::now();
        let pid = i32::try_from(child.id()).unwrap();
        assert_eq!(send_sigint(pid), 0);
        let out = child.wait_with_output().unwrap();
        (out, sent.elapsed())
    })
    .await
    .unwrap();
    let (out, took) = out;
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(out.status.code(), Some(1));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stopped_by"], "cancelled");
}

/// SIGINT to a child process, through the `kill` command (no unsafe code needed).
fn send_sigint(pid: i32) -> i32 {
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    status.code().unwrap_or(-1)
}
