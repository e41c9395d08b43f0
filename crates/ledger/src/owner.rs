//! Whose call an id is: the admission digest binds the caller as well as the call.
//!
//! A recorded result is returned only to the principal and tenant that made the call. The
//! digest a call is admitted with is the caller's digest of its canonical tool and arguments,
//! then `|` and a tag of the caller (16 hex digits of a SHA-256 of principal and tenant). The
//! same call from the same caller is a replay; the same id from another caller differs in the
//! tag, so the ledger never answers it with the recorded result: it is refused as
//! authorization refuses, and who asked is appended to the original's audit trail. Ids
//! admitted before the tag existed have none and are refused to everyone.

use super::events::PendingEvent;
use toolhost_contract::bounds::clip;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{Code, Decision, Stage};

/// The admission digest of a call whose canonical form has the digest `call_digest`, made by
/// `principal` of `tenant`.
pub fn bind_caller(call_digest: &str, principal: &str, tenant: &str) -> String {
    format!("{call_digest}|{}", caller_tag(principal, tenant))
}

/// 16 hex digits naming the caller: principal and tenant, length-prefixed so that no two
/// pairs share the input.
pub fn caller_tag(principal: &str, tenant: &str) -> String {
    let mut input = Vec::with_capacity(16 + principal.len() + tenant.len());
    for part in [principal, tenant] {
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
pub fn same_caller(a: &str, b: &str) -> bool {
    matches!((caller_of(a), caller_of(b)), (Some(x), Some(y)) if x == y)
}

/// The audit note of another caller's attempt on an id: who asked.
pub(super) fn asked_by(principal: &str, tenant: &str, tool: &str) -> PendingEvent {
    PendingEvent::now(
        Stage::Admit.as_str(),
        Code::Unauthorized.as_str(),
        &format!(
            "call id asked for by another caller (principal {:?}, tenant {:?}, tool {:?}); \
             refused as unauthorized, this call unchanged",
            clip(principal, 256),
            clip(tenant, 256),
            clip(tool, 64)
        ),
    )
}

/// The audit note of the caller's own id reused, while it runs, for another call.
pub(super) fn reused(tool: &str, digest: &str, size: u64) -> PendingEvent {
    PendingEvent::now(
        Stage::Admit.as_str(),
        Decision::Conflict.as_str(),
        &format!(
            "call id reused for tool {:?} with arguments sha256 {digest}, {size} bytes; refused \
             as duplicate_call_id, this call unchanged",
            clip(tool, 64)
        ),
    )
}
