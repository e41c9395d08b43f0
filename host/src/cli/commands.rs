//! One arm per command, and the helpers the commands share.

use std::process::ExitCode;

use super::frontends::{agent_run, serve};
use super::proposals::{parse_arguments, parse_batch, run_batch};
use super::report::{usage_error, usage_message, warn};
use super::{Command, Source, EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::{Code, EpochMode, Registry, Runtime, Status, ToolCall, ToolResult, Usage};

pub(super) async fn run(command: Command) -> ExitCode {
    match command {
        Command::Tools { source } => match load(&source) {
            Ok(rt) => {
                warn(&rt.registry());
                print_definitions(&rt.registry())
            }
            Err(code) => code,
        },
        Command::Check { file, component } => {
            let Some(path) = file.or(component) else {
                return ExitCode::from(EXIT_USAGE);
            };
            check(&path)
        }
        Command::New { name, lang, dir } => super::scaffold::new_project(&name, lang, dir),
        Command::EmbedWit { component, wit } => super::author::embed_wit(&component, &wit),
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
                        serde_json::to_string_pretty(&loaded.effective(&checked))
                            .expect("settings serialize")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e),
            }
        }
        Command::Lock { config, update } => super::lock::lock(&config, update),
        Command::Keygen { name } => super::sign::keygen(&name),
        Command::Sign {
            key,
            component,
            registry,
        } => match (component, registry.oci) {
            (Some(component), _) => super::sign::sign(&key, &component),
            (None, Some(r)) => super::sign_oci::sign(&key, &r, &registry.config),
            (None, None) => {
                super::report::usage_message("name a component file or `--oci REFERENCE`")
            }
        },
        Command::Verify {
            keys,
            component,
            registry,
        } => match (component, registry.oci) {
            (Some(component), _) => super::sign::verify(&keys, &component),
            (None, Some(r)) => super::sign_oci::verify(&keys, &r, &registry.config),
            (None, None) => {
                super::report::usage_message("name a component file or `--oci REFERENCE`")
            }
        },
        Command::Push {
            config,
            component,
            reference,
        } => super::push::push(&config, &component, &reference),
        Command::Call {
            source,
            identity,
            call_id,
            approval_token,
            tool,
            arguments,
        } => {
            let rt = match load(&source) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            let ctx = identity.context(&rt);
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
            source,
            arguments,
            yes,
            handle,
        } => {
            let rt = match load(&source) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            super::approve::approve(&rt, &handle, arguments.as_deref(), yes)
        }
        Command::Receipt {
            source,
            key,
            run,
            call,
            action,
        } => match (action, run, call) {
            (Some(action), _, _) => super::receipt::run(&source, action),
            (None, Some(run), Some(call)) => super::receipt::issue(&source, key, &run, &call),
            _ => {
                usage_message("give the call's RUN and CALL, or `receipt verify` or `receipt key`")
            }
        },
        Command::Reconcile { source, action } => match load(&source) {
            Ok(rt) => super::reconcile::reconcile(&rt, action),
            Err(code) => code,
        },
        Command::Ledger {
            source,
            run,
            action,
        } => {
            let rt = match load(&source) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            if let Some(action) = action {
                return super::ledger_verify::run(&rt, action);
            }
            let calls = match rt.ledger().calls(run.as_deref()) {
                Ok(calls) => calls,
                Err(e) => return usage_error(&e),
            };
            let out = match &run {
                None => serde_json::to_value(&calls),
                Some(r) => match rt.ledger().transcript_entries(r) {
                    Ok(t) => {
                        // Why an agent run stopped, if it did: its last `run_stopped` entry.
                        let stopped = t
                            .iter()
                            .rev()
                            .find(|e| e.kind == "run_stopped")
                            .map(|e| e.detail.clone());
                        let tasks = match rt.ledger().tasks_of_run(r) {
                            Ok(tasks) => tasks,
                            Err(e) => return usage_error(&e),
                        };
                        Ok(serde_json::json!({
                            "run_id": r, "stopped": stopped, "transcript": t, "calls": calls,
                            "tasks": tasks
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
            source,
            http,
            metrics,
            principal,
            tenant,
            watch,
        } => serve(&source, http, metrics, principal, tenant, watch).await,
        Command::Agent {
            source,
            identity,
            agent,
        } => agent_run(&source, &identity, *agent).await,
        Command::Batch {
            source,
            identity,
            file,
        } => {
            let rt = match load(&source) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            let batch = match std::fs::read(&file)
                .map_err(|e| e.to_string())
                .and_then(|t| parse_batch(&t))
            {
                Ok(p) => p,
                Err(e) => {
                    crate::telemetry::say(
                        tracing::Level::ERROR,
                        format!("{}: {e}", file.display()),
                    );
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let ctx = identity.context(&rt);
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

/// Load the runtime for a config (or one component), or the exit status of a bad one.
fn load(source: &Source) -> Result<Runtime, ExitCode> {
    let config = source.config().map_err(|e| usage_error(&e))?;
    config.start(EpochMode::Ticker).map_err(|e| usage_error(&e))
}

/// `toolhost check FILE`: the component loaded as `--component FILE` loads it, its compiled
/// form saved to that cache, nothing else written (no ledger, no key).
fn check(path: &std::path::Path) -> ExitCode {
    let mut config = crate::Config::single_component(path);
    // A `wasi:http` import is checked as an operator's network grant would load it (with a
    // warning that `--component` grants no host).
    config.components[0].network = Some(Default::default());
    match crate::config::check(&config, EpochMode::Manual) {
        Ok(mut checked) => {
            checked.registry.save_cache();
            warn(&checked.registry);
            print_definitions(&checked.registry)
        }
        Err(e) => usage_error(&e),
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
