//! Between toolhost's vocabulary and MCP's: a tool definition becomes an MCP `Tool` (schemas
//! and annotations), a `ToolResult` becomes a `CallToolResult`.
//!
//! MCP wants an object at the top of `outputSchema` and `structuredContent`. A tool whose WIT
//! result is not a record (a string, a number, a list, nothing) is advertised wrapped as
//! `{"result": <value>}`, and its structured content is wrapped the same way.

use rmcp::model::{CallToolResult, ResultType, Tool};
use serde_json::{json, Map, Value};

use toolhost_contract::Risk;
use toolhost_contract::{Status, ToolResult, DEFAULT_MODEL_MESSAGE_BYTES};
use toolhost_registry::Tool as HostTool;

/// The property a non-object output is wrapped in.
pub const WRAPPED_RESULT: &str = "result";

/// Whether a tool's output is advertised as is (an object schema) or wrapped.
pub fn output_is_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Whether the output of `tool` (as its caller sees it: `None` for no tool, or one hidden
/// from them) is wrapped as `{"result": …}`; the failure of a tool unknown to the caller is
/// rendered as a wrapped one.
pub fn wraps_output(tool: Option<&HostTool>) -> bool {
    tool.is_none_or(|t| !output_is_object(&t.output_schema))
}

/// The MCP `outputSchema` for a derived (and refined) output schema.
pub fn output_schema(schema: &Value) -> Value {
    if output_is_object(schema) {
        return schema.clone();
    }
    let mut inner = schema.clone();
    let dialect = inner.as_object_mut().and_then(|o| o.remove("$schema"));
    let mut wrapped = json!({
        "type": "object",
        "properties": { WRAPPED_RESULT: inner },
        "required": [WRAPPED_RESULT],
        "additionalProperties": false,
    });
    if let (Some(d), Some(o)) = (dialect, wrapped.as_object_mut()) {
        o.insert("$schema".into(), d);
    }
    wrapped
}

/// The MCP annotations a risk class implies (hints only; the host enforces, not the client).
pub fn annotations(risk: Risk, networked: bool) -> Value {
    let (read_only, destructive, idempotent) = match risk {
        Risk::Read => (true, false, true),
        Risk::Write => (false, false, false),
        Risk::External => (false, false, false),
        Risk::Destructive => (false, true, false),
    };
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": networked || risk == Risk::External,
    })
}

/// One tool as `tools/list` shows it, with the input schema its caller is offered
/// (`Visibility::input_schema`).
pub fn mcp_tool(tool: &HostTool, input_schema: &Value) -> Tool {
    let def = tool.definition();
    let value = json!({
        "name": def.name,
        "description": def.description,
        "inputSchema": input_schema,
        "outputSchema": output_schema(&def.output_schema),
        "annotations": annotations(def.risk, tool.grant.has_network()),
    });
    serde_json::from_value(value).expect("a derived definition is a valid MCP tool")
}

/// The `_meta` key a failure's `{status, code, message, call_id}` travel under.
///
/// Not `structuredContent`: once a client has listed tools, the official TypeScript SDK checks
/// `structuredContent` against the tool's `outputSchema` whenever it is present, `isError` or
/// not, and a failure shape is not the tool's output. `_meta` is free-form in every SDK, and the
/// code is in the text block too (`status="failed (CODE)"`), for clients that show only text.
pub const FAILURE_META: &str = "toolhost/failure";

/// The `_meta` key that marks a result an operator recorded (`toolhost reconcile`) for a call
/// whose outcome the host lost, with when (`{"at_ms": …}`).
pub const RECONCILED_META: &str = "toolhost/reconciled";

/// A terminal result as `tools/call` returns it: completed calls carry the output as
/// structured content; every failure is `isError` with `{status, code, message, call_id}` under
/// `_meta` ([`FAILURE_META`]) and no structured content — never a protocol error. The text
/// block is the bounded, untrusted-labelled model rendering. Its `resultType` is `complete`. A
/// reconciled result says so under `_meta` ([`RECONCILED_META`]) and in the text block.
pub fn call_result(result: &ToolResult, wrap: bool) -> CallToolResult {
    let text = result.model_message(DEFAULT_MODEL_MESSAGE_BYTES);
    let mut value = match (&result.status, &result.output) {
        (Status::Completed, Some(out)) => {
            let content = if wrap {
                json!({ WRAPPED_RESULT: out })
            } else {
                out.clone()
            };
            json!({
                "content": [{ "type": "text", "text": text }],
                "structuredContent": content,
                "isError": false,
            })
        }
        _ => json!({
            "content": [{ "type": "text", "text": text }],
            "isError": true,
            "_meta": { FAILURE_META: failure_content(result) },
        }),
    };
    if let Some(r) = &result.reconciled {
        value["_meta"][RECONCILED_META] = json!({ "at_ms": r.at_ms });
    }
    let mut result: CallToolResult =
        serde_json::from_value(value).expect("a rendered result is a valid MCP result");
    // 2026-07-28 names every result's type; rmcp strips it for a handshake-era peer.
    result.result_type = Some(ResultType::COMPLETE);
    result
}

/// `{status, code, message, call_id}` (and the approval handle, when one is needed).
fn failure_content(result: &ToolResult) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(result.status));
    m.insert(
        "code".into(),
        result.code.map_or(Value::Null, |c| json!(c.as_str())),
    );
    m.insert("message".into(), json!(result.message));
    m.insert("call_id".into(), json!(result.call_id));
    if let Some(a) = &result.approval {
        m.insert(
            "approval".into(),
            json!({"handle": a.handle, "expires_at": a.expires_at}),
        );
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_contract::{Code, ToolCall, Usage};

    fn call() -> ToolCall {
        ToolCall {
            call_id: "c1".into(),
            name: "t".into(),
            arguments: json!({}),
        }
    }

    /// A scalar output schema is wrapped into an object, keeping its dialect at the top.
    #[test]
    fn scalar_outputs_are_wrapped() {
        let s = output_schema(&json!({"$schema": "d", "type": "integer"}));
        assert_eq!(s["type"], "object");
        assert_eq!(s["$schema"], "d");
        assert_eq!(s["properties"]["result"], json!({"type": "integer"}));
        let r = call_result(
            &ToolResult::completed(&call(), json!(5), Usage::default()),
            true,
        );
        assert_eq!(r.structured_content, Some(json!({"result": 5})));
        assert_eq!(r.is_error, Some(false));
    }

    /// An object output schema is advertised unchanged and its content is not wrapped.
    #[test]
    fn object_outputs_are_not_wrapped() {
        let schema = json!({"type": "object", "properties": {}});
        assert_eq!(output_schema(&schema), schema);
        let r = call_result(
            &ToolResult::completed(&call(), json!({"a": 1}), Usage::default()),
            false,
        );
        assert_eq!(r.structured_content, Some(json!({"a": 1})));
    }

    /// A failure is a tool result with isError, no structured content (it would not match the
    /// output schema), and status/code/message under `_meta` and in the text.
    #[test]
    fn failures_carry_status_code_message_outside_structured_content() {
        let r = call_result(
            &ToolResult::failed(&call(), Code::InvalidArguments, "bad", Usage::default()),
            true,
        );
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content, None);
        let wire = serde_json::to_value(&r).unwrap();
        assert!(wire.get("structuredContent").is_none(), "{wire}");
        let s = &wire["_meta"][FAILURE_META];
        assert_eq!(s["status"], "failed");
        assert_eq!(s["code"], "invalid_arguments");
        assert_eq!(s["message"], "bad");
        assert_eq!(s["call_id"], "c1");
        let text = wire["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("status=\"failed (invalid_arguments)\""),
            "{text}"
        );
    }

    /// A reconciled result is marked under `_meta` and in the text frame, completed or not;
    /// another result carries no mark.
    #[test]
    fn reconciled_results_are_marked() {
        let mut done = ToolResult::completed(&call(), json!({"a": 1}), Usage::default());
        let plain = serde_json::to_value(call_result(&done, false)).unwrap();
        assert!(plain.get("_meta").is_none(), "{plain}");
        assert!(!plain["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("reconciled"));
        done.reconciled = Some(toolhost_contract::Reconciled { at_ms: 42 });
        let mut not_run =
            ToolResult::failed(&call(), Code::ConfirmedNotRun, "no", Usage::default());
        not_run.reconciled = done.reconciled;
        for r in [done, not_run] {
            let wire = serde_json::to_value(call_result(&r, false)).unwrap();
            assert_eq!(
                wire["_meta"][RECONCILED_META],
                json!({"at_ms": 42}),
                "{wire}"
            );
            let text = wire["content"][0]["text"].as_str().unwrap();
            assert!(
                text.contains(" reconciled=\"true\" trust=\"untrusted\""),
                "{text}"
            );
        }
    }

    /// Annotations follow the risk class; the network grant opens the world.
    #[test]
    fn annotations_follow_risk() {
        let a = annotations(Risk::Read, false);
        assert_eq!(a["readOnlyHint"], true);
        assert_eq!(a["openWorldHint"], false);
        let d = annotations(Risk::Destructive, false);
        assert_eq!(d["destructiveHint"], true);
        assert_eq!(d["readOnlyHint"], false);
        assert_eq!(annotations(Risk::Read, true)["openWorldHint"], true);
    }
}
