//! The same series as `/metrics`, as OpenTelemetry instruments for OTLP export.
//!
//! Names follow OpenTelemetry's style (`toolhost.call.duration`, seconds); attributes are the
//! Prometheus labels (`tool`, `status`, `code`, `stage`, `outcome`, `kind`), with the same rule:
//! only registered tool names, stage names and wire codes. The SDK aggregates in memory and
//! its reader thread exports every `OTEL_METRIC_EXPORT_INTERVAL` (60 s by default) and once
//! more when the command ends.

use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};
use opentelemetry::KeyValue;

use super::series::{Buckets, CallEnd, GROUP, MEMORY, SECONDS, UNKNOWN_TOOL};

/// The instruments, made once from the exporting meter.
pub(super) struct Instruments {
    calls: Counter<u64>,
    call_seconds: Histogram<f64>,
    stage_seconds: Histogram<f64>,
    fuel: Counter<u64>,
    memory_peak: Histogram<f64>,
    output_bytes: Counter<u64>,
    in_flight: UpDownCounter<i64>,
    commit_seconds: Histogram<f64>,
    group_size: Histogram<f64>,
    model_requests: Counter<u64>,
    model_retries: Counter<u64>,
    model_tokens: Counter<u64>,
}

fn histogram(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    about: &'static str,
    buckets: Buckets,
) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit(unit)
        .with_description(about)
        .with_boundaries(buckets.bounds())
        .build()
}

fn counter(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    about: &'static str,
) -> Counter<u64> {
    meter
        .u64_counter(name)
        .with_unit(unit)
        .with_description(about)
        .build()
}

impl Instruments {
    pub(super) fn new(meter: &Meter) -> Instruments {
        Instruments {
            calls: counter(
                meter,
                "toolhost.calls",
                "{call}",
                "Calls by tool, status and failure code",
            ),
            call_seconds: histogram(
                meter,
                "toolhost.call.duration",
                "s",
                "Whole-call latency by tool, admission to recorded outcome",
                SECONDS,
            ),
            stage_seconds: histogram(
                meter,
                "toolhost.stage.duration",
                "s",
                "Latency of each pipeline stage",
                SECONDS,
            ),
            fuel: counter(
                meter,
                "toolhost.fuel",
                "{fuel}",
                "Fuel guests burned, by tool",
            ),
            memory_peak: histogram(
                meter,
                "toolhost.memory.peak",
                "By",
                "Largest linear memory of each call, by tool",
                MEMORY,
            ),
            output_bytes: counter(
                meter,
                "toolhost.output",
                "By",
                "Bytes guests produced, by tool",
            ),
            in_flight: meter
                .i64_up_down_counter("toolhost.calls.in_flight")
                .with_unit("{call}")
                .with_description("Calls in the pipeline now")
                .build(),
            commit_seconds: histogram(
                meter,
                "toolhost.ledger.commit.duration",
                "s",
                "Latency of one ledger group commit",
                SECONDS,
            ),
            group_size: histogram(
                meter,
                "toolhost.ledger.group.writes",
                "{write}",
                "Writes per ledger group commit",
                GROUP,
            ),
            model_requests: counter(
                meter,
                "toolhost.model.requests",
                "{request}",
                "Attempts of agent-loop model requests, by outcome",
            ),
            model_retries: counter(
                meter,
                "toolhost.model.retries",
                "{request}",
                "Model requests sent again after a failed attempt",
            ),
            model_tokens: counter(
                meter,
                "toolhost.model.tokens",
                "{token}",
                "Tokens the model endpoint reported, by kind",
            ),
        }
    }

    pub(super) fn call_ended(&self, end: &CallEnd<'_>) {
        let tool = KeyValue::new("tool", end.tool.unwrap_or(UNKNOWN_TOOL).to_string());
        self.calls.add(
            1,
            &[
                tool.clone(),
                KeyValue::new("status", end.status),
                KeyValue::new("code", end.code),
            ],
        );
        let by_tool = [tool];
        self.call_seconds.record(end.seconds, &by_tool);
        if end.tool.is_some() && end.fuel > 0 {
            self.fuel.add(end.fuel, &by_tool);
            self.output_bytes.add(end.output_bytes, &by_tool);
            self.memory_peak
                .record(end.memory_peak_bytes as f64, &by_tool);
        }
    }

    pub(super) fn stage(&self, stage: &'static str, seconds: f64) {
        self.stage_seconds
            .record(seconds, &[KeyValue::new("stage", stage)]);
    }

    pub(super) fn in_flight(&self, change: i64) {
        self.in_flight.add(change, &[]);
    }

    pub(super) fn commit(&self, seconds: f64, writes: usize) {
        self.commit_seconds.record(seconds, &[]);
        self.group_size.record(writes as f64, &[]);
    }

    pub(super) fn model_request(&self, outcome: &'static str) {
        self.model_requests
            .add(1, &[KeyValue::new("outcome", outcome)]);
    }

    pub(super) fn model_retry(&self) {
        self.model_retries.add(1, &[]);
    }

    pub(super) fn model_tokens(&self, kind: &'static str, n: u64) {
        self.model_tokens.add(n, &[KeyValue::new("kind", kind)]);
    }
}
