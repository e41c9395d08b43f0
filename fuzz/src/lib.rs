//! The checks behind toolhost's fuzz targets: one function per parser that faces untrusted
//! bytes, taking the raw input and panicking when an invariant breaks.
//!
//! Each `fuzz_targets/<target>.rs` is one line that calls `<target>::check(data)`. The same
//! functions run on stable, without cargo-fuzz, over every committed input in
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` (`tests/all/fuzz_corpus.rs`
//! includes this file by path). So this file and its modules use only `toolhost`, `serde_json`,
//! `toml` and `wasmtime`, refer to each other with `super::`, and never to `crate::`.
//!
//! # Layout
//!
//! - [`fixture`]: the `types` guest component, loaded once per process (WIT types, a runtime).
//! - [`convert`]: JSON → component values and back, over every WIT type the guest uses.
//! - [`arguments`]: the strict JSON parse of arguments, then the pipeline's argument check (size,
//!   JSON Schema, exact WIT types).
//! - [`sse`]: the agent loop's server-sent-events reader and the turn it builds.
//! - [`approval`]: approval handles and tokens, parsed and verified from untrusted strings.
//! - [`mcp_frame`]: the check every MCP frame (stdio line, HTTP body) passes before rmcp.
//! - [`config`]: `Config::parse` and everything derived from a parsed config without I/O.

pub mod approval;
pub mod arguments;
pub mod config;
pub mod convert;
pub mod fixture;
pub mod mcp_frame;
pub mod sse;

/// Every target, by the name its `fuzz_targets/` file, its corpus directory and its regression
/// directory carry.
pub const TARGETS: &[&str] = &[
    "convert",
    "arguments",
    "sse",
    "approval",
    "config",
    "mcp_frame",
];
