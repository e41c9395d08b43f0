//! OpenAI Chat Completions: the request (`messages`, `tools` as functions, the output limit in
//! `max_tokens` or `max_completion_tokens`) and its response, streamed (`choices[0].delta`
//! chunks, then `[DONE]`) or whole (`choices[0].message`).
//!
//! A chunk belongs to the call its `index` names — unless it carries an id other than that
//! call's: some servers stream every parallel call at index 0, so a new id at a used index
//! starts a new call (never glued to the previous one, never dropped).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use super::{stream_error, RequestOptions, ToolSpec};
use crate::history::{Entry, History};
use crate::provider_error::ProviderError;
use crate::turn::{parse_strict, Finish, ModelTurn, Parts, TurnError};

pub(super) fn request(
    model: &str,
    history: &History,
    tools: &[ToolSpec],
    options: RequestOptions,
) -> Value {
    let messages: Vec<Value> = history.0.iter().map(message).collect();
    let mut body = json!({"model": model, "messages": messages, "stream": options.stream});
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if options.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(n) = options.max_output_tokens {
        body[options.chat_limit_field.as_str()] = json!(n);
    }
    body
}

fn message(e: &Entry) -> Value {
    match e {
        Entry::System(s) => json!({"role": "system", "content": s}),
        Entry::User(s) => json!({"role": "user", "content": s}),
        Entry::Assistant { text, calls } if calls.is_empty() => {
            json!({"role": "assistant", "content": text})
        }
        Entry::Assistant { text, calls } => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({"id": c.provider_id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
            json!({"role": "assistant", "content": text, "tool_calls": calls})
        }
        Entry::ToolResult {
            provider_id,
            content,
        } => json!({"role": "tool", "tool_call_id": provider_id, "content": content}),
    }
}

fn finish(word: &str) -> Finish {
    match word {
        "tool_calls" | "function_call" => Finish::ToolCalls,
        "length" => Finish::OutputLimit,
        "content_filter" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

/// Accumulates one Chat Completions turn from chunks (streaming) or from a whole message.
#[derive(Debug, Default)]
pub struct ChatTurn {
    parts: Parts,
    /// The provider's index → the position of the latest call at that index.
    at_index: BTreeMap<u32, usize>,
    done: bool,
    /// Positions in the current event's `tool_calls` whose object `arguments` repeat a key.
    repeated: Vec<usize>,
}

/// The event's JSON; a key repeated inside a call's *object* `arguments` (some servers send
/// the object instead of the specified string) is remembered by the call's place in
/// `tool_calls`. (String arguments are checked when the call completes.)
fn parse_event(data: &[u8]) -> Result<(Value, Vec<usize>), TurnError> {
    use toolhost_contract::strict_json::Segment;
    parse_strict(data, &|path| {
        path.windows(4).find_map(|w| match w {
            [Segment::Key(t), Segment::Index(k), Segment::Key(f), Segment::Key(a)]
                if t == "tool_calls" && f == "function" && a == "arguments" =>
            {
                Some(*k)
            }
            _ => None,
        })
    })
}

/// Whether a chunk or body is the provider's error (some servers send `"error": null` in
/// every chunk).
fn has_error(v: &Value) -> bool {
    v.get("error").is_some_and(|e| !e.is_null())
}

impl ChatTurn {
    /// Whether the stream said `[DONE]` (reading stops there; after a `finish_reason` alone
    /// the usage chunk may still follow).
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// One SSE event's data. `[DONE]` ends the stream; an `error` object is the provider's
    /// error, classified.
    pub fn event(&mut self, data: &str, now: Instant) -> Result<(), ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let (v, repeated) = parse_event(data.as_bytes())?;
        self.repeated = repeated;
        if has_error(&v) {
            return Err(stream_error(&v));
        }
        self.take_usage(&v);
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return Ok(()); // e.g. the usage-only final chunk
        };
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, now)?;
        }
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.parts.set_finish(finish(r), r);
        }
        Ok(())
    }

    /// A whole (non-streamed) response body, as received.
    pub fn whole_body(&mut self, raw: &[u8], now: Instant) -> Result<(), ProviderError> {
        let (v, repeated) = parse_event(raw)?;
        self.repeated = repeated;
        if has_error(&v) {
            return Err(stream_error(&v));
        }
        Ok(self.whole(&v, now)?)
    }

    /// A whole (non-streamed) response body.
    pub fn whole(&mut self, v: &Value, now: Instant) -> Result<(), TurnError> {
        let choice = v
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| TurnError::Malformed("no choices".into()))?;
        let message = choice
            .get("message")
            .ok_or_else(|| TurnError::Malformed("no message".into()))?;
        if let Some(text) = message.get("content").and_then(Value::as_str) {
            self.parts.text(text);
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for (i, c) in calls.iter().enumerate() {
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                self.call_delta(Some(index), c, i, now)?;
            }
        }
        let word = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("stop");
        self.parts.set_finish(finish(word), word);
        self.take_usage(v);
        self.done = true;
        Ok(())
    }

    fn take_usage(&mut self, v: &Value) {
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.parts.usage = Some(super::usage(u, "prompt_tokens", "completion_tokens"));
        }
    }

    fn delta(&mut self, delta: &Value, now: Instant) -> Result<(), TurnError> {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.parts.text(text);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (at, c) in calls.iter().enumerate() {
                let index = match c.get("index").and_then(Value::as_u64) {
                    Some(i) => Some(u32::try_from(i).map_err(|_| {
                        TurnError::Malformed("a tool call index is out of range".into())
                    })?),
                    // Some servers send each call whole, without an index: match it by id,
                    // or give it the next index.
                    None => None,
                };
                self.call_delta(index, c, at, now)?;
            }
        }
        Ok(())
    }

    /// The position of the call a chunk belongs to, starting a new call where it belongs to
    /// none: at an index not seen yet, at a seen index with another id than that call's, or
    /// (without an index) with an id not seen yet.
    fn position(&mut self, index: Option<u32>, id: Option<&str>) -> Result<usize, TurnError> {
        let calls = &self.parts.calls;
        let found = match index {
            Some(i) => {
                self.at_index
                    .get(&i)
                    .copied()
                    .filter(|&p| match (id, calls[p].id.as_deref()) {
                        (Some(new), Some(old)) => crate::turn::same_id(new, old),
                        _ => true,
                    })
            }
            None => id.and_then(|id| {
                calls
                    .iter()
                    .position(|p| p.id.as_deref().is_some_and(|o| crate::turn::same_id(id, o)))
            }),
        };
        if let Some(p) = found {
            return Ok(p);
        }
        let p = self.parts.new_call()?;
        let index = index.unwrap_or_else(|| {
            self.at_index
                .keys()
                .next_back()
                .map_or(0, |i| i.saturating_add(1))
        });
        self.at_index.insert(index, p);
        Ok(p)
    }

    /// One call's part of an event; `at` is its position in the event's `tool_calls`.
    fn call_delta(
        &mut self,
        index: Option<u32>,
        c: &Value,
        at: usize,
        now: Instant,
    ) -> Result<(), TurnError> {
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let position = self.position(index, id)?;
        let function = c.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        self.parts.identify(position, id, name, None);
        // Arguments are a JSON string by the spec; some servers send the object itself.
        let fragment = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        self.parts.arguments(position, &fragment, now);
        if self.repeated.contains(&at) {
            self.parts
                .fail(position, "invalid arguments: the arguments repeat a key");
        }
        Ok(())
    }

    /// The turn, once the response has ended. A stream that ended without `[DONE]` or a
    /// `finish_reason` is `Truncated`.
    pub fn finish(self, now: Instant) -> Result<ModelTurn, TurnError> {
        if !(self.done || self.parts.finish.is_some()) {
            return Err(TurnError::Truncated);
        }
        Ok(self.parts.finish(now))
    }
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
