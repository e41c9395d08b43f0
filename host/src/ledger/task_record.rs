//! What the ledger keeps of a task (`tasks.rs` records and reads it): a durable handle on one
//! call, bound to the caller that created it, that any host of the ledger can answer for.

use serde::Serialize;

use super::codec::decode_result;
use super::LedgerError;
use crate::contract::ToolResult;

/// Longest a task is kept after it is created, whatever its ttl asks: a day.
pub const MAX_TASK_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// A task to create: its handle, who may see it, the call it runs and how long it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The handle a client polls: random, never derived from the call.
    pub task_id: String,
    pub principal: String,
    pub tenant: String,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    /// The call's arguments (JSON): kept with the task until it is pruned, so that any host
    /// can show them for approval and run the approved call.
    pub arguments: String,
    /// Kept this long after creation (at most [`MAX_TASK_TTL_MS`]), then pruned.
    pub ttl_ms: i64,
}

/// Where a task's call is, as the ledger knows it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "result")]
pub enum TaskCall {
    /// Not in the ledger yet (its host is about to admit it) or admitted and not finished.
    Running,
    /// Not in the ledger and its host is gone: it never started and never will.
    Lost,
    /// Finished with this result (a reconciliation's, if it was reconciled).
    Finished(Box<ToolResult>),
}

/// A task as `tasks/get` answers it (and `toolhost ledger` lists it, without its arguments).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRecord {
    pub task_id: String,
    pub principal: String,
    pub tenant: String,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    /// The call's arguments, as the task was created with them.
    #[serde(skip)]
    pub arguments: serde_json::Value,
    /// The host that runs its call.
    pub owner: String,
    /// Unix milliseconds.
    pub created_at_ms: i64,
    /// The last change to the task or its call (a cancel mark, a move, the call's start or
    /// end).
    pub updated_at_ms: i64,
    pub expires_at_ms: i64,
    /// When a client asked to cancel it, if one did.
    pub cancel_requested_at_ms: Option<i64>,
    pub call: TaskCall,
}

/// A task's call state from its call's row as a backend read it: the row's state, its result
/// (a reconciliation's, if it has one), and whether the task's host holds its lease (asked
/// only for a call not in the ledger).
pub(crate) fn task_call(
    state: Option<String>,
    result: Option<String>,
    host_alive: impl FnOnce() -> bool,
) -> Result<TaskCall, LedgerError> {
    Ok(match (state, result) {
        (_, Some(json)) => TaskCall::Finished(Box::new(decode_result(&json)?)),
        (Some(_), None) => TaskCall::Running,
        (None, None) if host_alive() => TaskCall::Running,
        (None, None) => TaskCall::Lost,
    })
}

/// A task's stored arguments back.
pub(crate) fn task_arguments(json: &str) -> Result<serde_json::Value, LedgerError> {
    serde_json::from_str(json).map_err(|e| LedgerError::Corrupt(format!("a task's arguments: {e}")))
}
