//! What a frontend may hand the pipeline besides the call: a sink for a guest's live progress
//! reports, and someone to ask when a call needs a human's approval.
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

/// Where live progress reports go. Sending never blocks the guest: a full sink drops reports.
#[derive(Debug, Clone)]
pub struct ProgressSink(mpsc::Sender<GuestProgress>);

impl ProgressSink {
    /// A sink holding at most `capacity` reports not yet taken, and its receiving end.
    pub fn channel(capacity: usize) -> (ProgressSink, mpsc::Receiver<GuestProgress>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (ProgressSink(tx), rx)
    }

    /// Offer a report; dropped when the sink is full or closed.
    pub fn offer(&self, report: GuestProgress) {
        let _ = self.0.try_send(report);
    }
}

/// What a human is asked to approve: the exact call, as the approval will bind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt {
    pub tool: String,
    /// The validated arguments in canonical JSON (RFC 8785), exactly as the approval binds them.
    pub canonical_arguments: String,
    pub principal: String,
    pub tenant: String,
    /// Unix seconds after which the approval would no longer be accepted.
    pub expires_at: u64,
}

/// The human's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Approve this exact call, once.
    Approved,
    /// Refuse it: the call ends `approval_denied`.
    Declined,
    /// Nobody could be asked (no such capability, the question failed or timed out): the call
    /// ends `approval_required`, and `toolhost approve` works as without an approver.
    Unavailable,
}

/// Asks a human to approve a call.
pub trait Approver: Send + Sync {
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
