//! toolhost: runs AI-agent tools as WebAssembly components in a wasmtime sandbox and puts every
//! model-proposed call through one bounded pipeline.
//!
//! A call is a *proposal*: the host resolves the tool, checks the arguments against the tool's
//! WIT types, runs it in a fresh instance under fuel, an epoch deadline, an async timeout, a
//! memory and table ceiling, an output ceiling and the tool's capability grant, and returns one
//! [`ToolResult`] whose message is safe to show a model.
//!
//! # What a library user needs
//!
//! - [`Config`] and [`Runtime`]: load and check `toolhost.toml`, build the host
//!   (`Config::start`), and run calls (`Runtime::run_call`, `Runtime::call`; a front
//!   door that needs the tool first prepares the call once, `Runtime::prepare`, then
//!   `Runtime::run_prepared`).
//! - [`contract`]: the vocabulary — [`ToolCall`], [`ToolResult`], [`Status`], [`Code`], [`Risk`],
//!   [`RunContext`].
//! - [`serve`]: MCP over stdio and Streamable HTTP; [`agent`]: the bounded model loop.
//! - [`config`]: the file's sections and errors, `check-config`'s effective settings.
//! - [`cli`]: the `toolhost` command line, as the binary parses and runs it.
//!
//! # Layout
//!
//! The layers of `docs/architecture.md`, lowest first; a module uses only lower ones, and no
//! two files of one module import each other (`tests/all/layering.rs`):
//!
//! - `contract` and `telemetry`, each its own crate (`crates/contract`, re-exported here, and
//!   `crates/telemetry`): the vocabulary, and what the host tells its operator.
//! - `sandbox`, `ledger`, `policy`, each its own crate under `crates/`: execution under
//!   limits, the durable record, decisions. The ledger is four crates: `ledger-store` (the
//!   backend trait and its records), `ledger-sqlite` and `ledger-postgres` (one backend each),
//!   and `ledger` (the facade the runtime holds, which never names a driver).
//! - `oci`, its own crate (`crates/oci`): components fetched from OCI registries, checked
//!   against their digests, kept in a content-addressed store.
//! - `registry`, its own crate (`crates/registry`): components → tools.
//! - `runtime`, its own crate (`crates/runtime`): a call prepared once, then its stages
//!   (`stages/`, one file each).
//! - `serve` and `agent`, each its own crate (`crates/serve`, `crates/agent`): the front doors,
//!   which reach the rest through the runtime only.
//! - `config`, then `cli`: the `toolhost` command (`main.rs` only parses the command line
//!   and calls [`cli::Cli::run`]).
//!
//! The crates under the front doors (`runtime`, `registry`, `oci`, `sandbox`, `policy`,
//! `ledger`, `telemetry`) are not re-exported: what a library user needs of them is named below, and the
//! integration tests, benchmarks and fuzz targets depend on those crates themselves.
//! The runtime's benchmark-only entry points (`Runtime::unrecorded_for_benchmarks`,
//! `call_floor`, `benchmark_params`) are hidden from its documentation: they are not a stable
//! interface.

pub use toolhost_agent as agent;
pub mod cli;
pub mod config;
pub use toolhost_contract as contract;
pub use toolhost_serve as serve;

use toolhost_ledger as ledger;
use toolhost_oci as oci;
use toolhost_policy as policy;
use toolhost_registry as registry;
use toolhost_runtime as runtime;
use toolhost_sandbox as sandbox;
use toolhost_telemetry as telemetry;

pub use config::Config;
pub use contract::{Budgets, Code, Risk, RunContext, Status, ToolCall, ToolResult, Usage};
pub use registry::config::ToolName;
pub use registry::{Registry, RegistryError, Tool, ToolDefinition};
pub use runtime::{ApproveError, Diagnostics, ReconcileError, Runtime};
pub use sandbox::{EpochMode, Grant, Limits, Sandbox};
