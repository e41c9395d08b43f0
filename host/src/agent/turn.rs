//! One model turn, assembled from a streamed (server-sent events) or a whole chat-completions
//! response: the text, the proposed tool calls in index order, why it finished, and the token
//! usage the endpoint reported.
//!
//! Tool-call argument fragments accumulate per index in the pipeline's
//! [`ArgumentStream`](crate::runtime::stream_args::ArgumentStream) (byte and time limits) and are
//! parsed once, when the turn ends. Arguments that never complete or do not parse become an
//! `invalid_arguments` result for that call; nothing partial is ever executed.
//!
//! Longer than 500 lines: 177 of them are its unit tests, kept beside the code they test (the code is 374 lines).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;

use crate::contract::ToolResult;
use crate::runtime::stream_args::ArgumentStream;

/// Bytes of one server-sent event's data kept; a longer event is a malformed stream.
pub const MAX_EVENT_BYTES: usize = 1 << 20;
/// Bytes of assistant text kept per turn; the rest is cut.
pub const MAX_CONTENT_BYTES: usize = 1 << 20;
/// Tool calls one turn may propose; more is a malformed response.
pub const MAX_CALLS_PER_TURN: usize = 64;

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
    pub index: u32,
    /// The provider's id for it, if it sent one (not trusted to be unique).
    pub provider_id: Option<String>,
    pub name: String,
    /// The parsed arguments, or the `invalid_arguments` result to feed back instead.
    pub arguments: Result<Value, Box<ToolResult>>,
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
}

/// Splits a byte stream into server-sent events and returns each event's data.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Feed bytes; returns the data of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, TurnError> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() >= MAX_EVENT_BYTES {
                    return Err(TurnError::Malformed("an event is too large".into()));
                }
                self.line.push(b);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line)
                .map_err(|_| TurnError::Malformed("an event is not UTF-8".into()))?;
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.data));
                    self.has_data = false;
                }
                continue;
            }
            if line.starts_with(':') {
                continue; // comment / keep-alive
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            if field == "data" {
                if self.has_data {
                    self.data.push('\n');
                }
                if self.data.len() + value.len() > MAX_EVENT_BYTES {
                    return Err(TurnError::Malformed("an event is too large".into()));
                }
                self.data.push_str(value);
                self.has_data = true;
            }
        }
        Ok(events)
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
}

/// Accumulates one turn from chunks (streaming) or from a whole message.
#[derive(Debug, Default)]
pub struct TurnBuilder {
    content: String,
    has_content: bool,
    calls: BTreeMap<u32, PartialCall>,
    args: ArgumentStream,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    done: bool,
    /// Positions in the current event's `tool_calls` whose object `arguments` repeat a key.
    repeated: Vec<usize>,
}

fn key(index: u32) -> String {
    format!("index-{index}")
}

/// The event's JSON, strictly parsed; a key repeated inside a call's *object* `arguments` (some
/// servers send the object instead of the specified string) is tolerated here but remembered
/// by the call's position, so that call ends `invalid_arguments` instead of running with one of
/// the values. (String arguments are checked when the call completes.)
fn parse_event(data: &[u8]) -> Result<(Value, Vec<usize>), TurnError> {
    use crate::contract::strict_json::{parse_with, Segment};
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
                crate::runtime::clip(&err.to_string(), 200)
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
                self.call_delta(index, c, i, now)?;
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
        self.content.push_str(crate::runtime::clip(text, room));
    }

    fn delta(&mut self, delta: &Value, now: Instant) -> Result<(), TurnError> {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text(text);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (at, c) in calls.iter().enumerate() {
                let index = match c.get("index").and_then(Value::as_u64) {
                    Some(i) => u32::try_from(i).map_err(|_| {
                        TurnError::Malformed("a tool call index is out of range".into())
                    })?,
                    // Some servers send each call whole, without an index: match it by id,
                    // or give it the next index.
                    None => self.index_without_index(c),
                };
                self.call_delta(index, c, at, now)?;
            }
        }
        Ok(())
    }

    fn index_without_index(&self, c: &Value) -> u32 {
        let id = c.get("id").and_then(Value::as_str);
        let known = self
            .calls
            .iter()
            .find(|(_, p)| id.is_some() && p.id.as_deref() == id)
            .map(|(i, _)| *i);
        known.unwrap_or_else(|| {
            self.calls
                .keys()
                .next_back()
                .map_or(0, |i| i.saturating_add(1))
        })
    }

    /// One call's part of an event; `at` is its position in the event's `tool_calls`.
    fn call_delta(
        &mut self,
        index: u32,
        c: &Value,
        at: usize,
        now: Instant,
    ) -> Result<(), TurnError> {
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_CALLS_PER_TURN {
            return Err(TurnError::Malformed(format!(
                "more than {MAX_CALLS_PER_TURN} tool calls in one message"
            )));
        }
        let partial = self.calls.entry(index).or_default();
        if let Some(id) = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
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
        self.args.push(&key(index), name, &fragment, now);
        if self.repeated.contains(&at) {
            self.args
                .fail(&key(index), "invalid arguments: the arguments repeat a key");
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
            .map(|(index, p)| {
                let name = p.name.unwrap_or_default();
                let arguments = match self.args.finish(&key(index), now) {
                    Ok(call) => Ok(call.arguments),
                    Err(mut r) => {
                        r.tool = name.clone();
                        Err(Box::new(r))
                    }
                };
                ProposedCall {
                    index,
                    provider_id: p.id,
                    name,
                    arguments,
                }
            })
            .collect();
        Ok(ModelTurn {
            content: self.has_content.then_some(self.content),
            calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(delta: Value) -> String {
        json!({"choices": [{"index": 0, "delta": delta}]}).to_string()
    }

    /// Events split anywhere across reads come out whole; comments and CRLF are handled.
    #[test]
    fn sse_events_survive_any_split() {
        let text = ": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        for cut in 0..text.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&text.as_bytes()[..cut]).unwrap();
            got.extend(p.push(&text.as_bytes()[cut..]).unwrap());
            assert_eq!(got, vec!["{\"a\":1}", "x\ny", "[DONE]"], "cut at {cut}");
        }
    }

    /// Arguments in one-character fragments are assembled and parsed once.
    #[test]
    fn fragments_assemble_per_index() {
        let now = Instant::now();
        let mut b = TurnBuilder::default();
        b.event(&chunk(json!({"content": "Let me "})), now).unwrap();
        b.event(&chunk(json!({"content": "check."})), now).unwrap();
        let args = r#"{"name":"Ada"}"#;
        b.event(
            &chunk(
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "greet", "arguments": ""}}]}),
            ),
            now,
        )
        .unwrap();
        for ch in args.chars() {
            b.event(
                &chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": ch.to_string()}}]})),
                now,
            )
            .unwrap();
        }
        b.event(
            &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                .to_string(),
            now,
        )
        .unwrap();
        b.event(
            &json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
                .to_string(),
            now,
        )
        .unwrap();
        b.event("[DONE]", now).unwrap();
        let t = b.finish(now).unwrap();
        assert_eq!(t.content.as_deref(), Some("Let me check."));
        assert_eq!(t.calls.len(), 1);
        assert_eq!(t.calls[0].provider_id.as_deref(), Some("c1"));
        assert_eq!(t.calls[0].name, "greet");
        assert_eq!(
            t.calls[0].arguments.as_ref().unwrap(),
            &json!({"name": "Ada"})
        );
        assert_eq!(t.usage.unwrap().total, 15);
    }

    /// Arguments that never complete become invalid_arguments for that call only.
    #[test]
    fn unfinished_arguments_are_invalid() {
        let now = Instant::now();
        let mut b = TurnBuilder::default();
        b.event(
            &chunk(json!({"tool_calls": [
                {"index": 0, "id": "a", "function": {"name": "greet", "arguments": "{\"name\": "}},
                {"index": 1, "id": "b", "function": {"name": "greet", "arguments": "{\"name\":\"x\"}"}}
            ]})),
            now,
        )
        .unwrap();
        b.event("[DONE]", now).unwrap();
        let t = b.finish(now).unwrap();
        let bad = t.calls[0].arguments.as_ref().unwrap_err();
        assert_eq!(bad.code, Some(crate::contract::Code::InvalidArguments));
        assert!(t.calls[1].arguments.is_ok());
    }

    /// A stream that stops before finishing is truncated, not a turn.
    #[test]
    fn cut_stream_is_truncated() {
        let now = Instant::now();
        let mut b = TurnBuilder::default();
        b.event(&chunk(json!({"content": "hal"})), now).unwrap();
        assert_eq!(b.finish(now).unwrap_err(), TurnError::Truncated);
    }

    /// A non-streamed response gives the same turn.
    #[test]
    fn whole_response() {
        let now = Instant::now();
        let mut b = TurnBuilder::default();
        b.whole(
            &json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "x", "type": "function",
                    "function": {"name": "greet", "arguments": "{\"name\":\"A\"}"}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}),
            now,
        )
        .unwrap();
        let t = b.finish(now).unwrap();
        assert_eq!(t.content, None);
        assert_eq!(
            t.calls[0].arguments.as_ref().unwrap(),
            &json!({"name": "A"})
        );
        assert_eq!(t.usage.unwrap().total, 7);
    }

    /// Calls without an index (sent whole) get one each; object arguments are accepted.
    #[test]
    fn calls_without_index() {
        let now = Instant::now();
        let mut b = TurnBuilder::default();
        for (id, name) in [("a", "x"), ("b", "y")] {
            b.event(
                &chunk(json!({"tool_calls": [{"id": id, "function": {"name": name, "arguments": {"k": id}}}]})),
                now,
            )
            .unwrap();
        }
        b.event("[DONE]", now).unwrap();
        let t = b.finish(now).unwrap();
        assert_eq!(t.calls.len(), 2);
        assert_eq!(t.calls[1].name, "y");
        assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({"k": "b"}));
    }

    /// Object arguments that repeat a key end that call `invalid_arguments` (never run with
    /// either value); the other call of the same event is unaffected. The same for a whole body.
    #[test]
    fn repeated_keys_in_object_arguments_are_invalid() {
        let now = Instant::now();
        let event = r#"{"choices":[{"delta":{"tool_calls":[
            {"index":0,"id":"a","function":{"name":"x","arguments":{"k":1,"k":2}}},
            {"index":1,"id":"b","function":{"name":"y","arguments":{"k":1}}}]}}]}"#;
        let mut b = TurnBuilder::default();
        b.event(event, now).unwrap();
        b.event("[DONE]", now).unwrap();
        let t = b.finish(now).unwrap();
        let bad = t.calls[0].arguments.as_ref().unwrap_err();
        assert_eq!(bad.code, Some(crate::contract::Code::InvalidArguments));
        assert!(bad.message.contains("repeat"), "{}", bad.message);
        assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({"k": 1}));

        let body = r#"{"choices":[{"message":{"tool_calls":[
            {"id":"a","function":{"name":"x","arguments":{"k":{"j":1,"j":2}}}}]},
            "finish_reason":"tool_calls"}]}"#;
        let mut b = TurnBuilder::default();
        b.whole_body(body.as_bytes(), now).unwrap();
        let t = b.finish(now).unwrap();
        assert!(t.calls[0].arguments.is_err());
    }

    /// Malformed JSON in an event is an error of the response, not of a call.
    #[test]
    fn malformed_event() {
        let mut b = TurnBuilder::default();
        assert!(matches!(
            b.event("{not json", Instant::now()),
            Err(TurnError::Malformed(_))
        ));
    }
}
