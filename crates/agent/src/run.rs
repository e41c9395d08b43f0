//! The loop: ask the model, run what it proposes through the pipeline as one batch, feed the
//! results back, until a guard stops the run — and say which.
//!
//! Ledger call ids: `p:<provider id>` when the provider gave one (so a provider repeating an id
//! is answered from the ledger, never executed again), else `s<step>.<index>`. The provider's
//! id goes back with the result, beside whatever the ledger calls it; where the provider also
//! names the item that carried the call (Responses `fc_…`), the transcript keeps both.
//!
//! A response cut at its output limit, or withheld by the provider's filter, ends the run with
//! that stop reason; nothing it proposed runs.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use super::guards::{AgentConfig, StopReason};
use super::history::{Entry, History, SentCall};
use super::provider::{Failed, Provider, ProviderError};
use super::redact::Redactor;
use super::schema::provider_schema;
use super::step::{refuse_cut, refuse_rest, repeat_key, run_step};
use super::turn::{Finish, ModelTurn, TokenUsage};
use super::wire::{request_body, RequestOptions, ToolSpec};
use toolhost_contract::{Caller, Code, RunContext, Status, ToolCall};
use toolhost_runtime::guards::TOOL_CALLS_EXHAUSTED;
use toolhost_runtime::Prepared;
use toolhost_runtime::Runtime;

/// How a run ended, for a screen and for JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run_id: String,
    pub stopped_by: StopReason,
    /// More about the stop (the provider error, the repeated tool), operator-safe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The model's last text, if it gave any.
    pub final_text: Option<String>,
    pub steps: u32,
    /// Model requests sent, retries included.
    pub model_requests: u32,
    /// Tool calls decided in this run, by terminal status (`completed`, `failed`, …).
    pub tool_calls: BTreeMap<String, u64>,
    /// Tool calls decided in this run, by failure code.
    pub failures: BTreeMap<String, u64>,
    /// Tool calls whose id the ledger had already decided: answered with the recorded result,
    /// not run again (a provider that repeats an id).
    pub replayed: u64,
    pub tokens: TokenUsage,
}

/// The tools as the endpoint sees them: those the run's caller may see
/// ([`Runtime::visibility`]), so a model is never offered a tool it will be refused outright,
/// each with the schema that caller is offered.
pub fn advertised_tools(runtime: &Runtime, caller: &Caller) -> Vec<ToolSpec> {
    let seen = runtime.visibility(caller);
    seen.tools()
        .map(|t| ToolSpec {
            name: t.name.as_str().to_string(),
            description: t.description.clone(),
            parameters: provider_schema(&seen.input_schema(t)),
        })
        .collect()
}

/// The initial conversation for a prompt: `system_prompt`, then the prompt.
pub fn prompt_messages(prompt: &str, config: &AgentConfig) -> History {
    History::prompt(config.system_prompt.as_deref(), prompt)
}

struct State {
    summary: Summary,
    repeats: HashMap<String, u32>,
}

/// End the run: the summary says why (redacted once more), and so does the ledger.
fn end_run(
    runtime: &Runtime,
    ctx: &RunContext,
    redactor: &Redactor,
    mut st: State,
    why: StopReason,
    detail: Option<String>,
) -> Summary {
    let s = &mut st.summary;
    s.stopped_by = why;
    s.detail = detail.map(|d| redactor.redact(&d));
    s.final_text = s.final_text.take().map(|t| redactor.redact_secret(&t));
    let text = match &s.detail {
        Some(d) => format!("{why}: {d}"),
        None => why.to_string(),
    };
    note(runtime, ctx, s.steps, "run_stopped", &text);
    st.summary
}

/// Run the loop to a stop. `ctx` carries the run id, identity, cancellation (Ctrl-C) and the
/// approver, if any; its budgets are set from `config` here. The run is one `agent_run` span,
/// the parent of its model requests and its calls.
pub async fn run_agent(
    runtime: &Runtime,
    provider: &Provider,
    model: &str,
    messages: History,
    config: &AgentConfig,
    ctx: RunContext,
) -> Summary {
    use toolhost_contract::log_safe;
    let span = tracing::debug_span!(
        "agent_run",
        run_id = %log_safe(&ctx.run_id),
        principal = %log_safe(&ctx.caller.principal),
        tenant = %log_safe(&ctx.caller.tenant),
    );
    drive(runtime, provider, model, messages, config, ctx)
        .instrument(span)
        .await
}

async fn drive(
    runtime: &Runtime,
    provider: &Provider,
    model: &str,
    mut messages: History,
    config: &AgentConfig,
    mut ctx: RunContext,
) -> Summary {
    let started = Instant::now();
    let deadline = started + config.deadline();
    ctx.deadline = Some(deadline);
    ctx.budgets.max_calls = Some(config.max_tool_calls);
    ctx.budgets.max_calls_per_tool = config.max_calls_per_tool;
    let tools = advertised_tools(runtime, &ctx.caller);
    let mut st = State {
        summary: Summary {
            run_id: ctx.run_id.clone(),
            stopped_by: StopReason::Finished,
            detail: None,
            final_text: None,
            steps: 0,
            model_requests: 0,
            tool_calls: BTreeMap::new(),
            failures: BTreeMap::new(),
            replayed: 0,
            tokens: TokenUsage::default(),
        },
        repeats: HashMap::new(),
    };
    // Everything the summary says of the provider goes through its redactor once more.
    let redactor = provider.redactor();
    let ctx = &ctx;
    let stop = |st, why, detail| end_run(runtime, ctx, redactor, st, why, detail);
    loop {
        if ctx.cancel.is_cancelled() {
            return stop(st, StopReason::Cancelled, None);
        }
        if Instant::now() >= deadline {
            return stop(st, StopReason::Deadline, None);
        }
        if config
            .max_tokens
            .is_some_and(|m| st.summary.tokens.total >= m)
        {
            return stop(st, StopReason::TokenBudget, None);
        }
        if st.summary.steps >= config.max_steps {
            return stop(st, StopReason::MaxSteps, None);
        }
        st.summary.steps += 1;
        let step = st.summary.steps;
        let options = RequestOptions {
            stream: provider.options().stream,
            max_output_tokens: config.max_output_tokens,
            chat_limit_field: config.output_limit_field,
        };
        let body = request_body(provider.api(), model, &messages, &tools, options);
        let request_bytes = serde_json::to_vec(&body).unwrap_or_default();
        transcript(runtime, ctx, step, "model_request", &request_bytes);
        let completion = provider.complete(&body, &ctx.cancel, deadline).await;
        let attempts = match &completion {
            Ok(c) => &c.attempts,
            Err(f) => &f.attempts,
        };
        st.summary.model_requests += u32::try_from(attempts.len()).unwrap_or(u32::MAX);
        for (n, a) in attempts.iter().enumerate() {
            let mut text = format!("attempt {}: {} after {} ms", n + 1, a.outcome, a.elapsed_ms);
            if !a.detail.is_empty() {
                text.push_str(": ");
                text.push_str(&a.detail);
            }
            note(runtime, ctx, step, "model_attempt", &text);
        }
        let completion = match completion {
            Ok(c) => c,
            Err(Failed { error, .. }) => {
                return match error {
                    ProviderError::Cancelled => stop(st, StopReason::Cancelled, None),
                    ProviderError::Deadline => stop(st, StopReason::Deadline, None),
                    error => {
                        let detail = format!("{}: {error}", error.code());
                        stop(st, StopReason::ProviderError, Some(detail))
                    }
                };
            }
        };
        let _ = runtime.transcripts().entry_digested(
            (&ctx.run_id, step, "model_response"),
            &completion.response_digest,
            completion.response_bytes,
        );
        let turn = completion.turn;
        if let Some(u) = turn.usage {
            let t = &mut st.summary.tokens;
            t.prompt = t.prompt.saturating_add(u.prompt);
            t.completion = t.completion.saturating_add(u.completion);
            t.total = t.total.saturating_add(u.total);
            let m = toolhost_telemetry::metrics();
            m.model_tokens("prompt", u.prompt);
            m.model_tokens("completion", u.completion);
        }
        if turn.content.is_some() {
            st.summary.final_text = turn.content.clone();
        }
        let (assistant, calls) = assistant_message(step, &turn);
        if let Some((why, detail)) = cut_short(&turn) {
            // Each proposal of a cut turn is recorded, cancelled, and none runs.
            for result in refuse_cut(runtime, ctx, &calls, &detail).await {
                tally(&mut st.summary, &result);
            }
            return stop(st, why, Some(detail));
        }
        if turn.calls.is_empty() {
            return stop(st, StopReason::Finished, None);
        }
        messages.0.push(assistant);
        for (c, (call, _)) in turn.calls.iter().zip(&calls) {
            if let Some(item) = &c.item_id {
                let ids = format!(
                    "call {}: provider call id {}, item id {item}",
                    call.call_id,
                    c.provider_id.as_deref().unwrap_or("(none)")
                );
                note(runtime, ctx, step, "provider_ids", &ids);
            }
        }

        // Repeated-call detection, before anything runs: the repeat that reaches the limit and
        // every proposal after it are refused (recorded, never run), and the run stops.
        // Each call whose arguments arrived whole is prepared once (its tool, its canonical
        // form): the repeat guard's key and the pipeline read the same.
        let mut prepared: Vec<Option<Prepared>> = calls
            .iter()
            .zip(&turn.calls)
            .map(|((c, _), p)| p.arguments.is_ok().then(|| runtime.prepare(&ctx.caller, c)))
            .collect();
        let mut repeated = None;
        for (at, (proposed, prepared)) in turn.calls.iter().zip(&prepared).enumerate() {
            let n = st
                .repeats
                .entry(repeat_key(proposed, prepared.as_ref()))
                .or_insert(0);
            *n += 1;
            if *n >= config.repeat_limit.max(1) {
                repeated = Some(at);
                break;
            }
        }
        let ran = repeated.unwrap_or(calls.len());
        let after = prepared.split_off(ran);
        let mut results = run_step(runtime, ctx, &turn, &calls[..ran], prepared).await;
        if let Some(at) = repeated {
            let rest = (&calls[at..], &after[..]);
            results.extend(refuse_rest(runtime, ctx, rest, config.repeat_limit).await);
        }
        let mut budget_stop = None;
        let mut terminal = false;
        for ((call, provider_id), result) in calls.iter().zip(&results) {
            tally(&mut st.summary, result);
            if result.code == Some(Code::BudgetExhausted) && budget_stop.is_none() {
                // The pipeline's message says which budget ran out (RUN_CALLS_EXHAUSTED or
                // TOOL_CALLS_EXHAUSTED); anything else counts as the run's total.
                budget_stop = Some(if result.message == TOOL_CALLS_EXHAUSTED {
                    StopReason::MaxCallsPerTool
                } else {
                    StopReason::MaxToolCalls
                });
            }
            if config.terminal_tool.as_deref() == Some(call.name.as_str())
                && result.status == Status::Completed
            {
                terminal = true;
            }
            let content = result.model_message(config.tool_message_bytes);
            transcript(runtime, ctx, step, "tool_result", content.as_bytes());
            messages.0.push(Entry::ToolResult {
                provider_id: provider_id.clone(),
                content,
            });
        }
        if let Some(at) = repeated {
            let call = &calls[at].0;
            let what = if turn.calls[at].arguments.is_ok() {
                "the same arguments"
            } else {
                "the same unparseable arguments"
            };
            return stop(
                st,
                StopReason::RepeatedCall,
                Some(format!(
                    "{} was proposed with {what} {} times",
                    toolhost_contract::bounds::clip(&call.name, 64),
                    config.repeat_limit
                )),
            );
        }
        if terminal {
            return stop(st, StopReason::TerminalTool, None);
        }
        if let Some(why) = budget_stop {
            return stop(st, why, None);
        }
        if ctx.cancel.is_cancelled() {
            return stop(st, StopReason::Cancelled, None);
        }
    }
}

/// Count a call's result in the summary: by status and code when it was decided in this run,
/// as a replay when the ledger answered it from an earlier decision.
fn tally(summary: &mut Summary, result: &toolhost_contract::ToolResult) {
    if result.replayed {
        summary.replayed += 1;
        return;
    }
    *summary
        .tool_calls
        .entry(result.status.as_str().to_string())
        .or_default() += 1;
    if let Some(code) = result.code {
        *summary
            .failures
            .entry(code.as_str().to_string())
            .or_default() += 1;
    }
}

/// Why a turn ends the run before anything it proposed runs: a response cut at its output
/// limit, or withheld by the provider's filter.
fn cut_short(turn: &ModelTurn) -> Option<(StopReason, String)> {
    let word = turn.finish_reason.as_deref().unwrap_or_default();
    let calls = match turn.calls.len() {
        0 => String::new(),
        n => format!("; its {n} proposed call(s) were not run"),
    };
    match turn.finish {
        Finish::OutputLimit => Some((
            StopReason::OutputLimit,
            format!("the response was cut at its output limit ({word}){calls}"),
        )),
        Finish::ContentFilter => Some((
            StopReason::ContentFilter,
            format!("the provider withheld or cut the response ({word}){calls}"),
        )),
        Finish::Stop | Finish::ToolCalls => None,
    }
}

/// The assistant turn to keep in the history (every call with an id the result can answer,
/// with its arguments as proposed — also broken ones, so the model can see its mistake) and
/// the calls with their ledger ids and provider ids.
fn assistant_message(step: u32, turn: &ModelTurn) -> (Entry, Vec<(ToolCall, String)>) {
    let mut sent = Vec::new();
    let mut calls = Vec::new();
    for c in &turn.calls {
        let provider_id = c
            .provider_id
            .clone()
            .unwrap_or_else(|| format!("call_s{step}_{}", c.index));
        let call_id = match &c.provider_id {
            Some(id) => format!("p:{}", toolhost_contract::bounds::clip(id, 200)),
            None => format!("s{step}.{}", c.index),
        };
        let (arguments, text) = match &c.arguments {
            Ok(v) => (v.clone(), v.to_string()),
            Err(_) => (Value::Null, c.proposed_arguments.clone()),
        };
        sent.push(SentCall {
            provider_id: provider_id.clone(),
            // The history keeps the name within its bound (run_call refuses a longer one).
            name: toolhost_contract::bounds::cut_tool_name(&c.name).to_string(),
            arguments: text,
            parsed: c.arguments.as_ref().ok().cloned(),
        });
        calls.push((
            ToolCall {
                call_id,
                name: c.name.clone(),
                arguments,
            },
            provider_id,
        ));
    }
    let entry = Entry::Assistant {
        text: turn.content.clone(),
        calls: sent,
    };
    (entry, calls)
}

fn transcript(runtime: &Runtime, ctx: &RunContext, step: u32, kind: &str, bytes: &[u8]) {
    let _ = runtime
        .transcripts()
        .entry((&ctx.run_id, step, kind), bytes);
}

/// A transcript entry that is only operator text.
fn note(runtime: &Runtime, ctx: &RunContext, step: u32, kind: &str, detail: &str) {
    let _ = runtime
        .transcripts()
        .note((&ctx.run_id, step, kind), detail);
}
