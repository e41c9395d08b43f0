//! What the host tells its operator about itself: logs and spans through `tracing`, the
//! metrics `/metrics` shows (`metrics.rs`), and spans, metrics and log records exported over
//! OTLP (`otlp.rs`), with W3C trace context in and out (`propagation.rs`).
//!
//! Library code never prints: it emits `tracing` events and spans, and the command line
//! installs the one subscriber ([`install`]) that writes them to stderr, human-readable or as
//! JSON lines. Without a subscriber (the library embedded, the benchmarks) every span and event
//! is a disabled callsite, which costs a load and a branch.
//!
//! # Spans
//!
//! All at `DEBUG`, so the default level (`info`) pays nothing for them:
//!
//! - `call` (target `toolhost::call`): one per call through the pipeline, with `call_id`,
//!   `run_id`, `tool`, `principal` and `tenant` (all bounded by `contract::bounds` before the
//!   span exists; never argument content), and `status` and `code` recorded when it ends;
//! - one child per stage: `admit`, `resolve`, `validate`, `authorize`, `approve`, `limit`,
//!   `execute`, `check`, `record`;
//! - `mcp_request` per `tools/list` and `tools/call` (`method`, the JSON-RPC `id`), the parent
//!   of the call's span;
//! - `agent_run` per agent run (`run_id`, `principal`, `tenant`), the parent of its model
//!   requests and calls;
//! - `model_request` per attempt of a request the agent loop sends its model endpoint
//!   (`attempt`, from 1, and `outcome`: `ok` or the failure's code).
//!
//! # Events
//!
//! Guest log lines are events of target [`GUEST_TARGET`] at the guest's level, inside the
//! call's span, bounded as the kept reports are (`sandbox::MAX_REPORTS_PER_CALL` lines of
//! `sandbox::MAX_REPORT_MESSAGE_BYTES`), with the call's secret values redacted. By default
//! they are shown from `warn` up; over OTLP every one is a log record of its call's trace.

mod logs;
mod metrics;
mod metrics_otlp;
mod otlp;
mod propagation;
mod say;
mod series;

pub use logs::{install, LogFormat, TelemetryError, DEFAULT_FILTER};
pub use metrics::{
    enable as enable_metrics, enabled as metrics_enabled, metrics, CallEnd, Laps, Metrics,
    CONTENT_TYPE, UNKNOWN_TOOL,
};
pub use otlp::{shutdown, Endpoint, TelemetryConfig};
pub use propagation::{continue_trace, traceparent, MAX_TRACE_HEADER_BYTES};
pub use say::{say, show};

/// The target of guest log lines: a filter can name it (`toolhost::guest=debug`).
pub const GUEST_TARGET: &str = "toolhost::guest";
