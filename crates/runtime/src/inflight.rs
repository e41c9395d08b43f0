//! Calls in flight on this runtime: counted while they live, so that a lone call may commit on
//! its own thread when the ledger is idle (see `crates/ledger/src/group.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};

use toolhost_ledger::Inline;

use super::Runtime;

/// Counts a call in flight for as long as it lives (dropped with its future).
pub(super) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    pub(super) fn enter(count: &'a AtomicUsize) -> InFlight<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        toolhost_telemetry::metrics().call_entered();
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        toolhost_telemetry::metrics().call_left();
    }
}

impl Runtime {
    /// Whether this call's commits may run on its own thread when the ledger is idle: only
    /// while there are no more calls in flight than async workers to run them, so a commit
    /// never holds up another call.
    pub(super) fn inline(&self) -> Inline {
        let workers = tokio::runtime::Handle::try_current()
            .map_or(1, |h| h.metrics().num_workers())
            .max(1);
        if self.in_flight.load(Ordering::Relaxed) <= workers {
            Inline::Allowed
        } else {
            Inline::Never
        }
    }
}
