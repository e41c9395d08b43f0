//! The trusted context of a run: who is calling, for which tenant, until when, with which
//! budgets — built by a frontend from what it authenticated, never from tool arguments.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::hooks::{ApproverHandle, LogSink, ProgressSink};
use super::Caller;

/// Limits that span the calls of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Most tool calls the run may admit in total (`None`: unlimited).
    pub max_calls: Option<u64>,
    /// Most calls of any one tool (`None`: unlimited).
    pub max_calls_per_tool: Option<u64>,
}

/// Who runs calls, and under which bounds. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Groups the calls of one agent run; call ids are unique within it.
    pub run_id: String,
    /// The authenticated caller and the tenant it acts for.
    pub caller: Caller,
    /// No call of this run starts after this instant, and running calls are stopped at it.
    pub deadline: Option<Instant>,
    /// Cancelling it cancels every call of the run.
    pub cancel: CancellationToken,
    pub budgets: Budgets,
    /// Where a guest's live progress reports go, if the frontend wants them.
    pub progress: Option<ProgressSink>,
    /// Where a guest's live log lines go, if the frontend wants them.
    pub logs: Option<LogSink>,
    /// Whom to ask when a call needs approval and came without a token, if anyone.
    pub approver: Option<ApproverHandle>,
}

impl RunContext {
    /// A context for a caller the config vouches for, with a fresh run id, no deadline and no
    /// budgets.
    pub fn new(principal: impl Into<String>, tenant: impl Into<String>) -> Self {
        RunContext::for_caller(Caller::new(principal, tenant))
    }

    /// A context for `caller`, with a fresh run id, no deadline and no budgets.
    pub fn for_caller(caller: Caller) -> Self {
        RunContext {
            run_id: format!("run-{}", uuid::Uuid::new_v4().simple()),
            caller,
            deadline: None,
            cancel: CancellationToken::new(),
            budgets: Budgets::default(),
            progress: None,
            logs: None,
            approver: None,
        }
    }

    /// The same context with another run id.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }
}
