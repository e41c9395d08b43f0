//! W3C trace context in and out: [`traceparent`] gives the current span's `traceparent` header
//! for an outgoing request (the agent loop's model requests); [`continue_trace`] makes a span the
//! child of a caller's `traceparent`/`tracestate` (an MCP request's `_meta`). Both do nothing
//! unless spans are exported.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::otlp::exporting;

/// Longest `traceparent` or `tracestate` taken from a caller (W3C: 55 and 512 characters);
/// longer ones are ignored before any parsing.
pub const MAX_TRACE_HEADER_BYTES: usize = 1024;

/// The W3C `traceparent` of the current span, when spans are exported.
pub fn traceparent() -> Option<String> {
    if !exporting() {
        return None;
    }
    let cx = tracing::Span::current().context();
    let mut fields: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut fields);
    fields.remove("traceparent")
}

/// Make `span` the child of a caller's trace context, when spans are exported and the
/// context parses; anything else is ignored.
pub fn continue_trace(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if !exporting()
        || traceparent.len() > MAX_TRACE_HEADER_BYTES
        || tracestate.is_some_and(|s| s.len() > MAX_TRACE_HEADER_BYTES)
    {
        return;
    }
    let mut fields: HashMap<String, String> = HashMap::new();
    fields.insert("traceparent".into(), traceparent.to_string());
    if let Some(state) = tracestate {
        fields.insert("tracestate".into(), state.to_string());
    }
    let cx = TraceContextPropagator::new().extract(&fields);
    use opentelemetry::trace::TraceContextExt;
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}
