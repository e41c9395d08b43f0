//! Batches: several proposed calls from one model message. Consecutive `read` tools run in
//! parallel (bounded); every other risk runs alone, in proposal order; results come back in
//! proposal order. A failing call does not cancel its siblings.

use futures::stream::{self, StreamExt};
use serde::Deserialize;

use crate::contract::Risk;
use crate::contract::{RunContext, ToolCall, ToolResult};

use super::Runtime;

/// Read calls of one batch that run at once.
pub const MAX_PARALLEL_READS: usize = 8;
/// Proposals one batch may hold.
pub const MAX_BATCH_CALLS: usize = 256;

/// One proposed call, with the approval token a human minted for it, if any.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    #[serde(flatten)]
    pub call: ToolCall,
    #[serde(default)]
    pub approval_token: Option<String>,
}

impl Runtime {
    /// Run a batch; the i-th result answers the i-th proposal. Proposals past
    /// [`MAX_BATCH_CALLS`] end as `budget_exhausted` without running.
    pub async fn run_batch(&self, ctx: &RunContext, proposals: &[Proposal]) -> Vec<ToolResult> {
        let mut results = Vec::with_capacity(proposals.len());
        let (runnable, excess) = proposals.split_at(proposals.len().min(MAX_BATCH_CALLS));
        let mut i = 0;
        while i < runnable.len() {
            let is_read = |p: &Proposal| {
                self.registry
                    .get(&p.call.name)
                    .is_none_or(|t| t.risk == Risk::Read)
            };
            if is_read(&runnable[i]) {
                let end = runnable[i..]
                    .iter()
                    .position(|p| !is_read(p))
                    .map_or(runnable.len(), |n| i + n);
                let group: Vec<ToolResult> = stream::iter(&runnable[i..end])
                    .map(|p| self.run_call(ctx, &p.call, p.approval_token.as_deref()))
                    .buffered(MAX_PARALLEL_READS)
                    .collect()
                    .await;
                results.extend(group);
                i = end;
            } else {
                let p = &runnable[i];
                results.push(
                    self.run_call(ctx, &p.call, p.approval_token.as_deref())
                        .await,
                );
                i += 1;
            }
        }
        for p in excess {
            results.push(ToolResult::failed(
                &p.call,
                crate::contract::Code::BudgetExhausted,
                format!("a batch holds at most {MAX_BATCH_CALLS} calls"),
                crate::contract::Usage::default(),
            ));
        }
        results
    }
}
