//! Guest progress → `notifications/progress`, for calls whose client sent a progress token.
//!
//! What reaches the client is bounded and content-free: numbers only (the guest's message text
//! never leaves the host: it would be a channel around the output checks), strictly increasing
//! `progress` values, at most one notification per [`MIN_PROGRESS_INTERVAL`] and at most
//! [`MAX_PROGRESS_NOTIFICATIONS`] per call. The forwarder stops before the call's result is sent.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::time::Instant;

use toolhost_contract::{GuestProgress, ProgressSink};

/// Shortest gap between two notifications of one call; reports in between are coalesced
/// (the newest wins).
pub const MIN_PROGRESS_INTERVAL: Duration = Duration::from_millis(50);
/// Most notifications one call sends.
pub const MAX_PROGRESS_NOTIFICATIONS: u32 = 200;
/// Reports buffered between the guest and the forwarder; more are dropped, never waited for.
const SINK_CAPACITY: usize = 32;

/// Forwards one call's progress until the sink's last sender is gone.
pub struct Forwarder {
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// A sink for the call and the task that forwards what arrives in it to `peer`.
    pub fn start(peer: Peer<RoleServer>, token: ProgressToken) -> (ProgressSink, Forwarder) {
        let (sink, rx) = ProgressSink::channel(SINK_CAPACITY);
        let task = tokio::spawn(forward(
            rx,
            MIN_PROGRESS_INTERVAL,
            MAX_PROGRESS_NOTIFICATIONS,
            move |p| {
                let peer = peer.clone();
                let token = token.clone();
                async move {
                    let _ = peer.notify_progress(notification(token, p)).await;
                }
            },
        ));
        (sink, Forwarder { task })
    }

    /// Wait until the forwarder has stopped (its sink must be dropped first), so no progress
    /// notification follows the result.
    pub async fn finish(self) {
        let _ = self.task.await;
    }
}

fn notification(token: ProgressToken, p: GuestProgress) -> ProgressNotificationParam {
    let mut v = serde_json::json!({ "progressToken": token, "progress": p.done as f64 });
    if let (Some(total), Some(o)) = (p.total, v.as_object_mut()) {
        o.insert("total".into(), serde_json::json!(total as f64));
    }
    serde_json::from_value(v).expect("a progress notification is well formed")
}

/// The forwarding policy, independent of the transport: monotonic, rate-limited, capped.
pub(crate) async fn forward<F, Fut>(
    mut rx: mpsc::Receiver<GuestProgress>,
    interval: Duration,
    cap: u32,
    mut send: F,
) where
    F: FnMut(GuestProgress) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut last_sent: Option<u64> = None;
    let mut last_at: Option<Instant> = None;
    let mut pending: Option<GuestProgress> = None;
    let mut sent = 0u32;
    loop {
        let wake = match (pending, last_at) {
            (Some(_), Some(at)) => Some(at + interval),
            _ => None,
        };
        let report = tokio::select! {
            r = rx.recv() => match r {
                Some(r) => Some(r),
                None => return, // the call is over: pending reports are dropped, not sent late
            },
            _ = sleep_until(wake) => None,
        };
        if let Some(r) = report {
            if last_sent.is_some_and(|l| r.done <= l) {
                continue; // not an increase: MCP requires progress to grow
            }
            pending = Some(r);
        }
        let due = last_at.is_none_or(|at| Instant::now() >= at + interval);
        if let (true, Some(p)) = (due, pending) {
            if sent >= cap {
                pending = None;
                continue;
            }
            pending = None;
            last_sent = Some(p.done);
            last_at = Some(Instant::now());
            sent += 1;
            send(p).await;
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn p(done: u64) -> GuestProgress {
        GuestProgress { done, total: None }
    }

    /// Run the forwarder over `reports` (all queued before it starts) and return what it sent.
    async fn sent(reports: &[u64], interval: Duration, cap: u32) -> Vec<u64> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (sink, rx) = ProgressSink::channel(1024);
        for d in reports {
            sink.offer(p(*d));
        }
        drop(sink);
        let s2 = seen.clone();
        forward(rx, interval, cap, move |g| {
            s2.lock().unwrap().push(g.done);
            async {}
        })
        .await;
        let out = seen.lock().unwrap().clone();
        out
    }

    /// Decreasing and repeated values never go out: progress only grows.
    #[tokio::test]
    async fn monotonic() {
        assert_eq!(
            sent(&[1, 1, 0, 2, 3, 2, 4], Duration::ZERO, 100).await,
            vec![1, 2, 3, 4]
        );
    }

    /// Within one interval only the first report goes out; what is pending when the call
    /// ends is dropped, never sent after the result.
    #[tokio::test]
    async fn rate_limited_and_nothing_after_the_end() {
        assert_eq!(
            sent(&[1, 2, 3, 4], Duration::from_secs(3600), 100).await,
            vec![1]
        );
    }

    /// A guest reporting without end gets at most the cap.
    #[tokio::test]
    async fn capped() {
        let reports: Vec<u64> = (1..=600).collect();
        assert_eq!(sent(&reports, Duration::ZERO, 200).await.len(), 200);
    }

    /// A full sink drops reports instead of blocking the guest.
    #[test]
    fn full_sink_drops() {
        let (sink, mut rx) = ProgressSink::channel(2);
        for d in 0..10 {
            sink.offer(p(d));
        }
        assert_eq!(rx.try_recv().unwrap().done, 0);
        assert_eq!(rx.try_recv().unwrap().done, 1);
        assert!(rx.try_recv().is_err());
    }
}
