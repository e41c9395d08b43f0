//! Whose call an id is: the admission digest binds the caller as well as the call (the
//! ledger's `owner.rs` says how); here, the digest of a proposed call and the answer to an id
//! that is another caller's.

use crate::contract::canonical::{canonical_call, digest_bytes};
use crate::contract::{Code, RunContext, ToolCall, ToolResult, Usage};
use crate::ledger::bind_caller;
use crate::policy::UNAUTHORIZED_MESSAGE;

/// The admission digest of `call` from `ctx`'s caller, the size of the canonical call and of
/// its arguments.
pub(super) fn admission_digest(ctx: &RunContext, call: &ToolCall) -> (String, u64, u64) {
    let (canonical, arguments_len) = canonical_call(&call.name, &call.arguments);
    let digest = bind_caller(
        &digest_bytes(&canonical),
        &ctx.caller.principal,
        &ctx.caller.tenant,
    );
    (digest, canonical.len() as u64, arguments_len as u64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::same_caller;

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
