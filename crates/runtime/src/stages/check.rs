//! Stage 8, check: what the sandbox returned becomes the call's result — the output bounded,
//! converted and checked against the output schema, every fault classified.

use serde_json::Value;
use wasmtime::component::types::Type;
use wasmtime::component::Val;

use toolhost_contract::{Code, Status, ToolCall, ToolResult, Usage};
use toolhost_registry::convert::{json_size_lower_bound, to_json};
use toolhost_registry::Tool;
use toolhost_sandbox::{Execution, Fault};

use super::super::diagnostics::Entry;
use super::super::endings::cancelled;
use super::super::{clip, Runtime, MAX_TOOL_ERROR_MESSAGE};

/// Stage 8: limits, output conversion, output schema.
pub(crate) fn check(
    rt: &Runtime,
    run_id: &str,
    call: &ToolCall,
    tool: &Tool,
    exec: Execution,
) -> ToolResult {
    let mut usage = Usage {
        fuel_consumed: exec.fuel_consumed,
        wall_ms: exec.wall.as_millis() as u64,
        memory_peak_bytes: exec.memory_peak_bytes,
        output_bytes: exec.stdio_bytes,
    };
    let results = match exec.outcome {
        Ok(r) => r,
        Err(fault) => {
            let (code, message, detail) = match fault {
                Fault::FuelExhausted => (
                    Code::FuelExhausted,
                    "the tool used up its compute budget",
                    None,
                ),
                Fault::DeadlineExceeded => (
                    Code::DeadlineExceeded,
                    "the tool did not finish within its time limit",
                    None,
                ),
                Fault::MemoryExceeded => (
                    Code::MemoryExceeded,
                    "the tool exceeded its memory limit",
                    None,
                ),
                Fault::OutputTooLarge => (
                    Code::OutputTooLarge,
                    "the tool produced more output than it is allowed",
                    None,
                ),
                Fault::HostResourcesExceeded(over) => (
                    Code::HostResourcesExceeded,
                    "the tool held more host resources (open files, sockets, streams, \
                     directory listings) than a call may",
                    Some(over.to_string()),
                ),
                Fault::Cancelled => {
                    let mut r = if tool.risk == toolhost_contract::Risk::Read {
                        cancelled(call, Status::Cancelled, Code::Cancelled)
                    } else {
                        cancelled(call, Status::OutcomeUnknown, Code::CancelledAfterStart)
                    };
                    r.usage = usage;
                    return r;
                }
                Fault::Trap { detail, .. } => (Code::GuestTrap, "the tool crashed", Some(detail)),
                Fault::HostBusy => (
                    Code::RateLimited,
                    "the host is running as many calls as it can; retry later",
                    None,
                ),
                Fault::Setup { detail } => (
                    Code::HostError,
                    "the host could not run the tool",
                    Some(detail),
                ),
            };
            if detail.is_none() && exec.stderr.is_empty() {
                return ToolResult::failed(call, code, message, usage);
            }
            let detail = detail.unwrap_or_else(|| code.to_string());
            return failed_with_diagnostic(
                rt,
                run_id,
                call,
                tool,
                (code, message),
                usage,
                (&detail, &exec.stderr),
            );
        }
    };
    if results.iter().map(json_size_lower_bound).sum::<u64>() > tool.limits.output_bytes {
        return ToolResult::failed(
            call,
            Code::OutputTooLarge,
            "the tool returned more output than it is allowed",
            usage,
        );
    }
    let value = match (results.into_iter().next(), tool.result()) {
        (None, _) => Ok(Value::Null),
        (Some(Val::Result(r)), Some(Type::Result(_))) => match r {
            Ok(ok) => ok.map_or(Ok(Value::Null), |v| to_json(*v, "output")),
            Err(err) => {
                let rendered = match err.map(|v| to_json(*v, "error")) {
                    Some(Ok(Value::String(s))) => s,
                    Some(Ok(v)) => v.to_string(),
                    Some(Err(_)) | None => "no detail".to_string(),
                };
                return ToolResult::failed(
                    call,
                    Code::ToolError,
                    format!(
                        "the tool reported an error: {}",
                        clip(&rendered, MAX_TOOL_ERROR_MESSAGE)
                    ),
                    usage,
                );
            }
        },
        (Some(v), _) => to_json(v, "output"),
    };
    let value = match value {
        Ok(v) => v,
        Err(e) => {
            return failed_with_diagnostic(
                rt,
                run_id,
                call,
                tool,
                (
                    Code::InvalidOutput,
                    "the tool returned a value that has no JSON form",
                ),
                usage,
                (&e.to_string(), &exec.stderr),
            );
        }
    };
    let size = toolhost_contract::measure::json_len(&value);
    usage.output_bytes = usage.output_bytes.saturating_add(size);
    if size > tool.limits.output_bytes {
        return ToolResult::failed(
            call,
            Code::OutputTooLarge,
            "the tool returned more output than it is allowed",
            usage,
        );
    }
    if let Err(violations) = tool.output_validator().validate(&value) {
        let detail: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        return failed_with_diagnostic(
            rt,
            run_id,
            call,
            tool,
            (
                Code::InvalidOutput,
                "the tool returned a value that does not match its output schema",
            ),
            usage,
            (&detail.join("; "), &exec.stderr),
        );
    }
    ToolResult::completed(call, value, usage)
}

/// A failure whose operator detail (and the guest's stderr) goes to the diagnostic log.
fn failed_with_diagnostic(
    rt: &Runtime,
    run_id: &str,
    call: &ToolCall,
    tool: &Tool,
    (code, message): (Code, &str),
    usage: Usage,
    (detail, stderr): (&str, &[u8]),
) -> ToolResult {
    let mut r = ToolResult::failed(call, code, message, usage);
    r.diagnostic_id = Some(rt.diagnostics.record(Entry {
        run_id,
        tool: tool.name.as_str(),
        call_id: &call.call_id,
        detail,
        stderr,
    }));
    r
}
