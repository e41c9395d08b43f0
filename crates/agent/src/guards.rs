//! The bounds of an agent run (`[agent]` in the config, each overridable on the command line)
//! and the named reasons a run stops.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use toolhost_contract::ConfigProblem;

use super::wire::{Api, ChatLimitField};

/// The smallest `tool_message_bytes`: room for the frame a result is rendered in and a line of
/// its content.
pub const MIN_TOOL_MESSAGE_BYTES: usize = 256;

/// `[agent]`: how long and how far a run may go.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
    /// A system message put before the prompt, or before the messages of `--messages`.
    pub system_prompt: Option<String>,
    /// The provider API (none: what the base URL names, else `chat`).
    pub api: Option<Api>,
    /// Output tokens per response, sent in each API's own field (Messages requires one: 8192
    /// when this is not set).
    pub max_output_tokens: Option<u64>,
    /// The Chat Completions field that carries `max_output_tokens`.
    pub output_limit_field: ChatLimitField,
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
            api: None,
            max_output_tokens: None,
            output_limit_field: ChatLimitField::MaxTokens,
            tool_message_bytes: toolhost_contract::DEFAULT_MODEL_MESSAGE_BYTES,
        }
    }
}

impl AgentConfig {
    /// Every problem of the `[agent]` section (and of the flags that override it): a guard of 0
    /// would end every run before it starts. Whether `terminal_tool` names a configured tool is
    /// checked once the tools are known (the host's config layer).
    pub fn validate(&self, problems: &mut Vec<ConfigProblem>) {
        let mut zero = |key: &str, what: &str| {
            problems.push(ConfigProblem::new(
                format!("agent.{key}"),
                format!("is 0, so {what}; give at least 1 (or leave it out for the default)"),
            ))
        };
        if self.max_steps == 0 {
            zero("max_steps", "no model request could be made");
        }
        if self.max_tool_calls == 0 {
            zero("max_tool_calls", "no tool could be called");
        }
        if self.max_calls_per_tool == Some(0) {
            zero("max_calls_per_tool", "no tool could be called");
        }
        if self.deadline_secs == 0 {
            zero("deadline_secs", "every run would be out of time at once");
        }
        if self.max_tokens == Some(0) {
            zero("max_tokens", "no model request could be made");
        }
        if self.max_output_tokens == Some(0) {
            zero(
                "max_output_tokens",
                "every response would be cut before it starts",
            );
        }
        if self.repeat_limit == 0 {
            zero("repeat_limit", "no call could be made even once");
        }
        if self.tool_message_bytes < MIN_TOOL_MESSAGE_BYTES {
            problems.push(ConfigProblem::new(
                "agent.tool_message_bytes",
                format!(
                    "is {}, too small for even the result frame; give at least \
                     {MIN_TOOL_MESSAGE_BYTES} (the default is {})",
                    self.tool_message_bytes,
                    toolhost_contract::DEFAULT_MODEL_MESSAGE_BYTES
                ),
            ));
        }
        if self
            .terminal_tool
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            problems.push(ConfigProblem::new(
                "agent.terminal_tool",
                "is empty; name a configured tool, or leave it out",
            ));
        }
    }

    pub fn deadline(&self) -> Duration {
        Duration::from_secs(self.deadline_secs)
    }
}

toolhost_contract::wire_enum! {
    /// Why a run ended.
    pub enum StopReason {
        /// The model answered without proposing a tool call.
        Finished = "finished",
        MaxSteps = "max_steps",
        MaxToolCalls = "max_tool_calls",
        MaxCallsPerTool = "max_calls_per_tool",
        Deadline = "deadline",
        TokenBudget = "token_budget",
        RepeatedCall = "repeated_call",
        TerminalTool = "terminal_tool",
        Cancelled = "cancelled",
        /// The model request failed after its retries (or could not be retried).
        ProviderError = "provider_error",
        /// The response was cut at its output limit (`length`, `max_tokens`,
        /// `max_output_tokens`); nothing it proposed was run.
        OutputLimit = "output_limit",
        /// The provider withheld or cut the answer (`content_filter`, `refusal`); nothing it
        /// proposed was run.
        ContentFilter = "content_filter",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stop reason's wire name round-trips and is its own.
    #[test]
    fn stop_reasons_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for r in StopReason::ALL {
            let wire = serde_json::to_value(r).unwrap();
            assert_eq!(wire, serde_json::json!(r.as_str()));
            assert_eq!(serde_json::from_value::<StopReason>(wire).unwrap(), *r);
            assert!(seen.insert(r.as_str()));
        }
        assert_eq!(StopReason::ALL.len(), 12);
    }
}
