//! Reconciliation: an operator's record of what a call that ended `outcome_unknown` really did.
//!
//! A host that stops mid-call leaves a call whose effect nobody saw; recovery closes it as
//! `outcome_unknown` and it is never run again (`recovery.rs`). An operator who checked the
//! downstream system records what happened with `toolhost reconcile`:
//! - the call's row keeps its `outcome_unknown` result and its `recover` event;
//! - the reconciliation is a row of its own (table `reconciliations`) and a `reconcile` event
//!   appended to the call's trail, committed in one transaction;
//! - a replay of the call answers the reconciled result, marked [`Reconciled`];
//! - a call has at most one reconciliation: a second one is [`LedgerError::AlreadyReconciled`].
//!
//! Only a call whose status is `outcome_unknown` can be reconciled. Who may reconcile is
//! whoever can open the ledger (an operator command, never a model or an MCP client); the
//! output of a `completed` reconciliation is checked against the tool's output schema by the
//! runtime before it reaches the ledger.

use serde_json::Value;

use super::codec::now_ms;
use super::events::{event_lines, CallRecord};
use super::outcome::Outcome;
use super::verdicts::{
    Reconciliation, Settled, UnknownFilter, Verdict, MAX_LISTED_UNKNOWN, MAX_RECONCILE_TEXT_BYTES,
};
use super::{Ledger, LedgerError};
use toolhost_contract::{Code, Reconciled, Stage, Status, ToolCall, ToolResult, Usage};

impl Ledger {
    /// One call as the listing shows it; `UnknownCall` if it was never admitted.
    pub fn call(&self, run_id: &str, call_id: &str) -> Result<CallRecord, LedgerError> {
        self.store
            .call(run_id, call_id)?
            .ok_or_else(|| LedgerError::unknown(run_id, call_id))
    }

    /// The calls that ended `outcome_unknown` (and, unless `filter.include_reconciled`, have no
    /// reconciliation yet), oldest first.
    pub fn unknown_calls(&self, filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError> {
        let mut filter = filter.clone();
        filter.limit = filter.limit.clamp(1, MAX_LISTED_UNKNOWN);
        self.store.unknown_calls(&filter)
    }

    /// Record `reconciliation` for the call `(run_id, call_id)`, which must have ended
    /// `outcome_unknown` and have no reconciliation yet, and return the result a replay of
    /// it answers from now on. The output is not checked here: the runtime checks it against
    /// the tool's output schema first.
    pub fn reconcile(
        &self,
        run_id: &str,
        call_id: &str,
        reconciliation: &Reconciliation,
    ) -> Result<ToolResult, LedgerError> {
        for (field, text) in [
            ("operator", &reconciliation.operator),
            ("reason", &reconciliation.why),
        ] {
            if text.trim().is_empty() {
                return Err(LedgerError::BadReconciliation(format!(
                    "the {field} is empty"
                )));
            }
            if text.len() > MAX_RECONCILE_TEXT_BYTES {
                return Err(LedgerError::TooLong {
                    field,
                    max: MAX_RECONCILE_TEXT_BYTES,
                });
            }
        }
        if let Verdict::Failed(code @ (Code::ApprovalRequired | Code::ConfirmedNotRun)) =
            reconciliation.verdict
        {
            return Err(LedgerError::BadReconciliation(format!(
                "{code} cannot be recorded as a failure code: {}",
                "approval_required needs a handle, confirmed_not_run is its own verdict"
            )));
        }
        let record = self.call(run_id, call_id)?;
        if record.status != Some(Status::OutcomeUnknown) {
            let ended = record.status.map_or("no outcome yet", |s| s.as_str());
            return Err(LedgerError::NotOutcomeUnknown {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
                ended: ended.to_owned(),
            });
        }
        if record.reconciliation.is_some() {
            return Err(LedgerError::reconciled(run_id, call_id));
        }
        let at_ms = now_ms();
        let result = reconciled_result(call_id, &record.tool, &reconciliation.verdict, at_ms);
        let outcome = Outcome::of(&result)?;
        let decision = result
            .code
            .map_or(Status::Completed.as_str(), |c| c.as_str());
        let detail = format!(
            "by {}: {}; {}",
            reconciliation.operator,
            reconciliation.why,
            outcome.detail()
        );
        let event = event_lines([(at_ms, Stage::Reconcile.as_str(), decision, detail.as_str())])?;
        let settled = Settled::new(outcome, reconciliation, at_ms, event);
        self.store.reconcile(run_id, call_id, &settled)?;
        Ok(result)
    }
}

/// The result a reconciled call replays: the verdict, a model-safe message that says an
/// operator recorded it, and the [`Reconciled`] mark. Usage is zero: nothing ran.
fn reconciled_result(call_id: &str, tool: &str, verdict: &Verdict, at_ms: i64) -> ToolResult {
    let call = ToolCall {
        call_id: call_id.to_owned(),
        name: tool.to_owned(),
        arguments: Value::Null,
    };
    let mut result = match verdict {
        Verdict::Completed(output) => {
            let mut r = ToolResult::completed(&call, output.clone(), Usage::default());
            r.message = "completed; recorded by an operator after the host lost track of this \
                         call"
                .into();
            r
        }
        Verdict::Failed(code) => ToolResult::failed(
            &call,
            *code,
            format!(
                "failed ({code}); recorded by an operator after the host lost track of this call"
            ),
            Usage::default(),
        ),
        Verdict::ConfirmedNotRun => ToolResult::failed(
            &call,
            Code::ConfirmedNotRun,
            "an operator confirmed that this call never took effect; a new call may try again",
            Usage::default(),
        ),
    };
    result.reconciled = Some(Reconciled { at_ms });
    result
}
