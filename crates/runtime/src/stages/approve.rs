//! Stage 5, approve: a high-impact call needs a human's approval bound to exactly this call.

use toolhost_contract::{
    ApprovalAnswer, ApprovalNeeded, ApprovalPrompt, Code, RunContext, ToolCall, ToolResult, Usage,
};
use toolhost_contract::{ApproverHandle, Approvers, Decision, Stage};
use toolhost_ledger::{Journal, TokenSpend};
use toolhost_policy::{ApprovalFailure, ApprovalSubject};
use toolhost_registry::Tool;

use super::super::endings::Ended;
use super::super::Runtime;
use super::Call;

/// Stage 5, for a tool that needs a human: [`approve_call`] over the per-call value.
pub(crate) async fn approve(rt: &Runtime, c: &mut Call<'_>, tool: &Tool) -> Ended<()> {
    let arguments = c.prepared.canonical().arguments();
    approve_call(rt, c.ctx, c.call, tool, arguments, c.token, &mut c.journal).await
}

/// Stage 5: without a token the call ends `approval_required` with a handle a human can
/// approve — unless the run has an approver, who is asked first (an accept mints the token
/// for this exact call, a decline ends it `approval_denied`). With a token, the token must
/// be genuine (`approval_invalid`), for this caller (`approval_wrong_principal`) and this
/// call (`approval_mismatch`), unexpired (`approval_expired`) and unused
/// (`approval_reused`). `arguments` are the call's, in canonical form.
async fn approve_call(
    rt: &Runtime,
    ctx: &RunContext,
    call: &ToolCall,
    tool: &Tool,
    arguments: &[u8],
    token: Option<&str>,
    journal: &mut Journal<'_>,
) -> Ended<()> {
    let policy = rt.policy();
    let subject = ApprovalSubject::from_canonical(
        (
            tool.name.as_str(),
            tool.definition_digest.as_str(),
            policy.revision(),
        ),
        arguments,
        &ctx.caller,
        &ctx.run_id,
    );
    let now = rt.clock.unix_now();
    let asked;
    let mut approved_through = String::new();
    let token = match token {
        Some(t) => t,
        None => {
            let request = rt.approval_key.request(&subject, now, rt.approval_ttl);
            // A tool only the operator approves is never put to the calling client.
            let approver = ctx.approver.as_ref().filter(|a| {
                a.0.channel() == Approvers::Operator
                    || rt.approvals().approvers(tool) == Approvers::Client
            });
            let asking = (&subject, &request, tool.risk);
            match ask_approver(rt, ctx, approver, call, asking, journal).await? {
                Some((minted, source)) => {
                    asked = minted;
                    approved_through = format!("by a human, through {source}");
                    asked.as_str()
                }
                None => {
                    journal.note(
                        Stage::Approve,
                        Code::ApprovalRequired.as_str(),
                        &request.digest,
                    );
                    let mut r = ToolResult::failed(
                        call,
                        Code::ApprovalRequired,
                        "this tool needs a human's approval; resubmit the call with the approval token",
                        Usage::default(),
                    );
                    r.approval = Some(ApprovalNeeded {
                        handle: request.handle,
                        expires_at: request.expires_at,
                    });
                    return Err(Box::new(r));
                }
            }
        }
    };
    // The approval's id (what `used_tokens` keeps) and expiry, for the audit trail.
    let mut spent = String::new();
    let mut expired_by_ledger = false;
    let consume = |id: &str, expires: i64| {
        spent = format!("approval {id}, expires at {expires}");
        match rt.ledger.consume_token(id, expires) {
            Ok(TokenSpend::Spent) => true,
            Ok(TokenSpend::Expired) => {
                expired_by_ledger = true;
                false
            }
            Ok(TokenSpend::AlreadySpent) | Err(_) => false,
        }
    };
    let verified = match rt.approval_key.verify(token, &subject, now, consume) {
        // The ledger's clock (PostgreSQL: one for every host) says it expired.
        Err(ApprovalFailure::Reused) if expired_by_ledger => Err(ApprovalFailure::Expired),
        v => v,
    };
    match verified {
        Ok(()) => {
            if approved_through.is_empty() {
                approved_through = format!("by a token passed with the call ({spent})");
            }
            journal.note(
                Stage::Approve,
                Decision::Approved.as_str(),
                &approved_through,
            );
            Ok(())
        }
        Err(failure) => {
            // Each failure has its own code and a fixed model-safe message; the reason
            // (which check, for the operator) goes to the ledger only.
            journal.note(
                Stage::Approve,
                failure.code().as_str(),
                &failure.to_string(),
            );
            Err(Box::new(failure.refusal(call)))
        }
    }
}

/// Ask `approver`, if the call has one it may ask. `Some(token)`: approved, with a token
/// minted for exactly this request (it still goes through verification and is consumed
/// once). A decline ends the call here with `approval_denied`.
async fn ask_approver(
    rt: &Runtime,
    ctx: &RunContext,
    approver: Option<&ApproverHandle>,
    call: &ToolCall,
    (subject, request, risk): (
        &ApprovalSubject,
        &toolhost_policy::ApprovalRequest,
        toolhost_contract::Risk,
    ),
    journal: &mut Journal<'_>,
) -> Result<Option<(String, String)>, Box<ToolResult>> {
    let Some(approver) = approver else {
        return Ok(None);
    };
    let prompt = ApprovalPrompt {
        tool: subject.tool.clone(),
        risk: Some(risk),
        canonical_arguments: String::from_utf8_lossy(&subject.canonical_arguments).into_owned(),
        caller: subject.caller.clone(),
        run_id: subject.run_id.clone(),
        call_id: call.call_id.clone(),
        digest: request.digest.clone(),
        expires_at: request.expires_at,
    };
    journal.note(Stage::Approve, Decision::Asked.as_str(), &request.digest);
    let answer = tokio::select! {
        a = approver.0.ask(&prompt) => a,
        _ = ctx.cancel.cancelled() => ApprovalAnswer::Unavailable("the run was cancelled"),
    };
    let source = approver.0.source();
    match answer {
        ApprovalAnswer::Approved => match rt
            .approval_key
            .mint_at(&request.handle, rt.clock.unix_now())
        {
            // The token is then verified and consumed like any other.
            Ok(token) => Ok(Some((token, source))),
            Err(e) => {
                journal.note(
                    Stage::Approve,
                    Decision::MintFailed.as_str(),
                    &e.to_string(),
                );
                Ok(None)
            }
        },
        // Minted for the handle the human saw; verified against this call below.
        ApprovalAnswer::ApprovedWith(token) => Ok(Some((token, source))),
        ApprovalAnswer::Declined => {
            journal.note(
                Stage::Approve,
                Code::ApprovalDenied.as_str(),
                &format!("declined by a human, through {source}"),
            );
            Err(Box::new(ToolResult::failed(
                call,
                Code::ApprovalDenied,
                "a human declined this call",
                Usage::default(),
            )))
        }
        ApprovalAnswer::Unavailable(why) => {
            journal.note(
                Stage::Approve,
                Decision::Unanswered.as_str(),
                &format!("{source}: {why}"),
            );
            Ok(None)
        }
    }
}
