//! The Chat Completions reader: chunks, fragments, indices reused with new ids, whole bodies,
//! caps.

use super::*;
use crate::turn::{CONTENT_CUT_MARKER, MAX_CONTENT_BYTES, MAX_PROPOSED_ARGUMENT_BYTES};
use serde_json::json;

fn chunk(delta: Value) -> String {
    json!({"choices": [{"index": 0, "delta": delta}]}).to_string()
}

/// Arguments in one-character fragments are assembled and parsed once.
#[test]
fn fragments_assemble_per_index() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.event(&chunk(json!({"content": "Let me "})), now).unwrap();
    b.event(&chunk(json!({"content": "check."})), now).unwrap();
    let args = r#"{"name":"Ada"}"#;
    b.event(
        &chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
            "function": {"name": "greet", "arguments": ""}}]}),
        ),
        now,
    )
    .unwrap();
    for ch in args.chars() {
        b.event(
            &chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": ch.to_string()}}]}),
            ),
            now,
        )
        .unwrap();
    }
    b.event(
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}).to_string(),
        now,
    )
    .unwrap();
    b.event(
        &json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).to_string(),
        now,
    )
    .unwrap();
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    assert_eq!(t.content.as_deref(), Some("Let me check."));
    assert_eq!(t.calls.len(), 1);
    assert_eq!(t.calls[0].provider_id.as_deref(), Some("c1"));
    assert_eq!(t.calls[0].name, "greet");
    assert_eq!(
        t.calls[0].arguments.as_ref().unwrap(),
        &json!({"name": "Ada"})
    );
    assert_eq!(t.usage.unwrap().total, 15);
}

/// Arguments that never complete become invalid_arguments for that call only.
#[test]
fn unfinished_arguments_are_invalid() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.event(
        &chunk(json!({"tool_calls": [
            {"index": 0, "id": "a", "function": {"name": "greet", "arguments": "{\"name\": "}},
            {"index": 1, "id": "b", "function": {"name": "greet", "arguments": "{\"name\":\"x\"}"}}
        ]})),
        now,
    )
    .unwrap();
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    let bad = t.calls[0].arguments.as_ref().unwrap_err();
    assert_eq!(bad.code, Some(toolhost_contract::Code::InvalidArguments));
    assert!(t.calls[1].arguments.is_ok());
}

/// A stream that stops before finishing is truncated, not a turn.
#[test]
fn cut_stream_is_truncated() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.event(&chunk(json!({"content": "hal"})), now).unwrap();
    assert_eq!(b.finish(now).unwrap_err(), TurnError::Truncated);
}

/// A non-streamed response gives the same turn.
#[test]
fn whole_response() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.whole(
        &json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "x", "type": "function",
                "function": {"name": "greet", "arguments": "{\"name\":\"A\"}"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}),
        now,
    )
    .unwrap();
    let t = b.finish(now).unwrap();
    assert_eq!(t.content, None);
    assert_eq!(
        t.calls[0].arguments.as_ref().unwrap(),
        &json!({"name": "A"})
    );
    assert_eq!(t.usage.unwrap().total, 7);
}

/// Calls without an index (sent whole) get one each; object arguments are accepted.
#[test]
fn calls_without_index() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    for (id, name) in [("a", "x"), ("b", "y")] {
        b.event(
            &chunk(json!({"tool_calls": [{"id": id, "function": {"name": name, "arguments": {"k": id}}}]})),
            now,
        )
        .unwrap();
    }
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    assert_eq!(t.calls.len(), 2);
    assert_eq!(t.calls[1].name, "y");
    assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({"k": "b"}));
}

/// Object arguments that repeat a key end that call `invalid_arguments` (never run with
/// either value); the other call of the same event is unaffected. The same for a whole body.
#[test]
fn repeated_keys_in_object_arguments_are_invalid() {
    let now = Instant::now();
    let event = r#"{"choices":[{"delta":{"tool_calls":[
        {"index":0,"id":"a","function":{"name":"x","arguments":{"k":1,"k":2}}},
        {"index":1,"id":"b","function":{"name":"y","arguments":{"k":1}}}]}}]}"#;
    let mut b = ChatTurn::default();
    b.event(event, now).unwrap();
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    let bad = t.calls[0].arguments.as_ref().unwrap_err();
    assert_eq!(bad.code, Some(toolhost_contract::Code::InvalidArguments));
    assert!(bad.message.contains("repeat"), "{}", bad.message);
    assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({"k": 1}));

    let body = r#"{"choices":[{"message":{"tool_calls":[
        {"id":"a","function":{"name":"x","arguments":{"k":{"j":1,"j":2}}}}]},
        "finish_reason":"tool_calls"}]}"#;
    let mut b = ChatTurn::default();
    b.whole_body(body.as_bytes(), now).unwrap();
    let t = b.finish(now).unwrap();
    assert!(t.calls[0].arguments.is_err());
}

/// Malformed JSON in an event is an error of the response, not of a call.
#[test]
fn malformed_event() {
    let mut b = ChatTurn::default();
    assert!(matches!(
        b.event("{not json", Instant::now()),
        Err(ProviderError::Turn(TurnError::Malformed(_)))
    ));
}

fn call(index: Option<u32>, id: Option<&str>, name: Option<&str>, args: &str) -> String {
    let mut c = json!({"function": {"arguments": args}});
    if let Some(i) = index {
        c["index"] = json!(i);
    }
    if let Some(id) = id {
        c["id"] = json!(id);
    }
    if let Some(n) = name {
        c["function"]["name"] = json!(n);
    }
    chunk(json!({"tool_calls": [c]}))
}

/// A server that streams every parallel call at index 0: each new id starts a new call,
/// in arrival order, each with its own arguments (never glued together, never dropped);
/// fragments without an id continue the latest call at that index.
#[test]
fn a_new_id_at_a_used_index_is_a_new_call() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    for (id, arg) in [("a", "1"), ("b", "2"), ("c", "3")] {
        b.event(&call(Some(0), Some(id), Some("greet"), "{\"n\":"), now)
            .unwrap();
        b.event(&call(Some(0), None, None, arg), now).unwrap();
        b.event(&call(Some(0), Some(id), None, "}"), now).unwrap();
    }
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    let got: Vec<_> = t
        .calls
        .iter()
        .map(|c| {
            (
                c.index,
                c.provider_id.clone().unwrap(),
                c.arguments.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "a".to_string(), json!({"n": 1})),
            (1, "b".to_string(), json!({"n": 2})),
            (2, "c".to_string(), json!({"n": 3})),
        ]
    );
}

/// A call whose first chunk had no id takes the id that comes later (the usual order of
/// some servers), rather than starting a second call.
#[test]
fn a_late_id_joins_its_call() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.event(&call(Some(0), None, Some("greet"), "{}"), now)
        .unwrap();
    b.event(&call(Some(0), Some("late"), None, ""), now)
        .unwrap();
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    assert_eq!(t.calls.len(), 1);
    assert_eq!(t.calls[0].provider_id.as_deref(), Some("late"));
}

/// What the model sent as arguments is kept (bounded) with a digest of all of it, also
/// when it does not parse: two different broken strings have different digests.
#[test]
fn proposed_arguments_are_kept() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    b.event(&call(Some(0), Some("a"), Some("greet"), "{oops"), now)
        .unwrap();
    b.event(&call(Some(1), Some("b"), Some("greet"), "{oops!"), now)
        .unwrap();
    let long = format!("\"{}\"", "x".repeat(MAX_PROPOSED_ARGUMENT_BYTES));
    b.event(&call(Some(2), Some("c"), Some("greet"), &long), now)
        .unwrap();
    b.event("[DONE]", now).unwrap();
    let t = b.finish(now).unwrap();
    assert!(t.calls[0].arguments.is_err());
    assert_eq!(t.calls[0].proposed_arguments, "{oops");
    assert_ne!(t.calls[0].proposed_digest, t.calls[1].proposed_digest);
    assert_eq!(
        t.calls[2].proposed_arguments.len(),
        MAX_PROPOSED_ARGUMENT_BYTES
    );
}

/// Text past the cap is cut, and the text says where.
#[test]
fn cut_text_says_so() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    let big = "y".repeat(MAX_CONTENT_BYTES - 3);
    b.event(&chunk(json!({"content": big})), now).unwrap();
    b.event(&chunk(json!({"content": "abcdef"})), now).unwrap();
    b.event("[DONE]", now).unwrap();
    let text = b.finish(now).unwrap().content.unwrap();
    assert!(text.starts_with(&big));
    assert!(
        text.ends_with(&format!("yabc{CONTENT_CUT_MARKER}")),
        "{}",
        &text[text.len() - 80..]
    );
    let mut b = ChatTurn::default();
    b.event(&chunk(json!({"content": "short"})), now).unwrap();
    b.event("[DONE]", now).unwrap();
    assert_eq!(b.finish(now).unwrap().content.as_deref(), Some("short"));
}

/// `"error": null` in a chunk is no error; an error object is the provider's, classified.
#[test]
fn a_null_error_field_is_no_error() {
    let now = Instant::now();
    let mut b = ChatTurn::default();
    let chunk = json!({"error": null, "choices": [{"index": 0, "delta": {"content": "ok"},
        "finish_reason": "stop"}]});
    b.event(&chunk.to_string(), now).unwrap();
    assert_eq!(b.finish(now).unwrap().content.as_deref(), Some("ok"));
    let mut b = ChatTurn::default();
    let e = b
        .event(
            &json!({"error": {"type": "authentication_error"}}).to_string(),
            now,
        )
        .unwrap_err();
    assert_eq!(e.code(), "auth_failed");
}
