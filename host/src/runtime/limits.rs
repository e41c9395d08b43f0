//! Stage 6's shared part: a call's run budgets and its principal's rate, taken from the
//! ledger, which keeps them where every host on it sees them (`ledger/limits.rs`).

use crate::contract::RunContext;
use crate::ledger::{Budget, LedgerError};

use super::guards::{RUN_CALLS_EXHAUSTED, TOOL_CALLS_EXHAUSTED};
use super::Runtime;

/// Why the limit stage refuses a call.
pub(super) enum Refusal {
    Budget(&'static str),
    Rate,
}

impl Runtime {
    /// Take one call from the run's budgets and the principal's rate.
    pub(super) fn take_limits(
        &self,
        ctx: &RunContext,
        tool: &str,
    ) -> Result<Option<Refusal>, LedgerError> {
        let budgets = &ctx.budgets;
        if budgets.max_calls.is_some() || budgets.max_calls_per_tool.is_some() {
            match self.ledger.take_budget(&ctx.run_id, tool, budgets)? {
                None => {}
                Some(Budget::Run) => return Ok(Some(Refusal::Budget(RUN_CALLS_EXHAUSTED))),
                Some(Budget::Tool) => return Ok(Some(Refusal::Budget(TOOL_CALLS_EXHAUSTED))),
            }
        }
        if let Some((rate, burst)) = self.rate.settings() {
            if !self.ledger.take_rate(&ctx.caller.principal, rate, burst)? {
                return Ok(Some(Refusal::Rate));
            }
        }
        Ok(None)
    }
}
