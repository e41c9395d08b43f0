//! The wall clock the runtime judges approvals by: handles' and tokens' expiry, in unix
//! seconds. Tests move it forward instead of sleeping past a TTL; it never moves back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The system clock, plus however far a test has moved it forward.
#[derive(Debug, Default)]
pub struct Clock {
    ahead_secs: AtomicU64,
}

impl Clock {
    /// Unix seconds now, by this clock.
    pub fn unix_now(&self) -> u64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        system.saturating_add(self.ahead_secs.load(Ordering::Relaxed))
    }

    /// Move the clock forward by `by` (whole seconds, rounded up). Forward only: approvals can
    /// only expire sooner, never live longer.
    pub fn advance(&self, by: Duration) {
        let secs = by.as_secs() + u64::from(by.subsec_nanos() > 0);
        self.ahead_secs.fetch_add(secs, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock moves forward by whole seconds, rounded up.
    #[test]
    fn the_clock_moves_forward_only() {
        let c = Clock::default();
        let before = c.unix_now();
        c.advance(Duration::from_millis(1500));
        let after = c.unix_now();
        assert!(
            (before + 2..=before + 3).contains(&after),
            "{before} -> {after}"
        );
    }
}
