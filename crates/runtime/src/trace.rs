//! The spans of a call (`telemetry` lists them all): one `call` span, its fields bounded before
//! it exists, and its outcome recorded when it ends; and the call counted in the metrics.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

use toolhost_contract::{log_safe, RunContext, ToolCall, ToolResult};
use toolhost_telemetry::CallEnd;

use super::Prepared;

/// The span of one call. Its fields were bounded by `contract::bounds` (the call was checked
/// before), none is argument content, and the model-chosen ones are escaped for a log line
/// (`contract::log_safe`); they are computed only when the span is enabled.
pub(super) fn call_span(ctx: &RunContext, call: &ToolCall) -> Span {
    tracing::debug_span!(
        target: "toolhost::call",
        "call",
        call_id = %log_safe(&call.call_id),
        run_id = %log_safe(&ctx.run_id),
        tool = %log_safe(&call.name),
        principal = %log_safe(&ctx.caller.principal),
        tenant = %log_safe(&ctx.caller.tenant),
        status = Empty,
        code = Empty,
    )
}

/// Record how the call ended on its span.
pub(super) fn finish(span: &Span, result: &ToolResult) {
    span.record("status", result.status.as_str());
    if let Some(code) = result.code {
        span.record("code", code.as_str());
    }
}

/// Count a call that ended in the process's metrics, under its tool's name when the registry has
/// one (a name no tool has is never a label).
pub(super) fn count(prepared: &Prepared, result: &ToolResult, started: Instant) {
    if !toolhost_telemetry::metrics_enabled() {
        return;
    }
    toolhost_telemetry::metrics().call_ended(CallEnd {
        tool: prepared.registered().map(|t| t.name.as_str()),
        status: result.status.as_str(),
        code: result.code.map_or("", |c| c.as_str()),
        seconds: started.elapsed().as_secs_f64(),
        fuel: result.usage.fuel_consumed,
        memory_peak_bytes: result.usage.memory_peak_bytes,
        output_bytes: result.usage.output_bytes,
    });
}
