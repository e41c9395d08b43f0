//! Guest log lines reach an MCP client that asked for them (`logging/setLevel`) as
//! `notifications/message` — at its level, bounded, before the result, never in the result —
//! and reach no client that did not ask.

use serde_json::{json, Value};

use crate::mcp_frames::Serve;
use crate::support::{guest, temp_config, toml_path};

/// A session over the conformance tools (`test_tool_with_logging` logs three info lines), the
/// template (`greet`) and the hostile guests (`log_spam`).
fn serve() -> (tempfile::TempDir, Serve) {
    let (dir, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n[[component]]\npath = {}\n[[component]]\npath = {}\n\
         [component.tools.exfiltrate]\nnetwork = {{ allow = [\"127.0.0.1:9\"] }}\n",
        crate::support::own_data(),
        toml_path(&guest("conformance")),
        toml_path(&guest("template")),
        toml_path(&guest("hostile")),
    ));
    let s = Serve::start(&cfg);
    (dir, s)
}

fn request(s: &mut Serve, id: u64, method: &str, params: Value) -> (Vec<Value>, Value) {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.frame(frame.to_string().as_bytes());
    s.until_answer(&json!(id))
}

fn call(s: &mut Serve, id: u64, tool: &str) -> (Vec<Value>, Value) {
    request(s, id, "tools/call", json!({"name": tool, "arguments": {}}))
}

fn log_messages(before: &[Value]) -> Vec<&Value> {
    before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect()
}

/// The server offers logging; a client that never sets a level gets no log traffic.
#[test]
fn no_level_no_log_notifications() {
    let (_d, mut s) = serve();
    let (before, answer) = call(&mut s, 1, "test_tool_with_logging");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(log_messages(&before).is_empty(), "{before:?}");
}

/// At `info`, a call's three lines arrive in order before its result, each naming the tool and
/// the call; the result's text carries none of them. At `warning`, info lines are filtered.
#[test]
fn lines_at_the_clients_level_arrive_before_the_result() {
    let (_d, mut s) = serve();
    let (_, set) = request(&mut s, 1, "logging/setLevel", json!({"level": "info"}));
    assert_eq!(set["result"], json!({}), "{set}");
    let (before, answer) = call(&mut s, 2, "test_tool_with_logging");
    let logs = log_messages(&before);
    let texts: Vec<&str> = logs
        .iter()
        .map(|m| m["params"]["data"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ],
        "{before:?}"
    );
    for m in &logs {
        assert_eq!(m["params"]["level"], "info", "{m}");
        assert_eq!(m["params"]["logger"], "toolhost", "{m}");
        assert_eq!(m["params"]["data"]["tool"], "test_tool_with_logging", "{m}");
        assert_eq!(m["params"]["data"]["call_id"], "rpc-n:2", "{m}");
    }
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains("Tool processing data"), "{text}");
    assert!(text.contains("Logged three lines."), "{text}");

    let (_, set) = request(&mut s, 3, "logging/setLevel", json!({"level": "warning"}));
    assert_eq!(set["result"], json!({}), "{set}");
    let (before, _) = call(&mut s, 4, "test_tool_with_logging");
    assert!(log_messages(&before).is_empty(), "{before:?}");
}

/// A guest that logs 100,000 lines of 8 KiB gets a bounded stream: what the bucket allows (the
/// burst and its refill while the guest runs; `logging::tests` pin the exact numbers with a
/// clock driven by hand), within the per-call cap, then one warning that says how many were not
/// forwarded; every line at most 1 KiB. The session goes on.
#[test]
fn a_log_flood_is_bounded_and_the_session_goes_on() {
    let (_d, mut s) = serve();
    request(&mut s, 1, "logging/setLevel", json!({"level": "debug"}));
    let (before, answer) = call(&mut s, 2, "log_spam");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let logs = log_messages(&before);
    assert!(
        logs.len() > 1
            && logs.len() <= toolhost::serve::logging::MAX_LOG_NOTIFICATIONS as usize + 1,
        "{} notifications",
        logs.len()
    );
    for m in &logs[..logs.len() - 1] {
        let message = m["params"]["data"]["message"].as_str().unwrap();
        assert!(message.len() <= 1024, "{} bytes", message.len());
    }
    let last = logs.last().unwrap();
    assert_eq!(last["params"]["level"], "warning", "{last}");
    let said = last["params"]["data"]["message"].as_str().unwrap();
    assert!(said.contains("were not forwarded"), "{said}");
    let (before, answer) = request(
        &mut s,
        3,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "after"}}),
    );
    assert_eq!(
        answer["result"]["structuredContent"]["result"], "Hello, after!",
        "{answer}"
    );
    assert_eq!(
        log_messages(&before).len(),
        1,
        "greet logs one line: {before:?}"
    );
}

/// `logging/setLevel` with a level MCP does not define is an invalid-params error with its id.
#[test]
fn an_unknown_level_is_invalid_params() {
    let (_d, mut s) = serve();
    let (_, answer) = request(&mut s, 7, "logging/setLevel", json!({"level": "loud"}));
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}
