//! The subscriber the command line installs: events (and, on request, span closings) on stderr,
//! as human-readable lines or JSON lines, filtered with `RUST_LOG`'s syntax.

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::otlp::Endpoint;

/// What is exported over OTLP: every span and event of toolhost's own, guest lines included.
const EXPORTED: &str = "toolhost=debug";

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
/// busy and idle time. With `otlp`, toolhost's spans are also exported (`otlp.rs`), whatever the
/// log level.
pub fn install(
    format: LogFormat,
    level: Option<&str>,
    otlp: Option<&Endpoint>,
) -> Result<(), TelemetryError> {
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
    let export = match otlp {
        Some(endpoint) => Some(
            tracing_opentelemetry::layer()
                .with_tracer(super::otlp::tracer(endpoint)?)
                .with_filter(EnvFilter::new(EXPORTED)),
        ),
        None => None,
    };
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(export)
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)
}
