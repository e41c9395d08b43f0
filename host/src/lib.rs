//! toolhost: runs AI-agent tools as WebAssembly components in a wasmtime sandbox and puts every
//! model-proposed call through one bounded pipeline.
//!
//! A call is a *proposal*: the host resolves the tool, checks the arguments against the tool's
//! WIT types, runs it in a fresh instance under fuel, an epoch deadline, an async timeout, a
//! memory and table ceiling, an output ceiling and the tool's capability grant, and returns one
//! [`ToolResult`] whose message is safe to show a model.
//!
//! # Layout
//!
//! - [`contract`]: `ToolCall`, `ToolResult`, status and codes, risk — the vocabulary.
//! - [`registry`]: components → tools; WIT → JSON Schema; JSON ↔ component values.
//! - [`sandbox`]: engine, limits, WASI context from a grant, network policy, executor.
//! - [`policy`]: authorization rules and approval tokens.
//! - [`ledger`]: admission, replay, terminal outcomes and the audit trail (SQLite).
//! - [`runtime`]: the pipeline over the registry and the sandbox.
//! - [`serve`]: MCP over stdio and Streamable HTTP.
//! - [`agent`]: the bounded agent loop against an OpenAI-compatible endpoint.
//! - [`config`]: the config file: every section checked, then a [`Runtime`] built from it.
//! - [`cli`]: the `toolhost` command line (`main.rs` only parses and calls it).

pub mod agent;
pub mod cli;
pub mod config;
pub mod contract;
pub mod ledger;
pub mod policy;
pub mod registry;
pub mod runtime;
pub mod sandbox;
pub mod serve;

pub use config::Config;
pub use contract::{Budgets, Code, Risk, RunContext, Status, ToolCall, ToolResult, Usage};
pub use registry::config::ToolName;
pub use registry::{Registry, RegistryError, Tool, ToolDefinition};
pub use runtime::{Diagnostics, Runtime};
pub use sandbox::{EpochMode, Grant, Limits, Sandbox};
