//! Stage 6, limit: the run's budgets and the principal's rate, taken from the ledger (which
//! keeps them where every host on it sees them, `crates/ledger-store/src/limits.rs`), then a slot on this host;
//! a call cancelled or out of time by now does not start.

use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use toolhost_contract::{Code, RunContext, Stage, Status};
use toolhost_ledger::{Budget, LedgerError};

use super::super::endings::{cancelled, end, host_fault, Ended};
use super::super::guards::{RUN_CALLS_EXHAUSTED, TOOL_CALLS_EXHAUSTED};
use super::super::Runtime;
use super::Call;

/// Why the limit stage refuses a call.
enum Refusal {
    Budget(&'static str),
    Rate,
}

/// A slot on this host, held until the call ends; or the ending that says which limit.
pub(crate) fn limit(rt: &Runtime, c: &mut Call<'_>, tool: &str) -> Ended<OwnedSemaphorePermit> {
    let (ctx, call) = (c.ctx, c.call);
    let journal = &mut c.journal;
    match take_limits(rt, ctx, tool) {
        Ok(None) => {}
        Ok(Some(Refusal::Budget(why))) => {
            return Err(end(
                journal,
                call,
                Stage::Limit,
                Code::BudgetExhausted,
                why,
                why,
            ));
        }
        Ok(Some(Refusal::Rate)) => {
            let message = "too many calls; try again shortly";
            let code = Code::RateLimited;
            return Err(end(
                journal,
                call,
                Stage::Limit,
                code,
                "principal rate",
                message,
            ));
        }
        Err(e) => {
            return Err(Box::new(host_fault(
                &rt.diagnostics,
                ctx,
                call,
                "the host could not check this run's limits; the call was not run",
                &format!("limits in the ledger: {e}"),
            )))
        }
    }
    let Some(slot) = rt.concurrency.try_slot() else {
        let message = "the host is busy; try again shortly";
        let code = Code::RateLimited;
        return Err(end(
            journal,
            call,
            Stage::Limit,
            code,
            "host concurrency",
            message,
        ));
    };
    if ctx.cancel.is_cancelled() {
        journal.note(Stage::Execute, Code::Cancelled.as_str(), "before start");
        return Err(Box::new(cancelled(
            call,
            Status::Cancelled,
            Code::Cancelled,
        )));
    }
    if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
        let detail = "run deadline passed before start";
        let message = "the run's time is up";
        let code = Code::DeadlineExceeded;
        return Err(end(journal, call, Stage::Execute, code, detail, message));
    }
    Ok(slot)
}

/// Take one call from the run's budgets and the principal's rate.
fn take_limits(rt: &Runtime, ctx: &RunContext, tool: &str) -> Result<Option<Refusal>, LedgerError> {
    let budgets = &ctx.budgets;
    if budgets.max_calls.is_some() || budgets.max_calls_per_tool.is_some() {
        match rt.ledger.take_budget(&ctx.run_id, tool, budgets)? {
            None => {}
            Some(Budget::Run) => return Ok(Some(Refusal::Budget(RUN_CALLS_EXHAUSTED))),
            Some(Budget::Tool) => return Ok(Some(Refusal::Budget(TOOL_CALLS_EXHAUSTED))),
        }
    }
    if let Some((rate, burst)) = rt.rate.settings() {
        if !rt.ledger.take_rate(&ctx.caller.principal, rate, burst)? {
            return Ok(Some(Refusal::Rate));
        }
    }
    Ok(None)
}
