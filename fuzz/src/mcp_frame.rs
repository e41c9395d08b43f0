//! Target `mcp_frame`: the check every MCP frame passes before rmcp sees it
//! ([`check_frame`] for a stdio line, [`check_body`] for an HTTP POST body).
//!
//! Input: one frame (a line without its newline, or a body). Invariants, beyond "no panic":
//!
//! - a trailing `\r` and a leading byte order mark change nothing, and a body is checked like a
//!   line except that an empty one is a parse error;
//! - every refusal is a JSON-RPC error with code -32700, -32600 or -32602, answered as exactly
//!   one line that parses back to that error; a parse error carries `id: null`; an id it
//!   carries is the frame's own, exactly as written, and one rmcp can correlate (a string or an
//!   integer, float form such as `7.0` included); no refusal names a host path;
//! - text that is not JSON (serde_json's lenient view) is a parse error;
//! - a frame with no repeated key is never marked as repeating one, and a marked one is a
//!   `tools/call` whose repeat is inside `params.arguments`;
//! - a well-formed notification (no `id`, `jsonrpc: "2.0"`, a string `method`, usable `params`)
//!   is never answered.

use serde_json::Value;
use toolhost::contract::strict_json;
use toolhost::serve::frames::{check_body, check_frame, Frame, FrameError, MAX_FRAME_BYTES};

use super::fixture::repo_root;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let result = check_frame(data);
    let shown = format!("{result:?}");
    if !data.ends_with(b"\r") {
        let mut with_cr = data.to_vec();
        with_cr.push(b'\r');
        assert_eq!(
            format!("{:?}", check_frame(&with_cr)),
            shown,
            "a trailing CR"
        );
    }
    if !data.starts_with(BOM) {
        let with_bom = [BOM, data].concat();
        assert_eq!(
            format!("{:?}", check_frame(&with_bom)),
            shown,
            "a leading BOM"
        );
    }
    let blank = data.iter().all(u8::is_ascii_whitespace);
    match check_body(data) {
        Err(e) if blank => assert_eq!(e.code, -32700, "an empty body"),
        body => assert_eq!(format!("{body:?}"), shown, "a body vs a line"),
    }

    let stripped = data.strip_suffix(b"\r").unwrap_or(data);
    let stripped = stripped.strip_prefix(BOM).unwrap_or(stripped);
    let lenient = serde_json::from_slice::<Value>(stripped).ok();
    let unrepeated = strict_json::parse(stripped).is_ok();
    match &result {
        Err(e) => {
            refusal(e, data);
            if lenient.is_none() && stripped.len() <= MAX_FRAME_BYTES {
                // (blank input is Ok(Skip), so it never gets here)
                assert_eq!(e.code, -32700, "not JSON, answered {e:?}");
            }
            if unrepeated {
                assert!(!e.message.contains("more than once"), "{e:?}");
            }
            if let (Some(id), Some(v)) = (&e.id, &lenient) {
                assert_eq!(Some(id), v.get("id"), "the answer carries another id");
            }
            if let Some(v) = &lenient {
                assert!(
                    !(unrepeated && well_formed_notification(v)),
                    "a notification was answered: {e:?}"
                );
            }
        }
        Ok(Frame::Skip) => {}
        Ok(Frame::Message {
            repeated_argument, ..
        }) => {
            let v = lenient.expect("a passed frame is JSON");
            if let Some(r) = repeated_argument {
                assert!(!unrepeated, "marked as repeating a key, but none repeats");
                assert_eq!(
                    v["method"], "tools/call",
                    "a marked frame that is not a call"
                );
                let path = &r.0 .0;
                assert!(
                    path.len() > 2 && path[0].is_key("params") && path[1].is_key("arguments"),
                    "a repeat marked outside the arguments: {}",
                    r.0
                );
            }
        }
    }
}

/// The answer to a refused frame is one well-formed JSON-RPC error line.
fn refusal(e: &FrameError, input: &[u8]) {
    assert!(
        matches!(e.code, -32700 | -32600 | -32602),
        "code {}",
        e.code
    );
    if e.code == -32700 {
        assert_eq!(e.id, None, "a parse error carries an id");
    }
    if let Some(id) = &e.id {
        assert!(correlatable(id), "the answer's id {id}");
    }
    let line = e.answer_line();
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
    let answer = strict_json::parse(&line).expect("the answer is strict JSON");
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["error"]["code"], e.code);
    assert_eq!(answer["id"], e.id.clone().unwrap_or(Value::Null));
    let root = repo_root().to_string_lossy().into_owned();
    if !String::from_utf8_lossy(input).contains(&root) {
        assert!(!e.message.contains(&root), "a host path: {}", e.message);
    }
}

/// An id rmcp can correlate: a string, or an integer — written as one, or in float form (`7.0`,
/// `1e2`) below 2^53, which rmcp's `RequestId` also reads as that integer.
fn correlatable(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0)
        }
        _ => false,
    }
}

/// No `id`, `jsonrpc: "2.0"`, a string `method`, and `params` absent, null, an object or an
/// array: JSON-RPC never answers it.
fn well_formed_notification(v: &Value) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    !obj.contains_key("id")
        && obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && obj.get("method").is_some_and(Value::is_string)
        && matches!(
            obj.get("params"),
            None | Some(Value::Null | Value::Object(_) | Value::Array(_))
        )
}
