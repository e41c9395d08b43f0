//! Stage 6's shared part: a call's run budgets and its principal's rate, taken in the ledger
//! when the ledger keeps them for every host (PostgreSQL, `docs/ledger-postgres.md`), else in
//! this host's memory (`guards.rs`).

use std::time::Instant;

use crate::contract::{Budgets, RunContext};
use crate::ledger::postgres::Budget;
use crate::ledger::LedgerError;

use super::guards::{RUN_CALLS_EXHAUSTED, TOOL_CALLS_EXHAUSTED};
use super::Runtime;

/// Why the limit stage refuses a call.
pub(super) enum Refusal {
    Budget(&'static str),
    Rate,
}

impl Runtime {
    /// Take one call from the run's budgets and the principal's rate: in the ledger when it
    /// keeps them for every host (PostgreSQL), else in this host's memory.
    pub(super) fn take_limits(
        &self,
        ctx: &RunContext,
        tool: &str,
    ) -> Result<Option<Refusal>, LedgerError> {
        let Some(shared) = self.ledger.shared_limits() else {
            if let Err(why) = self.budgets.take(&ctx.run_id, tool, &ctx.budgets) {
                return Ok(Some(Refusal::Budget(why)));
            }
            return Ok((!self.rate.allow(&ctx.principal, Instant::now())).then_some(Refusal::Rate));
        };
        let Budgets {
            max_calls,
            max_calls_per_tool,
        } = ctx.budgets;
        if max_calls.is_some() || max_calls_per_tool.is_some() {
            match shared.take_budget(&ctx.run_id, tool, max_calls, max_calls_per_tool)? {
                None => {}
                Some(Budget::Run) => return Ok(Some(Refusal::Budget(RUN_CALLS_EXHAUSTED))),
                Some(Budget::Tool) => return Ok(Some(Refusal::Budget(TOOL_CALLS_EXHAUSTED))),
            }
        }
        if let Some((rate, burst)) = self.rate.settings() {
            if !shared.take_rate(&ctx.principal, rate, burst)? {
                return Ok(Some(Refusal::Rate));
            }
        }
        Ok(None)
    }
}
