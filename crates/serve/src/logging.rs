//! Guest log lines → MCP `notifications/message`, for sessions whose client asked for them
//! with `logging/setLevel`.
//!
//! A log line is text the guest chose, so it is a channel around the output checks: it goes to
//! the client (the agent application), never into a tool result or the model's text. It is
//! bounded three times: the host interface keeps at most 256 reports of at most 1 KiB per call
//! (`sandbox::host_api`); a call forwards at most [`MAX_LOG_NOTIFICATIONS`]; and a token bucket
//! ([`LOG_BURST`] lines, then one per [`LOG_REFILL`]) drops what a flooding guest writes faster.
//! What was dropped is said in one last `warning` line. Nothing is sent until the client sets a
//! level (a client that never asks gets no log traffic), and the forwarder finishes before the
//! call's result is sent, so every forwarded line precedes the result.
//!
//! (MCP logging is deprecated for a future revision by SEP-2577; the 2025 revisions served here
//! still define it, hence the `allow(deprecated)`.)
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

use toolhost_contract::{GuestLog, GuestLogLevel, LogSink};

/// Most log notifications one call sends (the drop notice aside).
pub const MAX_LOG_NOTIFICATIONS: u32 = 100;
/// Lines a call may send back to back before the rate applies.
pub const LOG_BURST: u32 = 20;
/// One more line may be sent per this much time.
pub const LOG_REFILL: Duration = Duration::from_millis(10);
/// Lines buffered between the guest and the forwarder; more are dropped, never waited for.
const SINK_CAPACITY: usize = 64;
/// The logger name every forwarded line carries.
pub const LOGGER: &str = "toolhost";

/// A session's minimum level: none until the client sets one.
#[derive(Debug, Clone, Default)]
pub struct SessionLevel(Arc<AtomicU8>);

impl SessionLevel {
    pub fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    /// The level set, if any.
    pub fn get(&self) -> Option<LoggingLevel> {
        let r = usize::from(self.0.load(Ordering::Relaxed)).checked_sub(1)?;
        LEVELS.get(r).copied()
    }

    /// Whether a line at `level` goes to the client: a level is set and `level` is at or
    /// above it.
    pub fn admits(&self, level: LoggingLevel) -> bool {
        self.get().is_some_and(|min| rank(level) >= rank(min))
    }
}

const LEVELS: [LoggingLevel; 8] = [
    LoggingLevel::Debug,
    LoggingLevel::Info,
    LoggingLevel::Notice,
    LoggingLevel::Warning,
    LoggingLevel::Error,
    LoggingLevel::Critical,
    LoggingLevel::Alert,
    LoggingLevel::Emergency,
];

/// 1 (debug) … 8 (emergency); 0 is "not set".
fn rank(level: LoggingLevel) -> u8 {
    LEVELS
        .iter()
        .position(|l| *l == level)
        .map_or(0, |i| i as u8 + 1)
}

/// The MCP level of a guest's WIT level.
pub fn mcp_level(level: GuestLogLevel) -> LoggingLevel {
    match level {
        GuestLogLevel::Debug => LoggingLevel::Debug,
        GuestLogLevel::Info => LoggingLevel::Info,
        GuestLogLevel::Warn => LoggingLevel::Warning,
        GuestLogLevel::Error => LoggingLevel::Error,
    }
}

/// Forwards one call's log lines until the sink's last sender is gone.
pub struct LogForwarder {
    task: tokio::task::JoinHandle<()>,
}

impl LogForwarder {
    /// A sink for the call and the task that forwards what arrives in it to `peer`, as lines
    /// of `tool`'s call `call_id`, at or above the session's level at the time of each line.
    pub fn start(
        peer: Peer<RoleServer>,
        level: SessionLevel,
        tool: String,
        call_id: String,
    ) -> (LogSink, LogForwarder) {
        let (sink, rx) = LogSink::channel(SINK_CAPACITY);
        let filter = level.clone();
        let wanted = move |l: GuestLogLevel| filter.admits(mcp_level(l));
        let task = tokio::spawn(forward(rx, Limits::DEFAULT, wanted, move |line| {
            let peer = peer.clone();
            let data = match &line {
                Line::Guest(g) => json!({"tool": tool, "call_id": call_id, "message": g.message}),
                Line::Dropped(n) => json!({
                    "tool": tool, "call_id": call_id,
                    "message": format!("{n} log line(s) of this call were not forwarded (rate or count limit)"),
                }),
            };
            let lvl = match &line {
                Line::Guest(g) => mcp_level(g.level),
                Line::Dropped(_) => LoggingLevel::Warning,
            };
            let wanted = level.admits(lvl);
            async move {
                if wanted {
                    let p = LoggingMessageNotificationParam::new(lvl, data).with_logger(LOGGER);
                    let _ = peer.notify_logging_message(p).await;
                }
            }
        }));
        (sink, LogForwarder { task })
    }

    /// Wait until every line taken has been sent (the sink must be dropped first), so no log
    /// notification follows the result.
    pub async fn finish(self) {
        let _ = self.task.await;
    }
}

/// What the forwarder hands its sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    Guest(GuestLog),
    /// How many lines were not forwarded; sent once, last.
    Dropped(u32),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub cap: u32,
    pub burst: u32,
    pub refill: Duration,
}

impl Limits {
    const DEFAULT: Limits = Limits {
        cap: MAX_LOG_NOTIFICATIONS,
        burst: LOG_BURST,
        refill: LOG_REFILL,
    };
}

/// The forwarding policy, independent of the transport: in order, capped, rate-limited by a
/// token bucket, never delaying the guest or the result (a line without a token is dropped).
/// Lines below the session's level (`wanted` false) are skipped before they cost anything.
pub(crate) async fn forward<W, F, Fut>(
    mut rx: mpsc::Receiver<GuestLog>,
    limits: Limits,
    wanted: W,
    mut send: F,
) where
    W: Fn(GuestLogLevel) -> bool,
    F: FnMut(Line) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut bucket = Bucket::full(limits.burst, limits.refill, Instant::now());
    let mut sent = 0u32;
    let mut dropped = 0u32;
    while let Some(line) = rx.recv().await {
        if !wanted(line.level) {
            continue;
        }
        if sent >= limits.cap || !bucket.take(Instant::now()) {
            dropped = dropped.saturating_add(1);
            continue;
        }
        sent += 1;
        send(Line::Guest(line)).await;
    }
    if dropped > 0 {
        send(Line::Dropped(dropped)).await;
    }
}

/// A token bucket: `burst` tokens at most, one more per `refill`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: u32,
    burst: u32,
    refill: Duration,
    /// When the last whole token was added (or the bucket was filled).
    since: Instant,
}

impl Bucket {
    pub(crate) fn full(burst: u32, refill: Duration, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            burst,
            refill,
            since: now,
        }
    }

    /// Spend one token if there is one at `now`.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let step = self.refill.as_nanos().max(1);
        let gained = now.saturating_duration_since(self.since).as_nanos() / step;
        if gained > 0 {
            let room = u128::from(self.burst - self.tokens);
            self.tokens += gained.min(room) as u32;
            // Keep the fraction of a token already earned, unless the bucket is full.
            self.since = if self.tokens == self.burst {
                now
            } else {
                self.since + self.refill * (gained as u32)
            };
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn line(i: usize) -> GuestLog {
        GuestLog {
            level: GuestLogLevel::Info,
            message: format!("line {i}"),
        }
    }

    /// The default burst and cap, with a refill no test run lasts long enough to see.
    const NO_REFILL: Limits = Limits {
        cap: MAX_LOG_NOTIFICATIONS,
        burst: LOG_BURST,
        refill: Duration::from_secs(3600),
    };

    /// Run the forwarder over `n` lines (all queued before it starts) and return what it sent.
    async fn sent(n: usize, limits: Limits) -> Vec<Line> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (sink, rx) = LogSink::channel(1024);
        for i in 0..n {
            sink.offer(line(i));
        }
        drop(sink);
        let s2 = seen.clone();
        forward(
            rx,
            limits,
            |l| l >= GuestLogLevel::Info,
            move |l| {
                s2.lock().unwrap().push(l);
                async {}
            },
        )
        .await;
        Arc::try_unwrap(seen).unwrap().into_inner().unwrap()
    }

    /// Within the burst every line goes, in order, and nothing is said about drops.
    #[tokio::test]
    async fn lines_within_the_burst_all_go_in_order() {
        let got = sent(3, NO_REFILL).await;
        assert_eq!(
            got,
            (0..3).map(|i| Line::Guest(line(i))).collect::<Vec<_>>()
        );
    }

    /// A flood gets the burst, then one line that says how many were dropped.
    #[tokio::test]
    async fn a_flood_is_cut_at_the_burst_and_the_drop_is_said() {
        let got = sent(500, NO_REFILL).await;
        assert_eq!(got.len(), LOG_BURST as usize + 1);
        assert_eq!(got[0], Line::Guest(line(0)));
        assert_eq!(got.last(), Some(&Line::Dropped(500 - LOG_BURST)));
    }

    /// The per-call cap holds even when the rate would allow more.
    #[tokio::test]
    async fn the_cap_holds_when_the_rate_allows_more() {
        let limits = Limits {
            cap: 5,
            burst: 1000,
            refill: Duration::from_secs(3600),
        };
        let got = sent(50, limits).await;
        assert_eq!(got.len(), 6);
        assert_eq!(got[5], Line::Dropped(45));
    }

    /// Tokens come back with time (clock driven by hand): a writer at the refill rate is never
    /// refused, a burst past the bucket is, and earned fractions of a token are kept.
    #[test]
    fn the_bucket_refills_at_its_rate() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut b = Bucket::full(2, ms(10), t0);
        assert!(b.take(t0) && b.take(t0));
        assert!(!b.take(t0), "the burst is spent");
        assert!(!b.take(t0 + ms(9)));
        assert!(b.take(t0 + ms(10)));
        for i in 2..100 {
            assert!(
                b.take(t0 + ms(10 * i)),
                "a line every refill is never refused ({i})"
            );
        }
        // 15 ms after the last token: one earned, half of the next kept.
        let t = t0 + ms(990 + 15);
        assert!(b.take(t));
        assert!(!b.take(t));
        assert!(b.take(t0 + ms(1010)));
        // A long pause fills the bucket, never beyond the burst.
        let t = t0 + ms(60_000);
        assert!(b.take(t) && b.take(t) && !b.take(t));
    }

    /// Lines below the level are skipped without spending the budget.
    #[tokio::test]
    async fn lines_below_the_level_cost_nothing() {
        let (sink, rx) = LogSink::channel(1024);
        for i in 0..100 {
            sink.offer(GuestLog {
                level: GuestLogLevel::Debug,
                message: format!("debug {i}"),
            });
        }
        sink.offer(line(0));
        drop(sink);
        let mut got = Vec::new();
        forward(
            rx,
            NO_REFILL,
            |l| l >= GuestLogLevel::Info,
            |l| {
                got.push(l);
                async {}
            },
        )
        .await;
        assert_eq!(got, [Line::Guest(line(0))]);
    }

    /// Levels are ordered as MCP orders them; unset sends nothing.
    #[test]
    fn session_level_orders_as_mcp_does() {
        let s = SessionLevel::default();
        assert_eq!(s.get(), None);
        assert!(!s.admits(LoggingLevel::Emergency));
        s.set(LoggingLevel::Warning);
        assert_eq!(s.get(), Some(LoggingLevel::Warning));
        assert!(rank(mcp_level(GuestLogLevel::Error)) >= rank(LoggingLevel::Warning));
        assert!(rank(mcp_level(GuestLogLevel::Info)) < rank(LoggingLevel::Warning));
    }
}
