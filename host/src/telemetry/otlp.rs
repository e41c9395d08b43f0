//! OTLP export of spans, and W3C trace context in and out.
//!
//! When `[telemetry] otlp_endpoint` (or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`) is set, the
//! subscriber gets an OpenTelemetry layer: every span of target `toolhost` at `debug` and above
//! becomes an OTLP span (HTTP/protobuf to `<endpoint>/v1/traces`, batched on the exporter's own
//! thread, every span sampled unless a remote parent was not), and events inside a span (guest
//! log lines among them) become its span events. Nothing is exported otherwise. A call never
//! waits on the collector: spans queue for the exporter's thread (2,048 at most; more are
//! dropped), and one export gives up after [`EXPORT_TIMEOUT`].
//!
//! Trace context: [`traceparent`] gives the current span's `traceparent` header for an outgoing
//! request (the agent loop's model requests); [`continue_trace`] makes a span the child of a
//! caller's `traceparent`/`tracestate` (an MCP request's `_meta`).

use std::collections::HashMap;
use std::sync::OnceLock;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, OTEL_EXPORTER_OTLP_ENDPOINT};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::TelemetryError;

/// Longest `traceparent` or `tracestate` taken from a caller (W3C: 55 and 512 characters);
/// longer ones are ignored before any parsing.
pub const MAX_TRACE_HEADER_BYTES: usize = 1024;

/// Longest one export may take. Exports run on the exporter's own thread, so no call waits on
/// the collector; this bounds how long a command's exit waits for the last batch when the
/// collector does not answer.
pub const EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The `[telemetry]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL (`http://collector:4318`); spans go to `<it>/v1/traces`. Unset:
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, else nothing is exported.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
}

impl TelemetryConfig {
    /// The endpoint spans go to, if any: the config's, else the environment's.
    pub fn endpoint(&self) -> Option<Endpoint> {
        match &self.otlp_endpoint {
            Some(e) => Some(Endpoint::Configured(e.clone())),
            None => std::env::var(OTEL_EXPORTER_OTLP_ENDPOINT)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|_| Endpoint::Environment),
        }
    }

    /// Refuse an endpoint that is not an http(s) URL.
    pub fn check(&self) -> Result<(), String> {
        if let Some(e) = &self.otlp_endpoint {
            let ok = (e.starts_with("http://") || e.starts_with("https://"))
                && e.parse::<http::Uri>().is_ok_and(|u| u.host().is_some());
            if !ok {
                return Err(format!(
                    "{e:?} is not an http(s) URL; give the collector's OTLP/HTTP base URL, like \
                     \"http://127.0.0.1:4318\" (spans go to /v1/traces under it)"
                ));
            }
        }
        Ok(())
    }
}

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `[telemetry] otlp_endpoint`, a base URL.
    Configured(String),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (read by the exporter itself).
    Environment,
}

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Build the exporter for `endpoint` and the tracer the subscriber's layer uses.
pub(super) fn tracer(endpoint: &Endpoint) -> Result<Tracer, TelemetryError> {
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    let builder = match endpoint {
        Endpoint::Configured(base) => {
            builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')))
        }
        Endpoint::Environment => builder,
    };
    let exporter = builder
        .build()
        .map_err(|e| TelemetryError::Otlp(e.to_string()))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .with_resource(Resource::builder().with_service_name("toolhost").build())
        .build();
    let tracer = provider.tracer("toolhost");
    PROVIDER
        .set(provider)
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    Ok(tracer)
}

/// Export what is buffered and stop the exporter (at the end of the command). Without an
/// exporter, nothing.
pub fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown();
    }
}

/// The W3C `traceparent` of the current span, when spans are exported.
pub fn traceparent() -> Option<String> {
    PROVIDER.get()?;
    let cx = tracing::Span::current().context();
    let mut fields: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut fields);
    fields.remove("traceparent")
}

/// Make `span` the child of a caller's trace context, when spans are exported and the
/// context parses; anything else is ignored.
pub fn continue_trace(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if PROVIDER.get().is_none()
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
