//! What the agent loop's approvers show and send: the question a human reads on a terminal
//! and the request an operator's `--approve-with` command receives.
//!
//! The question is the one rendering every front end shows (`toolhost_contract::pending`):
//! every control character (C0 and C1, ESC among them), bidirectional override, zero-width
//! mark, TAG character and variation selector, and every look-alike letter inside a Latin word,
//! is shown escaped — a model cannot redraw, hide, reorder or disguise what the human reads.

use serde_json::{json, Value};

use toolhost_contract::ApprovalPrompt;

pub use toolhost_contract::terminal_safe;

/// The question shown on a terminal: the one rendering of a pending call
/// ([`toolhost_contract::Pending`]) under a line that says what is asked.
pub fn question(p: &ApprovalPrompt) -> String {
    format!(
        "\ntoolhost: a tool call needs your approval\n{}",
        toolhost_contract::Pending::of(p).text()
    )
}

/// The request an `--approve-with` command reads on its stdin (one JSON object and a newline).
pub fn request_json(p: &ApprovalPrompt) -> Value {
    let arguments = serde_json::from_str::<Value>(&p.canonical_arguments)
        .unwrap_or_else(|_| Value::String(p.canonical_arguments.clone()));
    json!({
        "type": "toolhost.approval_request",
        "version": 1,
        "tool": p.tool,
        "arguments": arguments,
        "canonical_arguments": p.canonical_arguments,
        "principal": p.caller.principal,
        "tenant": p.caller.tenant,
        "run_id": p.run_id,
        "call_id": p.call_id,
        "digest": p.digest,
        "expires_at": p.expires_at,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use toolhost_contract::pending::MAX_SHOWN_ARGUMENT_BYTES;

    /// A prompt for `delete_file` with these canonical arguments (the approvers' tests use it).
    pub(crate) fn prompt(args: &str) -> ApprovalPrompt {
        ApprovalPrompt {
            tool: "delete_file".into(),
            risk: Some(toolhost_contract::Risk::Destructive),
            canonical_arguments: args.into(),
            caller: toolhost_contract::Caller::new("alice", "acme"),
            run_id: "run-1".into(),
            call_id: "p:call_1".into(),
            digest: "d1g3st".into(),
            expires_at: 1_900_000_000,
        }
    }

    /// The question shows the tool, identity, run and call, pretty arguments and the digest.
    #[test]
    fn question_shows_the_call() {
        let q = question(&prompt(r#"{"path":"/a","recursive":true}"#));
        for want in [
            "delete_file",
            "risk: destructive",
            "alice (tenant acme)",
            "run: run-1",
            "call: p:call_1",
            "\"path\": \"/a\"",
            "d1g3st",
        ] {
            assert!(q.contains(want), "{want:?} not in {q}");
        }
    }

    /// Escape sequences, C1 controls and bidi overrides in the arguments are shown escaped:
    /// nothing the model wrote can move the cursor, clear a line or reorder text.
    #[test]
    fn arguments_cannot_drive_the_terminal() {
        // JSON escapes ESC itself; C1 CSI (U+009B) and RLO (U+202E) arrive as raw characters.
        let q = question(&prompt("{\"p\":\"\u{9b}2K\u{202e}txt.exe\"}"));
        assert!(!q.contains('\u{9b}') && !q.contains('\u{202e}'), "{q}");
        assert!(q.contains("\\u{009b}2K\\u{202e}txt.exe"), "{q}");
        assert_eq!(terminal_safe("a\u{1b}[2Jb\rc"), "a\\u{001b}[2Jb\\u{000d}c");
    }

    /// Long arguments are cut, and the cut is said.
    #[test]
    fn long_arguments_are_cut_visibly() {
        let args = format!("{{\"x\":\"{}\"}}", "y".repeat(MAX_SHOWN_ARGUMENT_BYTES));
        let q = question(&prompt(&args));
        assert!(q.contains("more bytes not shown]"), "{q}");
        assert!(q.len() < MAX_SHOWN_ARGUMENT_BYTES + 1000);
    }

    /// The command's request carries the parsed arguments and everything the approval binds.
    #[test]
    fn request_for_a_command() {
        let r = request_json(&prompt(r#"{"path":"/a"}"#));
        assert_eq!(r["arguments"], json!({"path": "/a"}));
        assert_eq!(r["digest"], "d1g3st");
        assert_eq!(r["call_id"], "p:call_1");
        assert_eq!(r["type"], "toolhost.approval_request");
    }
}
