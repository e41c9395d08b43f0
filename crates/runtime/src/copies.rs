//! Copies of a running call: a proposal with the run and call id, arguments and caller of a
//! call that is running (claimed in this process, or admitted without an outcome) waits for
//! that call's recorded outcome and never runs beside it. At most [`MAX_WAITING_DUPLICATES`]
//! wait at once; a copy whose original was given up before it was admitted opens the call
//! again (`docs/pipeline.md`, late admission).

use std::time::{Duration, Instant};

use toolhost_contract::{ToolCall, ToolResult};
use toolhost_ledger::{Held, OpenCall, Waited};

use super::endings::{duplicate_call_id, foreign, replayed, still_running};
use super::Runtime;

/// How soon a duplicate of a running call first checks whether the original has finished;
/// each later check waits twice as long, up to [`IN_FLIGHT_POLL_MAX`].
const IN_FLIGHT_POLL: Duration = Duration::from_millis(20);

/// The longest wait between two checks of one waiting duplicate: a copy learns its result at
/// most this late, and a long call's copies cost the ledger a few reads a second each.
const IN_FLIGHT_POLL_MAX: Duration = Duration::from_millis(160);

/// Extra wait, beyond the tool's deadline, for a running original before giving up.
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(2);

/// Copies of running calls that may wait for their originals at once, across this runtime.
/// Each waiting copy holds a task and reads the ledger until its original ends (up to the
/// tool's deadline): without a bound, a client sending copies of a long call could keep the
/// host polling instead of serving, and hold a task per copy. As many as the default number
/// of concurrent calls leaves room for a retry of every running call; past it a copy is
/// answered at once `duplicate_call_id` ("still running"), as a copy that waited past its
/// patience is.
pub const MAX_WAITING_DUPLICATES: usize = 64;

/// A copy of a running call waits for the original's recorded outcome (never runs). The
/// outcome answers it only if it is this call's ([`toolhost_ledger::Ledger::waited`]); `copy`
/// is the call as the ledger is asked about it. `None`: the original was given up before it
/// was admitted, and nothing holds the id.
pub(super) async fn wait_for_original(
    rt: &Runtime,
    call: &ToolCall,
    copy: &OpenCall,
) -> Option<ToolResult> {
    let Some(_waiting) = Waiting::enter(&rt.waiting_duplicates) else {
        return Some(still_running(call));
    };
    let patience = rt
        .registry()
        .get(&call.name)
        .map_or(Duration::ZERO, |t| t.limits.deadline)
        + IN_FLIGHT_GRACE;
    let until = Instant::now() + patience;
    let mut poll = IN_FLIGHT_POLL;
    while Instant::now() < until {
        tokio::time::sleep(poll).await;
        poll = (poll * 2).min(IN_FLIGHT_POLL_MAX);
        match rt.ledger.waited(copy, rt.inline()).await {
            Waited::Answered(Held::Replay(recorded)) => return Some(replayed(*recorded)),
            Waited::Answered(Held::Foreign) => return Some(foreign(call)),
            Waited::Answered(Held::Reused) => return Some(duplicate_call_id(call)),
            Waited::Vanished => return None,
            Waited::Pending | Waited::Answered(Held::InFlight | Held::Fault(_)) => {}
        }
    }
    Some(still_running(call))
}

/// One copy waiting for its original, counted while it waits (see [`MAX_WAITING_DUPLICATES`]).
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    /// Count one more waiting copy, or `None` if [`MAX_WAITING_DUPLICATES`] already wait.
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Option<Waiting<'a>> {
        use std::sync::atomic::Ordering;
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_WAITING_DUPLICATES).then_some(n + 1)
            })
            .ok()
            .map(|_| Waiting(count))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}
