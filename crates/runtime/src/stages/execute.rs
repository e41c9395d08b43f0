//! Stage 7, execute: the call starts — committed first unless it is a read (durability by risk,
//! `docs/pipeline.md`) — and runs in a fresh sandbox instance under the tool's limits,
//! shortened to the run's deadline and cancellable by the run.

use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::component::Val;

use toolhost_contract::{LiveSinks, Risk, RunContext};
use toolhost_registry::Tool;
use toolhost_sandbox::{CallIds, Execution, Invocation};

use super::super::endings::Ended;
use super::super::Runtime;
use super::admit::answered;
use super::Call;

/// Start the call and run it; the ending is another call's answer when the ledger says the id
/// is no longer this call's.
pub(crate) async fn execute(
    rt: &Runtime,
    c: &mut Call<'_>,
    tool: &Tool,
    params: &[Val],
) -> Ended<Execution> {
    // A read tool's start is not committed: its decisions and, if it was admitted late, its
    // admission are committed with its outcome. Every other call is admitted and marked
    // started first.
    if tool.risk == Risk::Read {
        c.journal.running();
    } else if let Err(held) = c.journal.start(rt.inline()).await {
        return Err(Box::new(
            answered(rt, c.ctx, c.call, c.prepared, held).await,
        ));
    }
    Ok(in_sandbox(rt, c.ctx, &c.call.call_id, tool, params)
        .instrument(tracing::debug_span!("execute"))
        .await)
}

/// Run `tool` with converted `params` under its limits, shortened to the run's deadline,
/// cancellable by the run.
pub(crate) async fn in_sandbox(
    rt: &Runtime,
    ctx: &RunContext,
    call_id: &str,
    tool: &Tool,
    params: &[Val],
) -> Execution {
    let mut limits = tool.limits;
    if let Some(d) = ctx.deadline {
        let left = d.saturating_duration_since(Instant::now());
        limits.deadline = limits.deadline.min(left.max(Duration::from_millis(1)));
    }
    let cancel = ctx.cancel.child_token();
    rt.executions
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    rt.sandbox
        .execute(Invocation {
            pre: tool.pre(),
            func: tool.func(),
            params,
            result_count: usize::from(tool.result().is_some()),
            limits,
            grant: &tool.grant,
            call: CallIds {
                caller: &ctx.caller,
                run_id: &ctx.run_id,
                call_id,
            },
            cancel: &cancel,
            live: LiveSinks {
                progress: ctx.progress.clone(),
                logs: ctx.logs.clone(),
            },
        })
        .await
}
