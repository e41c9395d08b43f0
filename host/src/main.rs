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
    /// Print the recorded calls and their decisions as JSON.
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
            match rt.ledger.calls(run.as_deref()) {
                Ok(calls) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&calls).expect("records serialize")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e),
            }
        }
        Command::Serve {
            config,
            http,
            principal,
            tenant,
        } => serve(&config, http, principal, tenant).await,
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
