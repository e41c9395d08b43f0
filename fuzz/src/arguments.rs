//! Target `arguments`: the pipeline's argument check (stage 3: size cap, the tool's input JSON
//! Schema, then the exact WIT types), reached through [`Runtime::benchmark_params`], over every
//! tool of the `types` guest.
//!
//! Input: the first byte picks the tool, the rest is the arguments as JSON text. Invariants,
//! beyond "no panic":
//!
//! - accepted arguments are an object with exactly the tool's parameters, and each converted
//!   parameter is what the direct conversion gives for its value;
//! - a refusal is a message a model may see: at most [`MAX_MESSAGE_BYTES`], and without a host
//!   path (the repository's, unless the input itself carries it).
//!
//! [`Runtime::benchmark_params`]: toolhost::Runtime::benchmark_params

use serde_json::Value;
use toolhost::registry::convert::to_val;

use super::fixture::{fixture, repo_root};

/// The longest refusal this check accepts. Stage 3's longest message today is 1,043 bytes
/// (`invalid arguments: ` and a violation list clipped to 1 KiB); 2 KiB is the same bound as a
/// guest's own error message (`toolhost::runtime::MAX_TOOL_ERROR_MESSAGE`).
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    let f = fixture();
    let func = &f.functions[usize::from(selector) % f.functions.len()];
    let tool = f
        .runtime
        .registry
        .get(&func.tool)
        .expect("the tool is loaded");
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
