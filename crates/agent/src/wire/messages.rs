//! Anthropic's Messages API: the request (`system` apart, `messages` of content blocks,
//! `tool_use` and `tool_result` blocks, `tools` with `input_schema`, the required
//! `max_tokens`) and its response, streamed (`message_start`, content block events,
//! `message_delta` with the stop reason, `message_stop`) or whole (a `message`).
//!
//! A `tool_use` block's `id` is the call id a `tool_result` answers; its input arrives as
//! `input_json_delta` fragments (or whole, as an object, in a non-streamed message), bounded
//! by the argument stream and parsed once.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use super::{stream_error, RequestOptions, ToolSpec, DEFAULT_MESSAGES_MAX_TOKENS};
use crate::history::{Entry, History};
use crate::provider_error::ProviderError;
use crate::turn::{parse_strict, Finish, ModelTurn, Parts, TurnError};

pub(super) fn request(
    model: &str,
    history: &History,
    tools: &[ToolSpec],
    options: RequestOptions,
) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for e in &history.0 {
        match e {
            Entry::System(s) => system.push(s.as_str()),
            Entry::User(s) => messages.push(json!({"role": "user", "content": s})),
            Entry::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": t}));
                }
                // A call whose arguments did not parse is repeated with an empty input (the
                // API takes only an object); its result says what was wrong.
                blocks.extend(calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.provider_id, "name": c.name,
                        "input": c.parsed.clone().filter(Value::is_object).unwrap_or(json!({}))})
                }));
                if !blocks.is_empty() {
                    messages.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Entry::ToolResult {
                provider_id,
                content,
            } => {
                let block = json!({"type": "tool_result", "tool_use_id": provider_id,
                    "content": content});
                // Every result of one turn goes in one user message, as the API requires.
                match messages.last_mut() {
                    Some(m) if m["role"] == "user" && m["content"].is_array() => {
                        m["content"].as_array_mut().expect("checked").push(block)
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    let max_tokens = options
        .max_output_tokens
        .unwrap_or(DEFAULT_MESSAGES_MAX_TOKENS);
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": messages,
        "stream": options.stream});
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                    "input_schema": t.parameters})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

fn finish(word: &str) -> Finish {
    match word {
        "tool_use" => Finish::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => Finish::OutputLimit,
        "refusal" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

/// Accumulates one Messages turn from its events, or from a whole message.
#[derive(Debug, Default)]
pub struct MessagesTurn {
    parts: Parts,
    /// A content block's index → the position of its call, and the input its start gave.
    blocks: BTreeMap<u64, (usize, String)>,
    done: bool,
}

/// A message's JSON; a key repeated inside a `tool_use` block's object `input` is remembered
/// by the block's index.
fn parse(data: &[u8]) -> Result<(Value, Vec<usize>), TurnError> {
    use toolhost_contract::strict_json::Segment;
    parse_strict(data, &|path| {
        path.windows(3).find_map(|w| match w {
            [Segment::Key(c), Segment::Index(k), Segment::Key(i)]
                if c == "content" && i == "input" =>
            {
                Some(*k)
            }
            _ => None,
        })
    })
}

impl MessagesTurn {
    /// Whether `message_stop` arrived.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// One event's data, dispatched on its `type`; `ping` and thinking blocks are skipped.
    pub fn event(&mut self, data: &str, now: Instant) -> Result<(), ProviderError> {
        let (v, _) = parse_strict(data.as_bytes(), &|_| None)?;
        match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "error" => return Err(stream_error(&v)),
            "message_start" => {
                if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                    self.usage(u);
                }
            }
            "content_block_start" => {
                let index = block_index(&v)?;
                let block = v.get("content_block").unwrap_or(&Value::Null);
                self.block(index, block, false, now)?;
            }
            "content_block_delta" => {
                let delta = v.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        self.parts.text(t);
                    }
                    Some("input_json_delta") => {
                        let index = block_index(&v)?;
                        let &(p, _) = self.blocks.get(&index).ok_or_else(|| {
                            TurnError::Malformed("input for a tool_use never started".into())
                        })?;
                        let d = delta.get("partial_json").and_then(Value::as_str);
                        self.parts.arguments(p, d.unwrap_or_default(), now);
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some((p, start)) = self.blocks.get(&block_index(&v)?).cloned() {
                    if !self.parts.has_arguments(p) {
                        self.parts.arguments(p, &start, now);
                    }
                }
            }
            "message_delta" => {
                let word = v.get("delta").and_then(|d| d.get("stop_reason"));
                if let Some(w) = word.and_then(Value::as_str) {
                    self.parts.set_finish(finish(w), w);
                }
                if let Some(u) = v.get("usage") {
                    self.usage(u);
                }
            }
            "message_stop" => self.done = true,
            _ => {}
        }
        Ok(())
    }

    /// A whole (non-streamed) message, as received.
    pub fn whole_body(&mut self, raw: &[u8], now: Instant) -> Result<(), ProviderError> {
        let (v, repeated) = parse(raw)?;
        if v.get("type").and_then(Value::as_str) == Some("error") {
            return Err(stream_error(&v));
        }
        let content = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| TurnError::Malformed("no content".into()))?;
        for (i, block) in content.iter().enumerate() {
            let p = self.block(i as u64, block, true, now)?;
            if let Some(p) = p.filter(|_| repeated.contains(&i)) {
                self.parts
                    .fail(p, "invalid arguments: the arguments repeat a key");
            }
        }
        let word = v
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn");
        self.parts.set_finish(finish(word), word);
        if let Some(u) = v.get("usage") {
            self.usage(u);
        }
        self.done = true;
        Ok(())
    }

    /// A content block as it starts (or whole): text is taken, a `tool_use` starts a call
    /// (whose input, when `whole`, is taken at once). The call's position, for a tool_use.
    fn block(
        &mut self,
        index: u64,
        block: &Value,
        whole: bool,
        now: Instant,
    ) -> Result<Option<usize>, TurnError> {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.parts.text(t);
                Ok(None)
            }
            Some("tool_use") => {
                if self.blocks.contains_key(&index) {
                    return Err(TurnError::Malformed("a content block started twice".into()));
                }
                let p = self.parts.new_call()?;
                let s = |k: &str| block.get(k).and_then(Value::as_str);
                self.parts.identify(p, s("id"), s("name"), None);
                let input = match block.get("input") {
                    Some(i @ Value::Object(_)) => i.to_string(),
                    _ => "{}".to_string(),
                };
                if whole {
                    self.parts.arguments(p, &input, now);
                }
                self.blocks.insert(index, (p, input));
                Ok(Some(p))
            }
            _ => Ok(None),
        }
    }

    fn usage(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let mut usage = self.parts.usage.unwrap_or_default();
        if let Some(i) = n("input_tokens") {
            usage.prompt = i;
        }
        if let Some(o) = n("output_tokens") {
            usage.completion = o;
        }
        usage.total = usage.prompt.saturating_add(usage.completion);
        self.parts.usage = Some(usage);
    }

    pub fn finish(self, now: Instant) -> Result<ModelTurn, TurnError> {
        if !self.done {
            return Err(TurnError::Truncated);
        }
        Ok(self.parts.finish(now))
    }
}

fn block_index(v: &Value) -> Result<u64, TurnError> {
    v.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| TurnError::Malformed("a content block event has no index".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[Value]) -> Result<ModelTurn, ProviderError> {
        super::super::feed(super::super::Api::Messages, events)
    }

    fn tool_use(index: u64, id: &str) -> Value {
        json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": "greet", "input": {}}})
    }

    fn input(index: u64, partial: &str) -> Value {
        json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial}})
    }

    fn stop(index: u64) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }

    fn end(reason: &str) -> [Value; 2] {
        [
            json!({"type": "message_delta", "delta": {"stop_reason": reason},
                "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]
    }

    /// Text, then two tool_use blocks (one with its input in fragments, one with none): the
    /// calls come out whole, with `{}` for the one without input.
    #[test]
    fn streamed_blocks() {
        let mut events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Sure."}}),
            stop(0),
            tool_use(1, "toolu_1"),
            input(1, "{\"na"),
            input(1, "me\":\"A\"}"),
            stop(1),
            tool_use(2, "toolu_2"),
            json!({"type": "ping"}),
            stop(2),
        ];
        events.extend(end("tool_use"));
        let t = feed(&events).unwrap();
        assert_eq!(t.content.as_deref(), Some("Sure."));
        assert_eq!(t.calls[0].provider_id.as_deref(), Some("toolu_1"));
        assert_eq!(
            t.calls[0].arguments.as_ref().unwrap(),
            &json!({"name": "A"})
        );
        assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({}));
        assert_eq!(t.finish, Finish::ToolCalls);
        assert_eq!(
            t.usage.unwrap(),
            crate::turn::TokenUsage {
                prompt: 5,
                completion: 9,
                total: 14
            }
        );
    }

    /// Each stop reason, normalized; a stream without `message_stop` is truncated.
    #[test]
    fn stop_reasons() {
        for (reason, finish) in [
            ("end_turn", Finish::Stop),
            ("max_tokens", Finish::OutputLimit),
            ("refusal", Finish::ContentFilter),
            ("stop_sequence", Finish::Stop),
        ] {
            assert_eq!(feed(&end(reason)).unwrap().finish, finish, "{reason}");
        }
        assert_eq!(
            feed(&[tool_use(0, "t"), input(0, "{}")]).unwrap_err(),
            ProviderError::Turn(TurnError::Truncated)
        );
    }

    /// A whole message whose tool_use input repeats a key: that call is invalid, the other
    /// runs.
    #[test]
    fn whole_message_with_a_repeated_key() {
        let raw = br#"{"type":"message","content":[
            {"type":"tool_use","id":"t1","name":"greet","input":{"name":"A","name":"B"}},
            {"type":"tool_use","id":"t2","name":"greet","input":{"name":"C"}}],
            "stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let now = Instant::now();
        let mut r = MessagesTurn::default();
        r.whole_body(raw, now).unwrap();
        let t = r.finish(now).unwrap();
        assert!(t.calls[0].arguments.is_err());
        assert_eq!(
            t.calls[1].arguments.as_ref().unwrap(),
            &json!({"name": "C"})
        );
    }

    /// The request: system apart, results of one turn in one user message, `max_tokens`
    /// always, tools with `input_schema`.
    #[test]
    fn the_request() {
        use crate::history::SentCall;
        let call = |id: &str| SentCall {
            provider_id: id.into(),
            name: "greet".into(),
            arguments: "{\"name\":\"A\"}".into(),
            parsed: Some(json!({"name": "A"})),
        };
        let h = History(vec![
            Entry::System("Be brief.".into()),
            Entry::User("hi".into()),
            Entry::Assistant {
                text: None,
                calls: vec![call("t1"), call("t2")],
            },
            Entry::ToolResult {
                provider_id: "t1".into(),
                content: "one".into(),
            },
            Entry::ToolResult {
                provider_id: "t2".into(),
                content: "two".into(),
            },
        ]);
        let tools = [ToolSpec {
            name: "greet".into(),
            description: "Greets.".into(),
            parameters: json!({"type": "object"}),
        }];
        let options = RequestOptions {
            stream: true,
            max_output_tokens: None,
            chat_limit_field: super::super::ChatLimitField::MaxTokens,
        };
        let body = request("claude", &h, &tools, options);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["max_tokens"], DEFAULT_MESSAGES_MAX_TOKENS);
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3, "{body}");
        assert_eq!(m[1]["content"][1]["input"], json!({"name": "A"}));
        assert_eq!(m[2]["content"][1]["tool_use_id"], "t2");
    }
}
