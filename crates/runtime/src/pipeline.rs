//! The order of one call's stages (`stages/`, one file each): admit → resolve → validate →
//! authorize → approve → limit → execute → check → record. Each stage may end the call; every
//! ending is recorded in the ledger (committed) before it is returned, and nothing executes
//! that an earlier stage stopped.

use std::time::Instant;

use tracing::Instrument;

use toolhost_contract::bounds::check_call;
use toolhost_contract::{Decision, RunContext, Stage, ToolCall, ToolResult};
use toolhost_ledger::Held;
use toolhost_telemetry::Laps;

use super::endings::duplicate_call_id;
use super::inflight::InFlight;
use super::prepared::debug_check;
use super::stages::admit::{admit, answered, open_call};
use super::stages::approve::approve;
use super::stages::authorize::authorize;
use super::stages::check::check;
use super::stages::execute::execute;
use super::stages::limit::limit;
use super::stages::record::record;
use super::stages::resolve::resolve;
use super::stages::validate::validate;
use super::stages::Call;
use super::{clip, trace, Prepared, Runtime};

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
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        let prepared = self.prepare(&ctx.caller, call);
        self.run_prepared(ctx, call, &prepared, approval_token)
            .await
    }

    /// [`run_call`](Self::run_call) for a call its front door already prepared
    /// ([`Runtime::prepare`] for `ctx`'s caller and this call's tool and arguments).
    pub async fn run_prepared(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        prepared: &Prepared,
        approval_token: Option<&str>,
    ) -> ToolResult {
        // Bounds first: nothing of an oversized name or key is written anywhere.
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        debug_check(prepared, call);
        let span = trace::call_span(ctx, call);
        let started = Instant::now();
        let result = self
            .run_checked(ctx, call, prepared, approval_token)
            .instrument(span.clone())
            .await;
        trace::finish(&span, &result);
        trace::count(prepared, &result, started);
        result
    }

    /// [`run_prepared`](Self::run_prepared) after the bounds check, inside the call's span.
    async fn run_checked(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        prepared: &Prepared,
        token: Option<&str>,
    ) -> ToolResult {
        let _in_flight = InFlight::enter(&self.in_flight);
        let mut laps = Laps::start();
        // 1. admit (before anything else looks at the call). A call that may ask a human is
        // admitted first, so that a duplicate cannot ask a second time; any other is admitted
        // with its first commit (`crates/ledger/src/journal.rs`).
        let late = !prepared
            .tool()
            .is_some_and(|t| toolhost_policy::needs_approval(t.approval, t.risk));
        let journal = match admit(self, ctx, call, (prepared, late), &mut laps).await {
            Ok(journal) => journal,
            Err(answer) => return answer,
        };
        let mut c = Call {
            ctx,
            call,
            prepared,
            journal,
            laps,
            token,
        };
        let result = match self.stages(&mut c).await {
            Ok(result) | Err(result) => result,
        };
        let Call {
            journal, mut laps, ..
        } = c;
        let recorded = record(self, (ctx, call, prepared), journal, *result)
            .instrument(tracing::debug_span!("record"))
            .await;
        laps.lap("record");
        recorded
    }

    /// Stages 2–8, each decision noted on the call's journal; the caller records whatever
    /// comes back (`Err`: a stage ended the call).
    async fn stages(&self, c: &mut Call<'_>) -> Result<Box<ToolResult>, Box<ToolResult>> {
        // 2. resolve, as the caller sees the tools
        let resolved = tracing::debug_span!("resolve").in_scope(|| resolve(c));
        c.laps.lap("resolve");
        let tool = resolved?;
        // 3. validate: size cap, JSON Schema, then the exact WIT types
        let validated = tracing::debug_span!("validate").in_scope(|| validate(c, tool));
        c.laps.lap("validate");
        let params = validated?;
        c.journal.keep_content(&c.call.arguments);
        // 4. authorize, with the trusted caller only
        let authorized = tracing::debug_span!("authorize").in_scope(|| authorize(self, c, tool));
        c.laps.lap("authorize");
        authorized?;
        // 5. approve
        if toolhost_policy::needs_approval(tool.approval, tool.risk) {
            let approved = approve(self, c, tool)
                .instrument(tracing::debug_span!("approve"))
                .await;
            c.laps.lap("approve");
            approved?;
        }
        // 6. limit: the run's budgets, the principal's rate, a slot on this host, time left
        let limited = tracing::debug_span!("limit").in_scope(|| limit(self, c, tool.name.as_str()));
        c.laps.lap("limit");
        let _slot = limited?;
        // 7. execute
        let exec = execute(self, c, tool, &params).await;
        c.laps.lap("execute");
        let exec = exec?;
        // 8. check
        let result = tracing::debug_span!("check")
            .in_scope(|| check(self, &c.ctx.run_id, c.call, tool, exec));
        c.laps.lap("check");
        let decision = result
            .code
            .map_or(Decision::Completed.as_str(), |code| code.as_str());
        c.journal.note(Stage::Execute, decision, "");
        Ok(Box::new(result))
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
        let prepared = self.canonical_only(call);
        self.refuse_prepared(ctx, call, &prepared, stage, result)
            .await
    }

    /// [`refuse_at`](Self::refuse_at) for a call its front door already prepared.
    pub async fn refuse_prepared(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        prepared: &Prepared,
        stage: Stage,
        result: ToolResult,
    ) -> ToolResult {
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        debug_check(prepared, call);
        let span = trace::call_span(ctx, call);
        let recorded = async {
            let _in_flight = InFlight::enter(&self.in_flight);
            let opening = open_call(ctx, call, prepared, false);
            match self.ledger.open_call(opening, self.inline()).await {
                Ok(mut journal) => {
                    let code = result.code.map_or("failed", |c| c.as_str());
                    journal.note(stage, code, clip(&result.message, 256));
                    record(self, (ctx, call, prepared), journal, result).await
                }
                // A refusal does not wait for the call it copies.
                Err(Held::InFlight) => duplicate_call_id(call),
                Err(held) => answered(self, ctx, call, prepared, held).await,
            }
        };
        let started = Instant::now();
        let result = recorded.instrument(span.clone()).await;
        trace::finish(&span, &result);
        trace::count(prepared, &result, started);
        result
    }
}
