//! What a frontend may hand the pipeline besides the call: sinks for a guest's live progress
//! reports and log lines, and someone to ask when a call needs a human's approval.
//!
//! Both are optional and both are the frontend's business: the pipeline never blocks on a
//! progress sink (reports are dropped when it is full) and bounds how long it waits for an
//! approver only through the run's cancellation.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

/// One progress report a guest made: numbers only. The guest's message text is deliberately
/// not carried: it would be a side channel around the output checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestProgress {
    pub done: u64,
    pub total: Option<u64>,
}

/// One log line a guest wrote through the host interface, already bounded there
/// (`sandbox::host_api`: at most 1 KiB, at most 256 reports per call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestLog {
    pub level: GuestLogLevel,
    pub message: String,
}

/// A guest log line's severity, as the WIT `level` enum has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GuestLogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// Where a guest's live reports of one kind go. Sending never blocks the guest: a full or
/// closed sink drops what is offered.
#[derive(Debug)]
pub struct Sink<T>(mpsc::Sender<T>);

impl<T> Clone for Sink<T> {
    fn clone(&self) -> Self {
        Sink(self.0.clone())
    }
}

impl<T> Sink<T> {
    /// A sink holding at most `capacity` reports not yet taken, and its receiving end.
    pub fn channel(capacity: usize) -> (Sink<T>, mpsc::Receiver<T>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Sink(tx), rx)
    }

    /// Offer a report; dropped when the sink is full or closed.
    pub fn offer(&self, report: T) {
        let _ = self.0.try_send(report);
    }
}

/// Where live progress reports go (numbers only).
pub type ProgressSink = Sink<GuestProgress>;
/// Where live log lines go.
pub type LogSink = Sink<GuestLog>;

/// The live sinks of one call, each present only when the frontend wants it.
#[derive(Debug, Clone, Default)]
pub struct LiveSinks {
    pub progress: Option<ProgressSink>,
    pub logs: Option<LogSink>,
}

/// What a human is asked to approve: the exact call, as the approval will bind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt {
    pub tool: String,
    /// The tool's risk (`None` when the tool is no longer served).
    pub risk: Option<super::Risk>,
    /// The validated arguments in canonical JSON (RFC 8785), exactly as the approval binds them.
    pub canonical_arguments: String,
    pub caller: super::Caller,
    pub run_id: String,
    pub call_id: String,
    /// The digest the approval binds to (tool, arguments, principal, tenant, run): the same a
    /// `toolhost approve` handle names, and the ledger's `asked` event records.
    pub digest: String,
    /// Unix seconds after which the approval would no longer be accepted.
    pub expires_at: u64,
}

/// The human's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Approve this exact call, once.
    Approved,
    /// Approve it with this token, minted for the approval handle the human was shown (an
    /// earlier request of the same call: a task's, say). It is verified against this call like
    /// any token, so a call whose tool, rules or arguments changed since is refused
    /// (`approval_mismatch`), and spent once.
    ApprovedWith(String),
    /// Refuse it: the call ends `approval_denied`.
    Declined,
    /// Nobody could be asked, or no usable answer came (no such capability, the question
    /// failed or timed out; the reason, for the ledger): the call ends `approval_required`, and
    /// `toolhost approve` works as without an approver.
    Unavailable(&'static str),
}

/// Asks a human to approve a call.
pub trait Approver: Send + Sync {
    /// Who is asked, for the ledger ("the terminal", "the MCP client", "the approval console
    /// (operator ops-alice)", …).
    fn source(&self) -> String;

    /// Whose channel this is: the calling client's, or the operator's.
    fn channel(&self) -> super::Approvers;

    fn ask<'a>(
        &'a self,
        prompt: &'a ApprovalPrompt,
    ) -> Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>>;
}

/// A shared [`Approver`] a [`RunContext`](super::RunContext) can carry.
#[derive(Clone)]
pub struct ApproverHandle(pub Arc<dyn Approver>);

impl std::fmt::Debug for ApproverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApproverHandle(..)")
    }
}
