//! The `toolhost` command line: its arguments and what each command does.
//!
//! It lives in the library, not in `main.rs`, for build cost: a binary crate that awaits the
//! library's futures compiles its own copy of their drop glue and of the generic code inside them
//! (rmcp, hyper, serde, tokio's task harness). Measured on a 2-core machine, a release build of
//! that `main.rs` took 48 s (3.4 MB of machine code); with the commands here it takes about 1 s,
//! and the whole release build needs about 20 CPU-seconds less.
//!
//! # Layout
//!
//! - this file: the arguments ([`Cli`]) and [`Cli::run`], which starts the async runtime;
//! - `commands`: one arm per command, and the helpers they share;
//! - `frontends`: `serve` (MCP) and `agent` (the model loop);
//! - `proposals`: `call`'s arguments and `batch`'s file, parsed strictly;
//! - `lock`: writing and comparing `toolhost.lock`;
//! - `reconcile`: listing and reconciling calls that ended `outcome_unknown`;
//! - `author`, `scaffold`: the tool author's `embed-wit` and `new`;
//! - `sign`: `keygen`, `sign` and `verify`, the two ends of component signatures;
//! - `push`, `sign_oci`: publishing a component to an OCI registry, and its cosign signatures.

/// `println!` that does not panic when stdout is closed (`toolhost tools | head`): what cannot
/// be written is dropped, and the command ends as it would have.
/// Print one line of the command's output (JSON, or a token) to stdout, with C1 controls and
/// invisible reordering marks escaped (`json_terminal_safe`): ids, outputs and messages come
/// from models and tools, and stdout is often a terminal.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = crate::contract::json_terminal_safe(&format!($($arg)*));
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }};
}

mod approve;
mod author;
mod commands;
mod frontends;
mod ledger_verify;
mod lock;
mod proposals;
mod push;
mod receipt;
mod reconcile;
mod reloads;
mod report;
mod scaffold;
mod sign;
mod sign_oci;
mod telemetry_of;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
pub struct Cli {
    /// How log lines are written to stderr.
    #[arg(long, global = true, value_enum, default_value_t = crate::telemetry::LogFormat::Human)]
    pub log_format: crate::telemetry::LogFormat,
    /// What is logged: a level (error, warn, info, debug, trace) or directives like
    /// "info,toolhost::guest=debug"; overrides RUST_LOG. Default: RUST_LOG, else
    /// "warn,toolhost=info,toolhost::guest=warn".
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// A component in a registry, for `sign` and `verify`.
#[derive(clap::Args)]
pub struct OciArgs {
    /// The component in a registry, by digest: `registry/repository@sha256:…`.
    #[arg(long)]
    pub oci: Option<String>,
    /// The config whose `[oci]` settings apply (credentials, plain HTTP to a loopback
    /// registry); without the file, HTTPS and the Docker credential file's credentials.
    #[arg(long, default_value = "toolhost.toml")]
    pub config: PathBuf,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print the configured tools' definitions as a JSON array.
    Tools {
        #[command(flatten)]
        source: Source,
    },
    /// Load one component as `--component FILE` does, print the tool definitions derived from
    /// it or what is wrong, and fill the compile cache its calls use (`.toolhost/cache` beside
    /// it), so that no call pays the compile.
    Check {
        #[arg(required_unless_present = "component")]
        file: Option<PathBuf>,
        /// The same as FILE.
        #[arg(long, conflicts_with = "file")]
        component: Option<PathBuf>,
    },
    /// Write a new tool project into ./NAME (its WIT, source, build and test scripts, README)
    /// that builds anywhere, and print the commands that build and call it.
    New {
        /// The tool project's name: lowercase words joined by `-`.
        name: String,
        /// The language the tool is written in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: scaffold::Lang,
        /// Where to write it (default: ./NAME); it must not exist.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Embed a tool's WIT (with its `///` docs, which become the tools' descriptions) into its
    /// component, for toolchains that drop the docs (componentize-py, componentize-js).
    EmbedWit {
        /// The component; rewritten in place.
        component: PathBuf,
        /// The WIT file of the tool's own package (`wit/world.wit` in a `toolhost new` project).
        wit: PathBuf,
    },
    /// Check a config file through its components without writing anything, and print the
    /// effective settings (every default explicit) and each tool as JSON; exit 2 with every
    /// problem found, each at its key, when it is not usable.
    CheckConfig {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
    },
    /// Pin what a config runs: write the lock beside it (`toolhost.toml` → `toolhost.lock`)
    /// with each component's SHA-256 and each tool's definition digest. With a lock already
    /// there, print how the config differs from it and exit 1; `--update` accepts the changes.
    /// `serve`, `call` and `agent` refuse a config that differs from its lock.
    Lock {
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        /// Replace a lock that differs (or does not read) with what the config loads now.
        #[arg(long)]
        update: bool,
    },
    /// Make a signing key pair: NAME.key (private, mode 0600; never leaves the author) and
    /// NAME.pub (what operators name in `[trust.keys]`). ECDSA P-256, the kind cosign makes.
    Keygen {
        /// The files' path without extension, e.g. `keys/team`.
        name: PathBuf,
    },
    /// Sign a component with a private key: the signature is written beside it (FILE.sig),
    /// where a host with `[trust]` looks for it; with `--oci REF@sha256:…`, a cosign signature
    /// is added in the registry instead.
    Sign {
        /// The private key (PKCS#8 PEM, as `toolhost keygen` writes it).
        #[arg(long)]
        key: PathBuf,
        #[arg(required_unless_present = "oci", conflicts_with = "oci")]
        component: Option<PathBuf>,
        #[command(flatten)]
        registry: OciArgs,
    },
    /// Check a component's signature (FILE.sig, or with `--oci` its cosign signatures in the
    /// registry) against public keys, as a host with `[trust]` does before compiling it: exit 0
    /// naming the key, 1 saying why not.
    Verify {
        /// A public key (PEM) the component may be signed by; repeat for several.
        #[arg(long = "key", required = true)]
        keys: Vec<PathBuf>,
        #[arg(required_unless_present = "oci", conflicts_with = "oci")]
        component: Option<PathBuf>,
        #[command(flatten)]
        registry: OciArgs,
    },
    /// Publish a component to an OCI registry (the Wasm artifact layout: one `application/wasm`
    /// layer) at a tag, and print the reference by digest that a config's `oci =` pins.
    Push {
        /// The config whose `[oci]` settings (credentials, plain HTTP to a loopback registry)
        /// apply; without the file, HTTPS and the Docker credential file's credentials.
        #[arg(long, default_value = "toolhost.toml")]
        config: PathBuf,
        component: PathBuf,
        /// Where to: `registry/repository:tag`.
        reference: String,
    },
    /// Run one call and print its result as JSON. Exit 0 only when it completed.
    Call {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        identity: CallerArgs,
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
    /// Approve a call that ended `approval_required`: show the call (tool, run, arguments),
    /// ask for `yes`, and print the token for its handle.
    Approve {
        #[command(flatten)]
        source: Source,
        /// The call's arguments as JSON, when the ledger does not record them; checked against
        /// the handle, so what is shown is what the token runs.
        #[arg(long)]
        arguments: Option<String>,
        /// Approve without asking (for scripts that showed the call themselves).
        #[arg(long)]
        yes: bool,
        /// The `approval.handle` of the call's result.
        handle: String,
    },
    /// Print the recorded calls and their decisions as JSON; with `--run`, the run's model
    /// transcript (steps, digests, sizes) and MCP tasks too, as `{run_id, transcript, calls,
    /// tasks}`.
    Ledger {
        #[command(flatten)]
        source: Source,
        /// Only this run.
        #[arg(long)]
        run: Option<String>,
        #[command(subcommand)]
        action: Option<ledger_verify::Action>,
    },
    /// Print a finished call's signed receipt (docs/ledger-chain.md); exit 1 when it has no
    /// outcome or no longer matches its chain. `receipt verify` checks one offline.
    #[command(args_conflicts_with_subcommands = true)]
    Receipt {
        #[command(flatten)]
        source: Source,
        /// The private key (default: `receipt.key` in the data directory, made when missing).
        #[arg(long)]
        key: Option<PathBuf>,
        #[arg(required = true)]
        run: Option<String>,
        #[arg(required = true)]
        call: Option<String>,
        #[command(subcommand)]
        action: Option<receipt::Action>,
    },
    /// Calls whose outcome the host lost (`outcome_unknown`): list them, and record what one
    /// really did once an operator has checked.
    Reconcile {
        #[command(flatten)]
        source: Source,
        #[command(subcommand)]
        action: reconcile::Action,
    },
    /// Serve every configured tool over MCP: stdio by default (exits when stdin closes), or
    /// Streamable HTTP on `--http ADDR` (path /mcp; loopback unless tokens are configured).
    Serve {
        #[command(flatten)]
        source: Source,
        /// Serve Streamable HTTP on this address (HOST:PORT, or a PORT on 127.0.0.1).
        #[arg(long, value_parser = parse_listen)]
        http: Option<std::net::SocketAddr>,
        /// Serve /metrics (Prometheus text format), /healthz and /readyz on this address
        /// (HOST:PORT, or a PORT on 127.0.0.1), without authentication: bind it where only
        /// your monitoring reaches.
        #[arg(long, value_parser = parse_listen)]
        metrics: Option<std::net::SocketAddr>,
        /// The principal of stdio sessions (default: `[serve] principal`, else "local").
        #[arg(long)]
        principal: Option<String>,
        /// The tenant of stdio sessions (default: `[serve] tenant`, else "default").
        #[arg(long)]
        tenant: Option<String>,
        /// Reload the tools when the config, its lock or a component file changes (as on
        /// `SIGHUP`), about two seconds after the last write.
        #[arg(long)]
        watch: bool,
    },
    /// Drive a bounded agent run against an OpenAI-compatible chat-completions endpoint with the
    /// configured tools; print its summary as JSON. Exit 0 when the model finished (or a
    /// terminal tool ended the run), 1 when a guard stopped it, 2 for a bad command line.
    Agent {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        identity: CallerArgs,
        #[command(flatten)]
        agent: Box<AgentArgs>,
    },
    /// Run a JSON array of proposals ({call_id, name, arguments, approval_token?}) as one batch
    /// and print the results in order.
    Batch {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        identity: CallerArgs,
        file: PathBuf,
    },
}

/// An `--api` value.
fn parse_api(s: &str) -> Result<crate::agent::Api, String> {
    crate::agent::Api::from_wire(s)
        .ok_or_else(|| format!("{s:?} is not an API; give chat, responses or messages"))
}

/// `toolhost agent` options; each guard overrides its `[agent]` setting.
#[derive(clap::Args)]
pub struct AgentArgs {
    /// The endpoint's base URL, as OpenAI and Anthropic clients take it (e.g.
    /// http://127.0.0.1:8080/v1); its query is kept.
    #[arg(long)]
    base_url: String,
    /// The provider API: chat (Chat Completions), responses (the Responses API) or messages
    /// (Anthropic's Messages API). Default: `[agent] api`, else what the base URL names
    /// unambiguously (its path, or api.anthropic.com), else chat.
    #[arg(long, value_parser = parse_api)]
    api: Option<crate::agent::Api>,
    /// Serve /metrics (model requests, tokens, calls), /healthz and /readyz on this address
    /// while the run lasts, as `serve --metrics` does.
    #[arg(long, value_parser = parse_listen)]
    metrics: Option<std::net::SocketAddr>,
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
    /// A JSON file with the initial conversation as Chat Completions messages (an array of
    /// {role, content}, text only), whatever the API; `[agent] system_prompt` goes first.
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
    /// Output tokens per response, sent in the API's own field; a response cut there stops
    /// the run (`output_limit`).
    #[arg(long)]
    max_output_tokens: Option<u64>,
    #[arg(long)]
    repeat_limit: Option<u32>,
    #[arg(long)]
    terminal_tool: Option<String>,
    /// Ask for whole responses instead of a stream.
    #[arg(long)]
    no_stream: bool,
    /// Ask this command (run with `sh -c`) to approve each call that needs approval: it reads
    /// the request as JSON on stdin and answers `approve` or `deny` on stdout. Without it, a
    /// human is asked at the terminal when stdin and stderr are one; otherwise such calls end
    /// `approval_required`.
    #[arg(long, value_name = "CMD")]
    approve_with: Option<String>,
    /// How long a human or the --approve-with command has to answer.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    approval_timeout_secs: u64,
}

/// Where the tools come from: a config file, or one component with nothing granted.
#[derive(clap::Args, Clone)]
pub struct Source {
    /// The config file.
    // Global: a command with subcommands (`reconcile list`) takes it after them too.
    #[arg(long, global = true, default_value = "toolhost.toml")]
    config: PathBuf,
    /// Run this one component instead of a config: nothing granted, the default limits, its
    /// ledger and compile cache in `.toolhost` beside it.
    #[arg(long, global = true, conflicts_with = "config", value_name = "FILE")]
    component: Option<PathBuf>,
}

impl Source {
    /// The file this source reads: the config, or the one component.
    pub fn file(&self) -> PathBuf {
        self.component
            .clone()
            .unwrap_or_else(|| self.config.clone())
    }

    /// The config this source stands for, read and checked.
    pub fn config(&self) -> Result<crate::Config, crate::config::ConfigError> {
        match &self.component {
            Some(c) => Ok(crate::Config::single_component(c)),
            None => crate::Config::load(&self.config),
        }
    }
}

/// Who calls and in which run, from the command line (trusted context, never from tool
/// arguments): the `Caller` and run a command's calls get.
#[derive(clap::Args)]
pub struct CallerArgs {
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

impl CallerArgs {
    /// The run context these arguments name, with the runtime's budgets.
    fn context(&self, rt: &crate::Runtime) -> crate::RunContext {
        let ctx = rt.context(&self.principal, &self.tenant);
        match &self.run_id {
            Some(r) => ctx.with_run_id(r),
            None => ctx,
        }
    }
}

impl Cli {
    /// Run the command to its exit status, with logging installed first: the whole of
    /// `toolhost` after argument parsing.
    pub fn run(self) -> ExitCode {
        let endpoint = self.command.telemetry().endpoint();
        let installed = crate::telemetry::install(
            self.log_format,
            self.log_level.as_deref(),
            endpoint.as_ref(),
        );
        if let Err(e) = installed {
            crate::telemetry::say(tracing::Level::ERROR, e);
            return ExitCode::from(EXIT_USAGE);
        }
        let command = self.command;
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                crate::telemetry::say(
                    tracing::Level::ERROR,
                    format!("cannot start the async runtime: {e}"),
                );
                return ExitCode::FAILURE;
            }
        };
        let code = rt.block_on(commands::run(command));
        crate::telemetry::shutdown();
        code
    }
}

/// `--http`: HOST:PORT, or a bare PORT on 127.0.0.1.
fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|_| format!("{s:?} is not HOST:PORT or PORT (e.g. 127.0.0.1:8080)"))
}
