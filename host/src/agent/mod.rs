//! The bounded agent loop: toolhost as the client of an OpenAI-compatible chat-completions
//! endpoint. It advertises the configured tools, runs what the model proposes through the
//! pipeline, feeds the results back, and stops on a guard it can name.
//!
//! # Layout
//!
//! - [`guards`]: `[agent]` bounds and the named stop reasons.
//! - [`schema`]: canonical input schemas → the subset providers accept.
//! - [`turn`]: server-sent events and chunks → one model turn (text, calls, usage).
//! - [`provider`]: the HTTP(S) client, bounded reads, retries of the model request only.
//! - [`redact`]: the API key (and credential echoes) out of whatever a response gives back.
//! - [`run`]: the loop and its summary.

pub mod guards;
pub mod provider;
pub mod redact;
pub mod run;
pub mod schema;
pub mod turn;

pub use guards::{AgentConfig, StopReason};
pub use provider::{Endpoint, Provider, ProviderError, ProviderOptions};
pub use run::{advertised_tools, prompt_messages, run_agent, Summary};
