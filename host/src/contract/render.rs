//! One result, three readers: a bounded message for the model (marked as untrusted tool
//! output), a one-line summary for a screen, and a content-free summary for the ledger.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Status, ToolResult};

/// Default bytes of output a model message carries before it is cut.
pub const DEFAULT_MODEL_MESSAGE_BYTES: usize = 16 * 1024;

fn clip(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

impl ToolResult {
    /// The message a model reads: framed as untrusted tool output, never longer than
    /// `max_bytes` of payload (the frame adds a little).
    pub fn model_message(&self, max_bytes: usize) -> String {
        let body = match (&self.status, &self.output) {
            (Status::Completed, Some(out)) => out.to_string(),
            _ => self.message.clone(),
        };
        let (body, cut) = clip(&body, max_bytes);
        let status = match self.code {
            Some(code) => format!("{} ({code})", status_str(self.status)),
            None => status_str(self.status).to_string(),
        };
        let name = clip(&self.tool, 64).0;
        let id = clip(&self.call_id, 128).0;
        format!(
            "<tool_result tool=\"{}\" call_id=\"{}\" status=\"{status}\" trust=\"untrusted\">\n{body}{}\n</tool_result>",
            escape(name),
            escape(id),
            if cut { "\n[output truncated]" } else { "" },
        )
    }

    /// One line for a terminal.
    pub fn screen_line(&self) -> String {
        let mark = if self.status == Status::Completed {
            "OK"
        } else {
            "ERR"
        };
        let code = self.code.map(|c| format!(" {c}")).unwrap_or_default();
        let msg = if self.status == Status::Completed {
            String::new()
        } else {
            format!(": {}", clip(&self.message, 120).0)
        };
        format!(
            "{mark} {} [{}] {}{code} {} ms, fuel {}{msg}",
            clip(&self.tool, 64).0,
            clip(&self.call_id, 64).0,
            status_str(self.status),
            self.usage.wall_ms,
            self.usage.fuel_consumed
        )
    }

    /// What the ledger keeps by default: digests and sizes, no content.
    pub fn ledger_summary(&self) -> Value {
        let output = self.output.as_ref().map(|o| {
            let bytes = serde_json::to_vec(o).unwrap_or_default();
            json!({"sha256": hex::encode(Sha256::digest(&bytes)), "bytes": bytes.len()})
        });
        json!({
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status,
            "code": self.code,
            "output": output,
            "usage": self.usage,
        })
    }
}

fn status_str(s: Status) -> &'static str {
    match s {
        Status::Completed => "completed",
        Status::Failed => "failed",
        Status::Cancelled => "cancelled",
        Status::OutcomeUnknown => "outcome_unknown",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Code, ToolCall, Usage};

    fn call() -> ToolCall {
        ToolCall {
            call_id: "c\"1".into(),
            name: "t".into(),
            arguments: Value::Null,
        }
    }

    /// The model message is framed, escaped, bounded and marked untrusted.
    #[test]
    fn model_message_is_bounded_and_framed() {
        let r = ToolResult::completed(&call(), json!("x".repeat(100)), Usage::default());
        let m = r.model_message(10);
        assert!(m.starts_with("<tool_result tool=\"t\" call_id=\"c&quot;1\""));
        assert!(m.contains("trust=\"untrusted\""));
        assert!(m.contains("[output truncated]"));
        assert!(m.len() < 200);
        let f = ToolResult::failed(
            &call(),
            Code::GuestTrap,
            "the tool crashed",
            Usage::default(),
        );
        assert!(f.model_message(100).contains("failed (guest_trap)"));
    }

    /// The ledger summary carries a digest and a size, never the output itself.
    #[test]
    fn ledger_summary_has_no_content() {
        let r = ToolResult::completed(&call(), json!({"secret": "hunter2"}), Usage::default());
        let s = r.ledger_summary().to_string();
        assert!(!s.contains("hunter2"));
        assert!(s.contains("sha256"));
        assert!(r.screen_line().starts_with("OK t ["), "{}", r.screen_line());
    }
}
