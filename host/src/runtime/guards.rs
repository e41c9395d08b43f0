//! Limits beyond one call: per-run call budgets, a per-principal rate limit and a per-host
//! concurrency limit. A breach ends the call before it executes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::contract::{Budgets, ConfigProblem};
use crate::sandbox::MAX_CONCURRENT_INSTANCES;

/// Default calls that may execute at once on one host.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;
/// Runs whose counters are remembered; the oldest are forgotten past this (bounds host memory).
pub const MAX_TRACKED_RUNS: usize = 10_000;
/// Principals whose rate buckets are remembered.
pub const MAX_TRACKED_PRINCIPALS: usize = 10_000;

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

#[derive(Default)]
struct RunCounters {
    total: u64,
    per_tool: HashMap<String, u64>,
}

/// Counts calls per run against the run's budgets.
#[derive(Default)]
pub struct RunBudgets {
    runs: Mutex<(HashMap<String, RunCounters>, VecDeque<String>)>,
}

/// The message of a call refused because its run used all of its tool calls.
pub const RUN_CALLS_EXHAUSTED: &str = "this run has used all of its tool calls";
/// The message of a call refused because its run used all of its calls of that tool.
pub const TOOL_CALLS_EXHAUSTED: &str = "this run has used all of its calls of this tool";

impl RunBudgets {
    /// Count one call of `tool` in `run`, or say which budget it would break (and count nothing).
    pub fn take(&self, run: &str, tool: &str, budgets: &Budgets) -> Result<(), &'static str> {
        let mut guard = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let (runs, order) = &mut *guard;
        if !runs.contains_key(run) {
            if order.len() >= MAX_TRACKED_RUNS {
                if let Some(old) = order.pop_front() {
                    runs.remove(&old);
                }
            }
            order.push_back(run.to_string());
        }
        let c = runs.entry(run.to_string()).or_default();
        if budgets.max_calls.is_some_and(|m| c.total >= m) {
            return Err(RUN_CALLS_EXHAUSTED);
        }
        let n = c.per_tool.get(tool).copied().unwrap_or(0);
        if budgets.max_calls_per_tool.is_some_and(|m| n >= m) {
            return Err(TOOL_CALLS_EXHAUSTED);
        }
        c.total += 1;
        *c.per_tool.entry(tool.to_string()).or_default() += 1;
        Ok(())
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A token bucket per principal.
pub struct RateLimiter {
    rate: Option<f64>,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(rate: Option<f64>, burst: Option<u32>) -> Self {
        let burst = burst
            .map(f64::from)
            .unwrap_or_else(|| rate.unwrap_or(1.0).ceil().max(1.0));
        RateLimiter {
            rate,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The sustained rate (calls per second) and burst, when a rate is set.
    pub fn settings(&self) -> Option<(f64, f64)> {
        self.rate.map(|r| (r, self.burst))
    }

    /// Take one call for `principal` at `now`; false when over the rate.
    pub fn allow(&self, principal: &str, now: Instant) -> bool {
        let Some(rate) = self.rate else { return true };
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_TRACKED_PRINCIPALS && !buckets.contains_key(principal) {
            // Forget full buckets: they are indistinguishable from new ones.
            let burst = self.burst;
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let b = buckets.entry(principal.to_string()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
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
    use std::time::Duration;

    /// Budgets count per run and per tool, and a refused call is not counted.
    #[test]
    fn budgets() {
        let b = RunBudgets::default();
        let limits = Budgets {
            max_calls: Some(3),
            max_calls_per_tool: Some(2),
        };
        assert!(b.take("r", "a", &limits).is_ok());
        assert!(b.take("r", "a", &limits).is_ok());
        assert!(b.take("r", "a", &limits).is_err());
        assert!(b.take("r", "b", &limits).is_ok());
        assert!(b.take("r", "b", &limits).is_err());
        assert!(b.take("other", "a", &limits).is_ok());
    }

    /// The bucket allows a burst, refuses past it, and refills with time.
    #[test]
    fn rate() {
        let r = RateLimiter::new(Some(2.0), Some(2));
        let t = Instant::now();
        assert!(r.allow("p", t));
        assert!(r.allow("p", t));
        assert!(!r.allow("p", t));
        assert!(r.allow("q", t));
        assert!(r.allow("p", t + Duration::from_millis(500)));
        assert!(RateLimiter::new(None, None).allow("p", t));
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
