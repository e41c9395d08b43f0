//! Streamed tool-call arguments: fragments accumulate per call id under a byte limit and a time
//! limit, and are parsed exactly once, when the call is declared complete. A prefix is never
//! executed; malformed, over-limit or late arguments end as `failed` / `invalid_arguments`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use toolhost_contract::strict_json::{self, StrictJsonError};
use toolhost_contract::{Code, ToolCall, ToolResult, Usage};

/// Default cap on one call's accumulated arguments.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 1 << 20;
/// Default time from the first fragment to completion.
pub const DEFAULT_MAX_ARGUMENT_AGE: Duration = Duration::from_secs(60);
/// Calls that may be accumulating at once; more is a misbehaving stream.
pub const MAX_OPEN_CALLS: usize = 128;

#[derive(Debug)]
struct Partial {
    name: Option<String>,
    text: String,
    started: Instant,
    failure: Option<&'static str>,
}

/// Accumulates argument fragments per call id.
#[derive(Debug)]
pub struct ArgumentStream {
    max_bytes: usize,
    max_age: Duration,
    open: HashMap<String, Partial>,
}

impl Default for ArgumentStream {
    fn default() -> Self {
        ArgumentStream::new(DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_ARGUMENT_AGE)
    }
}

impl ArgumentStream {
    pub fn new(max_bytes: usize, max_age: Duration) -> Self {
        ArgumentStream {
            max_bytes,
            max_age,
            open: HashMap::new(),
        }
    }

    /// Add a fragment (and, when it arrives, the tool name) to a call. Past the byte limit, the
    /// time limit or the open-call limit the call is marked failed; it still ends only at
    /// [`finish`](Self::finish), so every call id gets exactly one result.
    pub fn push(&mut self, call_id: &str, name: Option<&str>, fragment: &str, now: Instant) {
        if !self.open.contains_key(call_id) && self.open.len() >= MAX_OPEN_CALLS {
            return;
        }
        let max_bytes = self.max_bytes;
        let max_age = self.max_age;
        let p = self
            .open
            .entry(call_id.to_string())
            .or_insert_with(|| Partial {
                name: None,
                text: String::new(),
                started: now,
                failure: None,
            });
        if let Some(n) = name {
            if !n.is_empty() {
                p.name.get_or_insert_with(String::new).push_str(n);
            }
        }
        if p.failure.is_some() {
            return;
        }
        if now.saturating_duration_since(p.started) > max_age {
            p.failure = Some("the arguments did not complete in time");
            p.text = String::new();
        } else if p.text.len() + fragment.len() > max_bytes {
            p.failure = Some("the arguments are larger than allowed");
            p.text = String::new();
        } else {
            p.text.push_str(fragment);
        }
    }

    /// Mark an open call failed with `why` (its arguments were seen and refused whole); it
    /// still ends only at [`finish`](Self::finish).
    pub fn fail(&mut self, call_id: &str, why: &'static str) {
        if let Some(p) = self.open.get_mut(call_id) {
            p.failure.get_or_insert(why);
            p.text = String::new();
        }
    }

    /// Declare a call complete: parse its arguments once. An unknown call id (never pushed, or
    /// dropped at the open-call limit) ends as invalid arguments too.
    #[allow(clippy::result_large_err)] // the error is the call's final result, not a fault
    pub fn finish(&mut self, call_id: &str, now: Instant) -> Result<ToolCall, ToolResult> {
        let p = self.open.remove(call_id);
        let name = p.as_ref().and_then(|p| p.name.clone()).unwrap_or_default();
        let fail = |message: &str| {
            let call = ToolCall {
                call_id: call_id.to_string(),
                name: name.clone(),
                arguments: Value::Null,
            };
            ToolResult::failed(&call, Code::InvalidArguments, message, Usage::default())
        };
        let Some(p) = p else {
            return Err(fail("no arguments were received for this call"));
        };
        if let Some(why) = p.failure {
            return Err(fail(why));
        }
        if now.saturating_duration_since(p.started) > self.max_age {
            return Err(fail("the arguments did not complete in time"));
        }
        let text = if p.text.trim().is_empty() {
            "{}"
        } else {
            p.text.as_str()
        };
        match strict_json::parse(text.as_bytes()) {
            Ok(arguments) => Ok(ToolCall {
                call_id: call_id.to_string(),
                name,
                arguments,
            }),
            Err(StrictJsonError::DuplicateKey(path)) => {
                Err(fail(&format!("the arguments repeat the key {path}")))
            }
            Err(_) => Err(fail("the arguments are not valid JSON")),
        }
    }

    /// Calls still accumulating.
    pub fn open_calls(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }

    /// End every call whose time limit passed, as invalid arguments.
    pub fn expire(&mut self, now: Instant) -> Vec<ToolResult> {
        let late: Vec<String> = self
            .open
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.started) > self.max_age)
            .map(|(id, _)| id.clone())
            .collect();
        late.into_iter()
            .filter_map(|id| self.finish(&id, now).err())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Fragments of several calls interleave and each parses once, when finished.
    #[test]
    fn fragments_accumulate_per_call() {
        let t = Instant::now();
        let mut s = ArgumentStream::default();
        s.push("a", Some("get_"), "{\"x\":", t);
        s.push("b", Some("other"), "{}", t);
        s.push("a", Some("thing"), " 1}", t);
        let a = s.finish("a", t).unwrap();
        assert_eq!(a.name, "get_thing");
        assert_eq!(a.arguments, json!({"x": 1}));
        assert_eq!(s.finish("b", t).unwrap().arguments, json!({}));
    }

    /// A prefix is never a call: unfinished or malformed JSON is invalid_arguments.
    #[test]
    fn malformed_and_unfinished_are_invalid() {
        let t = Instant::now();
        let mut s = ArgumentStream::default();
        s.push("a", Some("t"), "{\"x\": 1", t);
        let r = s.finish("a", t).unwrap_err();
        assert_eq!(r.code, Some(Code::InvalidArguments));
        assert_eq!(r.tool, "t");
        let r = s.finish("never", t).unwrap_err();
        assert_eq!(r.code, Some(Code::InvalidArguments));
    }

    /// Arguments that repeat a key are invalid, naming the key; nothing runs with either value.
    #[test]
    fn repeated_keys_are_invalid() {
        let t = Instant::now();
        let mut s = ArgumentStream::default();
        s.push("a", Some("t"), r#"{"value": 3, "#, t);
        s.push("a", None, r#""value": 4}"#, t);
        let r = s.finish("a", t).unwrap_err();
        assert_eq!(r.code, Some(Code::InvalidArguments));
        assert_eq!(r.message, "the arguments repeat the key /value");
    }

    /// Past the byte limit the call fails, and the buffer is released.
    #[test]
    fn byte_limit() {
        let t = Instant::now();
        let mut s = ArgumentStream::new(8, Duration::from_secs(1));
        s.push("a", Some("t"), "{\"x\":", t);
        s.push("a", None, "\"long\"}", t);
        let r = s.finish("a", t).unwrap_err();
        assert!(r.message.contains("larger"), "{}", r.message);
    }

    /// Past the time limit the call fails, at finish or by expiry.
    #[test]
    fn time_limit() {
        let t = Instant::now();
        let later = t + Duration::from_secs(2);
        let mut s = ArgumentStream::new(1024, Duration::from_secs(1));
        s.push("a", Some("t"), "{", t);
        s.push("b", Some("t"), "{}", t);
        assert!(s
            .finish("b", later)
            .unwrap_err()
            .message
            .contains("in time"));
        let expired = s.expire(later);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].call_id, "a");
        assert_eq!(s.open_calls().count(), 0);
    }
}
