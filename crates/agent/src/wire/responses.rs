//! The Responses API (OpenAI's, and Open Responses): the request (`input` items, `tools` as
//! functions, `max_output_tokens`, `store: false` — the history is sent whole every step) and
//! its response, streamed (typed events ending in `response.completed`, `response.incomplete`
//! or `response.failed`) or whole (a `response` object with its `output` items).
//!
//! A function call is an output item: its `call_id` is what the result answers, and its item
//! `id` (`fc_…`) is kept beside it, never taken for it. Argument deltas accumulate per output
//! item in the argument stream and are parsed once; where the `…arguments.done` event repeats
//! the arguments, they must equal what the deltas gave, or the call ends `invalid_arguments`.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

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
    let mut input = Vec::new();
    for e in &history.0 {
        match e {
            Entry::System(s) => input.push(json!({"role": "system", "content": s})),
            Entry::User(s) => input.push(json!({"role": "user", "content": s})),
            Entry::Assistant { text, calls } => {
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                    input.push(json!({"role": "assistant", "content": t}));
                }
                // The item id is not sent back: with `store: false` the provider keeps no item
                // it could name, and the call id is what the output answers.
                input.extend(calls.iter().map(|c| {
                    json!({"type": "function_call", "call_id": c.provider_id,
                        "name": c.name, "arguments": c.arguments})
                }));
            }
            Entry::ToolResult {
                provider_id,
                content,
            } => input.push(json!({"type": "function_call_output",
                "call_id": provider_id, "output": content})),
        }
    }
    let mut body = json!({"model": model, "input": input, "stream": options.stream,
        "store": false});
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters, "strict": false})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(n) = options.max_output_tokens {
        body["max_output_tokens"] = json!(n);
    }
    body
}

/// Accumulates one Responses turn from its events, or from a whole response.
#[derive(Debug, Default)]
pub struct ResponsesTurn {
    parts: Parts,
    /// An output item's `output_index` → the position of its call.
    at_output: BTreeMap<u64, usize>,
    /// An output item's `id` → the position of its call (events that give no index).
    at_item: BTreeMap<String, usize>,
    done: bool,
}

/// The text parts (`output_text`, `refusal`) of a response's message items, in order.
fn message_texts(r: &Value) -> impl Iterator<Item = &str> {
    let items = r
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    items
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
        .flat_map(|i| {
            i.get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|p| {
            p.get("text")
                .or_else(|| p.get("refusal"))
                .and_then(Value::as_str)
        })
}

impl ResponsesTurn {
    /// Whether a terminal event (`response.completed`, `.incomplete`) arrived.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// One event's data, dispatched on its `type`; events not listed are not needed here
    /// (reasoning, content parts, annotations) and are skipped.
    pub fn event(&mut self, data: &str, now: Instant) -> Result<(), ProviderError> {
        let (v, _) = parse_strict(data.as_bytes(), &|_| None)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "error" | "response.failed" => return Err(stream_error(&v)),
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(d) = v.get("delta").and_then(Value::as_str) {
                    self.parts.text(d);
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let p = self.call(v.get("output_index"), item)?;
                    // An added item's arguments are empty; a done item's are whole.
                    if kind == "response.output_item.done" {
                        self.final_arguments(p, item.get("arguments"), now);
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let p = self.known(&v)?;
                let d = v.get("delta").and_then(Value::as_str).unwrap_or_default();
                self.parts.arguments(p, d, now);
            }
            "response.function_call_arguments.done" => {
                let p = self.known(&v)?;
                self.final_arguments(p, v.get("arguments"), now);
            }
            "response.completed" | "response.incomplete" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                self.end(r);
            }
            _ => {}
        }
        Ok(())
    }

    /// A whole (non-streamed) response body, as received.
    pub fn whole_body(&mut self, raw: &[u8], now: Instant) -> Result<(), ProviderError> {
        let (v, _) = parse_strict(raw, &|_| None)?;
        if v.get("error").is_some_and(|e| !e.is_null()) || v["status"] == "failed" {
            return Err(stream_error(&json!({"response": v})));
        }
        let output = v
            .get("output")
            .and_then(Value::as_array)
            .ok_or_else(|| TurnError::Malformed("no output".into()))?;
        for (i, item) in output.iter().enumerate() {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    for part in item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let text = part.get("text").or_else(|| part.get("refusal"));
                        if let Some(t) = text.and_then(Value::as_str) {
                            self.parts.text(t);
                        }
                    }
                }
                Some("function_call") => {
                    let p = self.call(Some(&json!(i)), item)?;
                    self.final_arguments(p, item.get("arguments"), now);
                }
                _ => {}
            }
        }
        self.end(&v);
        Ok(())
    }

    /// The call of a `function_call` item, started at its first sight.
    fn call(&mut self, output_index: Option<&Value>, item: &Value) -> Result<usize, TurnError> {
        let index = output_index.and_then(Value::as_u64).ok_or_else(|| {
            TurnError::Malformed("a function call item has no output_index".into())
        })?;
        let item_id = item.get("id").and_then(Value::as_str);
        let p = match self.at_output.get(&index) {
            Some(&p) => p,
            None => {
                let p = self.parts.new_call()?;
                self.at_output.insert(index, p);
                if let Some(id) = item_id {
                    self.at_item.insert(id.to_string(), p);
                }
                p
            }
        };
        let s = |k: &str| item.get(k).and_then(Value::as_str);
        self.parts.identify(p, s("call_id"), s("name"), item_id);
        Ok(p)
    }

    /// The call an arguments event names, by `output_index` or `item_id`; an event for an item
    /// never announced is malformed.
    fn known(&self, v: &Value) -> Result<usize, TurnError> {
        let by_index = v
            .get("output_index")
            .and_then(Value::as_u64)
            .and_then(|i| self.at_output.get(&i));
        let by_item = v
            .get("item_id")
            .and_then(Value::as_str)
            .and_then(|i| self.at_item.get(i));
        by_index.or(by_item).copied().ok_or_else(|| {
            TurnError::Malformed("arguments for a function call never announced".into())
        })
    }

    /// The arguments as a done event (or a whole item) states them: taken when no delta gave
    /// any, else they must be what the deltas gave.
    fn final_arguments(&mut self, p: usize, args: Option<&Value>, now: Instant) {
        let Some(text) = args.and_then(Value::as_str) else {
            return;
        };
        if !self.parts.has_arguments(p) {
            self.parts.arguments(p, text, now);
        } else if self.parts.arguments_digest(p) != Sha256::digest(text.as_bytes()).as_slice() {
            self.parts.fail(
                p,
                "invalid arguments: the streamed arguments and their final form differ",
            );
        }
    }

    /// A terminal response object: how it ended, and its usage. A server that streamed no text
    /// deltas still gives its text in the response's message items.
    fn end(&mut self, r: &Value) {
        if !self.parts.has_text() {
            for t in message_texts(r) {
                self.parts.text(t);
            }
        }
        let incomplete = r.get("status").and_then(Value::as_str) == Some("incomplete");
        let reason = r
            .get("incomplete_details")
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str);
        let (finish, word) = match (incomplete, reason) {
            (true, Some("content_filter")) => (Finish::ContentFilter, "content_filter"),
            (true, Some(other)) => (Finish::OutputLimit, other),
            (true, None) => (Finish::OutputLimit, "incomplete"),
            (false, _) if !self.parts.calls.is_empty() => (Finish::ToolCalls, "completed"),
            (false, _) => (Finish::Stop, "completed"),
        };
        self.parts.set_finish(finish, word);
        if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
            self.parts.usage = Some(super::usage(u, "input_tokens", "output_tokens"));
        }
        self.done = true;
    }

    pub fn finish(self, now: Instant) -> Result<ModelTurn, TurnError> {
        if !self.done {
            return Err(TurnError::Truncated);
        }
        Ok(self.parts.finish(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::Finish;

    fn feed(events: &[Value]) -> Result<ModelTurn, ProviderError> {
        super::super::feed(super::super::Api::Responses, events)
    }

    fn added(index: u64, id: &str, call: &str) -> Value {
        json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "function_call", "id": id, "call_id": call, "name": "greet",
                "arguments": ""}})
    }

    fn delta(index: u64, d: &str) -> Value {
        json!({"type": "response.function_call_arguments.delta", "output_index": index,
            "delta": d})
    }

    fn completed() -> Value {
        json!({"type": "response.completed", "response": {"status": "completed",
            "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}}})
    }

    /// Two calls whose deltas interleave come out whole, each with its call id and item id.
    #[test]
    fn interleaved_calls_keep_both_ids() {
        let t = feed(&[
            json!({"type": "response.output_text.delta", "delta": "Checking."}),
            added(1, "fc_1", "call_1"),
            added(2, "fc_2", "call_2"),
            delta(1, "{\"name\":"),
            delta(2, "{\"name\":\"B\"}"),
            delta(1, "\"A\"}"),
            json!({"type": "response.function_call_arguments.done", "output_index": 1,
                "arguments": "{\"name\":\"A\"}"}),
            completed(),
        ])
        .unwrap();
        assert_eq!(t.content.as_deref(), Some("Checking."));
        let ids: Vec<_> = t
            .calls
            .iter()
            .map(|c| (c.provider_id.as_deref(), c.item_id.as_deref()))
            .collect();
        assert_eq!(
            ids,
            [
                (Some("call_1"), Some("fc_1")),
                (Some("call_2"), Some("fc_2"))
            ]
        );
        assert_eq!(
            t.calls[0].arguments.as_ref().unwrap(),
            &json!({"name": "A"})
        );
        assert_eq!(
            t.calls[1].arguments.as_ref().unwrap(),
            &json!({"name": "B"})
        );
        assert_eq!((t.finish, t.usage.unwrap().total), (Finish::ToolCalls, 10));
    }

    /// Final arguments that differ from the deltas make the call invalid, never one of the two;
    /// final arguments without deltas are taken.
    #[test]
    fn final_arguments_must_match_the_deltas() {
        let t = feed(&[
            added(0, "fc_1", "call_1"),
            delta(0, "{\"name\":\"A\"}"),
            json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                    "name": "greet", "arguments": "{\"name\":\"Z\"}"}}),
            added(1, "fc_2", "call_2"),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_2",
                "arguments": "{}"}),
            completed(),
        ])
        .unwrap();
        let bad = t.calls[0].arguments.as_ref().unwrap_err();
        assert!(bad.message.contains("differ"), "{}", bad.message);
        assert_eq!(t.calls[1].arguments.as_ref().unwrap(), &json!({}));
    }

    /// Text that arrived only in the completed response (no deltas) is taken from it; text
    /// that arrived as deltas is not taken twice.
    #[test]
    fn text_only_in_the_completed_response() {
        let done = json!({"type": "response.completed", "response": {"status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi."}]}]}});
        assert_eq!(
            feed(std::slice::from_ref(&done))
                .unwrap()
                .content
                .as_deref(),
            Some("Hi.")
        );
        let delta = json!({"type": "response.output_text.delta", "delta": "Hi."});
        assert_eq!(
            feed(&[delta, done]).unwrap().content.as_deref(),
            Some("Hi.")
        );
    }

    /// An incomplete response is an output limit (or a filter, by its reason); a stream without
    /// its terminal event is truncated; deltas for an item never announced are malformed.
    #[test]
    fn how_a_response_ends() {
        let incomplete = |reason: Value| {
            json!({"type": "response.incomplete", "response": {"status": "incomplete",
                "incomplete_details": reason}})
        };
        let t = feed(&[incomplete(json!({"reason": "max_output_tokens"}))]).unwrap();
        assert_eq!(
            (t.finish, t.finish_reason.as_deref()),
            (Finish::OutputLimit, Some("max_output_tokens"))
        );
        let t = feed(&[incomplete(json!({"reason": "content_filter"}))]).unwrap();
        assert_eq!(t.finish, Finish::ContentFilter);
        assert_eq!(
            feed(&[added(0, "fc", "c")]).unwrap_err(),
            ProviderError::Turn(TurnError::Truncated)
        );
        assert!(matches!(
            feed(&[delta(4, "{}")]),
            Err(ProviderError::Turn(TurnError::Malformed(_)))
        ));
    }

    /// A whole response: text parts and function call items, in order.
    #[test]
    fn a_whole_response() {
        let body = json!({"status": "completed", "output": [
            {"type": "reasoning", "id": "rs_1"},
            {"type": "message", "content": [{"type": "output_text", "text": "On it."}]},
            {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "greet",
                "arguments": "{\"name\":\"C\"}"}],
            "usage": {"input_tokens": 1, "output_tokens": 2}});
        let now = Instant::now();
        let mut r = ResponsesTurn::default();
        r.whole_body(body.to_string().as_bytes(), now).unwrap();
        let t = r.finish(now).unwrap();
        assert_eq!(t.content.as_deref(), Some("On it."));
        assert_eq!(t.calls[0].item_id.as_deref(), Some("fc_9"));
        assert_eq!(
            t.calls[0].arguments.as_ref().unwrap(),
            &json!({"name": "C"})
        );
        assert_eq!(t.usage.unwrap().total, 3);
    }
}
