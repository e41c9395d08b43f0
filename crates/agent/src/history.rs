//! A run's conversation in no wire format's terms: system and user text, the assistant's turns
//! with the calls it proposed, and each call's result. Each format renders it (`wire/`);
//! `--messages` files come in as Chat Completions messages ([`History::from_chat`]).

use serde_json::Value;

/// One entry of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    System(String),
    User(String),
    Assistant {
        text: Option<String>,
        calls: Vec<SentCall>,
    },
    /// The result of the call the provider knows as `provider_id`.
    ToolResult {
        provider_id: String,
        content: String,
    },
}

/// A proposed call as the history repeats it to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct SentCall {
    /// The id the result answers.
    pub provider_id: String,
    pub name: String,
    /// The argument text: canonical when it parsed, else as proposed (so the model sees its
    /// mistake).
    pub arguments: String,
    /// The parsed arguments, when they parsed.
    pub parsed: Option<Value>,
}

/// A run's conversation, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History(pub Vec<Entry>);

impl History {
    /// `[agent] system_prompt` (if any), then the prompt.
    pub fn prompt(system: Option<&str>, prompt: &str) -> History {
        let mut h = History::default();
        h.0.extend(system.map(|s| Entry::System(s.to_string())));
        h.0.push(Entry::User(prompt.to_string()));
        h
    }

    /// A conversation written as Chat Completions messages (`system`/`developer`, `user`,
    /// `assistant` with `tool_calls`, `tool`), text content only, with `system` put first
    /// when given. Anything else is refused, naming the message.
    pub fn from_chat(system: Option<&str>, messages: &[Value]) -> Result<History, String> {
        let mut h = History::default();
        h.0.extend(system.map(|s| Entry::System(s.to_string())));
        for (i, m) in messages.iter().enumerate() {
            let entry = chat_entry(m).map_err(|e| format!("message {i}: {e}"))?;
            h.0.push(entry);
        }
        if !h.0.iter().any(|e| matches!(e, Entry::User(_))) {
            return Err("no user message".into());
        }
        Ok(h)
    }
}

/// `content` as text: a string, or an array of `text` parts joined.
fn text(content: Option<&Value>) -> Result<Option<String>, String> {
    match content {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push_str(t),
                    _ => return Err("only text content parts are supported".into()),
                }
            }
            Ok(Some(out))
        }
        Some(_) => Err("content must be a string or an array of text parts".into()),
    }
}

fn field<'a>(v: &'a Value, k: &str) -> Result<&'a str, String> {
    v.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("has no string {k:?}"))
}

fn chat_entry(m: &Value) -> Result<Entry, String> {
    let role = field(m, "role")?;
    let content = text(m.get("content"))?;
    Ok(match role {
        "system" | "developer" => Entry::System(content.unwrap_or_default()),
        "user" => Entry::User(content.ok_or("a user message has no content")?),
        "assistant" => {
            let mut calls = Vec::new();
            for c in m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = c.get("function").ok_or("a tool call has no function")?;
                let arguments = field(f, "arguments")?.to_string();
                calls.push(SentCall {
                    provider_id: field(c, "id")?.to_string(),
                    name: field(f, "name")?.to_string(),
                    parsed: toolhost_contract::strict_json::parse(arguments.as_bytes()).ok(),
                    arguments,
                });
            }
            Entry::Assistant {
                text: content,
                calls,
            }
        }
        "tool" => Entry::ToolResult {
            provider_id: field(m, "tool_call_id")?.to_string(),
            content: content.unwrap_or_default(),
        },
        other => {
            return Err(format!(
                "role {other:?} is not one of system, developer, user, assistant, tool"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A chat transcript with a call and its result comes in whole, the system prompt first.
    #[test]
    fn chat_messages_come_in_whole() {
        let m = [
            json!({"role": "system", "content": "file's own"}),
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "greet", "arguments": "{\"name\":\"A\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "hello A"}),
        ];
        let h = History::from_chat(Some("configured"), &m).unwrap();
        assert_eq!(h.0[0], Entry::System("configured".into()));
        assert_eq!(h.0[1], Entry::System("file's own".into()));
        assert_eq!(h.0[2], Entry::User("hi".into()));
        let Entry::Assistant { calls, .. } = &h.0[3] else {
            panic!("{:?}", h.0[3])
        };
        assert_eq!(calls[0].parsed, Some(json!({"name": "A"})));
        assert_eq!(
            h.0[4],
            Entry::ToolResult {
                provider_id: "c1".into(),
                content: "hello A".into()
            }
        );
    }

    /// What cannot be carried to every format is refused, naming the message.
    #[test]
    fn what_cannot_be_carried_is_refused() {
        let image = [json!({"role": "user", "content": [{"type": "image_url"}]})];
        let e = History::from_chat(None, &image).unwrap_err();
        assert!(e.starts_with("message 0: only text"), "{e}");
        let e =
            History::from_chat(None, &[json!({"role": "function", "content": "x"})]).unwrap_err();
        assert!(e.contains("\"function\" is not one of"), "{e}");
        let e = History::from_chat(None, &[json!({"role": "system", "content": "x"})]).unwrap_err();
        assert_eq!(e, "no user message");
    }
}
