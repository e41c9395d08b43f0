//! Faults of the agent loop that a mock server cannot script, against our own scripted server:
//! an error event inside a `200` stream in each API, classified as the same error in a status
//! would be; a Responses content filter and failed response; a provider that repeats one call
//! id every step; `system_prompt` with `--messages`.

use serde_json::{json, Value};

use crate::openai::{scripted, text, tool_calls, Reply, Scripted};
use crate::support::toolhost;

/// greet, with a ledger of its own.
fn setup() -> (tempfile::TempDir, String) {
    let (dir, path) = crate::support::template_config();
    (dir, path.display().to_string())
}

/// `toolhost agent --api API` against `server` with `extra` flags (and a prompt, unless they
/// give `--messages`): exit status and summary.
fn agent(config: &str, server: &Scripted, api: &str, extra: &[&str]) -> (i32, Value) {
    let mut flags = Vec::new();
    if !extra.contains(&"--messages") {
        flags.extend(["--prompt", "hello"]);
    }
    flags.extend(extra);
    crate::agent_apis::agent_cli(config, (&server.base_url(), "m"), api, &flags)
}

/// Server-sent events of these JSON values.
fn events(values: &[Value]) -> Vec<u8> {
    values
        .iter()
        .map(|v| format!("data: {v}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// An error event inside a `200` stream is the provider's error, classified as the same error
/// in a status: refused credentials end the run at once (one request), in each API's own
/// event; an overloaded provider is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_inside_a_stream_is_classified() {
    let (_dir, config) = setup();
    let auth = [
        (
            "chat",
            json!({"error": {"message": "Incorrect API key", "type": "invalid_request_error",
                "code": "invalid_api_key"}}),
        ),
        (
            "responses",
            json!({"type": "error", "code": "invalid_api_key", "message": "Incorrect API key"}),
        ),
        (
            "messages",
            json!({"type": "error", "error": {"type": "authentication_error",
                "message": "invalid x-api-key"}}),
        ),
    ];
    for (api, event) in auth {
        let server = scripted(vec![Reply::RawStream(events(&[event]))], None).await;
        let (status, s) = agent(&config, &server, api, &[]);
        assert_eq!(status, 1, "{api}: {s}");
        let detail = s["detail"].as_str().unwrap();
        assert!(detail.starts_with("auth_failed"), "{api}: {detail}");
        assert!(detail.contains("an error event in the stream"), "{detail}");
        assert_eq!(server.requests().len(), 1, "{api}: retried");
    }
    // Overloaded mid-stream, then a whole answer: retried like a 529.
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error"}});
    let done = [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "fine"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    let server = scripted(
        vec![
            Reply::RawStream(events(&[overloaded])),
            Reply::RawStream(events(&done)),
        ],
        None,
    )
    .await;
    let (status, s) = agent(&config, &server, "messages", &[]);
    assert_eq!(status, 0, "{s}");
    assert_eq!(s["final_text"], "fine", "{s}");
    assert_eq!(s["model_requests"], 2, "{s}");
    assert_eq!(s["tokens"]["total"], 4, "{s}");
}

/// The Responses API: an incomplete response cut by the content filter stops the run
/// `content_filter`; a failed response carries its error, classified (a quota is final).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_filter_and_failure() {
    let (_dir, config) = setup();
    let filtered = json!({"type": "response.incomplete", "response": {"status": "incomplete",
        "incomplete_details": {"reason": "content_filter"}, "output": []}});
    let server = scripted(vec![Reply::RawStream(events(&[filtered]))], None).await;
    let (status, s) = agent(&config, &server, "responses", &[]);
    assert_eq!(
        (status, &s["stopped_by"]),
        (1, &json!("content_filter")),
        "{s}"
    );
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "insufficient_quota", "message": "no credit left"}}});
    let server = scripted(vec![Reply::RawStream(events(&[failed]))], None).await;
    let (status, s) = agent(&config, &server, "responses", &[]);
    assert_eq!(status, 1, "{s}");
    assert!(
        s["detail"].as_str().unwrap().starts_with("quota_exhausted"),
        "{s}"
    );
    assert_eq!(server.requests().len(), 1);
}

/// A provider that gives the same call id at every step: the call runs once, and the summary
/// counts the other two as replays (answered from the ledger), not as completed calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_repeated_every_step_is_counted_as_replays() {
    let (dir, config) = setup();
    let same = || Reply::Stream(tool_calls(&[("same", "greet", r#"{"name":"x"}"#)], 4, 10));
    let server = scripted(
        vec![same(), same(), same(), Reply::Stream(text("ok", 5))],
        None,
    )
    .await;
    let cfg = dir.path().join("repeat.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[agent]\nrepeat_limit = 5\n");
    std::fs::write(&cfg, text).unwrap();
    let (status, s) = agent(cfg.to_str().unwrap(), &server, "chat", &[]);
    assert_eq!(status, 0, "{s}");
    assert_eq!(s["tool_calls"], json!({"completed": 1}), "{s}");
    assert_eq!(s["replayed"], 2, "{s}");
    let ledger = toolhost(&[
        "ledger",
        "--config",
        cfg.to_str().unwrap(),
        "--run",
        s["run_id"].as_str().unwrap(),
    ])
    .json();
    let calls = ledger["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{ledger}");
    let admits: Vec<&Value> = calls[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["stage"] == "admit")
        .collect();
    assert_eq!(admits.len(), 3, "{ledger}");
    assert_eq!(admits[1]["decision"], "replay", "{ledger}");
}

/// `[agent] system_prompt` with `--messages` comes first, before the file's own messages, in
/// every API (Messages: in `system`); a file the formats cannot carry is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_prompt_goes_with_messages() {
    let (dir, config) = setup();
    let cfg = dir.path().join("system.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[agent]\nsystem_prompt = \"You are careful.\"\n");
    std::fs::write(&cfg, text).unwrap();
    let file = dir.path().join("messages.json");
    std::fs::write(
        &file,
        json!([{"role": "system", "content": "From the file."},
            {"role": "user", "content": "Say hi."}])
        .to_string(),
    )
    .unwrap();
    let (cfg, file) = (cfg.to_str().unwrap(), file.to_str().unwrap());
    let whole = |api: &str| match api {
        "chat" => json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}),
        "responses" => json!({"status": "completed", "output": [{"type": "message",
            "content": [{"type": "output_text", "text": "hi"}]}]}),
        _ => json!({"type": "message", "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn"}),
    };
    for api in ["chat", "responses", "messages"] {
        let server = scripted(vec![Reply::Json(whole(api))], None).await;
        let (status, s) = agent(cfg, &server, api, &["--messages", file, "--no-stream"]);
        assert_eq!(status, 0, "{api}: {s}");
        let body = &server.requests()[0].body;
        let system: Vec<Value> = match api {
            "chat" => body["messages"].as_array().unwrap()[..2].to_vec(),
            "responses" => body["input"].as_array().unwrap()[..2].to_vec(),
            _ => vec![body["system"].clone()],
        };
        let expected = match api {
            "messages" => vec![json!("You are careful.\n\nFrom the file.")],
            _ => vec![
                json!({"role": "system", "content": "You are careful."}),
                json!({"role": "system", "content": "From the file."}),
            ],
        };
        assert_eq!(system, expected, "{api}: {body}");
    }
    std::fs::write(
        dir.path().join("image.json"),
        json!([{"role": "user", "content": [{"type": "image_url"}]}]).to_string(),
    )
    .unwrap();
    let out = toolhost(&[
        "agent",
        "--config",
        cfg,
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--messages",
        dir.path().join("image.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("message 0: only text content parts are supported"),
        "{}",
        out.stderr
    );
}
