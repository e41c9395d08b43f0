//! Run budgets and per-principal rates: what a call takes before it executes, kept where the
//! ledger's hosts can all see it. A shared backend (PostgreSQL) keeps them in the database;
//! a ledger with one host (SQLite, the null ledger) keeps them in this host's memory, here.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use toolhost_contract::Budgets;

/// Runs whose counters one host remembers; the oldest are forgotten past this (bounds host
/// memory).
pub const MAX_TRACKED_RUNS: usize = 10_000;

/// Principals whose rate buckets one host remembers.
pub const MAX_TRACKED_PRINCIPALS: usize = 10_000;

/// A run budget a call would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// `max_calls`: the run's calls in all.
    Run,
    /// `max_calls_per_tool`: the run's calls of this tool.
    Tool,
}

#[derive(Default)]
struct RunCounters {
    total: u64,
    per_tool: HashMap<String, u64>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Budgets and rate buckets in one host's memory.
#[derive(Default)]
pub struct MemoryLimits {
    runs: Mutex<(HashMap<String, RunCounters>, VecDeque<String>)>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl MemoryLimits {
    /// Count one call of `tool` in `run`, or say which budget it would break (and count
    /// nothing).
    pub fn take_budget(&self, run: &str, tool: &str, budgets: &Budgets) -> Option<Budget> {
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
            return Some(Budget::Run);
        }
        let n = c.per_tool.get(tool).copied().unwrap_or(0);
        if budgets.max_calls_per_tool.is_some_and(|m| n >= m) {
            return Some(Budget::Tool);
        }
        c.total += 1;
        *c.per_tool.entry(tool.to_string()).or_default() += 1;
        None
    }

    /// Take one call from `principal`'s token bucket (`rate` per second, at most `burst`) at
    /// `now`: `false` when it is empty.
    pub fn take_rate(&self, principal: &str, rate: f64, burst: f64, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_TRACKED_PRINCIPALS && !buckets.contains_key(principal) {
            // Forget full buckets: they are indistinguishable from new ones.
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let b = buckets.entry(principal.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Budgets count per run and per tool, and a refused call is not counted.
    #[test]
    fn budgets() {
        let m = MemoryLimits::default();
        let limits = Budgets {
            max_calls: Some(3),
            max_calls_per_tool: Some(2),
        };
        assert_eq!(m.take_budget("r", "a", &limits), None);
        assert_eq!(m.take_budget("r", "a", &limits), None);
        assert_eq!(m.take_budget("r", "a", &limits), Some(Budget::Tool));
        assert_eq!(m.take_budget("r", "b", &limits), None);
        assert_eq!(m.take_budget("r", "b", &limits), Some(Budget::Run));
        assert_eq!(m.take_budget("other", "a", &limits), None);
    }

    /// The bucket allows a burst, refuses past it, and refills with time.
    #[test]
    fn rate() {
        let m = MemoryLimits::default();
        let t = Instant::now();
        assert!(m.take_rate("p", 2.0, 2.0, t));
        assert!(m.take_rate("p", 2.0, 2.0, t));
        assert!(!m.take_rate("p", 2.0, 2.0, t));
        assert!(m.take_rate("q", 2.0, 2.0, t));
        assert!(m.take_rate("p", 2.0, 2.0, t + Duration::from_millis(500)));
    }
}
