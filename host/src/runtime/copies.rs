//! Copies of a running call: a proposal with the run and call id, arguments and caller of a
//! call that is running (claimed in this process, or admitted without an outcome) waits for
//! that call's recorded outcome and never runs beside it. At most [`MAX_WAITING_DUPLICATES`]
//! wait at once; a copy whose original was given up before it was admitted opens the call
//! again (`docs/pipeline.md`, late admission).

use std::time::{Duration, Instant};

use crate::contract::{Code, RunContext, ToolCall, ToolResult, Usage};
use crate::ledger::{Held, Journal, OpenCall, Waited};
use crate::telemetry::Laps;

use tracing::Instrument;

use super::owner::{admission_digest, foreign};
use super::pipeline::{duplicate_call_id, open_call};
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

/// How many times a copy opens its call again after the original it waited for was given up
/// before admission (see [`Runtime::open`]). Each time costs a wait for a claim that then
/// vanished; past this, a client cancelling its own proposals in a loop gets "still running"
/// instead of keeping a copy cycling.
const MAX_REOPENS: usize = 2;

impl Runtime {
    /// Stage 1: admit the call (or claim its id), or answer it. A copy of a running call
    /// waits for the original's outcome; if the original was given up before it was admitted
    /// (its future dropped), nothing of it was recorded and the copy opens the call again, at
    /// most [`MAX_REOPENS`] times.
    pub(super) async fn open(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        mut opening: OpenCall,
        laps: &mut Laps,
    ) -> Result<Journal<'_>, ToolResult> {
        let late = opening.late;
        for _ in 0..=MAX_REOPENS {
            let admitted = self
                .ledger
                .open_call(opening, self.inline())
                .instrument(tracing::debug_span!("admit"))
                .await;
            laps.lap("admit");
            match admitted {
                Ok(journal) => return Ok(journal),
                Err(Held::InFlight) => {
                    let copy = copy_of(ctx, call, late);
                    match self.wait_for_original(call, &copy).await {
                        Some(answer) => return Err(answer),
                        None => opening = copy,
                    }
                }
                Err(held) => return Err(self.held(ctx, call, held).await),
            }
        }
        Err(still_running(call))
    }

    /// A duplicate of a running call waits for the original's recorded outcome (never runs).
    /// The outcome answers it only if it is this call's ([`crate::ledger::Ledger::waited`]).
    /// `None`: the original was given up before it was admitted, and nothing holds the id.
    pub(super) async fn await_original(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
    ) -> Option<ToolResult> {
        self.wait_for_original(call, &copy_of(ctx, call, false))
            .await
    }

    /// [`Runtime::await_original`] for `copy`, the call as the ledger is asked about it.
    async fn wait_for_original(&self, call: &ToolCall, copy: &OpenCall) -> Option<ToolResult> {
        let Some(_waiting) = Waiting::enter(&self.waiting_duplicates) else {
            return Some(still_running(call));
        };
        let patience = self
            .registry
            .get(&call.name)
            .map_or(Duration::ZERO, |t| t.limits.deadline)
            + IN_FLIGHT_GRACE;
        let until = Instant::now() + patience;
        let mut poll = IN_FLIGHT_POLL;
        while Instant::now() < until {
            tokio::time::sleep(poll).await;
            poll = (poll * 2).min(IN_FLIGHT_POLL_MAX);
            match self.ledger.waited(copy, self.inline()).await {
                Waited::Answered(Held::Replay(recorded)) => return Some(*recorded),
                Waited::Answered(Held::Foreign) => return Some(foreign(call)),
                Waited::Answered(Held::Reused) => return Some(duplicate_call_id(call)),
                Waited::Vanished => return None,
                Waited::Pending | Waited::Answered(Held::InFlight | Held::Fault(_)) => {}
            }
        }
        Some(still_running(call))
    }
}

/// `call` as the ledger is asked about it: its admission key (which binds the caller), opened
/// `late` or not when it is opened again.
fn copy_of(ctx: &RunContext, call: &ToolCall, late: bool) -> OpenCall {
    let (digest, size, _) = admission_digest(ctx, call);
    open_call(ctx, call, digest, size, late)
}

/// The answer to a copy whose original did not end while it waited (or that could not wait).
pub(super) fn still_running(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::DuplicateCallId,
        "a call with this id is still running",
        Usage::default(),
    )
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
