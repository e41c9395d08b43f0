//! Where a request of MCP 2026-07-28 runs: its run and its call id, without a session.
//!
//! A 2026-07-28 request stands alone: its protocol version and the client's capabilities are in
//! its `_meta`, its caller is the bearer token (HTTP) or the server's identity (stdio), and any
//! host behind a load balancer may answer it. What a session gave the handshake era — one run,
//! call ids from request ids — comes from two `_meta` keys the client may send:
//!
//! - [`RUN_META`] (`toolhost/run`): a name the client gives its run. The ledger run is
//!   [`run_of`] the caller's principal and tenant and that name, so one caller's name never
//!   reaches another caller's run, budgets or results, and any host finds the same run.
//! - [`CALL_META`] (`toolhost/callId`): the call's id in that run (`key:` + the value); without
//!   it, the JSON-RPC id (`rpc-n:` / `rpc-s:`, as in a session).
//!
//! A request without a run name is a run of its own (`mcp-` + a fresh UUID): nothing relates it
//! to any other request, so a resend of it is a new call. A client that may resend a call (after
//! a timeout, or a host's death) names its run and its call: the resend, on any host, is then
//! answered from the ledger and never runs twice.

use rmcp::model::{ProtocolVersion, RequestId, RequestMetaObject};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use toolhost_contract::Caller;

/// The `_meta` key naming the client's run.
pub const RUN_META: &str = "toolhost/run";
/// The `_meta` key naming the call within its run.
pub const CALL_META: &str = "toolhost/callId";
/// Longest run name or call key, in bytes: a name is an identifier, not data.
pub const MAX_NAME_BYTES: usize = 128;
/// Domain separation of the ledger run id derived from a run name.
const RUN_DOMAIN: &str = "toolhost.mcp.run.v1";

/// Whether a request is served the 2026-07-28 way: the version it names (or the lifecycle its
/// connection chose) is 2026-07-28 or later.
pub fn is_stateless(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| is_stateless_version(v.as_str()))
}

/// Whether a protocol version is 2026-07-28 or later, the revisions without sessions (dates
/// compare as strings).
pub fn is_stateless_version(version: &str) -> bool {
    version >= ProtocolVersion::V_2026_07_28.as_str()
}

/// The run and call id of one stateless request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub run_id: String,
    pub call_id: String,
}

/// Why a request's `_meta` names no usable run or call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error("_meta[\"{key}\"] must be a string of 1 to {MAX_NAME_BYTES} characters from A-Z a-z 0-9 and . _ : @ / + = -")]
    BadName { key: &'static str },
}

/// The ledger run of `name` for this caller: `mcp-run-` + 32 hex characters of SHA-256 over the
/// domain, principal, tenant and name (each length-prefixed, so no two triples collide).
pub fn run_of(caller: &Caller, name: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        RUN_DOMAIN,
        caller.principal.as_str(),
        caller.tenant.as_str(),
        name,
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = hex::encode(h.finalize());
    format!("mcp-run-{}", &digest[..32])
}

/// A fresh run for a request that names none.
pub fn fresh_run() -> String {
    format!("mcp-{}", uuid::Uuid::new_v4().simple())
}

/// The run and call id of a stateless request (see the module docs). `metas` are where the
/// keys are looked for, first match wins (the params' `_meta`, then the request's).
pub fn place(
    metas: &[Option<&RequestMetaObject>],
    caller: &Caller,
    id: &RequestId,
) -> Result<Place, PlaceError> {
    let find = |key: &'static str| -> Result<Option<String>, PlaceError> {
        match metas.iter().flatten().find_map(|m| m.get(key)) {
            None => Ok(None),
            Some(Value::String(s)) if is_name(s) => Ok(Some(s.clone())),
            Some(_) => Err(PlaceError::BadName { key }),
        }
    };
    let run_id = match find(RUN_META)? {
        Some(name) => run_of(caller, &name),
        None => fresh_run(),
    };
    let call_id = match find(CALL_META)? {
        Some(key) => format!("key:{key}"),
        None => call_id(id),
    };
    Ok(Place { run_id, call_id })
}

/// 1 to [`MAX_NAME_BYTES`] characters from a set that needs no escaping anywhere it is shown.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@/+=-".contains(&b))
}

/// The ledger call id of a JSON-RPC request: numbers and strings kept apart.
pub fn call_id(id: &RequestId) -> String {
    match id {
        RequestId::Number(n) => format!("rpc-n:{n}"),
        RequestId::String(s) => format!("rpc-s:{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> RequestMetaObject {
        serde_json::from_value(v).unwrap()
    }

    /// A run name is the caller's own: the same name of two callers is two runs, and the same
    /// caller finds the same run on every request (and every host).
    #[test]
    fn a_run_name_is_scoped_by_principal_and_tenant() {
        let alice = Caller::new("alice", "t");
        let mallory = Caller::new("mallory", "t");
        assert_eq!(run_of(&alice, "r1"), run_of(&alice, "r1"));
        assert_ne!(run_of(&alice, "r1"), run_of(&mallory, "r1"));
        assert_ne!(run_of(&alice, "r1"), run_of(&alice, "r2"));
        let mut other_tenant = alice.clone();
        other_tenant.tenant = "elsewhere".into();
        assert_ne!(run_of(&alice, "r1"), run_of(&other_tenant, "r1"));
        assert!(run_of(&alice, "r1").starts_with("mcp-run-"));
    }

    /// The run and call come from `_meta`; without them, a fresh run and the JSON-RPC id.
    #[test]
    fn place_reads_run_and_call_from_meta() {
        let alice = Caller::new("alice", "t");
        let id = RequestId::Number(7);
        let m = meta(json!({"toolhost/run": "r1", "toolhost/callId": "c-1"}));
        let p = place(&[Some(&m)], &alice, &id).unwrap();
        assert_eq!(p.run_id, run_of(&alice, "r1"));
        assert_eq!(p.call_id, "key:c-1");
        let none = place(&[None], &alice, &id).unwrap();
        assert!(none.run_id.starts_with("mcp-") && !none.run_id.starts_with("mcp-run-"));
        assert_eq!(none.call_id, "rpc-n:7");
        assert_ne!(place(&[None], &alice, &id).unwrap().run_id, none.run_id);
        let params = meta(json!({"toolhost/run": "from-params"}));
        let p = place(&[Some(&params), Some(&m)], &alice, &id).unwrap();
        assert_eq!(p.run_id, run_of(&alice, "from-params"));
        assert_eq!(p.call_id, "key:c-1");
    }

    /// A run or call name that is not a short plain string is refused, not truncated or cleaned.
    #[test]
    fn bad_names_are_refused() {
        let alice = Caller::new("alice", "t");
        let id = RequestId::Number(1);
        for bad in [
            json!(""),
            json!("a b"),
            json!("x".repeat(MAX_NAME_BYTES + 1)),
            json!(3),
            json!({"run": "r"}),
            json!("r\u{202e}"),
        ] {
            for key in [RUN_META, CALL_META] {
                let m = meta(json!({ key: bad.clone() }));
                assert_eq!(
                    place(&[Some(&m)], &alice, &id),
                    Err(PlaceError::BadName { key }),
                    "{key}: {bad}"
                );
            }
        }
        let longest = meta(json!({RUN_META: "x".repeat(MAX_NAME_BYTES)}));
        assert!(place(&[Some(&longest)], &alice, &id).is_ok());
    }
}
