//! One arm per command, and the helpers the commands share.

use std::process::ExitCode;

use super::frontends::{agent_run, serve};
use super::proposals::{parse_arguments, parse_batch, run_batch};
use super::{Command, Identity, EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::{Code, EpochMode, Registry, Runtime, Sandbox, Status, ToolCall, ToolResult, Usage};

pub(super) async fn run(command: Command) -> ExitCode {
    match command {
        Command::Tools { config } => match Runtime::from_config(&config, EpochMode::Ticker) {
            Ok(rt) => {
                warn(&rt.registry);
                print_definitions(&rt.registry)
            }
            Err(e) => usage_error(&e),
        },
        Command::Check { component } => {
            let sandbox = match Sandbox::new(
                crate::sandbox::EngineSettings {
                    max_memory_bytes: crate::sandbox::DEFAULT_MEMORY_BYTES,
                    max_table_elements: crate::sandbox::DEFAULT_TABLE_ELEMENTS,
                    max_instances: 1,
                },
                EpochMode::Manual,
            ) {
                Ok(s) => s,
                Err(e) => return usage_error(&e),
            };
            match Registry::check(&component, &sandbox) {
                Ok(reg) => {
                    warn(&reg);
                    print_definitions(&reg)
                }
                Err(e) => usage_error(&e),
            }
        }
        Command::CheckConfig { config } => {
            let loaded = match crate::Config::load(&config) {
                Ok(c) => c,
                Err(e) => return usage_error(&e),
            };
            match crate::config::check(&loaded, EpochMode::Manual) {
                Ok(checked) => {
                    warn(&checked.registry);
                    out!(
                        "{}",
                        serde_json::to_string_pretty(&loaded.effective(&checked.registry))
                            .expect("settings serialize")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e),
            }
        }
        Command::Call {
            config,
            identity,
            call_id,
            approval_token,
            tool,
            arguments,
        } => {
            let rt = match load(&config) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            let ctx = context(&rt, &identity);
            let call_id = call_id.unwrap_or_else(fresh_call_id);
            let arguments = match parse_arguments(&arguments) {
                Ok(args) => args,
                Err(message) => {
                    let call = ToolCall {
                        call_id,
                        name: tool,
                        arguments: serde_json::Value::Null,
                    };
                    let r = ToolResult::failed(
                        &call,
                        Code::InvalidArguments,
                        message,
                        Usage::default(),
                    );
                    return print_result(&r);
                }
            };
            let call = ToolCall {
                call_id,
                name: tool,
                arguments,
            };
            let result = rt.run_call(&ctx, &call, approval_token.as_deref()).await;
            print_result(&result)
        }
        Command::Approve {
            config,
            arguments,
            yes,
            handle,
        } => {
            let rt = match load(&config) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            super::approve::approve(&rt, &handle, arguments.as_deref(), yes)
        }
        Command::Ledger { config, run } => {
            let rt = match load(&config) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            let calls = match rt.ledger.calls(run.as_deref()) {
                Ok(calls) => calls,
                Err(e) => return usage_error(&e),
            };
            let out = match &run {
                None => serde_json::to_value(&calls),
                Some(r) => match rt.ledger.transcript_entries(r) {
                    Ok(t) => {
                        // Why an agent run stopped, if it did: its last `run_stopped` entry.
                        let stopped = t
                            .iter()
                            .rev()
                            .find(|e| e.kind == "run_stopped")
                            .map(|e| e.detail.clone());
                        Ok(serde_json::json!({
                            "run_id": r, "stopped": stopped, "transcript": t, "calls": calls
                        }))
                    }
                    Err(e) => return usage_error(&e),
                },
            };
            out!(
                "{}",
                serde_json::to_string_pretty(&out.expect("records serialize"))
                    .expect("records serialize")
            );
            ExitCode::SUCCESS
        }
        Command::Serve {
            config,
            http,
            principal,
            tenant,
        } => serve(&config, http, principal, tenant).await,
        Command::Agent {
            config,
            identity,
            agent,
        } => agent_run(&config, &identity, agent).await,
        Command::Batch {
            config,
            identity,
            file,
        } => {
            let rt = match load(&config) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            let batch = match std::fs::read(&file)
                .map_err(|e| e.to_string())
                .and_then(|t| parse_batch(&t))
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("toolhost: {}: {e}", file.display());
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let ctx = context(&rt, &identity);
            let results = run_batch(&rt, &ctx, &batch).await;
            out!(
                "{}",
                serde_json::to_string(&results).expect("results serialize")
            );
            if results.iter().all(|r| r.status == Status::Completed) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_NOT_COMPLETED)
            }
        }
    }
}

/// Load the runtime for a config, or the exit status of a bad config.
fn load(config: &std::path::Path) -> Result<Runtime, ExitCode> {
    Runtime::from_config(config, EpochMode::Ticker).map_err(|e| usage_error(&e))
}

pub(super) fn context(rt: &Runtime, id: &Identity) -> crate::RunContext {
    let ctx = rt.context(&id.principal, &id.tenant);
    match &id.run_id {
        Some(r) => ctx.with_run_id(r),
        None => ctx,
    }
}

fn print_result(result: &ToolResult) -> ExitCode {
    out!(
        "{}",
        serde_json::to_string(result).expect("a ToolResult serializes")
    );
    if result.status == Status::Completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_COMPLETED)
    }
}

fn fresh_call_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("call-{:x}-{:x}", nanos, std::process::id())
}

fn print_definitions(reg: &Registry) -> ExitCode {
    let defs: Vec<_> = reg.tools().map(|t| t.definition()).collect();
    out!(
        "{}",
        serde_json::to_string_pretty(&defs).expect("definitions serialize")
    );
    ExitCode::SUCCESS
}

pub(super) fn warn(reg: &Registry) {
    for w in &reg.warnings {
        eprintln!("toolhost: warning: {w}");
    }
}

/// A bad command line, config or component: the error and every cause behind it, exit 2.
pub(super) fn usage_error(e: &dyn std::error::Error) -> ExitCode {
    eprintln!("toolhost: {}", crate::contract::error_chain(e));
    ExitCode::from(EXIT_USAGE)
}
