//! Reconciliation from the runtime's side: an operator's record of what a call that ended
//! `outcome_unknown` did, checked as the check stage checks a tool's output before the ledger
//! takes it (`crates/ledger/src/reconcile.rs` stores it).

use toolhost_contract::ToolResult;
use toolhost_ledger::{LedgerError, Reconciliation, Verdict};

use super::Runtime;

/// Why a reconciliation was refused. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The call's tool is not in this config, so its output schema cannot be checked.
    #[error("the call's tool {0:?} is not configured here, so its output cannot be checked against its schema; reconcile it with the config that serves it")]
    UnknownTool(String),
    /// The recorded output is larger than the tool may return.
    #[error("the output is {size} bytes as JSON; the tool may return at most {max}")]
    OutputTooLarge { size: u64, max: u64 },
    /// The recorded output does not match the tool's output schema.
    #[error("the output does not match the tool's output schema: {0}")]
    InvalidOutput(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl Runtime {
    /// Record what an operator found the call `(run_id, call_id)` did; it must have ended
    /// `outcome_unknown` and have no reconciliation yet. A `completed` output must be what the
    /// tool could have returned: within its output limit and valid against its output schema.
    /// Returns the result a replay of the call answers from now on.
    pub fn reconcile(
        &self,
        run_id: &str,
        call_id: &str,
        reconciliation: &Reconciliation,
    ) -> Result<ToolResult, ReconcileError> {
        if let Verdict::Completed(output) = &reconciliation.verdict {
            let record = self.ledger.call(run_id, call_id)?;
            let registry = self.registry();
            let tool = registry
                .get(&record.tool)
                .ok_or_else(|| ReconcileError::UnknownTool(record.tool.clone()))?;
            let size = toolhost_contract::measure::json_len(output);
            if size > tool.limits.output_bytes {
                return Err(ReconcileError::OutputTooLarge {
                    size,
                    max: tool.limits.output_bytes,
                });
            }
            if let Err(violations) = tool.output_validator().validate(output) {
                let detail: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                return Err(ReconcileError::InvalidOutput(detail.join("; ")));
            }
        }
        Ok(self.ledger.reconcile(run_id, call_id, reconciliation)?)
    }
}
