//! The frame check's verdict on each kind of frame.

use rmcp::model::{ClientRequest, GetExtensions};
use serde_json::{json, Value};

use super::*;

/// The error a frame is answered with, or a panic naming what came back instead.
fn refused(frame: &[u8]) -> FrameError {
    match check_frame(frame) {
        Err(e) => e,
        Ok(f) => panic!("{} passed: {f:?}", String::from_utf8_lossy(frame)),
    }
}

fn code_and_id(frame: &[u8]) -> (i32, Value) {
    let e = refused(frame);
    let answer = e.answer();
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["error"]["code"], json!(e.code));
    (e.code, answer["id"].clone())
}

fn message(frame: &[u8]) -> (ClientJsonRpcMessage, Option<RepeatedArgumentKey>) {
    match check_frame(frame) {
        Ok(Frame::Message {
            message,
            repeated_argument,
        }) => (*message, repeated_argument),
        other => panic!("{}: {other:?}", String::from_utf8_lossy(frame)),
    }
}

/// What is not JSON, or not JSON the host can hold, is -32700 with a null id.
#[test]
fn unparsable_frames_are_parse_errors() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    for frame in [
        &b"not json"[..],
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":1e400}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\ud800"}}"#,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"} x"#,
        deep.as_bytes(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","id":2}"#,
    ] {
        assert_eq!(
            code_and_id(frame),
            (-32700, Value::Null),
            "{}",
            String::from_utf8_lossy(&frame[..frame.len().min(60)])
        );
    }
}

/// A frame over the cap is -32600 with a null id, before anything parses it.
#[test]
fn oversized_frames_are_invalid_requests() {
    let mut big = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
    big.resize(MAX_FRAME_BYTES + 1, b'a');
    assert_eq!(code_and_id(&big), (-32600, Value::Null));
    assert_eq!(refused(&big), FrameError::too_large());
}

/// JSON that is not one valid request object is -32600, with the id when it can be read.
#[test]
fn malformed_requests_are_invalid_requests() {
    for (frame, id) in [
        (&b"[]"[..], Value::Null),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Value::Null),
        (b"5", Value::Null),
        (br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, Value::Null),
        (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, Value::Null),
        (br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, Value::Null),
        (br#"{"id":7,"method":"ping"}"#, json!(7)),
        (br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#, json!("a")),
        (br#"{"jsonrpc":"2.0","id":7,"method":5}"#, json!(7)),
        (br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":5}"#, json!(7)),
        (br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}"#, json!(7)),
        (br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":7,"method":"ping"}"#, json!(7)),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
            json!(7),
        ),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"arguments":{"a":1,"a":1}}}"#,
            json!(7),
        ),
        (br#"{"jsonrpc":"2.0","id":7}"#, Value::Null),
        (br#"{"jsonrpc":"2.0","id":7,"result":{},"error":{}}"#, Value::Null),
    ] {
        assert_eq!(
            code_and_id(frame),
            (-32600, id),
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
}

/// Params a known method cannot take are -32602 with the id (rmcp alone says "method not
/// found", or "invalid request" without an id).
#[test]
fn unusable_params_are_invalid_params() {
    for frame in [
        &br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[1,2]}"#[..],
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#,
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/call"}"#,
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
        br#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":9,"method":"ping","params":[]}"#,
    ] {
        assert_eq!(
            code_and_id(frame),
            (-32602, json!(9)),
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
}

/// A repeated key inside `tools/call` arguments passes, marked with its path; the value is
/// the last one (what rmcp would parse), and the handler refuses the call.
#[test]
fn repeated_argument_keys_mark_the_call() {
    let frame = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"convert_length","arguments":{"value":3,"value":4,"to":{"u":1,"u":2}}}}"#;
    let (m, rep) = message(frame);
    let rep = rep.expect("marked");
    assert_eq!(rep.0.pointer(), "/params/arguments/value");
    assert_eq!(rep.within_arguments().pointer(), "/value");
    let JsonRpcMessage::Request(r) = m else {
        panic!("not a request")
    };
    let ClientRequest::CallToolRequest(call) = &r.request else {
        panic!("not tools/call")
    };
    assert_eq!(call.params.arguments.as_ref().unwrap()["value"], json!(4));
    assert!(call.extensions().get::<RepeatedArgumentKey>().is_none());
}

/// Good frames pass unmarked: requests (unknown methods too: rmcp answers those), a BOM and a
/// CRLF ending, notifications, and the client's responses.
#[test]
fn good_frames_pass() {
    for frame in [
        &br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#[..],
        br#"{"jsonrpc":"2.0","id":"s","method":"tools/list","params":null}"#,
        b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r",
        br#"{"jsonrpc":"2.0","id":1,"method":"no/such_method","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":{"b":1}}}}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        br#"{"jsonrpc":"2.0","id":4,"result":{"action":"decline"}}"#,
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
    ] {
        let (_, rep) = message(frame);
        assert!(rep.is_none(), "{}", String::from_utf8_lossy(frame));
    }
}

/// Nothing answers an empty line or a notification, even one rmcp cannot use.
#[test]
fn blanks_and_unusable_notifications_are_skipped() {
    for frame in [
        &b""[..],
        b"  \t",
        b"\r",
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}"#,
    ] {
        assert!(
            matches!(check_frame(frame), Ok(Frame::Skip)),
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
}

/// The answer is one JSON-RPC error line, `id: null` when no id could be read.
#[test]
fn answers_are_single_json_rpc_lines() {
    let line = refused(b"{").answer_line();
    assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
    assert!(line.ends_with(b"\n"));
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(v["id"], Value::Null);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Parse error"));
}

/// A method 2026-07-28 removed, in a request that names 2026-07-28, is -32601 with its id,
/// whatever its params; the same method in a handshake-era request is checked as before.
#[test]
fn methods_removed_in_2026_are_not_found() {
    let modern = |method: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        )
    };
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ] {
        assert_eq!(
            code_and_id(modern(method).as_bytes()),
            (-32601, json!(9)),
            "{method}"
        );
    }
    let (m, _) = message(modern("tools/list").as_bytes());
    assert!(matches!(m, JsonRpcMessage::Request(_)));
    let (m, _) = message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert!(
        matches!(m, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::PingRequest(_)))
    );
    let old = br#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{}}"#;
    assert_eq!(code_and_id(old), (-32602, json!(2)));
}
