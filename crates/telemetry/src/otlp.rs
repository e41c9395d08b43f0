//! OTLP export of spans, metrics and log records.
//!
//! When `[telemetry] otlp_endpoint` (or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`) is set, the
//! process exports over OTLP/HTTP with protobuf bodies, and nothing otherwise:
//!
//! - spans to `<endpoint>/v1/traces`: every span of target `toolhost` (all at `debug`), each
//!   sampled unless a remote parent was not;
//! - metrics to `<endpoint>/v1/metrics`: the series `/metrics` shows (`metrics_otlp.rs`),
//!   cumulative, every `OTEL_METRIC_EXPORT_INTERVAL` (60 s by default) and at exit;
//! - log records to `<endpoint>/v1/logs`: toolhost's events from `info` and every guest log
//!   line (bounded per call as the kept reports are), each carrying the trace and span id of
//!   the span it happened in (a guest line: its call's `execute` stage).
//!
//! A call never waits on the collector: spans and log records queue for their exporter's own
//! thread (2,048 each at most; more are dropped), metrics are aggregated in memory, and one
//! export gives up after [`EXPORT_TIMEOUT`].

use std::sync::OnceLock;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, OTEL_EXPORTER_OTLP_ENDPOINT};
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use serde::{Deserialize, Serialize};

use super::TelemetryError;

/// Longest one export may take. Exports run on the exporter's own thread, so no call waits on
/// the collector; this bounds how long a command's exit waits for the last batch when the
/// collector does not answer.
pub const EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The `[telemetry]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL (`http://collector:4318`); spans, metrics and log records go to
    /// `<it>/v1/traces`, `/v1/metrics` and `/v1/logs`. Unset: `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// else nothing is exported.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
}

impl TelemetryConfig {
    /// The endpoint telemetry goes to, if any: the config's, else the environment's.
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
                     \"http://127.0.0.1:4318\" (spans go to /v1/traces under it, metrics to /v1/metrics, logs to /v1/logs)"
                ));
            }
        }
        Ok(())
    }
}

/// Where telemetry goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `[telemetry] otlp_endpoint`, a base URL.
    Configured(String),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (read by the exporter itself).
    Environment,
}

/// The three exporting providers, once installed.
struct Providers {
    traces: SdkTracerProvider,
    meters: SdkMeterProvider,
    logs: SdkLoggerProvider,
}

static PROVIDERS: OnceLock<Providers> = OnceLock::new();

/// Whether this process exports over OTLP.
pub(super) fn exporting() -> bool {
    PROVIDERS.get().is_some()
}

/// The URL of one signal under a configured base; `None` lets the exporter read
/// `OTEL_EXPORTER_OTLP_ENDPOINT` and add the signal's path itself.
fn signal_url(endpoint: &Endpoint, signal: &str) -> Option<String> {
    match endpoint {
        Endpoint::Configured(base) => Some(format!("{}/v1/{signal}", base.trim_end_matches('/'))),
        Endpoint::Environment => None,
    }
}

fn failed(e: impl std::fmt::Display) -> TelemetryError {
    TelemetryError::Otlp(e.to_string())
}

/// Start the three exporters for `endpoint`; metrics start recording into theirs. Gives the
/// tracer and the logger provider the subscriber's layers use.
pub(super) fn start(endpoint: &Endpoint) -> Result<(Tracer, SdkLoggerProvider), TelemetryError> {
    let resource = Resource::builder().with_service_name("toolhost").build();

    let mut spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    if let Some(url) = signal_url(endpoint, "traces") {
        spans = spans.with_endpoint(url);
    }
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans.build().map_err(failed)?)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .with_resource(resource.clone())
        .build();

    let mut points = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    if let Some(url) = signal_url(endpoint, "metrics") {
        points = points.with_endpoint(url);
    }
    let meters = SdkMeterProvider::builder()
        .with_periodic_exporter(points.build().map_err(failed)?)
        .with_resource(resource.clone())
        .build();

    let mut records = opentelemetry_otlp::LogExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    if let Some(url) = signal_url(endpoint, "logs") {
        records = records.with_endpoint(url);
    }
    let logs = SdkLoggerProvider::builder()
        .with_batch_exporter(records.build().map_err(failed)?)
        .with_resource(resource)
        .build();

    let tracer = traces.tracer("toolhost");
    let meter = meters.meter("toolhost");
    let bridge = logs.clone();
    PROVIDERS
        .set(Providers {
            traces,
            meters,
            logs,
        })
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    super::metrics::export_to(&meter);
    Ok((tracer, bridge))
}

/// Export what is buffered and stop the exporters (at the end of the command), the three at
/// once so that an unreachable collector delays the exit by one [`EXPORT_TIMEOUT`], not three.
/// Without exporters, nothing.
pub fn shutdown() {
    if let Some(p) = PROVIDERS.get() {
        std::thread::scope(|s| {
            s.spawn(|| p.logs.shutdown());
            s.spawn(|| p.traces.shutdown());
            s.spawn(|| p.meters.shutdown());
        });
    }
}
