//! `tasks/update`: the answer to a task that waits for approval, checked as a `tools/call` is.

use std::sync::Arc;

use rmcp::model::{ErrorData, UpdateTaskParams};
use serde_json::json;

use super::http::door::Admitted;
use super::mrtr::{answer, approved_call_id, Answer};
use super::tasks::{blocking, Tasks};
use super::Shared;
use toolhost_contract::{ApproverHandle, Caller, Code, Stage, ToolCall};
use toolhost_runtime::tasks::TaskCall;

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
        let (runtime, tracker) = (&shared.runtime, &shared.tracker);
        let task = self.find(runtime, caller, &params.task_id).await?;
        if let Some(scope) = admitted.as_ref().and_then(|a| a.missing_scope(&task.tool)) {
            return Err(ErrorData::invalid_request(
                "the access token lacks the scope this call needs",
                Some(json!({ "scope": scope })),
            ));
        }
        let TaskCall::Finished(waiting) = &task.call else {
            return Ok(());
        };
        // A closed task (cancelled) has nothing left to approve.
        let Some(arguments) = task.arguments.clone().filter(|_| task.open) else {
            return Ok(());
        };
        let Some(approval) = waiting
            .approval
            .as_ref()
            .filter(|_| waiting.code == Some(Code::ApprovalRequired))
        else {
            return Ok(());
        };
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
        let to = approved_call_id(&task.call_id);
        let rt = runtime.clone();
        let (id, from, next) = (task.task_id.clone(), task.call_id.clone(), to.clone());
        if !blocking(move || rt.tasks().retarget(&id, &from, &next)).await? {
            return Ok(()); // another update moved it first
        }
        let mut ctx = runtime.context_for(caller.clone());
        ctx.run_id = task.run_id.clone();
        let call = ToolCall {
            call_id: to,
            name: task.tool.clone(),
            arguments,
        };
        let prepared = runtime.prepare(caller, &call);
        let token = match given {
            Answer::Approve => {
                match super::approvals::approved_handle(runtime, &approval.handle, &task.tool) {
                    Ok(token) => Some(token),
                    Err(failure) => {
                        let refused = failure.refusal(&call);
                        runtime
                            .refuse_prepared(&ctx, &call, &prepared, Stage::Approve, refused)
                            .await;
                        return Ok(());
                    }
                }
            }
            _ => {
                ctx.approver = Some(ApproverHandle(Arc::new(super::mrtr::Declined)));
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
        Ok(())
    }
}
