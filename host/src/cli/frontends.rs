//! The long-running commands: `serve` (MCP over stdio or HTTP) and `agent` (the model loop).

use std::process::ExitCode;
use std::sync::Arc;

use super::report::{usage_error, warn};
use super::{AgentArgs, CallerArgs, Source, EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::contract::ApproverHandle;
use crate::{EpochMode, Runtime};

/// `toolhost serve`: MCP over stdio or HTTP until stdin closes or Ctrl-C.
pub(super) async fn serve(
    source: &Source,
    http: Option<std::net::SocketAddr>,
    metrics: Option<std::net::SocketAddr>,
    principal: Option<String>,
    tenant: Option<String>,
    watch: bool,
) -> ExitCode {
    let mut config = match source.config() {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    if let Some(p) = principal {
        config.serve.principal = p;
    }
    if let Some(t) = tenant {
        config.serve.tenant = t;
    }
    // A JWKS file is named relative to the config file.
    if let Some(o) = config
        .serve
        .oauth
        .as_mut()
        .filter(|o| !o.jwks.contains("://"))
    {
        o.jwks = config.base_dir.join(&o.jwks).display().to_string();
    }
    // The console signs receipts with the key `toolhost receipt` uses.
    let receipt_key = config.data_dir().join("receipt.key");
    if let Some(c) = config.serve.console.as_mut() {
        c.receipt_key = Some(receipt_key);
    }
    let rt = match config.start(EpochMode::Ticker) {
        Ok(rt) => rt,
        Err(e) => return usage_error(&e),
    };
    warn(&rt.registry());
    warn_descriptors(rt.sandbox().descriptors());
    let shared = crate::serve::Shared::new(std::sync::Arc::new(rt), &config.serve);
    let _reloads = match super::reloads::start(source.clone(), shared.clone(), watch) {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    let _ops = match start_ops(&shared.runtime, metrics).await {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    let result = match http {
        None => crate::serve::serve_stdio(shared, &config.serve).await,
        Some(addr) => {
            let stop = tokio_util::sync::CancellationToken::new();
            let on_signal = stop.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                on_signal.cancel();
            });
            let r = crate::serve::serve_http(shared.clone(), &config.serve, addr, stop, |a| {
                crate::telemetry::say(
                    tracing::Level::INFO,
                    format!("serving MCP on http://{a}/mcp"),
                );
            })
            .await;
            shared.drain().await;
            r
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => usage_error(&e),
    }
}

/// Open the `--metrics ADDR` listener (`/metrics`, `/healthz`, `/readyz`), if asked for; it
/// stops when the returned guard drops. A bind that fails ends the command.
async fn start_ops(
    runtime: &Arc<Runtime>,
    addr: Option<std::net::SocketAddr>,
) -> Result<Option<tokio_util::sync::DropGuard>, ExitCode> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let ops = crate::serve::serve_ops(runtime.clone(), addr, stop.clone(), |a| {
        let _ = bound_tx.send(a);
    });
    let ops = tokio::spawn(ops);
    match bound_rx.await {
        Ok(a) => {
            crate::telemetry::say(
                tracing::Level::INFO,
                format!("serving metrics on http://{a}/metrics"),
            );
            Ok(Some(stop.drop_guard()))
        }
        Err(_) => Err(match ops.await {
            Ok(Err(e)) => usage_error(&e),
            _ => ExitCode::FAILURE,
        }),
    }
}

/// Say at start when the descriptor limit is too low for a full pool of calls to leave the
/// host its reserve.
fn warn_descriptors(plan: crate::sandbox::DescriptorPlan) {
    if !plan.reserve_holds {
        crate::telemetry::say(
            tracing::Level::WARN,
            format!(
                "the descriptor limit ({}) leaves each call only {} host handles \
             and cannot keep {} descriptors for the host when every call slot is busy; raise \
             `ulimit -n` (the hard limit) or lower run.max_concurrent_calls",
                plan.soft_limit,
                plan.handles_per_call,
                crate::sandbox::HOST_RESERVED_FDS
            ),
        );
    }
}

/// Largest `--messages` file read.
const MAX_MESSAGES_FILE_BYTES: u64 = 4 << 20;

/// `toolhost agent`: one bounded run; Ctrl-C cancels it (and its running calls).
pub(super) async fn agent_run(source: &Source, identity: &CallerArgs, args: AgentArgs) -> ExitCode {
    use crate::agent::{self, StopReason};
    let config = match source.config() {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let mut guards = config.agent.clone();
    let set = |slot: &mut Option<u64>, v: Option<u64>| {
        if v.is_some() {
            *slot = v;
        }
    };
    set(&mut guards.max_calls_per_tool, args.max_calls_per_tool);
    set(&mut guards.max_tokens, args.max_tokens);
    set(&mut guards.max_output_tokens, args.max_output_tokens);
    if args.api.is_some() {
        guards.api = args.api;
    }
    guards.max_steps = args.max_steps.unwrap_or(guards.max_steps);
    guards.max_tool_calls = args.max_tool_calls.unwrap_or(guards.max_tool_calls);
    guards.deadline_secs = args.deadline_secs.unwrap_or(guards.deadline_secs);
    guards.repeat_limit = args.repeat_limit.unwrap_or(guards.repeat_limit);
    if args.terminal_tool.is_some() {
        guards.terminal_tool = args.terminal_tool.clone();
    }
    if args.no_stream {
        guards.stream = false;
    }
    // The flags are held to the section's rules.
    let mut problems = Vec::new();
    guards.validate(&mut problems);
    if !problems.is_empty() {
        for p in problems {
            let flag = p.key.trim_start_matches("agent.").replace('_', "-");
            crate::telemetry::say(tracing::Level::ERROR, format!("--{flag}: {}", p.message));
        }
        return ExitCode::from(EXIT_USAGE);
    }
    let api_key = match &args.api_key_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(k) if !k.is_empty() => Some(k),
            _ => {
                crate::telemetry::say(
                    tracing::Level::ERROR,
                    format!("the environment variable {var} (--api-key-env) is not set"),
                );
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let endpoint = match agent::Endpoint::parse_for(&args.base_url, guards.api) {
        Ok(e) => e,
        Err(e) => return usage_error(&e),
    };
    let messages = match (&args.prompt, &args.messages) {
        (Some(p), _) => agent::prompt_messages(p, &guards),
        (None, Some(file)) => match read_messages(file, guards.system_prompt.as_deref()) {
            Ok(m) => m,
            Err(e) => {
                crate::telemetry::say(tracing::Level::ERROR, format!("{}: {e}", file.display()));
                return ExitCode::from(EXIT_USAGE);
            }
        },
        (None, None) => unreachable!("clap requires --prompt or --messages"),
    };
    let rt = match config.start(EpochMode::Ticker) {
        Ok(rt) => Arc::new(rt),
        Err(e) => return usage_error(&e),
    };
    warn(&rt.registry());
    let _ops = match start_ops(&rt, args.metrics).await {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    if let Some(t) = &args.terminal_tool {
        if rt.registry().get(t).is_none() {
            crate::telemetry::say(
                tracing::Level::ERROR,
                format!("--terminal-tool {t:?} is not a configured tool"),
            );
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let options = agent::ProviderOptions {
        stream: guards.stream,
        max_retries: guards.max_retries,
        ..agent::ProviderOptions::default()
    };
    let provider = match agent::Provider::new(endpoint, api_key, options) {
        Ok(p) => p,
        Err(e) => return usage_error(&e),
    };
    let mut ctx = identity.context(&rt);
    let timeout = std::time::Duration::from_secs(args.approval_timeout_secs);
    ctx.approver = match &args.approve_with {
        Some(cmd) if cmd.trim().is_empty() => {
            crate::telemetry::say(
                tracing::Level::ERROR,
                "--approve-with is empty; give a command",
            );
            return ExitCode::from(EXIT_USAGE);
        }
        Some(cmd) => {
            let mut approver = agent::CommandApprover::new(cmd.clone(), timeout);
            if let Some(var) = &args.api_key_env {
                approver = approver.withholding(var);
            }
            Some(ApproverHandle(Arc::new(approver)))
        }
        None => agent::TerminalApprover::from_terminal(timeout)
            .map(|t| ApproverHandle(Arc::new(t) as Arc<dyn crate::contract::Approver>)),
    };
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let summary = agent::run_agent(&rt, &provider, &args.model, messages, &guards, ctx).await;
    crate::telemetry::say(tracing::Level::INFO, format!("run {} stopped by {} after {} step(s), {} model request(s), tool calls {:?}, replayed {}, tokens {}",
        summary.run_id,
        summary.stopped_by,
        summary.steps,
        summary.model_requests,
        summary.tool_calls,
        summary.replayed,
        summary.tokens.total
    ));
    out!(
        "{}",
        serde_json::to_string_pretty(&summary).expect("a summary serializes")
    );
    match summary.stopped_by {
        StopReason::Finished | StopReason::TerminalTool => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_NOT_COMPLETED),
    }
}

/// The conversation of a `--messages` file, after `system_prompt`.
fn read_messages(
    file: &std::path::Path,
    system_prompt: Option<&str>,
) -> Result<crate::agent::History, String> {
    let meta = std::fs::metadata(file).map_err(|e| e.to_string())?;
    if meta.len() > MAX_MESSAGES_FILE_BYTES {
        return Err(format!("larger than {MAX_MESSAGES_FILE_BYTES} bytes"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let v: Vec<serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| format!("not a JSON array of messages: {e}"))?;
    if v.is_empty() {
        return Err("no messages".into());
    }
    crate::agent::History::from_chat(system_prompt, &v)
}
