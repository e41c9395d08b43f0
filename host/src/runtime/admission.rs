//! Stage 1 for most calls: late admission. A call the ledger has never seen, and that no
//! approval is involved in, runs its first stages before it is admitted; the admission is
//! committed with the start mark, or with the outcome of a call that ends before it starts —
//! one commit per call fewer (see `docs/benchmarks-history.md`), with the same record in the ledger.
//!
//! Exactly once still holds: a claim in the runtime's `pending` map stops a duplicate in this
//! process (it waits for the original's outcome, or is a conflict) — the claim is taken before
//! the ledger is asked whether the id is known, and the question (a round trip to a PostgreSQL
//! ledger) is awaited outside the map's lock — and the admission itself,
//! in one `BEGIN IMMEDIATE` transaction, finds an id another process admitted meanwhile — then
//! this call does not run and records nothing of its own.
//!
//! A claim cannot be left behind by a dropped `run_call` future: a [`Claim`] guard releases
//! it on drop (a read call holds its claim across the sandbox, and every call awaits its
//! commits). A commit the dropped future was waiting for still happens or fails as a whole.
//! Nor by a call the ledger already knows: its claim is released at once, and a conflict a
//! duplicate noted on it meanwhile is appended to the known call.

use crate::contract::{Decision, Stage};
use crate::contract::{RunContext, ToolCall, ToolResult};
use crate::ledger::{now_ms, Admission, Applied, Opening, PendingEvent, Write};

use super::owner::{asked_by, same_caller};
use super::pipeline::duplicate_call_id;
use super::{clip, Runtime};

impl Runtime {
    /// Whether this call is admitted late: if the ledger has never seen it (a read, not a
    /// commit) and no approval is involved, the stages run first and the admission is
    /// committed together with the start mark, or with the outcome of a call that ends before
    /// it starts — one commit fewer per call. The claim in `pending` stops a duplicate in this
    /// process from running meanwhile; a duplicate in another process is stopped by the
    /// admission itself, which finds the id taken (see [`Runtime::start`]). Calls that may
    /// need approval are admitted first, so a duplicate cannot ask a human a second time.
    pub(super) async fn admit_late(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        digest: &str,
        size: u64,
    ) -> (Late, Option<Claim<'_>>) {
        let approval = self
            .registry
            .get(&call.name)
            .is_some_and(|t| crate::policy::needs_approval(t.approval, t.risk));
        if approval {
            return (Late::No, None);
        }
        let claim = match self.claim(ctx, call, digest, size, false) {
            Ok(claim) => claim,
            Err(Late::Unsettled) => {
                // Another proposal with other arguments holds a claim the ledger has not
                // answered yet: the ledger decides. If it knows the id (a call recorded
                // earlier), this one is admitted the ordinary way (a replay, or a conflict
                // with the recorded call); if not, the other claim will run, and this one is
                // a conflict with it.
                match self
                    .ledger
                    .is_admitted_async(&ctx.run_id, &call.call_id, self.inline())
                    .await
                {
                    Ok(true) => return (Late::No, None),
                    Ok(false) => match self.claim(ctx, call, digest, size, true) {
                        Ok(claim) => claim,
                        Err(late) => return (late, None),
                    },
                    Err(e) => return (Late::Fault(e.to_string()), None),
                }
            }
            Err(late) => return (late, None),
        };
        let known = self
            .ledger
            .is_admitted_async(&ctx.run_id, &call.call_id, self.inline())
            .await;
        self.settle(ctx, call, claim, known).await
    }

    /// Claim the call's id in `pending`, or say why not: the same id is running in this
    /// process (with these arguments, or others: a conflict, noted on the running call), or
    /// — unless `unsettled_is_conflict` — another proposal with other arguments holds a
    /// claim the ledger has not answered yet ([`Late::Unsettled`]).
    pub(super) fn claim(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        digest: &str,
        size: u64,
        unsettled_is_conflict: bool,
    ) -> Result<Claim<'_>, Late> {
        let key = (ctx.run_id.clone(), call.call_id.clone());
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(log) = pending.get_mut(&key) {
                // Running in this process right now.
                let late = match &log.late {
                    // Another caller's call: refused whatever its arguments.
                    Some(l) if !same_caller(&l.digest, digest) => {
                        log.events.push(asked_by(ctx, call));
                        Late::Foreign
                    }
                    Some(l) if l.digest != digest && !l.found_new && !unsettled_is_conflict => {
                        Late::Unsettled
                    }
                    Some(l) if l.digest != digest => {
                        log.events.push(PendingEvent::now(
                            Stage::Admit.as_str(),
                            Decision::Conflict.as_str(),
                            &format!(
                                "call id reused for tool {:?} with arguments sha256 {digest}, \
                                 {size} bytes; refused as duplicate_call_id, this call unchanged",
                                clip(&call.name, 64)
                            ),
                        ));
                        Late::Conflict
                    }
                    Some(_) => Late::Duplicate,
                    None => Late::No,
                };
                return Err(late);
            }
            // Claimed before the ledger is asked, and not under the lock while it is: a
            // duplicate arriving meanwhile waits for this call, as for any claim.
            pending.insert(
                key,
                CallLog {
                    late: Some(LateAdmission {
                        digest: digest.to_owned(),
                        size,
                        at_ms: now_ms(),
                        content: false,
                        found_new: false,
                    }),
                    ..CallLog::default()
                },
            );
        }
        // Released if this future is dropped before the claim's commit ends it.
        Ok(Claim::new(self, ctx, call))
    }

    /// What a claim becomes once the ledger said whether it knows the id.
    pub(super) async fn settle<'a>(
        &'a self,
        ctx: &RunContext,
        call: &ToolCall,
        claim: Claim<'a>,
        known: Result<bool, crate::ledger::LedgerError>,
    ) -> (Late, Option<Claim<'a>>) {
        match known {
            Ok(false) => {
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(late) = pending.get_mut(&claim.key).and_then(|l| l.late.as_mut()) {
                    late.found_new = true;
                }
                drop(pending);
                (Late::Claimed, Some(claim))
            }
            Ok(true) => {
                // Known to the ledger: admitted the ordinary way, which commits nothing of
                // this claim's. What a duplicate noted meanwhile (a conflict) is appended to
                // the known call now — left in `pending`, it would never be committed nor
                // freed, and a client repeating the race would grow the host's memory.
                let noted = claim.release();
                self.append_noted(ctx, call, noted).await;
                (Late::No, None)
            }
            Err(e) => {
                // Nothing can be recorded while the ledger fails: the noted decisions go with
                // the claim (the duplicate that noted them has had its answer).
                claim.release();
                (Late::Fault(e.to_string()), None)
            }
        }
    }

    /// Append decisions a duplicate noted on a claim, after the claim ended, to the call the
    /// ledger knows (one commit each: a rare path).
    pub(super) async fn append_noted(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        noted: Vec<PendingEvent>,
    ) {
        for event in noted {
            let write = Write::Event {
                run_id: ctx.run_id.clone(),
                call_id: call.call_id.clone(),
                event,
            };
            // The audit note of a refused duplicate; the call's own record does not hang
            // on it.
            let _ = self.ledger.commit(write, self.inline()).await;
        }
    }

    /// The arguments passed validation: store them if the ledger records content — now, or with
    /// the admission of a call admitted late.
    pub(super) fn note_content(&self, ctx: &RunContext, call: &ToolCall) {
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let key = (ctx.run_id.clone(), call.call_id.clone());
            if let Some(late) = pending.get_mut(&key).and_then(|log| log.late.as_mut()) {
                late.content = true;
                return;
            }
        }
        let _ = self
            .ledger
            .record_content(&ctx.run_id, &call.call_id, &call.arguments);
    }

    /// Stage 7's ledger step: mark the call started, committing its decisions so far — and
    /// its admission, if it was admitted late. `Err` carries the answer for a call that must
    /// not run: another process admitted the same id first, or the ledger failed.
    #[allow(clippy::result_large_err)]
    pub(super) async fn start(&self, ctx: &RunContext, call: &ToolCall) -> Result<(), ToolResult> {
        let Some((late, events, _)) = self.late_admission(ctx, call) else {
            let log = self.take_pending(ctx, call);
            let write = Write::MarkStarted {
                run_id: ctx.run_id.clone(),
                call_id: call.call_id.clone(),
                events: log.events,
            };
            let _ = self.ledger.commit(write, self.inline()).await;
            return Ok(());
        };
        let admitted = match self.ledger.late_write(
            &ctx.run_id,
            &call.call_id,
            &late.opening(call, &events),
            None,
        ) {
            Ok(write) => self.ledger.commit(write, self.inline()).await,
            Err(e) => Err(e),
        };
        let answer = match admitted {
            Ok(Applied::Admission(Admission::New { .. })) | Ok(Applied::Done) => {
                self.admitted(ctx, call);
                return Ok(());
            }
            Ok(Applied::Admission(other)) => self.lost_admission(ctx, call, other).await,
            Err(e) => self.host_fault(call, "the host could not record this call", &e.to_string()),
        };
        // Nothing of this call is ours to record.
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                (ctx.run_id.clone(), call.call_id.clone()),
                CallLog {
                    settled: true,
                    ..CallLog::default()
                },
            );
        Err(answer)
    }

    /// A call that runs without a committed start (a `read`): note when it started, for its
    /// outcome's commit.
    pub(super) fn note_start(&self, ctx: &RunContext, call: &ToolCall) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((ctx.run_id.clone(), call.call_id.clone()))
            .or_default()
            .started_at_ms = Some(now_ms());
    }

    /// For a call not admitted yet: its admission and the decisions to commit with it. The
    /// claim stays in `pending` until the admission is committed ([`Runtime::admitted`]), so
    /// that a duplicate in this process keeps waiting instead of running.
    pub(super) fn late_admission(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
    ) -> Option<(LateAdmission, Vec<PendingEvent>, Option<i64>)> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let log = pending.get_mut(&(ctx.run_id.clone(), call.call_id.clone()))?;
        let late = log.late.clone()?;
        Some((late, std::mem::take(&mut log.events), log.started_at_ms))
    }

    /// The late admission is committed: drop the claim, keeping any decision a duplicate added
    /// meanwhile for the call's next commit.
    pub(super) fn admitted(&self, ctx: &RunContext, call: &ToolCall) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ctx.run_id.clone(), call.call_id.clone());
        if let Some(log) = pending.remove(&key) {
            if !log.events.is_empty() {
                pending.insert(
                    key,
                    CallLog {
                        events: log.events,
                        ..CallLog::default()
                    },
                );
            }
        }
    }

    /// The answer when another process (another host, on a shared ledger) admitted this id
    /// between our read and our admission: its recorded result, or — while it runs — its
    /// result once recorded, as a duplicate on one host would get.
    pub(super) async fn lost_admission(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        admission: Admission,
    ) -> ToolResult {
        match admission {
            Admission::Replay(recorded) => recorded,
            Admission::InFlight => self.await_original(ctx, call).await,
            Admission::New { .. } => duplicate_call_id(call),
            Admission::Conflict => self.conflict(ctx, call).await,
        }
    }
}

/// A late claim held by one `run_call`: dropping it (the call finished, or its future was
/// dropped) releases the claim if no commit has ended it yet, so a duplicate in this process
/// never waits for a call nobody is running.
pub(super) struct Claim<'a> {
    runtime: &'a Runtime,
    key: (String, String),
    /// Cleared when the claim was ended otherwise: then dropping it touches nothing (the key
    /// may be another call's claim by then).
    armed: bool,
}

impl<'a> Claim<'a> {
    pub(super) fn new(runtime: &'a Runtime, ctx: &RunContext, call: &ToolCall) -> Claim<'a> {
        Claim {
            runtime,
            key: (ctx.run_id.clone(), call.call_id.clone()),
            armed: true,
        }
    }

    /// Drop the claim now and return the decisions a duplicate added to it meanwhile; the
    /// guard then does nothing more.
    fn release(mut self) -> Vec<PendingEvent> {
        self.armed = false;
        let mut pending = self
            .runtime
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        pending
            .remove(&self.key)
            .map(|log| log.events)
            .unwrap_or_default()
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut pending = self
            .runtime
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if pending.get(&self.key).is_some_and(|log| log.late.is_some()) {
            pending.remove(&self.key);
        }
    }
}

/// What a run keeps of one call until its next commit (see [`Runtime::admit_late`]).
#[derive(Debug, Default)]
pub(crate) struct CallLog {
    /// Stage decisions not committed yet, in order.
    pub(super) events: Vec<PendingEvent>,
    /// Set while the call is not admitted yet.
    pub(super) late: Option<LateAdmission>,
    /// Another process owns this id: record nothing.
    pub(super) settled: bool,
    /// When a call whose start is not committed (a `read`) started executing.
    pub(super) started_at_ms: Option<i64>,
}

/// A call found new and claimed in this process, to be admitted with its next commit.
#[derive(Debug, Clone)]
pub(super) struct LateAdmission {
    digest: String,
    size: u64,
    at_ms: i64,
    /// The arguments passed validation (content is stored only for those, as before).
    content: bool,
    /// The ledger said it does not know the id: this claim runs.
    found_new: bool,
}

impl LateAdmission {
    pub(super) fn opening<'a>(
        &'a self,
        call: &'a ToolCall,
        events: &'a [PendingEvent],
    ) -> Opening<'a> {
        Opening {
            tool: &call.name,
            args_digest: &self.digest,
            args_size: self.size,
            at_ms: self.at_ms,
            events,
            content: self.content.then_some(&call.arguments),
        }
    }
}

/// What [`Runtime::admit_late`] decided.
pub(super) enum Late {
    /// Admitted the ordinary way, first.
    No,
    /// New and claimed: run the stages, admit with the next commit.
    Claimed,
    /// The same call is running in this process: wait for its outcome.
    Duplicate,
    /// The id is running in this process with other arguments.
    Conflict,
    /// The id is another caller's, running in this process.
    Foreign,
    /// Another proposal with other arguments holds a claim on the id that the ledger has not
    /// answered yet (only from [`Runtime::claim`]).
    Unsettled,
    /// The ledger could not be read.
    Fault(String),
}
