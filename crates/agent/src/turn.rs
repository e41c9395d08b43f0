//! One model turn, assembled from a streamed (server-sent events, see `sse.rs`) or a whole
//! chat-completions response: the text, the proposed tool calls in the order they arrived, why
//! it finished, and the token usage the endpoint reported.
//!
//! Tool-call argument fragments accumulate per call in the pipeline's
//! [`ArgumentStream`](toolhost_runtime::stream_args::ArgumentStream) (byte and time limits) and are
//! parsed once, when the turn ends. Arguments that never complete or do not parse become an
//! `invalid_arguments` result for that call; nothing partial is ever executed.
//!
//! A chunk belongs to the call its `index` names — unless it carries an id other than that
//! call's: some servers stream every parallel call at index 0, so a new id at a used index
//! starts a new call (never glued to the previous one, never dropped).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};

use toolhost_contract::ToolResult;
use toolhost_runtime::stream_args::ArgumentStream;

/// Bytes of assistant text kept per turn; the rest is cut (and the text says so).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;
/// What ends a text cut at [`MAX_CONTENT_BYTES`].
pub const CONTENT_CUT_MARKER: &str = "\n[toolhost: the reply was cut here, at 1 MiB]";
/// Tool calls one turn may propose; more is a malformed response.
pub const MAX_CALLS_PER_TURN: usize = 64;
/// Bytes of a call's arguments *as proposed* kept for the history sent back to the model (so
/// it can see a mistake); the arguments themselves are bounded by the argument stream.
pub const MAX_PROPOSED_ARGUMENT_BYTES: usize = 8 << 10;

/// Token counts an endpoint reported for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// One call the model proposed.
#[derive(Debug, Clone)]
pub struct ProposedCall {
    /// Its position in the turn (0, 1, …), unique within the turn.
    pub index: u32,
    /// The provider's id for it, if it sent one (not trusted to be unique).
    pub provider_id: Option<String>,
    pub name: String,
    /// The parsed arguments, or the `invalid_arguments` result to feed back instead.
    pub arguments: Result<Value, Box<ToolResult>>,
    /// The argument text as the model sent it, cut at [`MAX_PROPOSED_ARGUMENT_BYTES`].
    pub proposed_arguments: String,
    /// SHA-256 (hex) of the whole argument text as sent: what the repeat guard compares when
    /// the arguments do not parse.
    pub proposed_digest: String,
}

/// A complete model turn.
#[derive(Debug, Clone, Default)]
pub struct ModelTurn {
    pub content: Option<String>,
    pub calls: Vec<ProposedCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
}

/// Why a response could not become a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("the response is not valid chat-completions JSON: {0}")]
    Malformed(String),
    #[error("the stream ended before the message finished")]
    Truncated,
    /// Past one of toolhost's own size caps: asking again would pull as much again.
    #[error("{0} is larger than toolhost accepts")]
    TooLarge(&'static str),
}

/// One proposed call as it accumulates.
#[derive(Debug)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    proposed: String,
    digest: Sha256,
}

impl PartialCall {
    fn new() -> Self {
        PartialCall {
            id: None,
            name: None,
            proposed: String::new(),
            digest: Sha256::new(),
        }
    }
}

/// Accumulates one turn from chunks (streaming) or from a whole message.
#[derive(Debug, Default)]
pub struct TurnBuilder {
    content: String,
    has_content: bool,
    /// Text arrived past [`MAX_CONTENT_BYTES`].
    content_cut: bool,
    /// Calls in the order their first chunk arrived; a call's position keys its arguments.
    calls: Vec<PartialCall>,
    /// The provider's index → the position of the latest call at that index.
    at_index: BTreeMap<u32, usize>,
    args: ArgumentStream,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    done: bool,
    /// Positions in the current event's `tool_calls` whose object `arguments` repeat a key.
    repeated: Vec<usize>,
}

fn key(position: usize) -> String {
    format!("call-{position}")
}

/// The event's JSON, strictly parsed; a key repeated inside a call's *object* `arguments` (some
/// servers send the object instead of the specified string) is tolerated here but remembered
/// by the call's position, so that call ends `invalid_arguments` instead of running with one of
/// the values. (String arguments are checked when the call completes.)
fn parse_event(data: &[u8]) -> Result<(Value, Vec<usize>), TurnError> {
    use toolhost_contract::strict_json::{parse_with, Segment};
    let mut repeated = Vec::new();
    let v = parse_with(data, &mut |path| {
        let at = path.windows(4).find_map(|w| match w {
            [Segment::Key(t), Segment::Index(k), Segment::Key(f), Segment::Key(a)]
                if t == "tool_calls" && f == "function" && a == "arguments" =>
            {
                Some(*k)
            }
            _ => None,
        });
        repeated.extend(at);
        true
    })
    .map_err(|e| TurnError::Malformed(e.to_string()))?;
    Ok((v, repeated))
}

impl TurnBuilder {
    /// Whether the stream said `[DONE]` or a choice finished.
    pub fn finished(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    /// Whether the stream said `[DONE]` (reading stops there; after a `finish_reason` alone
    /// the usage chunk may still follow).
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// One SSE event's data. `[DONE]` ends the stream.
    pub fn event(&mut self, data: &str, now: Instant) -> Result<(), TurnError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let (v, repeated) = parse_event(data.as_bytes())?;
        self.repeated = repeated;
        if let Some(err) = v.get("error") {
            return Err(TurnError::Malformed(format!(
                "the stream carried an error: {}",
                toolhost_contract::bounds::clip(&err.to_string(), 200)
            )));
        }
        self.take_usage(&v);
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return Ok(()); // e.g. the usage-only final chunk
        };
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, now)?;
        }
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_string());
        }
        Ok(())
    }

    /// A whole (non-streamed) response body, as received.
    pub fn whole_body(&mut self, raw: &[u8], now: Instant) -> Result<(), TurnError> {
        let (v, repeated) = parse_event(raw)?;
        self.repeated = repeated;
        self.whole(&v, now)
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
            self.text(text);
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for (i, c) in calls.iter().enumerate() {
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                self.call_delta(Some(index), c, i, now)?;
            }
        }
        self.finish_reason = Some(
            choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .unwrap_or("stop")
                .to_string(),
        );
        self.take_usage(v);
        self.done = true;
        Ok(())
    }

    fn take_usage(&mut self, v: &Value) {
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let (prompt, completion) = (n("prompt_tokens"), n("completion_tokens"));
            let total = u
                .get("total_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(prompt.saturating_add(completion));
            self.usage = Some(TokenUsage {
                prompt,
                completion,
                total,
            });
        }
    }

    fn text(&mut self, text: &str) {
        self.has_content = true;
        let room = MAX_CONTENT_BYTES.saturating_sub(self.content.len());
        let kept = toolhost_contract::bounds::clip(text, room);
        self.content_cut |= kept.len() < text.len();
        self.content.push_str(kept);
    }

    fn delta(&mut self, delta: &Value, now: Instant) -> Result<(), TurnError> {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text(text);
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
        let found = match index {
            Some(i) => self.at_index.get(&i).copied().filter(|&p| {
                match (id, self.calls[p].id.as_deref()) {
                    (Some(new), Some(old)) => new == old,
                    _ => true,
                }
            }),
            None => id.and_then(|id| self.calls.iter().position(|p| p.id.as_deref() == Some(id))),
        };
        if let Some(p) = found {
            return Ok(p);
        }
        if self.calls.len() >= MAX_CALLS_PER_TURN {
            return Err(TurnError::Malformed(format!(
                "more than {MAX_CALLS_PER_TURN} tool calls in one message"
            )));
        }
        let index = index.unwrap_or_else(|| {
            self.at_index
                .keys()
                .next_back()
                .map_or(0, |i| i.saturating_add(1))
        });
        self.calls.push(PartialCall::new());
        let p = self.calls.len() - 1;
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
        let partial = &mut self.calls[position];
        if let Some(id) = id {
            partial.id.get_or_insert_with(|| id.to_string());
        }
        let function = c.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if let Some(n) = name {
            partial.name.get_or_insert_with(|| n.to_string());
        }
        // Arguments are a JSON string by the spec; some servers send the object itself.
        let fragment = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        partial.digest.update(fragment.as_bytes());
        let room = MAX_PROPOSED_ARGUMENT_BYTES.saturating_sub(partial.proposed.len());
        partial
            .proposed
            .push_str(toolhost_contract::bounds::clip(&fragment, room));
        self.args.push(&key(position), name, &fragment, now);
        if self.repeated.contains(&at) {
            self.args.fail(
                &key(position),
                "invalid arguments: the arguments repeat a key",
            );
        }
        Ok(())
    }

    /// The turn, once the response has ended. A stream that ended without finishing is
    /// `Truncated` (the model request is retried; nothing of it was executed).
    pub fn finish(mut self, now: Instant) -> Result<ModelTurn, TurnError> {
        if !self.finished() {
            return Err(TurnError::Truncated);
        }
        let calls = std::mem::take(&mut self.calls);
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(position, p)| {
                let name = p.name.unwrap_or_default();
                let arguments = match self.args.finish(&key(position), now) {
                    Ok(call) => Ok(call.arguments),
                    Err(mut r) => {
                        r.tool = name.clone();
                        Err(Box::new(r))
                    }
                };
                ProposedCall {
                    index: u32::try_from(position).unwrap_or(u32::MAX),
                    provider_id: p.id,
                    name,
                    arguments,
                    proposed_arguments: p.proposed,
                    proposed_digest: hex::encode(p.digest.finalize()),
                }
            })
            .collect();
        if self.content_cut {
            self.content.push_str(CONTENT_CUT_MARKER);
        }
        Ok(ModelTurn {
            content: self.has_content.then_some(self.content),
            calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
