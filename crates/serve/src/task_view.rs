//! How `tasks/get` shows a task: its call's state, as the ledger has it, mapped onto the task
//! statuses of the extension (`tasks.rs` serves the methods).

use rmcp::model::{DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::{json, Value};

use super::mapping::{call_result, FAILURE_META};
use super::mrtr::{Question, StateSeal};
use toolhost_contract::Caller;
use toolhost_contract::{Code, Status, ToolResult};
use toolhost_runtime::tasks::{TaskCall, TaskRecord};

/// The JSON-RPC code of a task whose call failed below the tool (internal error).
const INTERNAL_ERROR: i32 = -32603;

/// The poll interval a client is asked to keep.
pub const POLL_INTERVAL_MS: u64 = 500;

/// The task as `tasks/get` shows it: its call's state mapped onto the task statuses.
///
/// - running → `working`;
/// - completed, or failed with a code the tool or a stage decided → `completed`, its result
///   inlined as `tools/call` returns it (`isError` for a failure);
/// - waiting for approval → `input_required`, the approval question as the input request
///   (`completed` with the `approval_required` result when only the operator approves the tool,
///   `client_approves` false: the client is never asked, unless `console` names the approval
///   console's origin, whose page of the task is then the input request [`CONSOLE_INPUT`] in
///   URL mode); cancelled → `cancelled`;
/// - cancelled before it started → `cancelled`;
/// - a trap, a host fault, an unknown outcome (a call cancelled after it started, whose effect
///   is unknown, among them), or a call its host lost before recording it → `failed`, with a
///   JSON-RPC error whose data carries the toolhost failure (`status`, `code`).
pub(super) fn detailed(
    task: &TaskRecord,
    seal: &StateSeal,
    caller: &Caller,
    (wrap, client_approves, risk): (bool, bool, Option<toolhost_contract::Risk>),
    console: Option<&str>,
) -> DetailedTask {
    let base = Task::new(
        task.task_id.clone(),
        TaskStatus::Working,
        rfc3339(task.created_at_ms),
        rfc3339(task.updated_at_ms),
    )
    .with_ttl_ms(u64::try_from(task.expires_at_ms - task.created_at_ms).unwrap_or(0))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let payload = match &task.call {
        TaskCall::Running => TaskPayload::Working,
        TaskCall::Lost => TaskPayload::Failed {
            error: error_object(
                "the host that ran this task stopped before its call was recorded",
                json!({"status": "failed", "code": Code::HostError.as_str()}),
            ),
        },
        TaskCall::Finished(result) => {
            let waits = task.open && task.cancel_requested_at_ms.is_none();
            let pointed = console
                .filter(|_| {
                    waits && !client_approves && result.code == Some(Code::ApprovalRequired)
                })
                .and_then(|origin| console_request(origin, task));
            match pointed {
                Some(input_requests) => TaskPayload::InputRequired { input_requests },
                None => finished(task, result, seal, caller, (wrap, client_approves, risk)),
            }
        }
    };
    DetailedTask::new(base, payload)
}

fn finished(
    task: &TaskRecord,
    result: &ToolResult,
    seal: &StateSeal,
    caller: &Caller,
    (wrap, client_approves, risk): (bool, bool, Option<toolhost_contract::Risk>),
) -> TaskPayload {
    if let (Some(Code::ApprovalRequired), Some(a)) = (result.code, &result.approval) {
        // A waiting call cancelled before anyone approved it never ran.
        if task.cancel_requested_at_ms.is_some() {
            return TaskPayload::Cancelled;
        }
        let arguments = canonical_arguments(task);
        if let Some(arguments) = arguments
            .as_deref()
            .map(str::as_bytes)
            .filter(|_| task.open && client_approves)
        {
            let q = Question {
                tool: &task.tool,
                risk,
                run_id: &task.run_id,
                call_id: &task.call_id,
                handle: &a.handle,
                expires_at: a.expires_at,
                arguments,
            };
            if let Some(input_requests) = seal.ask(&q, caller).and_then(|r| r.input_requests) {
                return TaskPayload::InputRequired { input_requests };
            }
        }
    }
    match (result.status, result.code) {
        // A call cancelled after it started may have had its effect: the task says what the
        // ledger says (`outcome_unknown`, below), never a plain `cancelled`.
        (Status::Cancelled, _) => TaskPayload::Cancelled,
        (Status::OutcomeUnknown, _) | (Status::Failed, Some(Code::GuestTrap | Code::HostError)) => {
            TaskPayload::Failed {
                error: error_object(
                    &result.message,
                    json!({
                        "status": result.status,
                        "code": result.code.map(|c| c.as_str()),
                        "call_id": result.call_id,
                    }),
                ),
            }
        }
        _ => {
            let rendered = serde_json::to_value(call_result(result, wrap)).unwrap_or(Value::Null);
            TaskPayload::Completed {
                result: object(rendered),
            }
        }
    }
}

/// The key of the input request that points a client's human at the approval console. It is
/// not [`super::mrtr::APPROVAL_INPUT`]: the client's answer to it (that its human opened the
/// page) approves nothing, and `tasks/update` passes over it.
pub const CONSOLE_INPUT: &str = "console";

/// A URL-mode `elicitation/create` that sends the client's human to the console page of
/// `task`, where an operator approves or denies it.
fn console_request(origin: &str, task: &TaskRecord) -> Option<rmcp::model::InputRequests> {
    let page = format!(
        "{}/console/task?id={}",
        origin.trim_end_matches('/'),
        super::console::page_query(&task.task_id)
    );
    let message = format!(
        "Only an operator approves {}: an operator signs in to the approval console to see \
         this call and approve or deny it.",
        toolhost_contract::for_human(&task.tool)
    );
    let question: rmcp::model::InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": page, "elicitationId": task.task_id},
    }))
    .ok()?;
    let mut requests = rmcp::model::InputRequests::new();
    requests.insert(CONSOLE_INPUT.to_string(), question);
    Some(requests)
}

/// A task's stored arguments in the canonical form its approval binds, if the row keeps them
/// (what a human is shown: `tasks/get`'s question, the console's page).
pub(super) fn canonical_arguments(task: &TaskRecord) -> Option<String> {
    let arguments = task.arguments.as_ref()?;
    String::from_utf8(toolhost_contract::canonical::canonical_json(arguments)).ok()
}

/// A JSON-RPC error object: the internal-error code, `message`, and the toolhost failure.
fn error_object(message: &str, failure: Value) -> JsonObject {
    object(json!({
        "code": INTERNAL_ERROR,
        "message": message,
        "data": { FAILURE_META: failure },
    }))
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// Unix milliseconds as an RFC 3339 timestamp in UTC, with milliseconds.
pub(super) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps are RFC 3339 in UTC, as the extension's clients parse them.
    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_377_301_677), "2026-12-04T09:41:41.677Z");
    }
}
