//! Stage 9, record: the outcome is committed before it is returned. When the ledger cannot
//! take it (a database outage), the ledger keeps the outcome of an admitted call and records it
//! as soon as a later commit shows the ledger reachable again (`ledger/owed.rs`); the model is
//! told the outcome is unknown.

use crate::contract::{RunContext, Status, ToolCall, ToolResult};
use crate::ledger::{Journal, Unfinished};

use super::Runtime;

impl Runtime {
    /// Stage 9: commit the outcome before it is returned. If that fails the effect may have
    /// happened but is not recorded: say so rather than pretend.
    pub(super) async fn record(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        journal: Journal<'_>,
        result: ToolResult,
    ) -> ToolResult {
        match journal.finish(&result, self.inline()).await {
            Ok(()) => result,
            // Another process admitted this id first: its answer, not this call's.
            Err(Unfinished::Lost(held)) => self.held(ctx, call, held).await,
            Err(Unfinished::Unrecorded(error)) => {
                let detail = error.to_string();
                let mut r = self.host_fault(
                    ctx,
                    call,
                    "the host could not record this call's outcome",
                    &detail,
                );
                r.status = Status::OutcomeUnknown;
                r
            }
        }
    }
}
