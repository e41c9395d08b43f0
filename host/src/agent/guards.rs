//! The bounds of an agent run (`[agent]` in the config, each overridable on the command line)
//! and the named reasons a run stops.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[agent]`: how long and how far a run may go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model requests per run; the first is step 1.
    pub max_steps: u32,
    /// Tool calls per run, over all tools.
    pub max_tool_calls: u64,
    /// Tool calls per run of any one tool (none: only the total applies).
    pub max_calls_per_tool: Option<u64>,
    /// Wall-clock time of the whole run, in seconds.
    pub deadline_secs: u64,
    /// Tokens (the endpoint's `usage.total_tokens`, summed) after which no further step starts.
    pub max_tokens: Option<u64>,
    /// The same tool with the same canonical arguments this many times stops the run (the
    /// repeat that reaches the limit is not executed).
    pub repeat_limit: u32,
    /// A tool whose completed call ends the run.
    pub terminal_tool: Option<String>,
    /// Retries of one model request (never of a tool).
    pub max_retries: u32,
    /// Ask the endpoint to stream (server-sent events).
    pub stream: bool,
    /// A system message put before the prompt.
    pub system_prompt: Option<String>,
    /// Bytes of a tool result's rendering fed back to the model.
    pub tool_message_bytes: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_steps: 16,
            max_tool_calls: 64,
            max_calls_per_tool: None,
            deadline_secs: 600,
            max_tokens: None,
            repeat_limit: 3,
            terminal_tool: None,
            max_retries: 3,
            stream: true,
            system_prompt: None,
            tool_message_bytes: crate::contract::DEFAULT_MODEL_MESSAGE_BYTES,
        }
    }
}

impl AgentConfig {
    pub fn deadline(&self) -> Duration {
        Duration::from_secs(self.deadline_secs)
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without proposing a tool call.
    Finished,
    MaxSteps,
    MaxToolCalls,
    MaxCallsPerTool,
    Deadline,
    TokenBudget,
    RepeatedCall,
    TerminalTool,
    Cancelled,
    /// The model request failed after its retries (or could not be retried).
    ProviderError,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Finished => "finished",
            StopReason::MaxSteps => "max_steps",
            StopReason::MaxToolCalls => "max_tool_calls",
            StopReason::MaxCallsPerTool => "max_calls_per_tool",
            StopReason::Deadline => "deadline",
            StopReason::TokenBudget => "token_budget",
            StopReason::RepeatedCall => "repeated_call",
            StopReason::TerminalTool => "terminal_tool",
            StopReason::Cancelled => "cancelled",
            StopReason::ProviderError => "provider_error",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
