//! Tasks: a durable handle on one call that any host of the ledger answers for.
//!
//! A task is a row of its own (`tasks`), created by the host that runs its call and bound to
//! the caller that asked for it. Its state is read from its call's row: running while the call
//! has no outcome, then the call's outcome (or its reconciliation). A cancel is a mark on the
//! row that any host may set; the host that runs the call reads the marks on its own tasks
//! ([`Ledger::cancelled_tasks`]) and stops those calls. A host that dies leaves its calls to
//! recovery (`outcome_unknown`), and a task whose call it never admitted is [`TaskCall::Lost`].
//! Tasks are pruned once past their expiry; their calls stay in the ledger.
//!
//! A task is open until its call ends other than waiting for approval, it is cancelled, or it
//! expires; a caller's open tasks are bounded in number and argument bytes ([`TaskCaps`]),
//! checked and recorded in one transaction so that no two hosts both take the last place. A
//! row keeps its call's arguments only while it is open, and only under `record_content` or
//! for a call that waits for approval (any host must show and run it); otherwise their digest.

use super::codec::now_ms;
use super::task_record::{NewTask, TaskCall, TaskCaps, TaskCreated, TaskRecord, MAX_TASK_TTL_MS};
use super::{Ledger, LedgerError};

impl Ledger {
    /// Record `task`, run by this host, created now, unless a task with its id exists (the id
    /// of a task a client named is the same on a resend) or its caller holds `caps` already.
    pub fn create_task(&self, task: &NewTask, caps: &TaskCaps) -> Result<TaskCreated, LedgerError> {
        super::error::check_key(&task.run_id, &task.call_id, &task.tool)?;
        let mut task = task.clone();
        task.ttl_ms = task.ttl_ms.clamp(1, MAX_TASK_TTL_MS);
        let content =
            (self.options.record_content || task.for_approval).then_some(task.arguments.as_str());
        self.store.create_task(&task, content, caps, now_ms())
    }

    /// Close `task_id`: it no longer counts against its caller's caps, and its row forgets
    /// the call's arguments (idempotent).
    pub fn close_task(&self, task_id: &str) -> Result<(), LedgerError> {
        self.store.close_task(task_id)
    }

    /// The task `task_id` as `principal` of `tenant` may see it: `None` when there is no such
    /// task, it expired, or another caller created it (the three cannot be told apart).
    pub fn task(
        &self,
        task_id: &str,
        principal: &str,
        tenant: &str,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        let found = self.store.task(task_id, now_ms())?;
        Ok(found.filter(|t| t.principal == principal && t.tenant == tenant))
    }

    /// The tasks of run `run_id` that have not expired, oldest first (for `toolhost ledger`).
    pub fn tasks_of_run(&self, run_id: &str) -> Result<Vec<TaskRecord>, LedgerError> {
        self.store.tasks_of_run(run_id, now_ms())
    }

    /// At most `limit` tasks of any caller that wait for a human's approval, oldest first:
    /// open, their call ended `approval_required` with an approval to answer (the operator's
    /// console lists them).
    pub fn waiting_tasks(&self, limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        let mut tasks = self.store.waiting_tasks(now_ms(), limit)?;
        tasks.retain(|t| match &t.call {
            TaskCall::Finished(r) => {
                r.code == Some(toolhost_contract::Code::ApprovalRequired) && r.approval.is_some()
            }
            _ => false,
        });
        Ok(tasks)
    }

    /// The task `task_id` whoever created it, unless it is missing or expired (for the
    /// operator's console, never for a caller).
    pub fn any_task(&self, task_id: &str) -> Result<Option<TaskRecord>, LedgerError> {
        self.store.task(task_id, now_ms())
    }

    /// Ask the host that runs `task_id` to cancel its call (idempotent): whether the task is
    /// one `principal` of `tenant` may cancel.
    pub fn cancel_task(
        &self,
        task_id: &str,
        principal: &str,
        tenant: &str,
    ) -> Result<bool, LedgerError> {
        let Some(task) = self.task(task_id, principal, tenant)? else {
            return Ok(false);
        };
        self.store.cancel_task(task_id, now_ms())?;
        // A task whose call has ended (waiting for approval, say) has no run to stop: the
        // cancel closes it here. A running one is closed by its host when its call ends.
        if matches!(task.call, TaskCall::Finished(_)) {
            self.store.close_task(task_id)?;
        }
        Ok(true)
    }

    /// The tasks this host runs that a client asked to cancel and whose calls have no outcome
    /// yet.
    pub fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError> {
        self.store.cancelled_tasks()
    }

    /// Point `task_id` from its call `from` to the call `to`, run by this host (an approved
    /// retry of a call that waited for approval): whether this host moved it (`false`: the
    /// task is gone or another host moved it first).
    pub fn retarget_task(&self, task_id: &str, from: &str, to: &str) -> Result<bool, LedgerError> {
        self.store.retarget_task(task_id, from, to, now_ms())
    }

    /// Forget the tasks past their expiry: how many.
    pub fn prune_tasks(&self) -> Result<u64, LedgerError> {
        self.store.prune_tasks(now_ms())
    }
}
