//! The vocabulary every stage speaks: a proposed [`ToolCall`], the [`ToolResult`] that ends it,
//! its [`Status`] and its stable failure [`Code`], and the [`Usage`] it consumed.
//!
//! A `ToolCall` is untrusted input from a model. A `ToolResult` is what the model (and the
//! ledger) sees: its `message` is always safe to show a model — no host paths, no traps, no
//! policy internals.

pub mod bounds;
mod caller;
pub mod canonical;
mod context;
mod digest;
pub mod frame;
mod hooks;
pub mod measure;
pub mod pending;
mod problem;
mod render;
mod risk;
pub mod strict_json;
mod wire;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use caller::{Caller, Origin};
pub use context::{Budgets, RunContext};
pub use digest::Sha256Digest;
pub use hooks::{
    ApprovalAnswer, ApprovalPrompt, Approver, ApproverHandle, GuestLog, GuestLogLevel,
    GuestProgress, LiveSinks, LogSink, ProgressSink, Sink,
};
pub use pending::{for_human, Pending};
pub use problem::{error_chain, ConfigProblem, Listed};
pub use render::{json_terminal_safe, log_safe, terminal_safe, DEFAULT_MODEL_MESSAGE_BYTES};
pub use risk::{ApprovalMode, Approvers, Risk, RiskSource, TaskMode};

/// A call proposed by a model: which tool, correlated by which id, with which arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the caller correlates the result with.
    pub call_id: String,
    /// The model-facing tool name.
    pub name: String,
    /// The proposed arguments, not yet validated.
    pub arguments: Value,
}

wire_enum! {
    /// How a call ended.
    pub enum Status {
        /// The tool ran and returned a value that passed every check.
        Completed = "completed",
        /// A stage stopped the call, or the tool failed; `code` says which.
        Failed = "failed",
        /// The call was cancelled before it could finish.
        Cancelled = "cancelled",
        /// The call may or may not have had its effect (the host lost track of it).
        OutcomeUnknown = "outcome_unknown",
    }
}

wire_enum! {
    /// Why a call did not complete. The wire names are stable: callers match on them.
    pub enum Code {
        UnknownTool = "unknown_tool",
        InvalidArguments = "invalid_arguments",
        Unauthorized = "unauthorized",
        ApprovalRequired = "approval_required",
        /// A human declined the call.
        ApprovalDenied = "approval_denied",
        /// A genuine approval token for this call, past its expiry.
        ApprovalExpired = "approval_expired",
        /// The approval token is malformed, forged or altered (not minted with this host's key).
        ApprovalInvalid = "approval_invalid",
        /// A genuine approval token, minted for another call (tool, arguments or run).
        ApprovalMismatch = "approval_mismatch",
        /// A genuine approval token, already used once.
        ApprovalReused = "approval_reused",
        /// A genuine approval token, minted for another principal or tenant.
        ApprovalWrongPrincipal = "approval_wrong_principal",
        BudgetExhausted = "budget_exhausted",
        /// The agent loop refused a proposal that repeats an earlier call of the run (same tool,
        /// same arguments) as often as its repeat limit allows.
        RepeatedCall = "repeated_call",
        RateLimited = "rate_limited",
        DuplicateCallId = "duplicate_call_id",
        DeadlineExceeded = "deadline_exceeded",
        FuelExhausted = "fuel_exhausted",
        MemoryExceeded = "memory_exceeded",
        OutputTooLarge = "output_too_large",
        /// The tool held more of the host's own resources (handles and descriptors, directory
        /// listings) than one call may.
        HostResourcesExceeded = "host_resources_exceeded",
        GuestTrap = "guest_trap",
        ToolError = "tool_error",
        InvalidOutput = "invalid_output",
        Cancelled = "cancelled",
        CancelledAfterStart = "cancelled_after_start",
        /// The host could not set the call up (not the guest's fault); see the diagnostic log.
        HostError = "host_error",
        /// An operator checked a call whose outcome the host lost and confirmed that it never
        /// took effect (`toolhost reconcile`).
        ConfirmedNotRun = "confirmed_not_run",
    }
}

wire_enum! {
    /// The pipeline stage a ledger event belongs to, in pipeline order (`recover` is start-up's).
    pub enum Stage {
        Admit = "admit",
        Resolve = "resolve",
        Validate = "validate",
        Authorize = "authorize",
        Approve = "approve",
        Limit = "limit",
        Execute = "execute",
        Check = "check",
        Record = "record",
        Recover = "recover",
        /// An operator's record of what a call that ended `outcome_unknown` really did.
        Reconcile = "reconcile",
    }
}

wire_enum! {
    /// What a stage decided, besides ending the call with a [`Code`] (whose names it shares).
    pub enum Decision {
        /// Admission: a call the ledger has not seen.
        New = "new",
        /// Admission: the same call again; its recorded outcome is returned.
        Replay = "replay",
        /// Admission: the same id with other arguments; the original is left alone.
        Conflict = "conflict",
        /// Admission: the same call is still running.
        InFlight = "in_flight",
        /// Authorization: a rule (or the default) allows the call.
        Allowed = "allowed",
        /// Approval: a genuine token for this call.
        Approved = "approved",
        /// Approval: a human was asked.
        Asked = "asked",
        /// Approval: the approver gave no usable answer (the reason is the detail).
        Unanswered = "unanswered",
        /// Approval: the human approved, but the token could not be minted.
        MintFailed = "mint_failed",
        /// Execution: the tool ran and its output passed every check.
        Completed = "completed",
        /// Record: an outcome the ledger could not take when the call ended, recorded once it
        /// could (the caller was told `outcome_unknown` then).
        RecordedLate = "recorded_late",
        /// Recovery: a call a previous process left open.
        OutcomeUnknown = "outcome_unknown",
    }
}

/// What one call consumed inside the sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Fuel units the guest burned (roughly, Wasm instructions).
    pub fuel_consumed: u64,
    /// Wall-clock time of the execution stage, in milliseconds.
    pub wall_ms: u64,
    /// The largest linear memory the guest reached, in bytes.
    pub memory_peak_bytes: u64,
    /// Bytes the guest produced: stdout + stderr + the serialized result.
    pub output_bytes: u64,
}

/// An approval a call is waiting for. The handle names the exact call; only the host's key can
/// turn it into a token, so a model holding it gains nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalNeeded {
    pub handle: String,
    /// Unix seconds after which the approval is refused.
    pub expires_at: u64,
}

/// The one terminal result of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub tool: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Code>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Safe to show a model.
    pub message: String,
    /// Where the operator finds the detail (trap, guest stderr) in the diagnostic log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic_id: Option<String>,
    /// With `approval_required`: what a human approves (`toolhost approve HANDLE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalNeeded>,
    pub usage: Usage,
    /// Set when this is not what the host saw but what an operator recorded for a call whose
    /// outcome the host lost (`toolhost reconcile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled: Option<Reconciled>,
    /// This call's id was already decided: the result is the recorded one, returned again
    /// without running anything. Never stored or sent; set by the admit stage.
    #[serde(skip)]
    pub replayed: bool,
}

/// An operator's record of a call that ended `outcome_unknown`: the result it carries is the
/// operator's claim, checked against the tool's output schema, not an observation of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciled {
    /// When the operator recorded it (unix milliseconds, the ledger's clock).
    pub at_ms: i64,
}

impl ToolResult {
    /// A completed call with its output.
    pub fn completed(call: &ToolCall, output: Value, usage: Usage) -> Self {
        ToolResult {
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            status: Status::Completed,
            code: None,
            output: Some(output),
            message: "completed".to_string(),
            diagnostic_id: None,
            approval: None,
            usage,
            reconciled: None,
            replayed: false,
        }
    }

    /// A failed call with its code and a model-safe message.
    pub fn failed(call: &ToolCall, code: Code, message: impl Into<String>, usage: Usage) -> Self {
        ToolResult {
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            status: Status::Failed,
            code: Some(code),
            output: None,
            message: message.into(),
            diagnostic_id: None,
            approval: None,
            usage,
            reconciled: None,
            replayed: false,
        }
    }
}
