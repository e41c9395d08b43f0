//! The endings that more than one stage gives a call: each a [`ToolResult`] with a fixed,
//! model-safe message (the operator's detail goes to the journal or the diagnostic log).

use toolhost_contract::{Code, RunContext, Stage, Status, ToolCall, ToolResult, Usage};
use toolhost_ledger::Journal;
use toolhost_policy::UNAUTHORIZED_MESSAGE;

use super::diagnostics::{Diagnostics, Entry};

/// A stage's answer: go on with `T`, or end the call with this result (already noted on the
/// journal).
pub(super) type Ended<T> = Result<T, Box<ToolResult>>;

/// End the call at `stage` with `code`: the decision is noted with `detail` (operator text),
/// and the model is told `message`.
pub(super) fn end(
    journal: &mut Journal<'_>,
    call: &ToolCall,
    stage: Stage,
    code: Code,
    detail: &str,
    message: impl Into<String>,
) -> Box<ToolResult> {
    journal.note(stage, code.as_str(), detail);
    Box::new(ToolResult::failed(call, code, message, Usage::default()))
}

/// A recorded result, marked as answered again without running anything.
pub(super) fn replayed(mut recorded: ToolResult) -> ToolResult {
    recorded.replayed = true;
    recorded
}

/// The answer to an id another call of the same caller used with other arguments.
pub(super) fn duplicate_call_id(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::DuplicateCallId,
        "this call id was already used for a different call",
        Usage::default(),
    )
}

/// The answer to a copy whose original did not end while it waited (or that could not wait).
pub(super) fn still_running(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::DuplicateCallId,
        "a call with this id is still running",
        Usage::default(),
    )
}

/// The answer to another caller's id: what authorization answers.
pub(super) fn foreign(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::Unauthorized,
        UNAUTHORIZED_MESSAGE,
        Usage::default(),
    )
}

/// The answer to a call cancelled before or while it ran.
pub(super) fn cancelled(call: &ToolCall, status: Status, code: Code) -> ToolResult {
    let mut r = ToolResult::failed(call, code, "the call was cancelled", Usage::default());
    r.status = status;
    r
}

/// A fault of the host itself: the model is told `message`; the operator detail goes to the
/// diagnostic log under the id the result carries.
pub(super) fn host_fault(
    diagnostics: &Diagnostics,
    ctx: &RunContext,
    call: &ToolCall,
    message: &str,
    detail: &str,
) -> ToolResult {
    let mut r = ToolResult::failed(call, Code::HostError, message, Usage::default());
    r.diagnostic_id = Some(diagnostics.record(Entry {
        run_id: &ctx.run_id,
        tool: &call.name,
        call_id: &call.call_id,
        detail,
        stderr: b"",
    }));
    r
}
