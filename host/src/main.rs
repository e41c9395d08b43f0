//! The `toolhost` command: a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
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
        /// The call id to correlate the result with (default: a fresh one).
        #[arg(long)]
        call_id: Option<String>,
        /// The tool's model-facing name.
        tool: String,
        /// The arguments, a JSON object.
        arguments: String,
    },
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
            call_id,
            tool,
            arguments,
        } => {
            let rt = match Runtime::from_config(&config, EpochMode::Ticker) {
                Ok(rt) => rt,
                Err(e) => return usage_error(&e),
            };
            let call_id = call_id.unwrap_or_else(fresh_call_id);
            let result = match parse_arguments(&arguments) {
                Ok(args) => {
                    let call = ToolCall {
                        call_id,
                        name: tool,
                        arguments: args,
                    };
                    rt.call(&call).await
                }
                Err(message) => {
                    let call = ToolCall {
                        call_id,
                        name: tool,
                        arguments: serde_json::Value::Null,
                    };
                    ToolResult::failed(&call, Code::InvalidArguments, message, Usage::default())
                }
            };
            println!(
                "{}",
                serde_json::to_string(&result).expect("a ToolResult serializes")
            );
            if result.status == Status::Completed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_NOT_COMPLETED)
            }
        }
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
