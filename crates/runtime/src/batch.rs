//! Batches: several proposed calls from one model message. Consecutive `read` tools run in
//! parallel (bounded); every other risk runs alone, in proposal order; results come back in
//! proposal order. A failing call does not cancel its siblings.

use futures::stream::{self, StreamExt};
use serde::Deserialize;

use toolhost_contract::Risk;
use toolhost_contract::{RunContext, ToolCall, ToolResult};

use super::{Prepared, Runtime};

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
        let batch: Vec<(Proposal, Prepared)> = proposals
            .iter()
            .map(|p| (p.clone(), self.prepare(&ctx.caller, &p.call)))
            .collect();
        self.run_prepared_batch(ctx, &batch).await
    }

    /// [`run_batch`](Self::run_batch) for proposals their front door already prepared, each
    /// beside its own [`Prepared`] ([`Runtime::prepare`]).
    pub async fn run_prepared_batch(
        &self,
        ctx: &RunContext,
        batch: &[(Proposal, Prepared)],
    ) -> Vec<ToolResult> {
        let mut results = Vec::with_capacity(batch.len());
        let (runnable, excess) = batch.split_at(batch.len().min(MAX_BATCH_CALLS));
        let runnable: Vec<(&Proposal, &Prepared)> = runnable.iter().map(|(p, r)| (p, r)).collect();
        // A tool the caller may not see is refused at resolve, whatever its risk.
        let is_read = |(_, prepared): &(&Proposal, &Prepared)| {
            prepared.tool().is_none_or(|t| t.risk == Risk::Read)
        };
        let mut i = 0;
        while i < runnable.len() {
            if is_read(&runnable[i]) {
                let end = runnable[i..]
                    .iter()
                    .position(|p| !is_read(p))
                    .map_or(runnable.len(), |n| i + n);
                let group: Vec<ToolResult> = stream::iter(runnable[i..end].iter().copied())
                    .map(|(p, prepared)| {
                        self.run_prepared(ctx, &p.call, prepared, p.approval_token.as_deref())
                    })
                    .buffered(MAX_PARALLEL_READS)
                    .collect()
                    .await;
                results.extend(group);
                i = end;
            } else {
                let (p, prepared) = runnable[i];
                let token = p.approval_token.as_deref();
                results.push(self.run_prepared(ctx, &p.call, prepared, token).await);
                i += 1;
            }
        }
        for (p, _) in excess {
            results.push(ToolResult::failed(
                &p.call,
                toolhost_contract::Code::BudgetExhausted,
                format!("a batch holds at most {MAX_BATCH_CALLS} calls"),
                toolhost_contract::Usage::default(),
            ));
        }
        results
    }
}
