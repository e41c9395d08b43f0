//! Approval through the MCP client's human: `elicitation/create` shows the tool and its
//! canonical arguments and asks for an explicit yes.
//!
//! Only an `accept` whose content says `{"approve": true}` approves; `decline` (or an accept
//! that says no) refuses; `cancel`, a timeout or a failed request leaves the call
//! `approval_required`, so an operator can still approve it with `toolhost approve`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;

use toolhost_contract::{ApprovalAnswer, ApprovalPrompt, Approver};

/// How long the human has to answer before the call ends `approval_required`.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Asks through one session's client.
pub struct ElicitingApprover {
    peer: Peer<RoleServer>,
}

impl ElicitingApprover {
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitingApprover { peer }
    }
}

/// The question a human reads: the one rendering of a pending call
/// ([`toolhost_contract::Pending`]).
pub fn question(p: &ApprovalPrompt) -> String {
    format!(
        "Approve this tool call?\n\n{}",
        toolhost_contract::Pending::of(p).text()
    )
}

/// The form that asks for `p`: the question and one required boolean, `approve`.
pub(crate) fn params(p: &ApprovalPrompt) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "form",
        "message": question(p),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "Run this exact call once",
                    "default": false
                }
            },
            "required": ["approve"]
        }
    }))
    .expect("the approval form is a valid elicitation request")
}

impl Approver for ElicitingApprover {
    fn channel(&self) -> toolhost_contract::Approvers {
        toolhost_contract::Approvers::Client
    }

    fn source(&self) -> String {
        "the MCP client".into()
    }

    fn ask<'a>(
        &'a self,
        prompt: &'a ApprovalPrompt,
    ) -> Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>> {
        Box::pin(async move {
            let answer = self
                .peer
                .create_elicitation_with_timeout(params(prompt), Some(ELICITATION_TIMEOUT))
                .await;
            match answer {
                Ok(r) => match r.action {
                    ElicitationAction::Accept => {
                        let yes = r
                            .content
                            .as_ref()
                            .and_then(|c| c.get("approve"))
                            .and_then(|v| v.as_bool());
                        match yes {
                            Some(true) => ApprovalAnswer::Approved,
                            _ => ApprovalAnswer::Declined,
                        }
                    }
                    ElicitationAction::Decline => ApprovalAnswer::Declined,
                    _ => ApprovalAnswer::Unavailable("the client cancelled the question"),
                },
                Err(_) => ApprovalAnswer::Unavailable("the question failed or timed out"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_contract::pending::MAX_SHOWN_ARGUMENT_BYTES;

    fn prompt(args: String) -> ApprovalPrompt {
        ApprovalPrompt {
            tool: "delete_file".into(),
            risk: Some(toolhost_contract::Risk::Destructive),
            canonical_arguments: args,
            caller: toolhost_contract::Caller::new("alice", "acme"),
            run_id: "r".into(),
            call_id: "c".into(),
            digest: "d".into(),
            expires_at: 0,
        }
    }

    /// The question names the tool, the identity, the exact arguments and the expiry.
    #[test]
    fn question_shows_the_call() {
        let mut p = prompt("{\"path\":\"/a\"}".into());
        p.expires_at = 1_796_000_000;
        let q = question(&p);
        assert!(q.contains("delete_file"));
        assert!(q.contains("alice"));
        assert!(q.contains("\"path\": \"/a\""), "{q}");
        assert!(q.contains("risk: destructive"), "{q}");
        assert!(q.contains("expires: 2026-11-30T"), "{q}");
        let _ = params(&prompt("{}".into()));
    }

    /// Controls and reordering marks from the model's arguments reach the client's human
    /// escaped, never raw (canonical JSON leaves C1 controls and bidi marks as they are).
    #[test]
    fn arguments_cannot_drive_the_question() {
        let q = question(&prompt(
            "{\"path\":\"a\u{9b}2J\u{202e}gpj.exe\u{200b}\"}".into(),
        ));
        assert!(
            !q.chars()
                .any(|c| (c.is_control() && c != '\n')
                    || toolhost_contract::frame::is_hiding_format(c)),
            "{q:?}"
        );
        assert!(q.contains("\\u{009b}2J\\u{202e}gpj.exe"), "{q}");
    }

    /// Long arguments are cut, and the cut is said, with the digest of the whole.
    #[test]
    fn long_arguments_are_cut_visibly() {
        let q = question(&prompt("x".repeat(MAX_SHOWN_ARGUMENT_BYTES + 10)));
        assert!(q.contains("[10 more bytes not shown]"), "{q}");
        assert!(q.len() < MAX_SHOWN_ARGUMENT_BYTES + 400);
    }
}
