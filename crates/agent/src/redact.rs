//! Keeping the provider's API key out of everything the agent prints or records.
//!
//! The key goes out in one place only: the `Authorization: Bearer` header of each model
//! request. A provider may send it back — a 401 body quoting the key or the header, an error
//! event repeating it, even a reply that echoes it. Everything the agent keeps of a response
//! passes through a [`Redactor`] before it leaves [`Provider::complete`](super::Provider::complete):
//!
//! - **errors** (what becomes the summary's `detail`): [`Redactor::redact`] replaces the key's
//!   value (as sent, and JSON-escaped), a trailing fragment of it where a text was cut inside
//!   the key (at least [`MIN_FRAGMENT`] characters), any `Bearer <credential>`, and the value of
//!   any `Authorization` header echo, whatever key they carry. An error body is redacted
//!   *before* it is cut to its excerpt, so a cut never leaves a piece of the key behind.
//! - **turns** (the model's text, tool names, call ids and arguments, which reach the summary's
//!   `final_text` and the ledger): [`Redactor::redact_secret`] replaces the key's value and a
//!   trailing fragment only, so a model's own text about headers or other credentials reaches
//!   its tools unchanged.
//!
//! The loop redacts the summary's `detail` and `final_text` once more before returning it.

use serde_json::Value;

use super::turn::ModelTurn;

/// What a redacted secret or credential is replaced by.
pub const REDACTED: &str = "[redacted]";

/// The shortest piece of the key, at the very end of a text, taken for a cut key.
pub const MIN_FRAGMENT: usize = 4;

/// Ends a credential in an `Authorization` header echo (a header line, a JSON or form value).
const VALUE_END: &[char] = &['"', '\'', '\\', ',', ';', '}', '&', '\r', '\n'];

/// The shortest run of token characters after `Bearer ` taken for a credential (so that
/// "a bearer of news" stays as it is).
const MIN_CREDENTIAL: usize = 8;

/// Whether `c` may be part of a bearer credential (RFC 6750 `b64token`, plus `_`).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '+' | '/' | '=')
}

/// Replaces one secret (the API key) and credential echoes in provider text.
#[derive(Clone, Default)]
pub struct Redactor {
    /// The key as sent, and its JSON-escaped form when that differs. Never empty strings.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for this key (none: only credential echoes are redacted from errors).
    pub fn new(key: Option<&str>) -> Redactor {
        let mut secrets = Vec::new();
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            secrets.push(k.to_string());
            let json = serde_json::to_string(k).expect("a string serializes");
            let escaped = &json[1..json.len() - 1];
            if escaped != k {
                secrets.push(escaped.to_string());
            }
        }
        Redactor { secrets }
    }

    /// `text` without the key's value (whole, or cut at the end of `text`).
    pub fn redact_secret(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        for s in &self.secrets {
            if let Some(n) = trailing_fragment(&out, s) {
                out.truncate(out.len() - n);
                out.push_str(REDACTED);
            }
        }
        out
    }

    /// `text` (provider error text) without the key, any `Bearer` credential and any
    /// `Authorization` header value.
    pub fn redact(&self, text: &str) -> String {
        let out = self.redact_secret(text);
        let out = redact_labelled(&out, "authorization", true);
        redact_labelled(&out, "bearer", false)
    }

    /// Every string in `value` (keys included) through [`Redactor::redact_secret`].
    pub fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.redact_secret(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => {
                if self.secrets.is_empty() {
                    map.values_mut().for_each(|v| self.redact_value(v));
                    return;
                }
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.redact_value(&mut v);
                    map.insert(self.redact_secret(&k), v);
                }
            }
            _ => {}
        }
    }

    /// Everything of a turn that the agent prints or records, through
    /// [`Redactor::redact_secret`].
    pub fn redact_turn(&self, turn: &mut ModelTurn) {
        if self.secrets.is_empty() {
            return;
        }
        let r = |s: &mut String| *s = self.redact_secret(s);
        if let Some(s) = &mut turn.content {
            r(s);
        }
        if let Some(s) = &mut turn.finish_reason {
            r(s);
        }
        for c in &mut turn.calls {
            r(&mut c.name);
            r(&mut c.proposed_arguments);
            if let Some(s) = &mut c.provider_id {
                r(s);
            }
            if let Some(s) = &mut c.item_id {
                r(s);
            }
            match &mut c.arguments {
                Ok(v) => self.redact_value(v),
                Err(result) => {
                    r(&mut result.message);
                    r(&mut result.tool);
                    r(&mut result.call_id);
                }
            }
        }
    }
}

/// The length of the longest prefix of `secret` (at least [`MIN_FRAGMENT`] characters, shorter
/// than the whole) that `text` ends with.
fn trailing_fragment(text: &str, secret: &str) -> Option<usize> {
    let ends: Vec<usize> = secret
        .char_indices()
        .map(|(i, _)| i)
        .skip(MIN_FRAGMENT)
        .collect();
    ends.into_iter()
        .rev()
        .find(|&n| text.ends_with(&secret[..n]))
}

/// Replace what follows each case-insensitive `label` with [`REDACTED`]. A header label
/// (`authorization`) needs a `:` or `=` after optional quotes and spaces, and its value runs
/// to a [`VALUE_END`]; a scheme (`bearer`) needs spaces after it, then a credential of at least
/// [`MIN_CREDENTIAL`] token characters.
fn redact_labelled(text: &str, label: &str, header: bool) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower[at..].find(label) {
        let label_end = at + found + label.len();
        let Some((value_start, value_end)) = value_span(text, label_end, header) else {
            out.push_str(&text[at..label_end]);
            at = label_end;
            continue;
        };
        out.push_str(&text[at..value_start]);
        out.push_str(REDACTED);
        at = value_end;
    }
    out.push_str(&text[at..]);
    out
}

/// Where the value after a label starts and ends, if the label is followed by one.
fn value_span(text: &str, label_end: usize, header: bool) -> Option<(usize, usize)> {
    let rest = &text[label_end..];
    let start = if header {
        let after_quotes = rest.trim_start_matches(['"', '\'', '\\', ' ', '\t']);
        let after_sep = after_quotes.strip_prefix([':', '='])?;
        let value = after_sep.trim_start_matches(['"', '\'', '\\', ' ', '\t']);
        text.len() - value.len()
    } else {
        let value = rest.trim_start_matches([' ', '\t']);
        if value.len() == rest.len() {
            return None;
        }
        text.len() - value.len()
    };
    let value = &text[start..];
    let len = if header {
        value.find(VALUE_END).unwrap_or(value.len())
    } else {
        let n = value.find(|c| !is_token_char(c)).unwrap_or(value.len());
        if n < MIN_CREDENTIAL {
            return None;
        }
        n
    };
    (len > 0 && !value[..len].starts_with(REDACTED)).then_some((start, start + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk-live-0123456789abcdefSECRET/+=";

    /// The key, a Bearer echo and an Authorization echo in any spelling are all redacted.
    #[test]
    fn errors_lose_the_key_and_every_credential_echo() {
        let r = Redactor::new(Some(KEY));
        let text = format!(
            "Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}\r\n\
             {{\"authorization\":\"Bearer other-token\"}} AUTHORIZATION=Basic dXNlcjpwYXNz; \
             bearer   tok_12345 {}",
            serde_json::to_string(KEY).unwrap()
        );
        let out = r.redact(&text);
        for leaked in [
            KEY,
            "0123456789",
            "other-token",
            "dXNlcjpwYXNz",
            "tok_12345",
        ] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(
            out.starts_with("Incorrect API key provided: [redacted]."),
            "{out}"
        );
        assert!(out.contains("Authorization: [redacted]\r\n"), "{out}");
        // No key configured: credential echoes still go.
        let none = Redactor::new(None).redact("Authorization: Bearer abc");
        assert_eq!(none, "Authorization: [redacted]");
    }

    /// A text cut inside the key loses the piece it ends with.
    #[test]
    fn a_key_cut_at_the_end_is_redacted() {
        let r = Redactor::new(Some(KEY));
        let cut = format!("bad key {}", &KEY[..12]);
        assert_eq!(r.redact_secret(&cut), "bad key [redacted]");
        assert_eq!(r.redact_secret("ends with sk-"), "ends with sk-");
    }

    /// Words that only look like labels, and text without a key, are left alone.
    #[test]
    fn ordinary_text_is_untouched() {
        let r = Redactor::new(Some(KEY));
        for t in [
            "missing authorization header",
            "a bearer of news",
            "Bearer",
            "",
        ] {
            assert_eq!(r.redact(t), t);
        }
    }

    /// Turn values are redacted of the key only; other credentials reach tools unchanged.
    #[test]
    fn values_lose_the_key_only() {
        let r = Redactor::new(Some(KEY));
        let mut v = json!({"header": format!("Bearer {KEY}"), KEY: ["Bearer mine"]});
        r.redact_value(&mut v);
        assert_eq!(
            v,
            json!({"header": "Bearer [redacted]", "[redacted]": ["Bearer mine"]})
        );
    }
}
