//! The stages of one call, in order: admit → resolve → validate → authorize → approve → limit →
//! execute → check → record. Each stage may end the call; every ending is recorded in the ledger
//! (committed) before it is returned, and nothing executes that an earlier stage stopped.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::component::types::Type;
use wasmtime::component::Val;

use crate::contract::bounds::check_call;
use crate::contract::{
    ApprovalAnswer, ApprovalNeeded, ApprovalPrompt, Code, RunContext, Status, ToolCall, ToolResult,
    Usage,
};
use crate::ledger::{digest_bytes, Admission, PendingEvent};
use crate::policy::{canonical_json, ApprovalSubject, Subject};
use crate::registry::convert::{json_size_lower_bound, to_json, to_val};
use crate::registry::Tool;
use crate::sandbox::{Execution, Fault};

use super::admission::{CallLog, Late};
use super::{clip, Runtime, MAX_INPUT_BYTES, MAX_TOOL_ERROR_MESSAGE};

/// How often a duplicate of a running call checks whether the original has finished.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(20);

/// Extra wait, beyond the tool's deadline, for a running original before giving up.
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(2);

/// What admission keys a call by: the digest and size of its canonical `{tool, arguments}`.
fn admission_digest(call: &ToolCall) -> (String, u64) {
    let canonical = canonical_json(&serde_json::json!({
        "tool": call.name,
        "arguments": call.arguments,
    }));
    (digest_bytes(&canonical), canonical.len() as u64)
}

impl Runtime {
    /// Run one proposed call through every stage. `approval_token` is what a human minted for
    /// this exact call (tool, arguments, principal, tenant, run), if any. A call whose tool name,
    /// call id, run id, principal or tenant is past its bound (`contract::bounds`) is answered
    /// before admission and not recorded: what it would store is what is refused.
    pub async fn run_call(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        approval_token: Option<&str>,
    ) -> ToolResult {
        // Bounds first: nothing of an oversized name or key is written anywhere.
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        if self.unrecorded {
            return self.stages(ctx, call, approval_token).await;
        }
        // 1. admit (before anything else looks at the call)
        let (digest, size) = admission_digest(call);
        match self.admit_late(ctx, call, &digest, size) {
            Late::Claimed => {
                let result = self.stages(ctx, call, approval_token).await;
                return self.record(ctx, call, result);
            }
            Late::Duplicate => return self.await_original(ctx, call).await,
            Late::Conflict => return duplicate_call_id(call),
            Late::Fault(detail) => {
                return self.host_fault(call, "the host could not record this call", &detail)
            }
            Late::No => {}
        }
        match self
            .ledger
            .admit(&ctx.run_id, &call.call_id, &call.name, &digest, size)
        {
            Ok(Admission::New { .. }) => {}
            Ok(Admission::Replay(result)) => return result,
            Ok(Admission::Conflict) => return duplicate_call_id(call),
            Ok(Admission::InFlight) => return self.await_original(ctx, call).await,
            Err(e) => {
                return self.host_fault(call, "the host could not record this call", &e.to_string())
            }
        }
        let result = self.stages(ctx, call, approval_token).await;
        self.record(ctx, call, result)
    }

    /// Record a call that ended before the pipeline could look at it — its arguments never
    /// arrived whole, or not unambiguously (a repeated key) — with the given result (its
    /// message is the validate stage's recorded reason), so it too has exactly one recorded outcome.
    /// A repeated id replays what was recorded, as in [`Runtime::run_call`].
    pub fn refuse(&self, ctx: &RunContext, call: &ToolCall, result: ToolResult) -> ToolResult {
        if let Err(refusal) = check_call(ctx, call) {
            return refusal.result(call);
        }
        let (digest, size) = admission_digest(call);
        match self
            .ledger
            .admit(&ctx.run_id, &call.call_id, &call.name, &digest, size)
        {
            Ok(Admission::New { .. }) => {
                let code = result.code.map_or("failed", |c| c.as_str());
                let detail = super::clip(&result.message, 256).to_string();
                self.event(ctx, call, "validate", code, &detail);
                self.record(ctx, call, result)
            }
            Ok(Admission::Replay(recorded)) => recorded,
            Ok(Admission::Conflict) | Ok(Admission::InFlight) => duplicate_call_id(call),
            Err(e) => self.host_fault(call, "the host could not record this call", &e.to_string()),
        }
    }

    /// A duplicate of a running call waits for the original's recorded outcome (never runs).
    async fn await_original(&self, ctx: &RunContext, call: &ToolCall) -> ToolResult {
        let patience = self
            .registry
            .get(&call.name)
            .map_or(Duration::ZERO, |t| t.limits.deadline)
            + IN_FLIGHT_GRACE;
        let until = Instant::now() + patience;
        while Instant::now() < until {
            tokio::time::sleep(IN_FLIGHT_POLL).await;
            if let Ok(Some(r)) = self.ledger.outcome(&ctx.run_id, &call.call_id) {
                return r;
            }
        }
        ToolResult::failed(
            call,
            Code::DuplicateCallId,
            "a call with this id is still running",
            Usage::default(),
        )
    }

    fn event(&self, ctx: &RunContext, call: &ToolCall, stage: &str, decision: &str, detail: &str) {
        if self.unrecorded {
            return;
        }
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((ctx.run_id.clone(), call.call_id.clone()))
            .or_default()
            .events
            .push(PendingEvent::now(stage, decision, detail));
    }

    /// What the call has not committed yet.
    pub(super) fn take_pending(&self, ctx: &RunContext, call: &ToolCall) -> CallLog {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(ctx.run_id.clone(), call.call_id.clone()))
            .unwrap_or_default()
    }

    /// Stages 2–8; the caller records whatever comes back.
    async fn stages(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        approval_token: Option<&str>,
    ) -> ToolResult {
        // 2. resolve
        let Some(tool) = self.registry.get(&call.name) else {
            self.event(ctx, call, "resolve", "unknown_tool", "");
            return ToolResult::failed(
                call,
                Code::UnknownTool,
                format!("there is no tool named {:?}", clip(&call.name, 64)),
                Usage::default(),
            );
        };
        // 3. validate: size cap, JSON Schema, then the exact WIT types
        let params = match self.validate(tool, &call.arguments) {
            Ok(p) => p,
            Err(message) => {
                self.event(ctx, call, "validate", "invalid_arguments", "");
                return ToolResult::failed(call, Code::InvalidArguments, message, Usage::default());
            }
        };
        self.note_content(ctx, call);
        // 4. authorize, with the trusted subject only
        let subject = Subject {
            principal: ctx.principal.clone(),
            tenant: ctx.tenant.clone(),
        };
        let decision =
            self.policy
                .authorize(&subject, tool.name.as_str(), tool.risk, &call.arguments);
        self.event(
            ctx,
            call,
            "authorize",
            if decision.allowed {
                "allowed"
            } else {
                "unauthorized"
            },
            &decision.reason,
        );
        if !decision.allowed {
            return ToolResult::failed(
                call,
                Code::Unauthorized,
                decision.message,
                Usage::default(),
            );
        }
        // 5. approve
        if crate::policy::needs_approval(tool.approval, tool.risk) {
            if let Err(r) = self.approve(ctx, call, tool, approval_token).await {
                return *r;
            }
        }
        // 6. limit
        if let Err(why) = self
            .budgets
            .take(&ctx.run_id, tool.name.as_str(), &ctx.budgets)
        {
            self.event(ctx, call, "limit", "budget_exhausted", why);
            return ToolResult::failed(call, Code::BudgetExhausted, why, Usage::default());
        }
        if !self.rate.allow(&ctx.principal, Instant::now()) {
            self.event(ctx, call, "limit", "rate_limited", "principal rate");
            return ToolResult::failed(
                call,
                Code::RateLimited,
                "too many calls; try again shortly",
                Usage::default(),
            );
        }
        let Some(_slot) = self.concurrency.try_slot() else {
            self.event(ctx, call, "limit", "rate_limited", "host concurrency");
            return ToolResult::failed(
                call,
                Code::RateLimited,
                "the host is busy; try again shortly",
                Usage::default(),
            );
        };
        if ctx.cancel.is_cancelled() {
            self.event(ctx, call, "execute", "cancelled", "before start");
            return cancelled(call, Status::Cancelled, Code::Cancelled);
        }
        if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
            self.event(
                ctx,
                call,
                "execute",
                "deadline_exceeded",
                "run deadline passed before start",
            );
            return ToolResult::failed(
                call,
                Code::DeadlineExceeded,
                "the run's time is up",
                Usage::default(),
            );
        }
        // 7. execute
        if !self.unrecorded {
            if let Err(answer) = self.start(ctx, call) {
                return answer;
            }
        }
        let exec = self.execute_in(ctx, tool, &params).await;
        // 8. check
        let result = self.check(call, tool, exec);
        self.event(
            ctx,
            call,
            "execute",
            result.code.map_or("completed", |c| c.as_str()),
            "",
        );
        result
    }

    /// Stage 5: without a token the call ends `approval_required` with a handle a human can
    /// approve — unless the run has an approver, who is asked first (an accept mints the token
    /// for this exact call, a decline ends it `approval_denied`). With a token, the token must
    /// be genuine (`approval_invalid`), for this caller (`approval_wrong_principal`) and this
    /// call (`approval_mismatch`), unexpired (`approval_expired`) and unused
    /// (`approval_reused`).
    #[allow(clippy::result_large_err)]
    async fn approve(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        tool: &Tool,
        token: Option<&str>,
    ) -> Result<(), Box<ToolResult>> {
        let subject = ApprovalSubject {
            tool: tool.name.to_string(),
            arguments: call.arguments.clone(),
            principal: ctx.principal.clone(),
            tenant: ctx.tenant.clone(),
            run_id: ctx.run_id.clone(),
        };
        let now = unix_now();
        let asked;
        let token = match token {
            Some(t) => t,
            None => {
                let request = self.approval_key.request(&subject, now, self.approval_ttl);
                match self.ask_approver(ctx, call, &subject, &request).await? {
                    Some(minted) => {
                        asked = minted;
                        asked.as_str()
                    }
                    None => {
                        self.event(ctx, call, "approve", "approval_required", &request.digest);
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
        let consume =
            |id: &str, expires: i64| self.ledger.consume_token(id, expires).unwrap_or(false);
        match self.approval_key.verify(token, &subject, now, consume) {
            Ok(()) => {
                self.event(ctx, call, "approve", "approved", "");
                Ok(())
            }
            Err(failure) => {
                // Each failure has its own code and a fixed model-safe message; the reason
                // (which check, for the operator) goes to the ledger only.
                let code = failure.code();
                self.event(ctx, call, "approve", code.as_str(), &failure.to_string());
                Err(Box::new(ToolResult::failed(
                    call,
                    code,
                    failure.message(),
                    Usage::default(),
                )))
            }
        }
    }

    /// Ask the run's approver, if it has one. `Some(token)`: approved, with a token minted for
    /// exactly this request (it still goes through verification and is consumed once).
    /// A decline ends the call here with `approval_denied`.
    #[allow(clippy::result_large_err)]
    async fn ask_approver(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        subject: &ApprovalSubject,
        request: &crate::policy::ApprovalRequest,
    ) -> Result<Option<String>, Box<ToolResult>> {
        let Some(approver) = ctx.approver.as_ref() else {
            return Ok(None);
        };
        let prompt = ApprovalPrompt {
            tool: subject.tool.clone(),
            canonical_arguments: String::from_utf8_lossy(&canonical_json(&subject.arguments))
                .into_owned(),
            principal: subject.principal.clone(),
            tenant: subject.tenant.clone(),
            expires_at: request.expires_at,
        };
        self.event(ctx, call, "approve", "asked", &request.digest);
        let answer = tokio::select! {
            a = approver.0.ask(&prompt) => a,
            _ = ctx.cancel.cancelled() => ApprovalAnswer::Unavailable,
        };
        match answer {
            ApprovalAnswer::Approved => match self.approval_key.mint(&request.handle) {
                Ok(token) => Ok(Some(token)),
                Err(e) => {
                    self.event(ctx, call, "approve", "mint_failed", &e.to_string());
                    Ok(None)
                }
            },
            ApprovalAnswer::Declined => {
                self.event(
                    ctx,
                    call,
                    "approve",
                    "approval_denied",
                    "declined by a human",
                );
                Err(Box::new(ToolResult::failed(
                    call,
                    Code::ApprovalDenied,
                    "a human declined this call",
                    Usage::default(),
                )))
            }
            ApprovalAnswer::Unavailable => Ok(None),
        }
    }

    /// Stage 3: the validated parameters in WIT order, or a model-safe reason why not.
    pub(crate) fn validate(&self, tool: &Tool, args: &Value) -> Result<Vec<Val>, String> {
        let size = serde_json::to_vec(args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_INPUT_BYTES {
            return Err(format!(
                "the arguments are larger than {MAX_INPUT_BYTES} bytes"
            ));
        }
        if let Err(violations) = tool.input_validator.validate(args) {
            let text: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
            return Err(format!(
                "invalid arguments: {}",
                clip(&text.join("; "), 1024)
            ));
        }
        let obj = args
            .as_object()
            .ok_or_else(|| "the arguments must be a JSON object".to_string())?;
        if let Some(extra) = obj
            .keys()
            .find(|k| !tool.params.iter().any(|(n, _)| n == *k))
        {
            return Err(format!("unexpected argument {:?}", clip(extra, 64)));
        }
        tool.params
            .iter()
            .map(|(name, ty)| {
                let v = obj
                    .get(name)
                    .ok_or_else(|| format!("missing argument {name:?}"))?;
                to_val(ty, v, &format!("/{name}"))
                    .map_err(|e| format!("invalid arguments: {}", clip(&e.to_string(), 512)))
            })
            .collect()
    }

    /// Stage 8: limits, output conversion, output schema.
    pub(crate) fn check(&self, call: &ToolCall, tool: &Tool, exec: Execution) -> ToolResult {
        let mut usage = Usage {
            fuel_consumed: exec.fuel_consumed,
            wall_ms: exec.wall.as_millis() as u64,
            memory_peak_bytes: exec.memory_peak_bytes,
            output_bytes: exec.stdio_bytes,
        };
        let results = match exec.outcome {
            Ok(r) => r,
            Err(fault) => {
                let (code, message, detail) = match fault {
                    Fault::FuelExhausted => (
                        Code::FuelExhausted,
                        "the tool used up its compute budget",
                        None,
                    ),
                    Fault::DeadlineExceeded => (
                        Code::DeadlineExceeded,
                        "the tool did not finish within its time limit",
                        None,
                    ),
                    Fault::MemoryExceeded => (
                        Code::MemoryExceeded,
                        "the tool exceeded its memory limit",
                        None,
                    ),
                    Fault::OutputTooLarge => (
                        Code::OutputTooLarge,
                        "the tool produced more output than it is allowed",
                        None,
                    ),
                    Fault::Cancelled => {
                        let mut r = if tool.risk == crate::registry::config::Risk::Read {
                            cancelled(call, Status::Cancelled, Code::Cancelled)
                        } else {
                            cancelled(call, Status::OutcomeUnknown, Code::CancelledAfterStart)
                        };
                        r.usage = usage;
                        return r;
                    }
                    Fault::Trap { detail } => (Code::GuestTrap, "the tool crashed", Some(detail)),
                    Fault::HostBusy => (
                        Code::HostError,
                        "the host is running as many calls as it can; retry later",
                        None,
                    ),
                    Fault::Setup { detail } => (
                        Code::HostError,
                        "the host could not run the tool",
                        Some(detail),
                    ),
                };
                if detail.is_none() && exec.stderr.is_empty() {
                    return ToolResult::failed(call, code, message, usage);
                }
                let detail = detail.unwrap_or_else(|| code.to_string());
                return self.failed_with_diagnostic(
                    call,
                    tool,
                    (code, message),
                    usage,
                    &detail,
                    &exec.stderr,
                );
            }
        };
        if results.iter().map(json_size_lower_bound).sum::<u64>() > tool.limits.output_bytes {
            return ToolResult::failed(
                call,
                Code::OutputTooLarge,
                "the tool returned more output than it is allowed",
                usage,
            );
        }
        let value = match (results.into_iter().next(), &tool.result) {
            (None, _) => Ok(Value::Null),
            (Some(Val::Result(r)), Some(Type::Result(_))) => match r {
                Ok(ok) => ok.map_or(Ok(Value::Null), |v| to_json(&v, "output")),
                Err(err) => {
                    let rendered = match err.map(|v| to_json(&v, "error")) {
                        Some(Ok(Value::String(s))) => s,
                        Some(Ok(v)) => v.to_string(),
                        Some(Err(_)) | None => "no detail".to_string(),
                    };
                    return ToolResult::failed(
                        call,
                        Code::ToolError,
                        format!(
                            "the tool reported an error: {}",
                            clip(&rendered, MAX_TOOL_ERROR_MESSAGE)
                        ),
                        usage,
                    );
                }
            },
            (Some(v), _) => to_json(&v, "output"),
        };
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                return self.failed_with_diagnostic(
                    call,
                    tool,
                    (
                        Code::InvalidOutput,
                        "the tool returned a value that has no JSON form",
                    ),
                    usage,
                    &e.to_string(),
                    &exec.stderr,
                );
            }
        };
        let size = serde_json::to_vec(&value)
            .map(|v| v.len() as u64)
            .unwrap_or(u64::MAX);
        usage.output_bytes = usage.output_bytes.saturating_add(size);
        if size > tool.limits.output_bytes {
            return ToolResult::failed(
                call,
                Code::OutputTooLarge,
                "the tool returned more output than it is allowed",
                usage,
            );
        }
        if let Err(violations) = tool.output_validator.validate(&value) {
            let detail: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
            return self.failed_with_diagnostic(
                call,
                tool,
                (
                    Code::InvalidOutput,
                    "the tool returned a value that does not match its output schema",
                ),
                usage,
                &detail.join("; "),
                &exec.stderr,
            );
        }
        ToolResult::completed(call, value, usage)
    }

    /// Stage 9: commit the outcome before it is returned. If that fails the effect may have
    /// happened but is not recorded: say so rather than pretend.
    fn record(&self, ctx: &RunContext, call: &ToolCall, result: ToolResult) -> ToolResult {
        let recorded = match self.late_admission(ctx, call) {
            Some((late, events)) => {
                let admitted = self.ledger.admit_finished(
                    &ctx.run_id,
                    &call.call_id,
                    &late.opening(call, &events),
                    &result,
                );
                // The claim ends here; a decision a duplicate added meanwhile is recorded after.
                let leftover = self.take_pending(ctx, call);
                for e in &leftover.events {
                    let _ = self.ledger.event(
                        &ctx.run_id,
                        &call.call_id,
                        &e.stage,
                        &e.decision,
                        &e.detail,
                    );
                }
                match admitted {
                    Ok(Admission::New { .. }) => Ok(()),
                    Ok(other) => return self.lost_admission(call, other),
                    Err(e) => Err(e),
                }
            }
            None => {
                let log = self.take_pending(ctx, call);
                if log.settled {
                    return result;
                }
                self.ledger
                    .finish_with(&ctx.run_id, &call.call_id, &result, &log.events)
            }
        };
        match recorded {
            Ok(()) => result,
            Err(e) => {
                let detail = e.to_string();
                let mut r = self.host_fault(
                    call,
                    "the host could not record this call's outcome",
                    &detail,
                );
                r.status = Status::OutcomeUnknown;
                r
            }
        }
    }

    /// A failure whose operator detail (and the guest's stderr) goes to the diagnostic log.
    fn failed_with_diagnostic(
        &self,
        call: &ToolCall,
        tool: &Tool,
        (code, message): (Code, &str),
        usage: Usage,
        detail: &str,
        stderr: &[u8],
    ) -> ToolResult {
        let mut r = ToolResult::failed(call, code, message, usage);
        r.diagnostic_id =
            Some(
                self.diagnostics
                    .record(tool.name.as_str(), &call.call_id, detail, stderr),
            );
        r
    }

    pub(super) fn host_fault(&self, call: &ToolCall, message: &str, detail: &str) -> ToolResult {
        let mut r = ToolResult::failed(call, Code::HostError, message, Usage::default());
        r.diagnostic_id = Some(
            self.diagnostics
                .record(&call.name, &call.call_id, detail, b""),
        );
        r
    }
}

pub(super) fn duplicate_call_id(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::DuplicateCallId,
        "this call id was already used for a different call",
        Usage::default(),
    )
}

fn cancelled(call: &ToolCall, status: Status, code: Code) -> ToolResult {
    let mut r = ToolResult::failed(call, code, "the call was cancelled", Usage::default());
    r.status = status;
    r
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
