//! The `toolhost` command: a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolhost::runtime::batch::Proposal;
use toolhost::{Code, EpochMode, Registry, Runtime, Sandbox, Status, ToolCall, ToolResult, Usage};

/// Exit status for a bad command line or config.
const EXIT_USAGE: u8 = 2;
/// Exit status for a call that did not complete.
const EXIT_NOT_COMPLETED: u8 = 1;

#[derive(Parser)]
#[command(
    name = "toolhost",
    version,
    about = "A WebAssembly sandboxed tool host for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the configured tools' definitions as a JSON array.
    Tools {
        /// The config file (default: ./toolhost.toml).
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
    },
    /// Load one component and print the tool definitions derived from it, or what is wrong.
    Check { component: PathBuf },
    /// Run one call and print its result as JSON. Exit 0 only when it completed.
    Call {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        #[command(flatten)]
        identity: Identity,
        /// The call id to correlate the result with (default: a fresh one).
        #[arg(long)]
        call_id: Option<String>,
        /// The token a human minted with `toolhost approve`, for a tool that needs approval.
        #[arg(long)]
        approval_token: Option<String>,
        /// The tool's model-facing name.
        tool: String,
        /// The arguments, a JSON object.
        arguments: String,
    },
    /// Approve a call that ended `approval_required`: print the token for its handle.
    Approve {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        /// The `approval.handle` of the call's result.
        handle: String,
    },
    /// Print the recorded calls and their decisions as JSON; with `--run`, the run's model
    /// transcript (steps, digests, sizes) too, as `{run_id, transcript, calls}`.
    Ledger {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        /// Only this run.
        #[arg(long)]
        run: Option<String>,
    },
    /// Serve every configured tool over MCP: stdio by default (exits when stdin closes), or
    /// Streamable HTTP on `--http ADDR` (path /mcp; loopback unless tokens are configured).
    Serve {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        /// Serve Streamable HTTP on this address (HOST:PORT, or a PORT on 127.0.0.1).
        #[arg(long, value_parser = parse_listen)]
        http: Option<std::net::SocketAddr>,
        /// The principal of stdio sessions (default: `[serve] principal`, else "local").
        #[arg(long)]
        principal: Option<String>,
        /// The tenant of stdio sessions (default: `[serve] tenant`, else "default").
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Drive a bounded agent run against an OpenAI-compatible chat-completions endpoint with the
    /// configured tools; print its summary as JSON. Exit 0 when the model finished (or a
    /// terminal tool ended the run), 1 when a guard stopped it, 2 for a bad command line.
    Agent {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        #[command(flatten)]
        identity: Identity,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Run a JSON array of proposals ({call_id, name, arguments, approval_token?}) as one batch
    /// and print the results in order.
    Batch {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        #[command(flatten)]
        identity: Identity,
        file: PathBuf,
    },
}

/// `toolhost agent` options; each guard overrides its `[agent]` setting.
#[derive(clap::Args)]
struct AgentArgs {
    /// The endpoint's base URL, as OpenAI clients take it (e.g. http://127.0.0.1:8080/v1).
    #[arg(long)]
    base_url: String,
    /// The model name to request.
    #[arg(long)]
    model: String,
    /// The environment variable that holds the API key (the key is never a flag or in a file).
    #[arg(long)]
    api_key_env: Option<String>,
    /// The user's prompt.
    #[arg(
        long,
        required_unless_present = "messages",
        conflicts_with = "messages"
    )]
    prompt: Option<String>,
    /// A JSON file with the initial chat messages (an array of {role, content}).
    #[arg(long)]
    messages: Option<PathBuf>,
    #[arg(long)]
    max_steps: Option<u32>,
    #[arg(long)]
    max_tool_calls: Option<u64>,
    #[arg(long)]
    max_calls_per_tool: Option<u64>,
    #[arg(long)]
    deadline_secs: Option<u64>,
    #[arg(long)]
    max_tokens: Option<u64>,
    #[arg(long)]
    repeat_limit: Option<u32>,
    #[arg(long)]
    terminal_tool: Option<String>,
    /// Ask for whole responses instead of a stream.
    #[arg(long)]
    no_stream: bool,
}

/// Who calls: trusted context from the command line, never from tool arguments.
#[derive(clap::Args)]
struct Identity {
    /// The principal the calls run as.
    #[arg(long, default_value = "local")]
    principal: String,
    /// The tenant the calls run for.
    #[arg(long, default_value = "default")]
    tenant: String,
    /// The run the calls belong to (default: a fresh run). Call ids are unique per run.
    #[arg(long)]
    run_id: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolhost: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(run(cli.command))
}

async fn run(command: Command) -> ExitCode {
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
                toolhost::sandbox::EngineSettings {
                    max_memory_bytes: toolhost::sandbox::DEFAULT_MEMORY_BYTES,
                    max_table_elements: toolhost::sandbox::DEFAULT_TABLE_ELEMENTS,
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
        Command::Approve { config, handle } => {
            let rt = match load(&config) {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            match rt.mint_approval(&handle) {
                Ok((token, record)) => {
                    eprintln!(
                        "approving tool `{}` in run `{}` (call `{}`, arguments sha256 {})",
                        record.tool, record.run_id, record.call_id, record.args_digest
                    );
                    for e in record.events.iter().filter(|e| e.stage == "authorize") {
                        eprintln!("  {}", e.detail);
                    }
                    println!("{token}");
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e),
            }
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
                    Ok(t) => Ok(serde_json::json!({"run_id": r, "transcript": t, "calls": calls})),
                    Err(e) => return usage_error(&e),
                },
            };
            println!(
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
            let proposals: Vec<Proposal> = match std::fs::read_to_string(&file)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("toolhost: {}: {e}", file.display());
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let ctx = context(&rt, &identity);
            let results = rt.run_batch(&ctx, &proposals).await;
            println!(
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

/// `toolhost serve`: MCP over stdio or HTTP until stdin closes or Ctrl-C.
async fn serve(
    path: &std::path::Path,
    http: Option<std::net::SocketAddr>,
    principal: Option<String>,
    tenant: Option<String>,
) -> ExitCode {
    let mut config = match toolhost::Config::load(path) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    if let Some(p) = principal {
        config.serve.principal = p;
    }
    if let Some(t) = tenant {
        config.serve.tenant = t;
    }
    let rt = match Runtime::from_loaded(&config, EpochMode::Ticker) {
        Ok(rt) => rt,
        Err(e) => return usage_error(&e),
    };
    warn(&rt.registry);
    let shared = toolhost::serve::Shared::new(std::sync::Arc::new(rt));
    let result = match http {
        None => toolhost::serve::serve_stdio(shared, &config.serve).await,
        Some(addr) => {
            let stop = tokio_util::sync::CancellationToken::new();
            let on_signal = stop.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                on_signal.cancel();
            });
            let r = toolhost::serve::serve_http(shared.clone(), &config.serve, addr, stop, |a| {
                eprintln!("toolhost: serving MCP on http://{a}/mcp");
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

/// Largest `--messages` file read.
const MAX_MESSAGES_FILE_BYTES: u64 = 4 << 20;

/// `toolhost agent`: one bounded run; Ctrl-C cancels it (and its running calls).
async fn agent_run(path: &std::path::Path, identity: &Identity, args: AgentArgs) -> ExitCode {
    use toolhost::agent::{self, StopReason};
    let config = match toolhost::Config::load(path) {
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
    let api_key = match &args.api_key_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(k) if !k.is_empty() => Some(k),
            _ => {
                eprintln!("toolhost: the environment variable {var} (--api-key-env) is not set");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let endpoint = match agent::Endpoint::parse(&args.base_url) {
        Ok(e) => e,
        Err(e) => return usage_error(&e),
    };
    let messages = match (&args.prompt, &args.messages) {
        (Some(p), _) => agent::prompt_messages(p, &guards),
        (None, Some(file)) => match read_messages(file) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("toolhost: {}: {e}", file.display());
                return ExitCode::from(EXIT_USAGE);
            }
        },
        (None, None) => unreachable!("clap requires --prompt or --messages"),
    };
    let rt = match Runtime::from_loaded(&config, EpochMode::Ticker) {
        Ok(rt) => rt,
        Err(e) => return usage_error(&e),
    };
    warn(&rt.registry);
    let options = agent::ProviderOptions {
        stream: guards.stream,
        max_retries: guards.max_retries,
        ..agent::ProviderOptions::default()
    };
    let provider = agent::Provider::new(endpoint, api_key, options);
    let ctx = context(&rt, identity);
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let summary = agent::run_agent(&rt, &provider, &args.model, messages, &guards, ctx).await;
    eprintln!(
        "toolhost: run {} stopped by {} after {} step(s), {} model request(s), tool calls {:?}, tokens {}",
        summary.run_id,
        summary.stopped_by,
        summary.steps,
        summary.model_requests,
        summary.tool_calls,
        summary.tokens.total
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).expect("a summary serializes")
    );
    match summary.stopped_by {
        StopReason::Finished | StopReason::TerminalTool => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_NOT_COMPLETED),
    }
}

fn read_messages(file: &std::path::Path) -> Result<Vec<serde_json::Value>, String> {
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
    for (i, m) in v.iter().enumerate() {
        if !m.get("role").is_some_and(|r| r.is_string()) {
            return Err(format!("message {i} has no role"));
        }
    }
    Ok(v)
}

fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|_| format!("{s:?} is not HOST:PORT or PORT (e.g. 127.0.0.1:8080)"))
}

/// Load the runtime for a config, or the exit status of a bad config.
fn load(config: &std::path::Path) -> Result<Runtime, ExitCode> {
    Runtime::from_config(config, EpochMode::Ticker).map_err(|e| usage_error(&e))
}

fn context(rt: &Runtime, id: &Identity) -> toolhost::RunContext {
    let ctx = rt.context(&id.principal, &id.tenant);
    match &id.run_id {
        Some(r) => ctx.with_run_id(r),
        None => ctx,
    }
}

fn print_result(result: &ToolResult) -> ExitCode {
    println!(
        "{}",
        serde_json::to_string(result).expect("a ToolResult serializes")
    );
    if result.status == Status::Completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_COMPLETED)
    }
}

fn parse_arguments(text: &str) -> Result<serde_json::Value, String> {
    if text.len() > toolhost::runtime::MAX_INPUT_BYTES {
        return Err(format!(
            "the arguments are larger than {} bytes",
            toolhost::runtime::MAX_INPUT_BYTES
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("the arguments are not valid JSON: {e}"))
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
    println!(
        "{}",
        serde_json::to_string_pretty(&defs).expect("definitions serialize")
    );
    ExitCode::SUCCESS
}

fn warn(reg: &Registry) {
    for w in &reg.warnings {
        eprintln!("toolhost: warning: {w}");
    }
}

fn usage_error(e: &dyn std::error::Error) -> ExitCode {
    eprintln!("toolhost: {e}");
    ExitCode::from(EXIT_USAGE)
}
