//! The vocabulary every stage speaks: a proposed [`ToolCall`], the [`ToolResult`] that ends it,
//! its [`Status`] and its stable failure [`Code`], and the [`Usage`] it consumed.
//!
//! A `ToolCall` is untrusted input from a model. A `ToolResult` is what the model (and the
//! ledger) sees: its `message` is always safe to show a model — no host paths, no traps, no
//! policy internals.

pub mod bounds;
mod context;
pub mod frame;
mod hooks;
mod problem;
mod render;
mod risk;
pub mod strict_json;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use context::{Budgets, RunContext};
pub use hooks::{
    ApprovalAnswer, ApprovalPrompt, Approver, ApproverHandle, GuestLog, GuestLogLevel,
    GuestProgress, LiveSinks, LogSink, ProgressSink, Sink,
};
pub use problem::ConfigProblem;
pub use render::DEFAULT_MODEL_MESSAGE_BYTES;
pub use risk::{ApprovalMode, Risk};

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

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and returned a value that passed every check.
    Completed,
    /// A stage stopped the call, or the tool failed; `code` says which.
    Failed,
    /// The call was cancelled before it could finish.
    Cancelled,
    /// The call may or may not have had its effect (the host lost track of it).
    OutcomeUnknown,
}

/// Why a call did not complete. The serialized names are stable: callers match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    UnknownTool,
    InvalidArguments,
    Unauthorized,
    ApprovalRequired,
    /// A human declined the call.
    ApprovalDenied,
    /// A genuine approval token for this call, past its expiry.
    ApprovalExpired,
    /// The approval token is malformed, forged or altered (not minted with this host's key).
    ApprovalInvalid,
    /// A genuine approval token, minted for another call (tool, arguments or run).
    ApprovalMismatch,
    /// A genuine approval token, already used once.
    ApprovalReused,
    /// A genuine approval token, minted for another principal or tenant.
    ApprovalWrongPrincipal,
    BudgetExhausted,
    RateLimited,
    DuplicateCallId,
    DeadlineExceeded,
    FuelExhausted,
    MemoryExceeded,
    OutputTooLarge,
    GuestTrap,
    ToolError,
    InvalidOutput,
    Cancelled,
    CancelledAfterStart,
    /// The host could not set the call up (not the guest's fault); see the diagnostic log.
    HostError,
}

impl Code {
    /// The stable snake_case name of this code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::UnknownTool => "unknown_tool",
            Code::InvalidArguments => "invalid_arguments",
            Code::Unauthorized => "unauthorized",
            Code::ApprovalRequired => "approval_required",
            Code::ApprovalDenied => "approval_denied",
            Code::ApprovalExpired => "approval_expired",
            Code::ApprovalInvalid => "approval_invalid",
            Code::ApprovalMismatch => "approval_mismatch",
            Code::ApprovalReused => "approval_reused",
            Code::ApprovalWrongPrincipal => "approval_wrong_principal",
            Code::BudgetExhausted => "budget_exhausted",
            Code::RateLimited => "rate_limited",
            Code::DuplicateCallId => "duplicate_call_id",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::FuelExhausted => "fuel_exhausted",
            Code::MemoryExceeded => "memory_exceeded",
            Code::OutputTooLarge => "output_too_large",
            Code::GuestTrap => "guest_trap",
            Code::ToolError => "tool_error",
            Code::InvalidOutput => "invalid_output",
            Code::Cancelled => "cancelled",
            Code::CancelledAfterStart => "cancelled_after_start",
            Code::HostError => "host_error",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
        }
    }
}
