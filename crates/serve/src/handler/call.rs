//! `tools/call`: one proposal from an MCP client through the pipeline — its identity, its
//! place (session or 2026-07-28 `_meta`), a resumed approval, a task, progress and log
//! forwarding, cancellation — answered as one `CallToolResult`, a task, or `input_required`.

use std::sync::Arc;

use futures::FutureExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::{admitted, call_id, Session};
use crate::approvals::{
    approval_token, approved, form_elicitation, state_refused, supports_form_elicitation,
};
use crate::elicit::ElicitingApprover;
use crate::frames::repeated_argument_key;
use crate::logging::{LogForwarder, SessionLevel};
use crate::mapping::{call_result, wraps_output};
use crate::mrtr::{self, Answer, Question};
use crate::progress::Forwarder;
use crate::stateless::{self, Place};
use crate::tasks::Created;
use toolhost_contract::{ApproverHandle, Code, Stage, ToolCall, ToolResult, Usage};

impl Session {
    /// `tools/call`: the whole pipeline for one proposal (see the parent module).
    pub(super) async fn answer_call(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let stateless = stateless::is_stateless(&cx);
        let mut call = ToolCall {
            call_id: call_id(&cx.id),
            name: request.name.to_string(),
            arguments: Value::Object(request.arguments.clone().unwrap_or_default()),
        };
        let identity = match self.identity(&cx) {
            Ok(i) => i,
            Err(why) => {
                // Rendered as for a tool nobody may see: nothing of the tool is told.
                let r = ToolResult::failed(&call, Code::Unauthorized, why, Usage::default());
                return Ok(call_result(&r, true).into());
            }
        };
        let place = if stateless {
            stateless::place(&[request.meta.as_ref(), Some(&cx.meta)], &identity, &cx.id)
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?
        } else {
            Place {
                run_id: self.run_id.clone(),
                call_id: call.call_id.clone(),
            }
        };
        call.call_id = place.call_id.clone();
        // Nothing of an oversized name or id goes further, not even into a refusal.
        if let Err(refusal) = toolhost_contract::bounds::check_proposal(&call) {
            return Ok(call_result(&refusal.result(&call), true).into());
        }
        let runtime = self.shared.runtime.clone();
        // The tool and the canonical call, worked out once for every step below.
        let prepared = runtime.prepare(&identity, &call);
        let wrap = wraps_output(prepared.tool());
        let mut ctx = runtime.context_for(identity.clone());
        ctx.run_id = place.run_id;
        ctx.cancel = self.cancel.child_token();
        // A 2026-07-28 retry answering an approval: it runs where the first round ran.
        let resumed = match request.request_state.as_deref().filter(|_| stateless) {
            None => None,
            Some(sealed) => {
                let now = runtime.clock().unix_now();
                match self.shared.seal.open(sealed, &identity, now) {
                    Ok(r) => Some(r),
                    // A state that fails its checks is refused as a protocol error, before
                    // anything is admitted: nothing of it names a call that may be recorded.
                    Err(failure) => return Err(state_refused(&failure)),
                }
            }
        };
        if let Some(r) = &resumed {
            ctx.run_id = r.run_id.clone();
            call.call_id = r.call_id.clone();
        }
        // Arguments that repeat a key (the frame check marked the request) are refused and
        // recorded, never run with whichever value a parser kept.
        if let Some(repeat) = repeated_argument_key(&cx) {
            let refused = ToolCall {
                arguments: Value::Null,
                ..call
            };
            let message = format!("the arguments repeat the key {}", repeat.within_arguments());
            let r = ToolResult::failed(&refused, Code::InvalidArguments, message, Usage::default());
            return Ok(call_result(&runtime.refuse(&ctx, &refused, r).await, wrap).into());
        }
        // A tool configured to run as a task: a handle at once for a 2026-07-28 client that
        // declared the tasks extension (`tasks.rs`); one that did not is refused a `required`
        // one, and a handshake-era session gets no task.
        if resumed.is_none() && crate::tasks::as_task(prepared.tool(), &call.name, &cx, stateless)?
        {
            let how = (approval_token(&request, &cx), stateless, admitted(&cx));
            let created = self.shared.tasks.create(
                &self.shared,
                (ctx.clone(), call.clone(), prepared.clone()),
                how,
            );
            match created.await? {
                Created::Task(created) => return Ok(CallToolResponse::Task(created)),
                Created::Refused(r) => return Ok(call_result(&r, wrap).into()),
                Created::Answer => {}
            }
        }
        // The token that approves the call: minted for a retry that says yes, else one the
        // client passed in `_meta`.
        let answer = mrtr::answer(request.input_responses.as_ref());
        let asked_again = resumed.as_ref().filter(|r| {
            // Only for the call the handle approves: a question about other arguments
            // would show the human a call the approval cannot run.
            answer == Answer::Missing
                && runtime.approvals().bind_call(
                    &r.handle,
                    &call.name,
                    prepared.tool().map_or("", |t| t.definition_digest.as_str()),
                    prepared.canonical().arguments(),
                    &r.run_id,
                )
        });
        if let Some(r) = asked_again {
            // No readable answer: the same question again, nothing admitted.
            let q = Question {
                tool: &call.name,
                risk: prepared.tool().map(|t| t.risk),
                run_id: &r.run_id,
                call_id: &r.first_call_id,
                handle: &r.handle,
                expires_at: r.expires_at,
                arguments: prepared.canonical().arguments(),
            };
            if let Some(ask) = self.shared.seal.ask(&q, &identity) {
                return Ok(ask.into());
            }
        }
        let token = match resumed.as_ref().map(|r| (r, answer)) {
            Some((r, Answer::Approve)) => match approved(&runtime, r, &call.name) {
                Ok(token) => Some(token),
                Err(failure) => {
                    let refused = failure.refusal(&call);
                    let r = runtime
                        .refuse_prepared(&ctx, &call, &prepared, Stage::Approve, refused)
                        .await;
                    return Ok(call_result(&r, wrap).into());
                }
            },
            Some((_, Answer::Decline)) => {
                ctx.approver = Some(ApproverHandle(Arc::new(mrtr::Declined)));
                None
            }
            Some((_, Answer::Cancelled | Answer::Missing)) => None,
            None => approval_token(&request, &cx),
        };
        // Server-to-client requests do not exist in 2026-07-28: a human is asked through
        // `input_required` instead (below).
        if !stateless && supports_form_elicitation(&cx) {
            ctx.approver = Some(ApproverHandle(Arc::new(ElicitingApprover::new(
                cx.peer.clone(),
            ))));
        }
        let progress_token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| cx.meta.get_progress_token());
        let forwarder = progress_token.map(|t| {
            let (sink, f) = Forwarder::start(cx.peer.clone(), t);
            ctx.progress = Some(sink);
            f
        });
        // In a session, the level `logging/setLevel` set; in 2026-07-28, the request's own.
        let level = if stateless {
            let level = SessionLevel::default();
            if let Some(l) = cx.meta.log_level() {
                level.set(l);
            }
            level
        } else {
            self.log_level.clone()
        };
        let logs = level.get().is_some().then(|| {
            let (sink, f) = LogForwarder::start(
                cx.peer.clone(),
                level,
                call.name.clone(),
                call.call_id.clone(),
            );
            ctx.logs = Some(sink);
            f
        });
        let run_id = ctx.run_id.clone();
        // notifications/cancelled for this request (or, over stateless HTTP, the client
        // going away) cancels this call only.
        let call_cancel = ctx.cancel.clone();
        let request_ct = cx.ct.clone();
        // Run on this task (rmcp's task for this request, which rmcp never drops: a
        // cancelled request only has its token cancelled), counted by the tracker so that a
        // stopping server waits for it; no task of our own per call, each spawn being a
        // wake-up of the other worker on these machines.
        let prepared_here = &prepared;
        let run = self.shared.tracker.track_future(async move {
            let result = {
                let run = runtime.run_prepared(&ctx, &call, prepared_here, token.as_deref());
                tokio::pin!(run);
                tokio::select! {
                    biased;
                    r = &mut run => r,
                    _ = request_ct.cancelled() => {
                        call_cancel.cancel();
                        run.await
                    }
                }
            };
            drop(ctx); // closes the progress and log sinks
            if let Some(f) = forwarder {
                f.finish().await;
            }
            if let Some(f) = logs {
                f.finish().await;
            }
            result
        });
        // A panic in the call (none is known) answers this request with an error instead of
        // leaving the client waiting for an answer that never comes.
        let result = match std::panic::AssertUnwindSafe(run).catch_unwind().await {
            Ok(result) => result,
            Err(_) => return Err(ErrorData::internal_error("the call task failed", None)),
        };
        // A first round that needs a human, from a client that can ask one: `input_required`.
        let asks = stateless
            && resumed.is_none()
            && result.code == Some(Code::ApprovalRequired)
            && prepared
                .tool()
                .is_some_and(|t| !self.shared.runtime.approvals().operator_only(t))
            && cx
                .client_capabilities()
                .is_some_and(|c| form_elicitation(&c));
        if let Some(approval) = result.approval.as_ref().filter(|_| asks) {
            let q = Question {
                tool: &result.tool,
                risk: prepared.tool().map(|t| t.risk),
                run_id: &run_id,
                call_id: &result.call_id,
                handle: &approval.handle,
                expires_at: approval.expires_at,
                arguments: prepared.canonical().arguments(),
            };
            if let Some(ask) = self.shared.seal.ask(&q, &identity) {
                return Ok(ask.into());
            }
        }
        Ok(call_result(&result, wrap).into())
    }
}
