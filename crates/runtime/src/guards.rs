//! Limits beyond one call: the `[run]` settings (per-run call budgets, a per-principal rate,
//! a per-host concurrency limit) and the concurrency slots. The ledger keeps the budgets' and
//! rates' counts (`crates/ledger-store/src/limits.rs`). A breach ends the call before it executes.

use std::sync::Arc;

use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use toolhost_contract::{Budgets, ConfigProblem};
use toolhost_sandbox::MAX_CONCURRENT_INSTANCES;

/// Default calls that may execute at once on one host.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;

/// The `[run]` config section.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunLimitsConfig {
    /// Most calls one run may make (default: unlimited).
    pub max_calls: Option<u64>,
    /// Most calls of one tool per run (default: unlimited).
    pub max_calls_per_tool: Option<u64>,
    /// Calls executing at once on this host (default 64).
    pub max_concurrent_calls: Option<u32>,
    /// Sustained calls per second per principal (default: unlimited).
    pub rate_per_principal: Option<f64>,
    /// Burst above the sustained rate (default: one second's worth, at least 1).
    pub rate_burst: Option<u32>,
}

impl RunLimitsConfig {
    /// Calls that may execute at once: the concurrency guard's limit and the instance pool's size.
    pub fn concurrent_calls(&self) -> u32 {
        self.max_concurrent_calls
            .unwrap_or(DEFAULT_MAX_CONCURRENT_CALLS)
    }

    /// Every problem of the `[run]` section.
    pub fn validate(&self, problems: &mut Vec<ConfigProblem>) {
        let mut bad = |key: &str, message: String| {
            problems.push(ConfigProblem::new(format!("run.{key}"), message))
        };
        match self.max_concurrent_calls {
            Some(0) => bad("max_concurrent_calls", "must be at least 1".into()),
            Some(n) if n > MAX_CONCURRENT_INSTANCES => bad(
                "max_concurrent_calls",
                format!(
                    "{n} is more than one host can run at once; use at most \
                     {MAX_CONCURRENT_INSTANCES}, and more hosts for more"
                ),
            ),
            _ => {}
        }
        for (key, v) in [
            ("max_calls", self.max_calls),
            ("max_calls_per_tool", self.max_calls_per_tool),
        ] {
            if v == Some(0) {
                bad(
                    key,
                    "is 0, which would refuse every call; remove it for no limit".into(),
                );
            }
        }
        if let Some(r) = self.rate_per_principal {
            if !(r.is_finite() && r > 0.0) {
                bad(
                    "rate_per_principal",
                    format!("{r} must be a positive number of calls per second"),
                );
            }
        }
        if self.rate_burst == Some(0) {
            bad("rate_burst", "must be at least 1".into());
        }
    }

    /// The run budgets these settings give a new run.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_calls: self.max_calls,
            max_calls_per_tool: self.max_calls_per_tool,
        }
    }
}

/// The message of a call refused because its run used all of its tool calls.
pub const RUN_CALLS_EXHAUSTED: &str = "this run has used all of its tool calls";
/// The message of a call refused because its run used all of its calls of that tool.
pub const TOOL_CALLS_EXHAUSTED: &str = "this run has used all of its calls of this tool";

/// The per-principal rate of this host's config; the buckets are kept by the ledger.
pub struct RateLimiter {
    rate: Option<f64>,
    burst: f64,
}

impl RateLimiter {
    pub fn new(rate: Option<f64>, burst: Option<u32>) -> Self {
        let burst = burst
            .map(f64::from)
            .unwrap_or_else(|| rate.unwrap_or(1.0).ceil().max(1.0));
        RateLimiter { rate, burst }
    }

    /// The sustained rate (calls per second) and burst, when a rate is set.
    pub fn settings(&self) -> Option<(f64, f64)> {
        self.rate.map(|r| (r, self.burst))
    }
}

/// Slots for calls executing at once on this host.
pub struct Concurrency {
    slots: Arc<Semaphore>,
}

impl Concurrency {
    pub fn new(max: u32) -> Self {
        Concurrency {
            slots: Arc::new(Semaphore::new(max as usize)),
        }
    }

    /// A slot, or `None` when every slot is taken.
    pub fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The burst is one second's worth (at least 1) unless set.
    #[test]
    fn rate_settings() {
        assert_eq!(
            RateLimiter::new(Some(2.5), None).settings(),
            Some((2.5, 3.0))
        );
        assert_eq!(
            RateLimiter::new(Some(0.5), Some(4)).settings(),
            Some((0.5, 4.0))
        );
        assert_eq!(RateLimiter::new(None, Some(4)).settings(), None);
    }

    /// Slots run out and come back when released.
    #[test]
    fn concurrency() {
        let c = Concurrency::new(1);
        let s = c.try_slot().unwrap();
        assert!(c.try_slot().is_none());
        drop(s);
        assert!(c.try_slot().is_some());
    }
}
