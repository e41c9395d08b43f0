//! MCP tasks as the front doors see them ([`Runtime::tasks`]): a task's row in the ledger,
//! found only by the caller that created it. The rows and their bounds are
//! `crates/ledger/src/tasks.rs`'s.

use toolhost_contract::Caller;

/// The ledger's clock, in milliseconds since the Unix epoch (a task's timestamps).
pub use toolhost_ledger::now_ms;
pub use toolhost_ledger::{
    LedgerError, NewTask, TaskCall, TaskCaps, TaskCreated, TaskRecord, MAX_TASK_TTL_MS,
};

use super::Runtime;

/// The task side of a [`Runtime`]. Every method reads or writes the ledger and may block:
/// call it off the async workers.
pub struct TaskStore<'a> {
    rt: &'a Runtime,
}

impl Runtime {
    /// Tasks: create, find, cancel, move, close and prune rows.
    pub fn tasks(&self) -> TaskStore<'_> {
        TaskStore { rt: self }
    }
}

impl TaskStore<'_> {
    /// Create `task` unless its caller's open tasks are past `caps`.
    pub fn create(&self, task: &NewTask, caps: &TaskCaps) -> Result<TaskCreated, LedgerError> {
        self.rt.ledger.create_task(task, caps)
    }

    /// Whether the call `(run_id, call_id)` was admitted (by a task or a request).
    pub fn call_known(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        self.rt.ledger.is_admitted(run_id, call_id)
    }

    /// Task `task_id` as `caller` may see it: `None` when there is none, it expired, or it is
    /// another caller's (the three cannot be told apart).
    pub fn find(&self, task_id: &str, caller: &Caller) -> Result<Option<TaskRecord>, LedgerError> {
        self.rt
            .ledger
            .task(task_id, &caller.principal, &caller.tenant)
    }

    /// At most `limit` tasks of any caller that wait for a human's approval, oldest first
    /// (the operator's console lists them; never a caller's view).
    pub fn waiting(&self, limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        self.rt.ledger.waiting_tasks(limit)
    }

    /// Task `task_id` whoever created it, unless it is missing or expired (the operator's
    /// console; never a caller's view).
    pub fn any(&self, task_id: &str) -> Result<Option<TaskRecord>, LedgerError> {
        self.rt.ledger.any_task(task_id)
    }

    /// Mark task `task_id` cancelled for the host that runs it: whether `caller` may.
    pub fn cancel(&self, task_id: &str, caller: &Caller) -> Result<bool, LedgerError> {
        self.rt
            .ledger
            .cancel_task(task_id, &caller.principal, &caller.tenant)
    }

    /// The ids of tasks marked cancelled whose calls may still run.
    pub fn cancelled(&self) -> Result<Vec<String>, LedgerError> {
        self.rt.ledger.cancelled_tasks()
    }

    /// Move task `task_id` from call `from` to call `to`, if it is still on `from`.
    pub fn retarget(&self, task_id: &str, from: &str, to: &str) -> Result<bool, LedgerError> {
        self.rt.ledger.retarget_task(task_id, from, to)
    }

    /// Close task `task_id`: its call ended, and its row keeps no arguments.
    pub fn close(&self, task_id: &str) -> Result<(), LedgerError> {
        self.rt.ledger.close_task(task_id)
    }

    /// Delete expired tasks; how many went.
    pub fn prune(&self) -> Result<u64, LedgerError> {
        self.rt.ledger.prune_tasks()
    }
}
