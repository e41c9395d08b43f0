//! Whose call an id is: the admission digest binds the caller as well as the call.
//!
//! A recorded result is returned only to the principal and tenant that made the call. The
//! digest a call is admitted with is the SHA-256 of its canonical tool and arguments, then `|`
//! and a tag of the caller (16 hex digits of a SHA-256 of principal and tenant). The same call
//! from the same caller is a replay; the same id from another caller differs in the tag, so
//! the ledger never answers it with the recorded result: the runtime refuses it
//! `unauthorized`, as authorization refuses, and appends who asked to the original's audit
//! trail. Ids admitted before the tag existed have none and are refused to everyone.

use crate::contract::{Code, RunContext, Stage, ToolCall, ToolResult, Usage};
use crate::ledger::{digest_bytes, PendingEvent};
use crate::policy::{canonical_call, UNAUTHORIZED_MESSAGE};

use super::pipeline::duplicate_call_id;
use super::{clip, Runtime};

/// The admission digest of `call` from `ctx`'s caller, the size of the canonical call and of
/// its arguments.
pub(super) fn admission_digest(ctx: &RunContext, call: &ToolCall) -> (String, u64, u64) {
    let (canonical, arguments_len) = canonical_call(&call.name, &call.arguments);
    let digest = format!("{}|{}", digest_bytes(&canonical), caller_tag(ctx));
    (digest, canonical.len() as u64, arguments_len as u64)
}

/// 16 hex digits naming the caller: principal and tenant, length-prefixed so that no two
/// pairs share the input.
fn caller_tag(ctx: &RunContext) -> String {
    let mut input = Vec::with_capacity(16 + ctx.principal.len() + ctx.tenant.len());
    for part in [&ctx.principal, &ctx.tenant] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part.as_bytes());
    }
    digest_bytes(&input)[..16].to_string()
}

/// The caller tag of an admission digest (none for ids admitted before tags existed).
fn caller_of(digest: &str) -> Option<&str> {
    digest.split_once('|').map(|(_, caller)| caller)
}

/// Whether two admission digests are of the same caller.
pub(super) fn same_caller(a: &str, b: &str) -> bool {
    matches!((caller_of(a), caller_of(b)), (Some(x), Some(y)) if x == y)
}

/// The answer to another caller's id: what authorization answers.
pub(super) fn foreign(call: &ToolCall) -> ToolResult {
    ToolResult::failed(
        call,
        Code::Unauthorized,
        UNAUTHORIZED_MESSAGE,
        Usage::default(),
    )
}

/// The audit note of another caller's attempt on an id: who asked.
pub(super) fn asked_by(ctx: &RunContext, call: &ToolCall) -> PendingEvent {
    PendingEvent::now(
        Stage::Admit.as_str(),
        Code::Unauthorized.as_str(),
        &format!(
            "call id asked for by another caller (principal {:?}, tenant {:?}, tool {:?}); \
             refused as unauthorized, this call unchanged",
            clip(&ctx.principal, 256),
            clip(&ctx.tenant, 256),
            clip(&call.name, 64)
        ),
    )
}

impl Runtime {
    /// The answer to an id the ledger holds with another digest: `unauthorized` when it is
    /// another caller's (noting who asked on it), `duplicate_call_id` when it is the caller's
    /// own id reused for another call. A rare path: the digest is computed again here rather
    /// than kept by every call for it.
    pub(super) async fn conflict(&self, ctx: &RunContext, call: &ToolCall) -> ToolResult {
        let (digest, _, _) = admission_digest(ctx, call);
        match self
            .ledger
            .admitted_digest(&ctx.run_id, &call.call_id)
            .await
        {
            Ok(Some(theirs)) if same_caller(&theirs, &digest) => duplicate_call_id(call),
            Ok(Some(_)) => {
                self.append_noted(ctx, call, vec![asked_by(ctx, call)])
                    .await;
                foreign(call)
            }
            // Gone or unreadable: refuse without answering anything of the id.
            Ok(None) | Err(_) => foreign(call),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(principal: &str, tenant: &str) -> RunContext {
        RunContext::new(principal, tenant)
    }

    fn call() -> ToolCall {
        ToolCall {
            call_id: "c".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": "a"}),
        }
    }

    /// One call from one caller has one digest; another principal, another tenant, or a
    /// principal/tenant split moved between the two, has another; the args part is shared.
    #[test]
    fn the_digest_binds_the_caller() {
        let alice = admission_digest(&ctx("alice", "acme"), &call()).0;
        assert_eq!(alice, admission_digest(&ctx("alice", "acme"), &call()).0);
        for (p, t) in [
            ("bob", "acme"),
            ("alice", "other"),
            ("alic", "eacme"),
            ("", "aliceacme"),
        ] {
            let other = admission_digest(&ctx(p, t), &call()).0;
            assert_ne!(alice, other, "{p}/{t}");
            assert!(!same_caller(&alice, &other), "{p}/{t}");
            assert_eq!(
                alice.split_once('|').unwrap().0,
                other.split_once('|').unwrap().0
            );
        }
        assert!(same_caller(&alice, &alice));
        assert!(
            !same_caller(&alice, "abc"),
            "an untagged digest is nobody's"
        );
    }
}
