//! Target `arguments`: tool-call arguments as every frontend takes them — the one strict JSON
//! parse ([`strict_json::parse`]), then the pipeline's argument check (stage 3: size cap, the
//! tool's input JSON Schema, then the exact WIT types), reached through
//! [`Runtime::benchmark_params`] — over every tool of the `types` guest.
//!
//! Input: the first byte picks the tool, the rest is the arguments as JSON text. Invariants,
//! beyond "no panic":
//!
//! - the strict parse and serde_json's (lenient) parse agree except where they must not: what
//!   the strict parse accepts, serde_json parses to the same value; what serde_json refuses, the
//!   strict parse refuses; what serde_json accepts within [`MAX_DEPTH`] levels, the strict parse
//!   refuses only for a repeated key, whose path ends at a key;
//! - accepted arguments are an object with exactly the tool's parameters, and each converted
//!   parameter is what the direct conversion gives for its value;
//! - a refusal is a message a model may see: at most [`MAX_MESSAGE_BYTES`], and without a host
//!   path (the repository's, unless the input itself carries it).
//!
//! [`Runtime::benchmark_params`]: toolhost::Runtime::benchmark_params

use serde_json::Value;
use toolhost::contract::strict_json::{self, Segment, StrictJsonError, MAX_DEPTH};
use toolhost_registry::convert::to_val;

use super::fixture::{fixture, repo_root};

/// The longest refusal this check accepts. Stage 3's longest message today is 1,043 bytes
/// (`invalid arguments: ` and a violation list clipped to 1 KiB); 2 KiB is the same bound as a
/// guest's own error message (`toolhost_runtime::MAX_TOOL_ERROR_MESSAGE`).
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let Some(args) = parse(text) else {
        return;
    };
    let f = fixture();
    let func = &f.functions[usize::from(selector) % f.functions.len()];
    let registry = f.runtime.registry();
    let tool = registry.get(&func.tool).expect("the tool is loaded");
    match f.runtime.benchmark_params(tool, &args) {
        Ok(vals) => {
            let obj = args
                .as_object()
                .unwrap_or_else(|| panic!("{}: accepted non-object arguments {args}", func.tool));
            assert_eq!(obj.len(), func.params.len(), "{}: {args}", func.tool);
            assert_eq!(vals.len(), func.params.len(), "{}: {args}", func.tool);
            for ((name, ty), val) in func.params.iter().zip(&vals) {
                let v = obj
                    .get(name)
                    .unwrap_or_else(|| panic!("{}: {name} missing from {args}", func.tool));
                assert_eq!(
                    to_val(ty, v, "/").as_ref(),
                    Ok(val),
                    "{}: stage 3 and the direct conversion of {name} differ",
                    func.tool
                );
            }
        }
        Err(message) => {
            assert!(
                message.len() <= MAX_MESSAGE_BYTES,
                "{}: a {}-byte refusal",
                func.tool,
                message.len()
            );
            let root = repo_root().to_string_lossy().into_owned();
            let echoed = String::from_utf8_lossy(text).contains(&root);
            assert!(
                echoed || !message.contains(&root),
                "{}: the refusal names a host path: {message}",
                func.tool
            );
        }
    }
}

/// Nesting depth of a value (a scalar is 1).
fn depth(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The strict parse of `text`, checked against serde_json's.
pub fn parse(text: &[u8]) -> Option<Value> {
    let strict = strict_json::parse(text);
    let lenient = serde_json::from_slice::<Value>(text);
    match (&strict, &lenient) {
        (Ok(s), Ok(l)) => assert_eq!(s, l, "the strict and the lenient parse differ"),
        (Ok(s), Err(e)) => panic!("the strict parse accepts {s}, serde_json refuses it: {e}"),
        (Err(StrictJsonError::DuplicateKey(path)), _) => {
            assert!(
                matches!(path.0.last(), Some(Segment::Key(_))),
                "a repeat whose path {path} does not end at a key"
            );
        }
        (Err(e), Ok(l)) => assert!(
            depth(l) > MAX_DEPTH,
            "serde_json accepts {l} ({} levels), the strict parse refuses it: {e}",
            depth(l)
        ),
        (Err(_), Err(_)) => {}
    }
    strict.ok()
}
