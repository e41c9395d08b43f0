//! The three wire formats the agent speaks, behind one face: which path a request goes to and
//! how it authenticates ([`Api`]), the request body for a [`History`] ([`request_body`]), and
//! a reader that turns a streamed or whole response into one [`ModelTurn`] ([`Reader`]).
//!
//! # Layout
//!
//! - `chat.rs`: OpenAI Chat Completions (`/chat/completions`).
//! - `responses.rs`: the Responses API, as OpenAI and Open Responses define it (`/responses`).
//! - `messages.rs`: Anthropic's Messages API (`/messages`).

use std::time::Instant;

use serde_json::Value;

use super::history::History;
use super::provider_error::ProviderError;
use super::turn::{ModelTurn, TurnError};

mod chat;
mod messages;
mod responses;

pub use chat::ChatTurn;

toolhost_contract::wire_enum! {
    /// A provider API: its wire format, its path and its authentication.
    pub enum Api {
        /// OpenAI Chat Completions and the servers compatible with it.
        Chat = "chat",
        /// The Responses API (OpenAI; Open Responses).
        Responses = "responses",
        /// Anthropic's Messages API.
        Messages = "messages",
    }
}

/// `max_tokens` of a Messages request when `--max-output-tokens` is not given: the API requires
/// the field.
pub const DEFAULT_MESSAGES_MAX_TOKENS: u64 = 8192;

toolhost_contract::wire_enum! {
    /// The field of a Chat Completions request that carries the output limit: `max_tokens` is
    /// what compatible servers (vLLM, llama.cpp, Ollama) read; OpenAI's reasoning models take
    /// only `max_completion_tokens`.
    pub enum ChatLimitField {
        MaxTokens = "max_tokens",
        MaxCompletionTokens = "max_completion_tokens",
    }
}

impl Api {
    /// The path appended to the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Responses => "/responses",
            Api::Messages => "/messages",
        }
    }

    /// The API whose own path a base URL's path already ends in.
    pub fn of_path(path: &str) -> Option<Api> {
        let path = path.trim_end_matches('/');
        Api::ALL.iter().find(|a| path.ends_with(a.path())).copied()
    }

    /// The API a host serves alone (Anthropic's).
    pub fn of_host(host: &str) -> Option<Api> {
        (host == "api.anthropic.com").then_some(Api::Messages)
    }
}

/// A tool as every format advertises it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The input schema, already in the subset providers accept.
    pub parameters: Value,
}

/// What a request asks besides the conversation.
#[derive(Debug, Clone, Copy)]
pub struct RequestOptions {
    pub stream: bool,
    /// Output tokens per response, in each API's own field.
    pub max_output_tokens: Option<u64>,
    pub chat_limit_field: ChatLimitField,
}

/// The request body of one model request.
pub fn request_body(
    api: Api,
    model: &str,
    history: &History,
    tools: &[ToolSpec],
    options: RequestOptions,
) -> Value {
    match api {
        Api::Chat => chat::request(model, history, tools, options),
        Api::Responses => responses::request(model, history, tools, options),
        Api::Messages => messages::request(model, history, tools, options),
    }
}

/// Reads one response of an API into a turn.
#[derive(Debug)]
pub enum Reader {
    Chat(ChatTurn),
    Responses(responses::ResponsesTurn),
    Messages(messages::MessagesTurn),
}

impl Reader {
    pub fn new(api: Api) -> Reader {
        match api {
            Api::Chat => Reader::Chat(ChatTurn::default()),
            Api::Responses => Reader::Responses(Default::default()),
            Api::Messages => Reader::Messages(Default::default()),
        }
    }

    /// One server-sent event's data. An error the stream reports is classified as the same
    /// error in an HTTP status would be.
    pub fn event(&mut self, data: &str, now: Instant) -> Result<(), ProviderError> {
        match self {
            Reader::Chat(r) => r.event(data, now),
            Reader::Responses(r) => r.event(data, now),
            Reader::Messages(r) => r.event(data, now),
        }
    }

    /// A whole (non-streamed) response body, as received.
    pub fn whole_body(&mut self, raw: &[u8], now: Instant) -> Result<(), ProviderError> {
        match self {
            Reader::Chat(r) => r.whole_body(raw, now),
            Reader::Responses(r) => r.whole_body(raw, now),
            Reader::Messages(r) => r.whole_body(raw, now),
        }
    }

    /// Whether the stream said its last word (reading stops there).
    pub fn saw_done(&self) -> bool {
        match self {
            Reader::Chat(r) => r.saw_done(),
            Reader::Responses(r) => r.saw_done(),
            Reader::Messages(r) => r.saw_done(),
        }
    }

    /// The turn, once the response has ended. A stream that ended without its last word is
    /// `Truncated` (the model request is retried; nothing of it was executed).
    pub fn finish(self, now: Instant) -> Result<ModelTurn, TurnError> {
        match self {
            Reader::Chat(r) => r.finish(now),
            Reader::Responses(r) => r.finish(now),
            Reader::Messages(r) => r.finish(now),
        }
    }
}

/// An error object inside a stream, classified as an HTTP error would be.
fn stream_error(v: &Value) -> ProviderError {
    let excerpt = toolhost_contract::bounds::clip(&v.to_string(), 300).to_string();
    super::provider_error::classify(
        super::provider_error::Origin::Stream,
        Some(v),
        excerpt,
        None,
    )
}

/// Token usage from a `usage` object whose input and output counts are named `prompt` and
/// `completion` (the total is the endpoint's `total_tokens`, or their sum).
fn usage(u: &Value, prompt: &str, completion: &str) -> crate::turn::TokenUsage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (prompt, completion) = (n(prompt), n(completion));
    crate::turn::TokenUsage {
        prompt,
        completion,
        total: u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt.saturating_add(completion)),
    }
}

/// A stream of these events through `api`'s reader, to its turn (the readers' tests).
#[cfg(test)]
fn feed(api: Api, events: &[Value]) -> Result<ModelTurn, ProviderError> {
    let now = Instant::now();
    let mut r = Reader::new(api);
    for e in events {
        r.event(&e.to_string(), now)?;
    }
    Ok(r.finish(now)?)
}
