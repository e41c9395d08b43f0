//! Stage 9, record: the outcome is committed before it is returned. When the ledger cannot
//! take it (a database outage), the ledger keeps the outcome of an admitted call and records it
//! as soon as a later commit shows the ledger reachable again (`crates/ledger/src/owed.rs`); the model is
//! told the outcome is unknown.

use toolhost_contract::{RunContext, Status, ToolCall, ToolResult};
use toolhost_ledger::{Journal, Unfinished};

use super::super::endings::host_fault;
use super::super::{Prepared, Runtime};
use super::admit::answered;

/// Commit the outcome before it is returned. If that fails the effect may have happened but
/// is not recorded: say so rather than pretend.
pub(crate) async fn record(
    rt: &Runtime,
    (ctx, call, prepared): (&RunContext, &ToolCall, &Prepared),
    journal: Journal<'_>,
    result: ToolResult,
) -> ToolResult {
    match journal.finish(&result, rt.inline()).await {
        Ok(()) => result,
        // Another process admitted this id first: its answer, not this call's.
        Err(Unfinished::Lost(held)) => answered(rt, ctx, call, prepared, held).await,
        Err(Unfinished::Unrecorded(error)) => {
            let detail = error.to_string();
            let message = "the host could not record this call's outcome";
            let mut r = host_fault(&rt.diagnostics, ctx, call, message, &detail);
            r.status = Status::OutcomeUnknown;
            r
        }
    }
}
