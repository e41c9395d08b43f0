//! The `toolhost:tool/host` interface a guest imports: bounded progress reports and bounded
//! logs, and the call's trusted context.
//!
//! Reports are capped per call in count and in message size; whatever comes past the caps is
//! counted and dropped, so a guest that floods them costs the host a fixed amount of memory.
//! A message has the call's secret values redacted before it is kept or goes live.

use serde::Serialize;

use toolhost_contract::{GuestLog, GuestLogLevel, GuestProgress, LiveSinks};

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "toolhost:tool/tool",
});

pub use self::toolhost::tool::host::{add_to_linker, CallContext, Host, Level};

use super::secrets::CallSecrets;

/// Reports (progress and log lines together) kept per call.
pub const MAX_REPORTS_PER_CALL: usize = 256;
/// Bytes kept of one report's message; the rest is cut off at a character boundary.
pub const MAX_REPORT_MESSAGE_BYTES: usize = 1024;

/// One kept report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    Progress {
        done: u64,
        total: Option<u64>,
        message: String,
    },
    Log {
        level: &'static str,
        message: String,
    },
}

/// What a call reported through the host interface.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Reports {
    /// The first [`MAX_REPORTS_PER_CALL`] reports.
    pub kept: Vec<Report>,
    /// How many reports were dropped past the cap.
    pub dropped: u64,
    /// Whether any kept message was truncated.
    pub truncated: bool,
    /// Where progress (numbers only) and kept log lines go live, besides being kept.
    #[serde(skip)]
    pub live: LiveSinks,
}

impl Reports {
    /// Whether the next report would be dropped.
    fn is_full(&self) -> bool {
        self.kept.len() >= MAX_REPORTS_PER_CALL
    }

    fn push(&mut self, report: Report) {
        if !self.is_full() {
            self.kept.push(report);
        } else {
            self.dropped += 1;
        }
    }

    /// A fresh copy of at most [`MAX_REPORT_MESSAGE_BYTES`] of `message`, cut at a character
    /// boundary. Never the lifted buffer itself: `truncate` would keep its guest-sized capacity
    /// alive for the rest of the call.
    fn bounded(&mut self, message: String) -> String {
        let cut = message.floor_char_boundary(MAX_REPORT_MESSAGE_BYTES);
        if cut < message.len() {
            self.truncated = true;
        }
        message[..cut].to_owned()
    }
}

/// What a guest's `toolhost:tool/host` import reaches during one call.
pub struct HostApi {
    pub reports: Reports,
    /// The call's context; its idempotency key is filled in when the guest first asks.
    pub context: CallContext,
    pub secrets: CallSecrets,
}

impl HostApi {
    /// `message` with the call's secret values redacted, when it will be kept: only its first
    /// [`MAX_REPORT_MESSAGE_BYTES`] and one value's length more are read, and what a cut
    /// through a value would leave is dropped. A report past the cap is dropped unread.
    fn redacted(&mut self, message: String) -> String {
        if self.secrets.is_empty() || self.reports.is_full() {
            return message;
        }
        let (text, cut) = self
            .secrets
            .redact_window(&message, MAX_REPORT_MESSAGE_BYTES);
        self.reports.truncated |= cut;
        text
    }
}

impl Host for HostApi {
    fn progress(&mut self, done: u64, total: Option<u64>, message: String) {
        let message = self.redacted(message);
        self.reports.progress(done, total, message);
    }

    fn log(&mut self, level: Level, message: String) {
        let message = self.redacted(message);
        self.reports.log(level, message);
    }

    fn context(&mut self) -> CallContext {
        // Derived on first use: most calls never ask.
        if self.context.idempotency_key.is_empty() {
            let c = &self.context;
            self.context.idempotency_key =
                idempotency_key(&c.principal, &c.tenant, &c.run_id, &c.call_id);
        }
        self.context.clone()
    }
}

/// The idempotency key of call `call_id` of run `run_id` for `principal` of `tenant`: the
/// first 128 bits of a SHA-256 over the four, each length-prefixed, in hex. The same inputs
/// give the same key on every host; the ledger admits one caller per `(run, call id)`, so two
/// calls never share a key.
pub fn idempotency_key(principal: &str, tenant: &str, run_id: &str, call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"toolhost idempotency key v1");
    for part in [principal, tenant, run_id, call_id] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

impl Reports {
    fn progress(&mut self, done: u64, total: Option<u64>, message: String) {
        if let Some(sink) = &self.live.progress {
            sink.offer(GuestProgress { done, total });
        }
        if self.is_full() {
            self.dropped += 1;
            return;
        }
        let message = self.bounded(message);
        self.push(Report::Progress {
            done,
            total,
            message,
        });
    }

    fn log(&mut self, level: Level, message: String) {
        if self.is_full() {
            self.dropped += 1;
            return;
        }
        let (name, live_level) = match level {
            Level::Debug => ("debug", GuestLogLevel::Debug),
            Level::Info => ("info", GuestLogLevel::Info),
            Level::Warn => ("warn", GuestLogLevel::Warn),
            Level::Error => ("error", GuestLogLevel::Error),
        };
        let message = self.bounded(message);
        guest_event(level, &message);
        // Only kept lines go live, so the live stream is bounded exactly as the record is.
        if let Some(sink) = &self.live.logs {
            sink.offer(GuestLog {
                level: live_level,
                message: message.clone(),
            });
        }
        self.push(Report::Log {
            level: name,
            message,
        });
    }
}

/// A kept guest log line as an event of the call's span (`telemetry::GUEST_TARGET`), escaped
/// for one log line; formatted only when some subscriber shows that level.
fn guest_event(level: Level, message: &str) {
    use toolhost_contract::log_safe;
    use toolhost_telemetry::GUEST_TARGET;
    match level {
        Level::Debug => tracing::debug!(target: GUEST_TARGET, "{}", log_safe(message)),
        Level::Info => tracing::info!(target: GUEST_TARGET, "{}", log_safe(message)),
        Level::Warn => tracing::warn!(target: GUEST_TARGET, "{}", log_safe(message)),
        Level::Error => tracing::error!(target: GUEST_TARGET, "{}", log_safe(message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floods are cut at the caps: a fixed number of reports, each of bounded size.
    #[test]
    fn reports_are_bounded() {
        let mut r = Reports::default();
        for i in 0..(MAX_REPORTS_PER_CALL as u64 + 10) {
            r.log(Level::Info, "é".repeat(MAX_REPORT_MESSAGE_BYTES));
            r.progress(i, None, String::new());
        }
        assert_eq!(r.kept.len(), MAX_REPORTS_PER_CALL);
        assert_eq!(r.dropped, MAX_REPORTS_PER_CALL as u64 + 20);
        assert!(r.truncated);
        for k in &r.kept {
            if let Report::Log { message, .. } = k {
                assert!(message.len() <= MAX_REPORT_MESSAGE_BYTES);
                assert!(
                    message.capacity() <= MAX_REPORT_MESSAGE_BYTES,
                    "kept the lifted buffer"
                );
            }
        }
    }

    /// Kept log lines go live, bounded copies at their level; lines past the cap do not.
    #[test]
    fn only_kept_log_lines_go_live() {
        let (sink, mut rx) = toolhost_contract::LogSink::channel(1024);
        let mut r = Reports {
            live: LiveSinks {
                progress: None,
                logs: Some(sink),
            },
            ..Reports::default()
        };
        r.log(Level::Warn, "x".repeat(5000));
        for _ in 0..MAX_REPORTS_PER_CALL {
            r.log(Level::Debug, "more".into());
        }
        let first = rx.try_recv().unwrap();
        assert_eq!(first.level, GuestLogLevel::Warn);
        assert_eq!(first.message.len(), MAX_REPORT_MESSAGE_BYTES);
        let mut rest = 0;
        while rx.try_recv().is_ok() {
            rest += 1;
        }
        assert_eq!(rest, MAX_REPORTS_PER_CALL - 1, "only kept lines go live");
    }

    /// The key is a function of the caller, the run and the call id alone, and any change of
    /// one (or a shifted boundary between two) gives another key.
    #[test]
    fn idempotency_keys_are_stable_and_distinct() {
        let k = idempotency_key("alice", "acme", "run-1", "call-1");
        assert_eq!(k, idempotency_key("alice", "acme", "run-1", "call-1"));
        assert_eq!(k.len(), 32);
        assert!(k
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        for other in [
            idempotency_key("alice", "acme", "run-1", "call-2"),
            idempotency_key("alice", "acme", "run-2", "call-1"),
            idempotency_key("bob", "acme", "run-1", "call-1"),
            idempotency_key("alice", "other", "run-1", "call-1"),
            idempotency_key("alice", "acme", "run-1c", "all-1"),
        ] {
            assert_ne!(k, other);
        }
    }
}
