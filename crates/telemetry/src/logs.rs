//! The subscriber the command line installs: events (and, on request, span closings) on stderr,
//! as human-readable lines or JSON lines, filtered with `RUST_LOG`'s syntax.

use std::io::IsTerminal;

use tracing::Metadata;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::otlp::Endpoint;

/// Whether a callsite is toolhost's own.
fn own(meta: &Metadata<'_>) -> bool {
    own_target(meta.target())
}

/// Whether a target is toolhost's: the `toolhost` crate's (`toolhost`, `toolhost::…`: the named
/// targets `toolhost::call` and `toolhost::guest` too) or another crate of its workspace's
/// (`toolhost_runtime::…`, `toolhost_ledger::…`, whose callsites take their module's path).
fn own_target(target: &str) -> bool {
    target == "toolhost" || target.starts_with("toolhost::") || target.starts_with("toolhost_")
}

/// What becomes an OTLP span: every span of toolhost's own (events are log records instead).
fn exported_span(meta: &Metadata<'_>) -> bool {
    own(meta) && meta.is_span()
}

/// What becomes an OTLP log record: toolhost's events from `info`, and every guest line. The
/// spans pass too, so that a record can name the span it happened in.
fn exported_record(meta: &Metadata<'_>) -> bool {
    own(meta)
        && (meta.is_span()
            || meta.target() == super::GUEST_TARGET
            || *meta.level() <= tracing::Level::INFO)
}

/// What is shown when neither `--log-level` nor `RUST_LOG` says: toolhost's own events from
/// `info` (startup, sessions, warnings), guest log lines from `warn`, other crates' from `warn`.
pub const DEFAULT_FILTER: &str = "warn,toolhost=info,toolhost::guest=warn";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event: time, level, the spans it is in, the message and fields.
    #[default]
    Human,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (with `message`),
    /// `span` and `spans` (each with its fields).
    Json,
}

/// Logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter (`--log-level` or `RUST_LOG`) does not parse.
    #[error("{source_name} {filter:?} is not a log filter ({message}); give a level (error, warn, info, debug, trace) or directives like \"info,toolhost::guest=debug\"")]
    Filter {
        source_name: &'static str,
        filter: String,
        message: String,
    },
    /// A subscriber is already installed in this process.
    #[error("logging is already set up in this process")]
    AlreadyInstalled,
    /// The OTLP exporter could not be built.
    #[error("the OTLP exporter cannot start: {0}")]
    Otlp(String),
}

/// Install the process's subscriber: `level` (`--log-level`) wins over `RUST_LOG`, which wins
/// over [`DEFAULT_FILTER`]. At `debug` and below, each span's closing is logged too, with its
/// busy and idle time. With `otlp`, toolhost's spans, metrics and log records are also exported
/// (`otlp.rs`), whatever the log level.
pub fn install(
    format: LogFormat,
    level: Option<&str>,
    otlp: Option<&Endpoint>,
) -> Result<(), TelemetryError> {
    super::say::choose(format);
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let (source_name, text) = match (level, env) {
        (Some(l), _) => ("--log-level", l.to_string()),
        (None, Some(e)) => ("RUST_LOG", e),
        (None, None) => ("the default filter", DEFAULT_FILTER.to_string()),
    };
    let filter = EnvFilter::builder()
        .parse(&text)
        .map_err(|e| TelemetryError::Filter {
            source_name,
            filter: text.clone(),
            message: e.to_string(),
        })?;
    let spans = match filter.max_level_hint() {
        Some(max) if max >= tracing::level_filters::LevelFilter::DEBUG => FmtSpan::CLOSE,
        _ => FmtSpan::NONE,
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_span_events(spans);
    let fmt = match format {
        LogFormat::Human => fmt.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    };
    let (spans, records) = match otlp {
        Some(endpoint) => {
            let (tracer, logs) = super::otlp::start(endpoint)?;
            let spans = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(filter_fn(exported_span));
            let records =
                opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&logs)
                    .with_filter(filter_fn(exported_record));
            (Some(spans), Some(records))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(spans)
        .with(records)
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)
}

#[cfg(test)]
mod tests {
    use super::own_target;

    #[test]
    fn every_crate_of_the_workspace_is_own() {
        for target in [
            "toolhost",
            "toolhost::call",
            "toolhost::guest",
            "toolhost_runtime::pipeline",
            "toolhost_ledger_sqlite::writer",
            "toolhost_serve::http",
        ] {
            assert!(own_target(target), "{target}");
        }
        for target in ["rmcp::service", "wasmtime", "toolhostile", "hyper::proto"] {
            assert!(!own_target(target), "{target}");
        }
    }
}
