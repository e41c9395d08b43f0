//! The answer to a task that waits for approval: a client's `tasks/update`, checked as a
//! `tools/call` is, and an operator's decision in the console (`console.rs`), through one
//! path ([`Tasks::answer_waiting`]).

use std::sync::Arc;

use rmcp::model::{ErrorData, UpdateTaskParams};
use serde_json::json;

use super::http::door::{Admitted, Pass};
use super::mrtr::{answer, approved_call_id, Answer};
use super::tasks::{blocking, Tasks};
use super::Shared;
use toolhost_contract::{
    ApprovalAnswer, ApprovalNeeded, ApproverHandle, Caller, Code, Stage, ToolCall,
};
use toolhost_runtime::tasks::{TaskCall, TaskRecord};

impl Tasks {
    /// `tasks/update`: the answer to a task that waits for approval. An approval runs the
    /// approved call on this host and moves the task to it; a decline records the approved
    /// call's refusal (`approval_denied`); anything else changes nothing.
    ///
    /// It answers to the authority `tools/call` does: the access token must hold the scope a
    /// call of the task's tool needs (`-32600`, naming it, otherwise), the approved call runs
    /// through the whole pipeline (visibility, policy, limits), and over HTTP it counts as one
    /// of the caller's requests in flight (`-32600` when none is left, and nothing changes).
    pub async fn update(
        self: &Arc<Tasks>,
        shared: &Shared,
        caller: &Caller,
        params: &UpdateTaskParams,
        admitted: Option<Admitted>,
    ) -> Result<(), ErrorData> {
        let runtime = &shared.runtime;
        let task = self.find(runtime, caller, &params.task_id).await?;
        if let Some(scope) = admitted.as_ref().and_then(|a| a.missing_scope(&task.tool)) {
            return Err(ErrorData::invalid_request(
                "the access token lacks the scope this call needs",
                Some(json!({ "scope": scope })),
            ));
        }
        if waiting_approval(&task).is_none() {
            return Ok(());
        }
        let given = answer(Some(&params.input_responses));
        if !matches!(given, Answer::Approve | Answer::Decline) {
            return Ok(());
        }
        if runtime.approvals().operator_only_by_name(&task.tool) {
            return Err(ErrorData::invalid_request(
                "only the operator's channel approves this tool (toolhost approve); the \
                 client's answer changes nothing",
                None,
            ));
        }
        let pass = match admitted.as_ref().map(Admitted::hold) {
            None => None,
            Some(Ok(pass)) => Some(pass),
            Some(Err(_)) => {
                return Err(ErrorData::invalid_request(
                    "too many of this caller's requests and tasks are in flight; try again \
                     when one ends",
                    None,
                ))
            }
        };
        let decision = (matches!(given, Answer::Approve), Answerer::Client);
        self.answer_waiting(shared, caller, &task, decision, pass)
            .await?;
        Ok(())
    }
}

/// Who answers a task that waits for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answerer {
    /// The task's own client (`tasks/update`): never for a tool only the operator approves.
    Client,
    /// The operator of this name (the console): any tool.
    Operator(String),
}

/// An operator's answer to a waiting task, as the approver of its approved call: the ledger
/// records it as the operator's (`approved` or `approval_denied`, "through the approval
/// console (operator …)"), on the operator's channel, so a tool only the operator approves is
/// answered too.
struct OperatorAnswer {
    operator: String,
    /// Approve with this token (minted for the task's own handle); `None`: decline.
    token: Option<String>,
}

impl toolhost_contract::Approver for OperatorAnswer {
    fn source(&self) -> String {
        format!("the approval console (operator {})", self.operator)
    }

    fn channel(&self) -> toolhost_contract::Approvers {
        toolhost_contract::Approvers::Operator
    }

    fn ask<'a>(
        &'a self,
        _prompt: &'a toolhost_contract::ApprovalPrompt,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ApprovalAnswer> + Send + 'a>> {
        let answer = match &self.token {
            Some(token) => ApprovalAnswer::ApprovedWith(token.clone()),
            None => ApprovalAnswer::Declined,
        };
        Box::pin(std::future::ready(answer))
    }
}

/// What answering a task did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// The task no longer waits (answered before, cancelled, expired): nothing changed.
    NotWaiting,
    /// The approval could not be used (expired, say): the approved call is recorded refused.
    Refused,
    /// The approved call runs on this host (approved), or ends `approval_denied` (declined).
    Running,
}

/// The approval a task waits for, if it waits: open, with its arguments, its call ended
/// `approval_required` with a handle.
pub(crate) fn waiting_approval(task: &TaskRecord) -> Option<&ApprovalNeeded> {
    let TaskCall::Finished(waiting) = &task.call else {
        return None;
    };
    if !task.open || task.arguments.is_none() || waiting.code != Some(Code::ApprovalRequired) {
        return None;
    }
    waiting.approval.as_ref()
}

impl Tasks {
    /// Answer `task`, which waits for approval, for `caller` (its creator): move it to its
    /// approved call (once, on whichever host moves it first) and run that call through the
    /// whole pipeline on this host, with a token minted for the task's own approval handle
    /// (approved) or a declining approver (declined).
    pub(crate) async fn answer_waiting(
        self: &Arc<Tasks>,
        shared: &Shared,
        caller: &Caller,
        task: &TaskRecord,
        (approve, by): (bool, Answerer),
        pass: Option<Pass>,
    ) -> Result<Answered, ErrorData> {
        let (runtime, tracker) = (&shared.runtime, &shared.tracker);
        let (Some(approval), Some(arguments)) = (waiting_approval(task), task.arguments.clone())
        else {
            return Ok(Answered::NotWaiting);
        };
        let to = approved_call_id(&task.call_id);
        let rt = runtime.clone();
        let (id, from, next) = (task.task_id.clone(), task.call_id.clone(), to.clone());
        if !blocking(move || rt.tasks().retarget(&id, &from, &next)).await? {
            return Ok(Answered::NotWaiting); // another answer moved it first
        }
        let mut ctx = runtime.context_for(caller.clone());
        ctx.run_id = task.run_id.clone();
        let call = ToolCall {
            call_id: to,
            name: task.tool.clone(),
            arguments,
        };
        let prepared = runtime.prepare(caller, &call);
        let token = match (approve, by) {
            (true, Answerer::Client) => {
                match super::approvals::approved_handle(runtime, &approval.handle, &task.tool) {
                    Ok(token) => Some(token),
                    Err(failure) => {
                        return Ok(self
                            .refuse_approved(shared, &ctx, &call, &prepared, failure)
                            .await)
                    }
                }
            }
            (false, Answerer::Client) => {
                ctx.approver = Some(ApproverHandle(Arc::new(super::mrtr::Declined)));
                None
            }
            (approve, Answerer::Operator(operator)) => {
                let token = if approve {
                    match super::approvals::operator_approved(runtime, &approval.handle) {
                        Ok(token) => Some(token),
                        Err(failure) => {
                            return Ok(self
                                .refuse_approved(shared, &ctx, &call, &prepared, failure)
                                .await)
                        }
                    }
                } else {
                    None
                };
                // The pipeline asks this approver, which answers with the token (or says no),
                // so that the ledger names the operator.
                ctx.approver = Some(ApproverHandle(Arc::new(OperatorAnswer { operator, token })));
                None
            }
        };
        self.run(
            runtime,
            tracker,
            &task.task_id,
            (ctx, call, prepared, token),
            pass,
        );
        Ok(Answered::Running)
    }

    /// Record the approved call refused for `failure` (its approval could not be minted).
    async fn refuse_approved(
        &self,
        shared: &Shared,
        ctx: &toolhost_contract::RunContext,
        call: &ToolCall,
        prepared: &toolhost_runtime::Prepared,
        failure: toolhost_runtime::ApprovalFailure,
    ) -> Answered {
        let refused = failure.refusal(call);
        shared
            .runtime
            .refuse_prepared(ctx, call, prepared, Stage::Approve, refused)
            .await;
        Answered::Refused
    }
}
