//! Host file descriptors: the soft limit raised at start, and each call's share of what is left
//! once the host's own work is set aside.
//!
//! Every open file, directory and socket of a guest is a host descriptor. A call holds at most
//! its handle budget of them (one per table entry) plus its preopened grants; the budget is
//! chosen so that a full pool of calls still leaves [`HOST_RESERVED_FDS`] to the host.

use super::host_budget::MAX_HOST_HANDLES_PER_CALL;

/// Descriptors kept for the host's own work whatever its calls hold: the ledger (database, log,
/// shared memory, checkpoints, PostgreSQL connections), the HTTP listener and its connections,
/// granted directories held open, the compile cache, stdio and the async runtime's own.
pub const HOST_RESERVED_FDS: u64 = 1_024;

/// Descriptors a call holds outside its handle table: one per preopened grant.
pub const CALL_FIXED_FDS: u64 = 16;

/// The smallest handle budget a call gets, even when the descriptor limit cannot give every
/// slot of the pool its share (the host then warns at start).
pub const MIN_HANDLES_PER_CALL: usize = 32;

/// The highest soft limit the host asks for (the kernel's default `nr_open`).
const SOFT_LIMIT_CEILING: u64 = 1 << 20;

/// How the host's descriptors are shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorPlan {
    /// The soft `RLIMIT_NOFILE` in effect.
    pub soft_limit: u64,
    /// Host handles (and so descriptors) one call may hold.
    pub handles_per_call: usize,
    /// Whether a full pool of calls at that budget still leaves [`HOST_RESERVED_FDS`].
    pub reserve_holds: bool,
}

/// Raise the soft descriptor limit as far as the hard limit allows (at most 2^20), and share
/// it out among `slots` calls.
pub fn plan(slots: u32) -> DescriptorPlan {
    share(raise_soft_limit(), slots)
}

/// The soft limit after raising it to the hard limit where allowed.
fn raise_soft_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or(u64::MAX).min(SOFT_LIMIT_CEILING);
    let soft = now.current.unwrap_or(u64::MAX);
    if soft >= hard {
        return soft;
    }
    let raised = Rlimit {
        current: Some(hard),
        maximum: now.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => hard,
        Err(_) => soft,
    }
}

/// Each of `slots` calls' share of `soft_limit` once the host's reserve is set aside.
pub fn share(soft_limit: u64, slots: u32) -> DescriptorPlan {
    let per_slot = soft_limit.saturating_sub(HOST_RESERVED_FDS) / u64::from(slots.max(1));
    let fair = per_slot.saturating_sub(CALL_FIXED_FDS);
    let handles = usize::try_from(fair)
        .unwrap_or(usize::MAX)
        .min(MAX_HOST_HANDLES_PER_CALL);
    DescriptorPlan {
        soft_limit,
        handles_per_call: handles.max(MIN_HANDLES_PER_CALL),
        reserve_holds: handles >= MIN_HANDLES_PER_CALL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of calls at their budget never reaches into the host's reserve; a limit too low
    /// for that is reported, and the budget never goes above the handle cap or below the floor.
    #[test]
    fn shares_leave_the_reserve() {
        for (soft, slots) in [(20_000, 64), (20_000, 128), (1 << 20, 128), (4_096, 8)] {
            let p = share(soft, slots);
            assert!(p.reserve_holds, "{p:?}");
            let held = u64::from(slots) * (p.handles_per_call as u64 + CALL_FIXED_FDS);
            assert!(held + HOST_RESERVED_FDS <= soft, "{p:?}");
        }
        assert_eq!(
            share(1 << 20, 1).handles_per_call,
            MAX_HOST_HANDLES_PER_CALL
        );
        let low = share(1_024, 64);
        assert!(!low.reserve_holds);
        assert_eq!(low.handles_per_call, MIN_HANDLES_PER_CALL);
    }

    /// After planning, the soft limit is at least the hard one (up to the ceiling).
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use rustix::process::{getrlimit, Resource};
        let p = plan(1);
        let now = getrlimit(Resource::Nofile);
        let hard = now.maximum.unwrap_or(u64::MAX).min(SOFT_LIMIT_CEILING);
        assert_eq!(now.current, Some(p.soft_limit));
        assert!(p.soft_limit >= hard);
    }
}
