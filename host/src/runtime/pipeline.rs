//! The stages of one call, in order: admit → resolve → validate → authorize → approve → limit →
//! execute → check → record. Each stage may end the call; every ending is recorded in the ledger
//! (committed) before it is returned, and nothing executes that an earlier stage stopped.

use std::time::Instant;

use crate::contract::bounds::check_call;
use crate::contract::{Code, RunContext, Status, ToolCall, ToolResult, Usage};
use crate::contract::{Decision, Risk, Stage};
use crate::ledger::{CallKey, Held, Inline, Journal, OpenCall};

use tracing::Instrument;

use super::diagnostics::Entry;
use super::limits::Refusal;
use super::owner::{admission_digest, foreign};
use super::{clip, trace, Runtime};
use crate::registry::Tool;
use crate::telemetry::Laps;

impl Runtime {
    /// Run one proposed call through every stage. `approval_token` is what a human minted for
    /// this exact call (tool, arguments, principal, tenant, run), if any. A call whose tool name,
    /// call id, run id, principal or tenant is past its bound (`contract::bounds`) is answered
    /// before admission and not recorded: what it would store is what is refused.
    pub async fn run_call(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        approval_token: Option<&str>,
    ) -> ToolResult {
        // Bounds first: nothing of an oversized name or key is written anywhere.
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        let span = trace::call_span(ctx, call);
        let started = Instant::now();
        let result = self
            .run_checked(ctx, call, approval_token)
            .instrument(span.clone())
            .await;
        trace::finish(&span, &result);
        trace::count(&self.registry, call, &result, started);
        result
    }

    /// [`run_call`](Self::run_call) after the bounds check, inside the call's span.
    async fn run_checked(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        approval_token: Option<&str>,
    ) -> ToolResult {
        let _in_flight = InFlight::enter(&self.in_flight);
        let mut laps = Laps::start();
        // 1. admit (before anything else looks at the call). A call that may ask a human is
        // admitted first, so that a duplicate cannot ask a second time; any other is admitted
        // with its first commit (`ledger/journal.rs`).
        let (digest, size, args_size) = admission_digest(ctx, call);
        let late = !self
            .visible_tool(&ctx.caller, &call.name)
            .is_some_and(|t| crate::policy::needs_approval(t.approval, t.risk));
        let opening = open_call(ctx, call, digest, size, late);
        let mut journal = match self.open(ctx, call, opening, &mut laps).await {
            Ok(journal) => journal,
            Err(answer) => return answer,
        };
        let result = self
            .stages(
                ctx,
                call,
                &mut journal,
                &mut laps,
                approval_token,
                Some(args_size),
            )
            .await;
        let recorded = self
            .record(ctx, call, journal, result)
            .instrument(tracing::debug_span!("record"))
            .await;
        laps.lap("record");
        recorded
    }

    /// Record a call that ended before the pipeline could look at it — its arguments never
    /// arrived whole, or not unambiguously (a repeated key) — with the given result (its
    /// message is the validate stage's recorded reason), so it too has exactly one recorded outcome.
    /// A repeated id replays what was recorded, as in [`Runtime::run_call`].
    pub async fn refuse(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        result: ToolResult,
    ) -> ToolResult {
        self.refuse_at(ctx, call, Stage::Validate, result).await
    }

    /// [`refuse`](Self::refuse), with the refusal recorded as `stage`'s decision (e.g. the
    /// agent loop's repeat guard, a `limit`).
    pub async fn refuse_at(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        stage: Stage,
        result: ToolResult,
    ) -> ToolResult {
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        let span = trace::call_span(ctx, call);
        let recorded = async {
            let _in_flight = InFlight::enter(&self.in_flight);
            let (digest, size, _) = admission_digest(ctx, call);
            let opening = open_call(ctx, call, digest, size, false);
            match self.ledger.open_call(opening, self.inline()).await {
                Ok(mut journal) => {
                    let code = result.code.map_or("failed", |c| c.as_str());
                    journal.note(stage, code, super::clip(&result.message, 256));
                    self.record(ctx, call, journal, result).await
                }
                // A refusal does not wait for the call it copies.
                Err(Held::InFlight) => duplicate_call_id(call),
                Err(held) => self.held(ctx, call, held).await,
            }
        };
        let started = Instant::now();
        let result = recorded.instrument(span.clone()).await;
        trace::finish(&span, &result);
        trace::count(&self.registry, call, &result, started);
        result
    }

    /// The answer to a call whose id the ledger holds (or could not read).
    pub(super) async fn held(&self, ctx: &RunContext, call: &ToolCall, held: Held) -> ToolResult {
        match held {
            Held::Replay(recorded) => *recorded,
            Held::InFlight => self
                .await_original(ctx, call)
                .await
                .unwrap_or_else(|| super::copies::still_running(call)),
            Held::Reused => duplicate_call_id(call),
            Held::Foreign => foreign(call),
            Held::Fault(e) => self.host_fault(
                ctx,
                call,
                "the host could not record this call",
                &e.to_string(),
            ),
        }
    }

    /// Stages 2–8, each decision noted on the call's journal; the caller records whatever
    /// comes back. `args_size` is the size of the arguments' canonical form, when admission
    /// has measured it.
    async fn stages(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        journal: &mut Journal<'_>,
        laps: &mut Laps,
        approval_token: Option<&str>,
        args_size: Option<u64>,
    ) -> ToolResult {
        // 2. resolve, as the caller sees the tools: one the policy hides from it is answered
        // as no tool at all (the ledger says which, for the operator)
        let resolved =
            tracing::debug_span!("resolve").in_scope(|| self.visible_tool(&ctx.caller, &call.name));
        laps.lap("resolve");
        let Some(tool) = resolved else {
            let message = format!("there is no tool named {:?}", clip(&call.name, 64));
            let detail = match self.registry.get(&call.name) {
                Some(_) => "hidden from this caller by policy",
                None => "",
            };
            let code = Code::UnknownTool;
            return end(journal, call, Stage::Resolve, code, detail, message);
        };
        // 3. validate: size cap, JSON Schema, then the exact WIT types
        let validated = tracing::debug_span!("validate")
            .in_scope(|| self.validate(tool, &call.arguments, args_size));
        laps.lap("validate");
        let params = match validated {
            Ok(p) => p,
            Err(message) => {
                let code = Code::InvalidArguments;
                return end(journal, call, Stage::Validate, code, "", message);
            }
        };
        journal.keep_content(&call.arguments);
        // 4. authorize, with the trusted subject only
        let authorized = {
            let _stage = tracing::debug_span!("authorize").entered();
            self.authorize_call(ctx, call, tool, journal)
        };
        laps.lap("authorize");
        if let Err(refused) = authorized {
            return refused;
        }
        // 5. approve
        if crate::policy::needs_approval(tool.approval, tool.risk) {
            let approved = self
                .approve(ctx, call, tool, approval_token, journal)
                .instrument(tracing::debug_span!("approve"))
                .await;
            laps.lap("approve");
            if let Err(r) = approved {
                return *r;
            }
        }
        // 6. limit: the run's budgets, the principal's rate, a slot on this host, time left
        let limited = {
            let _stage = tracing::debug_span!("limit").entered();
            self.limit(ctx, call, tool, journal)
        };
        laps.lap("limit");
        let _slot = match limited {
            Ok(slot) => slot,
            Err(refused) => return refused,
        };
        // 7. execute. A read tool's start is not committed (durability by risk, see
        // `docs/pipeline.md`): its decisions and, if it was admitted late, its admission are
        // committed with its outcome. Every other call is admitted and marked started first.
        if tool.risk == Risk::Read {
            journal.running();
        } else if let Err(held) = journal.start(self.inline()).await {
            return self.held(ctx, call, held).await;
        }
        let exec = self
            .execute_in(ctx, &call.call_id, tool, &params)
            .instrument(tracing::debug_span!("execute"))
            .await;
        laps.lap("execute");
        // 8. check
        let result =
            tracing::debug_span!("check").in_scope(|| self.check(&ctx.run_id, call, tool, exec));
        laps.lap("check");
        let decision = result
            .code
            .map_or(Decision::Completed.as_str(), |c| c.as_str());
        journal.note(Stage::Execute, decision, "");
        result
    }

    /// Stage 4: the policy's decision for the trusted subject, noted either way.
    #[allow(clippy::result_large_err)]
    fn authorize_call(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        tool: &Tool,
        journal: &mut Journal<'_>,
    ) -> Result<(), ToolResult> {
        let subject = &ctx.caller;
        let decision =
            self.policy
                .authorize(subject, tool.name.as_str(), tool.risk, &call.arguments);
        if !decision.allowed {
            let (reason, message) = (&decision.reason, decision.message);
            let code = Code::Unauthorized;
            return Err(end(journal, call, Stage::Authorize, code, reason, message));
        }
        let allowed = Decision::Allowed.as_str();
        journal.note(Stage::Authorize, allowed, &decision.reason);
        Ok(())
    }

    /// Stage 6: take from the run's budgets and the principal's rate, then a slot on this
    /// host (held until the call ends); a call cancelled or out of time by now does not start.
    #[allow(clippy::result_large_err)]
    fn limit(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        tool: &Tool,
        journal: &mut Journal<'_>,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, ToolResult> {
        let refused = |journal: &mut Journal<'_>, code, detail, message: &str| {
            Err(end(journal, call, Stage::Limit, code, detail, message))
        };
        match self.take_limits(ctx, tool.name.as_str()) {
            Ok(None) => {}
            Ok(Some(Refusal::Budget(why))) => {
                return refused(journal, Code::BudgetExhausted, why, why);
            }
            Ok(Some(Refusal::Rate)) => {
                let message = "too many calls; try again shortly";
                return refused(journal, Code::RateLimited, "principal rate", message);
            }
            Err(e) => {
                return Err(self.host_fault(
                    ctx,
                    call,
                    "the host could not check this run's limits; the call was not run",
                    &format!("limits in the ledger: {e}"),
                ))
            }
        }
        let Some(slot) = self.concurrency.try_slot() else {
            let message = "the host is busy; try again shortly";
            return refused(journal, Code::RateLimited, "host concurrency", message);
        };
        if ctx.cancel.is_cancelled() {
            let cancelled_code = Code::Cancelled.as_str();
            journal.note(Stage::Execute, cancelled_code, "before start");
            return Err(cancelled(call, Status::Cancelled, Code::Cancelled));
        }
        if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
            let detail = "run deadline passed before start";
            let message = "the run's time is up";
            let code = Code::DeadlineExceeded;
            return Err(end(journal, call, Stage::Execute, code, detail, message));
        }
        Ok(slot)
    }

    /// Whether this call's commits may run on its own thread when the ledger is idle: only
    /// while there are no more calls in flight than async workers to run them, so a commit
    /// never holds up another call (see `ledger/group.rs`).
    pub(super) fn inline(&self) -> Inline {
        let workers = tokio::runtime::Handle::try_current()
            .map_or(1, |h| h.metrics().num_workers())
            .max(1);
        if self.in_flight.load(std::sync::atomic::Ordering::Relaxed) <= workers {
            Inline::Allowed
        } else {
            Inline::Never
        }
    }

    pub(super) fn host_fault(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        message: &str,
        detail: &str,
    ) -> ToolResult {
        let mut r = ToolResult::failed(call, Code::HostError, message, Usage::default());
        r.diagnostic_id = Some(self.diagnostics.record(Entry {
            run_id: &ctx.run_id,
            tool: &call.name,
            call_id: &call.call_id,
            detail,
            stderr: b"",
        }));
        r
    }
}

/// Counts a call in flight for as long as it lives (dropped with its future).
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> InFlight<'a> {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::telemetry::metrics().call_entered();
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        crate::telemetry::metrics().call_left();
    }
}

/// End the call at `stage` with `code`: the decision is noted with `detail` (operator text),
/// and the model is told `message`.
fn end(
    journal: &mut Journal<'_>,
    call: &ToolCall,
    stage: Stage,
    code: Code,
    detail: &str,
    message: impl Into<String>,
) -> ToolResult {
    journal.note(stage, code.as_str(), detail);
    ToolResult::failed(call, code, message, Usage::default())
}

/// What the ledger is asked to open for a call: its admission key (the digest from
/// [`admission_digest`], which binds the caller) and who asks.
pub(super) fn open_call(
    ctx: &RunContext,
    call: &ToolCall,
    digest: String,
    size: u64,
    late: bool,
) -> OpenCall {
    OpenCall {
        key: CallKey {
            run_id: ctx.run_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            args_digest: digest,
            args_size: size,
        },
        caller: ctx.caller.clone(),
        late,
    }
}

pub(super) fn duplicate_call_id(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::DuplicateCallId,
        "this call id was already used for a different call",
        Usage::default(),
    )
}

pub(super) fn cancelled(call: &ToolCall, status: Status, code: Code) -> ToolResult {
    let mut r = ToolResult::failed(call, code, "the call was cancelled", Usage::default());
    r.status = status;
    r
}
