//! Integration tests: the real `toolhost` binary and the library against real components.
//!
//! One test binary (link time with wasmtime is long). Guests must be built first:
//! `just test` does it (`just build-guests`).

mod agent;
mod agent_approval;
mod agent_loop;
mod agent_secrets;
mod agent_transport;
mod api_server;
mod approval_codes;
mod authors;
mod balanced;
mod cache;
mod call_context;
mod certs;
mod cli;
mod config_ui;
mod disk;
mod duplicates;
mod durability;
mod epochs;
mod example_tools;
mod frames;
mod front_door;
mod fuzz_corpus;
mod grants;
mod host_handles;
mod host_memory;
mod hostile;
mod input_bounds;
mod json_schema_suite;
mod layering;
mod logs;
mod mcp;
mod mcp_frames;
mod mcp_logging;
mod mcp_stateless;
mod mcp_tasks;
mod mcp_ts;
mod metrics;
mod multi_host;
mod oauth;
mod openai;
mod pg_restart;
mod pg_tls;
mod pipeline;
mod polyglot;
mod pool;
mod replay_owner;
mod resources;
mod scaffold;
mod schema_portability;
mod secrets;
mod support;
mod types;
mod visibility;
