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
//! - [`contract`]: `ToolCall`, `ToolResult`, status and codes — the vocabulary.
//! - [`registry`]: config + components → tools; WIT → JSON Schema; JSON ↔ component values.
//! - [`sandbox`]: engine, limits, WASI context from a grant, network policy, executor.
//! - [`policy`]: authorization rules and approval tokens.
//! - [`ledger`]: admission, replay, terminal outcomes and the audit trail (SQLite).
//! - [`runtime`]: the pipeline over the registry and the sandbox.
//! - [`serve`]: MCP over stdio and Streamable HTTP.
//! - [`agent`]: the bounded agent loop against an OpenAI-compatible endpoint.
//! - [`cli`]: the `toolhost` command line (`main.rs` only parses and calls it).

pub mod agent;
pub mod cli;
pub mod contract;
pub mod ledger;
pub mod policy;
pub mod registry;
pub mod runtime;
pub mod sandbox;
pub mod serve;

pub use contract::{Budgets, Code, RunContext, Status, ToolCall, ToolResult, Usage};
pub use registry::config::{Config, Risk, ToolName};
pub use registry::{Registry, RegistryError, Tool, ToolDefinition};
pub use runtime::{Diagnostics, Runtime};
pub use sandbox::{EpochMode, Grant, Limits, Sandbox};
