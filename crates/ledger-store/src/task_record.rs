//! What the ledger keeps of a task (`tasks.rs` records and reads it): a durable handle on one
//! call, bound to the caller that created it, that any host of the ledger can answer for.

use serde::Serialize;

use super::codec::decode_result;
use super::LedgerError;
use toolhost_contract::{Caller, ToolResult};

/// Longest a task is kept after it is created, whatever its ttl asks: a day.
pub const MAX_TASK_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// A task to create: its handle, who may see it, the call it runs and how long it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The handle a client polls: random, never derived from the call.
    pub task_id: String,
    /// Who may see and steer it.
    pub caller: Caller,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    /// The call's arguments (JSON). The row keeps them while the task is open, and only under
    /// `record_content` or when [`NewTask::for_approval`]; their length counts against the
    /// caller's [`TaskCaps::bytes`] either way.
    pub arguments: String,
    /// What a resend is compared with: the digest of the tool and its canonical arguments.
    pub call_digest: String,
    /// The call waits for a human before it runs: any host must be able to show its arguments
    /// and run the approved call, so the row keeps them until the task closes.
    pub for_approval: bool,
    /// Kept this long after creation (at most [`MAX_TASK_TTL_MS`]), then pruned.
    pub ttl_ms: i64,
}

/// What one caller (principal and tenant) may hold in open tasks, on every host of a ledger:
/// a task is open from its creation until its call ends other than waiting for approval, it
/// is cancelled, or it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskCaps {
    /// Open tasks at once.
    pub open: u32,
    /// The arguments of those tasks together, in bytes.
    pub bytes: u64,
}

impl TaskCaps {
    /// Whether a caller holding `open` open tasks of `bytes` argument bytes may open one more
    /// of `size` bytes.
    pub fn admit(&self, open: i64, bytes: i64, size: i64) -> bool {
        open < i64::from(self.open)
            && bytes.saturating_add(size) <= i64::try_from(self.bytes).unwrap_or(i64::MAX)
    }
}

/// What [`Ledger::create_task`](super::Ledger::create_task) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskCreated {
    /// Recorded, open.
    Created,
    /// A task with its id exists (a resend of a named call): nothing changed.
    Exists,
    /// The caller holds its [`TaskCaps`] already: nothing recorded.
    Full,
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
    /// The call's arguments, while the task is open and the row keeps them (see
    /// [`NewTask::arguments`]).
    #[serde(skip)]
    pub arguments: Option<serde_json::Value>,
    /// The digest of the tool and its canonical arguments ([`NewTask::call_digest`]).
    #[serde(skip)]
    pub call_digest: String,
    /// Whether the task still counts against its caller's [`TaskCaps`].
    pub open: bool,
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
pub fn task_call(
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

/// A task's stored arguments back, if the row keeps them.
pub fn task_arguments(json: Option<String>) -> Result<Option<serde_json::Value>, LedgerError> {
    json.map(|j| serde_json::from_str(&j))
        .transpose()
        .map_err(|e| LedgerError::Corrupt(format!("a task's arguments: {e}")))
}
