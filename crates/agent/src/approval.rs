//! What the agent loop's approvers show and send: the question a human reads on a terminal
//! and the request an operator's `--approve-with` command receives.
//!
//! Everything shown comes from the model (the arguments) or from trusted context (tool,
//! principal, run); either way it is text for a terminal, so every control character
//! (C0 and C1, ESC among them) and every bidirectional override is shown escaped: a model cannot
//! redraw, hide or reorder what the human reads.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use toolhost_contract::ApprovalPrompt;

/// Bytes of the pretty-printed arguments shown; the rest is cut (and the cut is said), and
/// the SHA-256 of the whole canonical arguments is always shown.
pub const MAX_SHOWN_ARGUMENT_BYTES: usize = 4096;

pub use toolhost_contract::terminal_safe;

/// The arguments as a human reads them: pretty JSON, indented, cut at
/// [`MAX_SHOWN_ARGUMENT_BYTES`] with the cut said.
fn shown_arguments(p: &ApprovalPrompt) -> String {
    let pretty = serde_json::from_str::<Value>(&p.canonical_arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| p.canonical_arguments.clone());
    let shown = toolhost_contract::bounds::clip(&pretty, MAX_SHOWN_ARGUMENT_BYTES);
    let mut out = terminal_safe(shown);
    if shown.len() < pretty.len() {
        out.push_str(&format!(
            "\n… [{} more bytes not shown]",
            pretty.len() - shown.len()
        ));
    }
    out.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The question shown on a terminal.
pub fn question(p: &ApprovalPrompt) -> String {
    format!(
        "\ntoolhost: a tool call needs your approval\n\
         \x20 tool:       {}\n\
         \x20 principal:  {} (tenant {})\n\
         \x20 run, call:  {} {}\n\
         \x20 arguments:\n{}\n\
         \x20 arguments sha256: {}\n\
         \x20 approval digest:  {}\n\
         \x20 The approval is for this exact call, once, until unix time {} (in {} s).\n",
        terminal_safe(&p.tool),
        terminal_safe(&p.caller.principal),
        terminal_safe(&p.caller.tenant),
        terminal_safe(&p.run_id),
        terminal_safe(&p.call_id),
        shown_arguments(p),
        hex::encode(Sha256::digest(p.canonical_arguments.as_bytes())),
        p.digest,
        p.expires_at,
        p.expires_at.saturating_sub(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        ),
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

    /// A prompt for `delete_file` with these canonical arguments (the approvers' tests use it).
    pub(crate) fn prompt(args: &str) -> ApprovalPrompt {
        ApprovalPrompt {
            tool: "delete_file".into(),
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
            "alice (tenant acme)",
            "run-1 p:call_1",
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
