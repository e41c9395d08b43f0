//! One step's calls: run as a batch through the pipeline (each prepared once), the repeat
//! guard's key, the refusals of a repeated call and those after it, and of the calls of a turn
//! cut short.

use std::collections::HashMap;

use serde_json::json;

use super::turn::{ModelTurn, ProposedCall};
use toolhost_contract::canonical::{canonical_json, digest_bytes};
use toolhost_contract::{Code, RunContext, Stage, Status, ToolCall, ToolResult, Usage};
use toolhost_runtime::batch::Proposal;
use toolhost_runtime::Prepared;
use toolhost_runtime::Runtime;

/// The repeated proposal (`repeated_call`) and those after it in its turn (`cancelled`: the
/// run stops before them), each recorded with its outcome; none runs.
pub(super) async fn refuse_rest(
    runtime: &Runtime,
    ctx: &RunContext,
    (rest, prepared): (&[(ToolCall, String)], &[Option<Prepared>]),
    limit: u32,
) -> Vec<ToolResult> {
    let mut out = Vec::with_capacity(rest.len());
    for (i, ((call, _), prepared)) in rest.iter().zip(prepared).enumerate() {
        let result = if i == 0 {
            ToolResult::failed(
                call,
                Code::RepeatedCall,
                format!(
                    "not run: this call repeats an earlier one of this run ({limit} times with \
                     the same arguments); the run stops here"
                ),
                Usage::default(),
            )
        } else {
            not_run(
                call,
                "not run: the run stopped at a repeated call proposed before this one".into(),
            )
        };
        out.push(match prepared {
            Some(p) => {
                runtime
                    .refuse_prepared(ctx, call, p, Stage::Limit, result)
                    .await
            }
            None => runtime.refuse_at(ctx, call, Stage::Limit, result).await,
        });
    }
    out
}

/// The proposals of a turn that was cut short (`why`: its output limit, the provider's
/// filter), each recorded `cancelled` at the limit stage; none runs.
pub(super) async fn refuse_cut(
    runtime: &Runtime,
    ctx: &RunContext,
    calls: &[(ToolCall, String)],
    why: &str,
) -> Vec<ToolResult> {
    let mut out = Vec::with_capacity(calls.len());
    for (call, _) in calls {
        let r = not_run(call, format!("not run: {why}"));
        out.push(runtime.refuse_at(ctx, call, Stage::Limit, r).await);
    }
    out
}

/// A proposal the run stopped before: `cancelled`, saying why (model-safe).
fn not_run(call: &ToolCall, why: String) -> ToolResult {
    let mut r = ToolResult::failed(call, Code::Cancelled, why, Usage::default());
    r.status = Status::Cancelled;
    r
}

/// Run one step's calls as a batch; calls whose arguments did not arrive whole are recorded
/// with their `invalid_arguments` result instead. Results are in proposal order.
pub(super) async fn run_step(
    runtime: &Runtime,
    ctx: &RunContext,
    turn: &ModelTurn,
    calls: &[(ToolCall, String)],
    prepared: Vec<Option<Prepared>>,
) -> Vec<ToolResult> {
    let broken: HashMap<&str, &ToolResult> = turn
        .calls
        .iter()
        .zip(calls.iter())
        .filter_map(|(p, (c, _))| {
            p.arguments
                .as_ref()
                .err()
                .map(|r| (c.call_id.as_str(), &**r))
        })
        .collect();
    let batch: Vec<(Proposal, Prepared)> = calls
        .iter()
        .zip(prepared)
        .filter(|((c, _), _)| !broken.contains_key(c.call_id.as_str()))
        .filter_map(|((c, _), prepared)| {
            let proposal = Proposal {
                call: c.clone(),
                approval_token: None,
            };
            Some((proposal, prepared?))
        })
        .collect();
    let mut ran = runtime.run_prepared_batch(ctx, &batch).await.into_iter();
    let mut results = Vec::with_capacity(calls.len());
    for (c, _) in calls {
        results.push(match broken.get(c.call_id.as_str()) {
            Some(r) => {
                let mut r = (*r).clone();
                r.call_id = c.call_id.clone();
                r.tool = c.name.clone();
                runtime.refuse(ctx, c, r).await
            }
            None => ran.next().expect("one result per proposal"),
        });
    }
    results
}

/// What makes two proposals "the same call": the tool and its canonical arguments (the
/// prepared call's fingerprint), or, when the arguments did not parse, the exact text sent
/// (two different broken strings are two different calls).
pub(super) fn repeat_key(proposed: &ProposedCall, prepared: Option<&Prepared>) -> String {
    match prepared {
        Some(p) => p.fingerprint().to_string(),
        None => digest_bytes(&canonical_json(&json!({
            "tool": proposed.name,
            "arguments": {"unparsed": proposed.proposed_digest},
        }))),
    }
}
