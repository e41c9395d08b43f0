//! The host's metrics, one set per process, in the Prometheus text format (`/metrics`) and,
//! when OTLP export is on, as OpenTelemetry instruments (`metrics_otlp.rs`).
//!
//! Labels are only ever tool names the registry holds (a name no tool has is counted as
//! [`UNKNOWN_TOOL`]), stage names, wire names of statuses and codes, and outcome codes: nothing
//! a guest, a model or a client writes becomes a label, so no caller can grow the set of series.
//! Recording is off until something will read it ([`enable`]: `serve --metrics`, `agent
//! --metrics`, or OTLP export): until then each place that records costs one relaxed load, so
//! a host nobody scrapes pays nothing for metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::metrics_otlp::Instruments;
use super::series::{Buckets, GROUP, MEMORY, SECONDS};
pub use super::series::{CallEnd, UNKNOWN_TOOL};

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    status: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// A histogram over `buckets`' bounds.
fn histogram(buckets: Buckets) -> Histogram {
    Histogram::new(buckets.bounds())
}

fn seconds() -> Histogram {
    histogram(SECONDS)
}

fn memory() -> Histogram {
    histogram(MEMORY)
}

/// Every metric the host keeps.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Histograms<ToolLabels>,
    stage_seconds: Histograms<StageLabels>,
    fuel: Family<ToolLabels, Counter>,
    memory_peak: Histograms<ToolLabels>,
    output_bytes: Family<ToolLabels, Counter>,
    in_flight: Gauge,
    commit_seconds: Histogram,
    group_size: Histogram,
    model_requests: Family<OutcomeLabels, Counter>,
    model_retries: Counter,
    model_tokens: Family<KindLabels, Counter>,
    reloads: Family<OutcomeLabels, Counter>,
    /// The OpenTelemetry instruments, once OTLP export starts.
    otlp: OnceLock<Instruments>,
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Start recording (once something serves `/metrics`); there is no way back.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Also record into `meter`'s instruments (OTLP export), and start recording.
pub(super) fn export_to(meter: &opentelemetry::metrics::Meter) {
    let _ = metrics().otlp.set(Instruments::new(meter));
    enable();
}

/// Whether metrics are recorded.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The process's metrics. Recording methods do nothing until [`enable`].
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::with_prefix("toolhost"),
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(seconds),
            stage_seconds: Family::new_with_constructor(seconds),
            fuel: Family::default(),
            memory_peak: Family::new_with_constructor(memory),
            output_bytes: Family::default(),
            in_flight: Gauge::default(),
            commit_seconds: seconds(),
            group_size: histogram(GROUP),
            model_requests: Family::default(),
            model_retries: Counter::default(),
            model_tokens: Family::default(),
            reloads: Family::default(),
            otlp: OnceLock::new(),
        };
        let mut registry = m.registry;
        let r = &mut registry;
        r.register(
            "calls",
            "Calls by tool, status and failure code",
            m.calls.clone(),
        );
        r.register(
            "call_seconds",
            "Whole-call latency by tool, admission to recorded outcome",
            m.call_seconds.clone(),
        );
        r.register(
            "stage_seconds",
            "Latency of each pipeline stage",
            m.stage_seconds.clone(),
        );
        r.register("fuel", "Fuel guests burned, by tool", m.fuel.clone());
        r.register(
            "memory_peak_bytes",
            "Largest linear memory of each call, by tool",
            m.memory_peak.clone(),
        );
        r.register(
            "output_bytes",
            "Bytes guests produced, by tool",
            m.output_bytes.clone(),
        );
        r.register(
            "calls_in_flight",
            "Calls in the pipeline now",
            m.in_flight.clone(),
        );
        r.register(
            "ledger_commit_seconds",
            "Latency of one ledger group commit",
            m.commit_seconds.clone(),
        );
        r.register(
            "ledger_group_writes",
            "Writes per ledger group commit",
            m.group_size.clone(),
        );
        r.register(
            "model_requests",
            "Attempts of agent-loop model requests, by outcome",
            m.model_requests.clone(),
        );
        r.register(
            "model_retries",
            "Model requests sent again after a failed attempt",
            m.model_retries.clone(),
        );
        r.register(
            "model_tokens",
            "Tokens the model endpoint reported, by kind",
            m.model_tokens.clone(),
        );
        r.register(
            "reloads",
            "Reloads of the tools (SIGHUP), by outcome: applied, or refused (the running set kept)",
            m.reloads.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Count one call that ended.
    pub fn call_ended(&self, end: CallEnd<'_>) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.call_ended(&end);
        }
        let tool = end.tool.unwrap_or(UNKNOWN_TOOL).to_string();
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.clone(),
                status: end.status,
                code: end.code,
            })
            .inc();
        let by_tool = ToolLabels { tool };
        self.call_seconds
            .get_or_create(&by_tool)
            .observe(end.seconds);
        if end.tool.is_some() && end.fuel > 0 {
            self.fuel.get_or_create(&by_tool).inc_by(end.fuel);
            self.output_bytes
                .get_or_create(&by_tool)
                .inc_by(end.output_bytes);
            self.memory_peak
                .get_or_create(&by_tool)
                .observe(end.memory_peak_bytes as f64);
        }
    }

    /// One pipeline stage took `seconds`.
    pub fn stage(&self, stage: &'static str, seconds: f64) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.stage(stage, seconds);
        }
        self.stage_seconds
            .get_or_create(&StageLabels { stage })
            .observe(seconds);
    }

    /// One more call in the pipeline (always counted: a gauge must pair its changes).
    pub fn call_entered(&self) {
        self.in_flight.inc();
        if let Some(otlp) = self.otlp.get() {
            otlp.in_flight(1);
        }
    }

    /// One call fewer in the pipeline.
    pub fn call_left(&self) {
        self.in_flight.dec();
        if let Some(otlp) = self.otlp.get() {
            otlp.in_flight(-1);
        }
    }

    /// One ledger group commit of `writes` writes took `seconds`.
    pub fn commit(&self, seconds: f64, writes: usize) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.commit(seconds, writes);
        }
        self.commit_seconds.observe(seconds);
        self.group_size.observe(writes as f64);
    }

    /// One attempt of a model request ended with `outcome` (`ok` or a failure code).
    pub fn model_request(&self, outcome: &'static str) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.model_request(outcome);
        }
        self.model_requests
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A model request is sent again after a failed attempt.
    pub fn model_retry(&self) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.model_retry();
        }
        self.model_retries.inc();
    }

    /// A reload ended: `applied` or `refused`.
    pub fn reload(&self, outcome: &'static str) {
        if !enabled() {
            return;
        }
        self.reloads.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// The model endpoint reported `n` tokens of `kind` (`prompt`, `completion`).
    pub fn model_tokens(&self, kind: &'static str, n: u64) {
        if !enabled() {
            return;
        }
        if let Some(otlp) = self.otlp.get() {
            otlp.model_tokens(kind, n);
        }
        self.model_tokens
            .get_or_create(&KindLabels { kind })
            .inc_by(n);
    }

    /// The text exposition ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}

/// Times the stages of one call: each [`lap`](Laps::lap) records the time since the previous
/// one (or the start) under a stage's name. Reads no clock while metrics are off.
pub struct Laps {
    last: Option<std::time::Instant>,
}

impl Laps {
    pub fn start() -> Laps {
        Laps {
            last: enabled().then(std::time::Instant::now),
        }
    }

    /// The stage `stage` ended now.
    pub fn lap(&mut self, stage: &'static str) {
        if let Some(last) = self.last {
            let now = std::time::Instant::now();
            metrics().stage(stage, (now - last).as_secs_f64());
            self.last = Some(now);
        }
    }
}
