//! The bounded agent loop: toolhost as the client of a model endpoint that speaks Chat
//! Completions, the Responses API or Anthropic's Messages API. It advertises the configured
//! tools, runs what the model proposes through the pipeline, feeds the results back, and stops
//! on a guard it can name.
//!
//! # Layout
//!
//! - [`approval`]: what a human or an operator's command is shown of a call to approve;
//!   [`approve_terminal`] asks at the terminal, [`approve_command`] runs `--approve-with`.
//! - [`guards`]: `[agent]` bounds and the named stop reasons.
//! - [`schema`]: canonical input schemas → the subset providers accept.
//! - [`sse`]: server-sent events → the data of each event.
//! - [`history`]: the conversation in no wire format's terms.
//! - [`wire`]: one file per API: its request body, and its response → one model turn.
//! - [`turn`]: what a model turn is (text, calls, how it ended, usage), as every format
//!   builds it.
//! - [`endpoint`]: the base URL and the API → the request URL.
//! - [`provider`]: the HTTP(S) client, bounded reads, retries of the model request only.
//! - [`redact`]: the API key (and credential echoes) out of whatever a response gives back.
//! - [`run`]: the loop and its summary.

pub mod approval;
pub mod approve_command;
pub mod approve_terminal;
pub mod endpoint;
pub mod guards;
pub mod history;
pub mod provider;
mod provider_error;
pub mod redact;
mod retry_after;
pub mod run;
pub mod schema;
pub mod sse;
mod step;
pub mod turn;
pub mod wire;

pub use approve_command::CommandApprover;
pub use approve_terminal::TerminalApprover;
pub use endpoint::Endpoint;
pub use guards::{AgentConfig, StopReason};
pub use history::History;
pub use provider::{Provider, ProviderError, ProviderOptions};
pub use run::{advertised_tools, prompt_messages, run_agent, Summary};
pub use wire::Api;
