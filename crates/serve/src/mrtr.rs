//! Approval of a 2026-07-28 call through `input_required`: the question goes back in the result,
//! the answer comes with the client's retry, and no host keeps anything in between.
//!
//! # Round trip
//!
//! 1. A call that needs approval ends `approval_required` and is recorded so (call `K` in run
//!    `R`, with its handle). When the client declared form elicitation in the request's
//!    `_meta`, the answer is `resultType: "input_required"` with one input request,
//!    [`APPROVAL_INPUT`]: the same form `elicitation/create` shows in a session (tool,
//!    principal, tenant, canonical arguments, digest, expiry), and a `requestState`.
//! 2. The `requestState` is sealed (HMAC-SHA256, rmcp's `RequestStateCodec`) under a key
//!    derived from the approval key, so every host sharing the approval key can open it and
//!    nobody else can make or alter one. It holds the run `R`, the call `K`, the handle, the
//!    principal and the tenant — nothing secret, since the handle is shown to the human anyway.
//! 3. The client retries the call with `inputResponses` and the `requestState`. The host opens
//!    the state, and refuses the retry with a JSON-RPC `-32602` (the approval code in its
//!    `data`) before anything is admitted: not one it sealed is `approval_invalid`; another
//!    caller's is `approval_wrong_principal`; one past the handle's expiry is
//!    `approval_expired`. A retry without a readable answer is asked again (the same state),
//!    if its tool and arguments are the ones the handle approves.
//!    Otherwise it runs in `R` as call [`approved_call_id`]`(K)`: an accept with `approve:
//!    true` mints the token for the sealed handle, which the approve stage verifies against the
//!    retry's own tool and arguments (`approval_mismatch` if they changed) and spends once in
//!    the ledger; a decline ends `approval_denied`; a cancel ends `approval_required` with a
//!    handle for `toolhost approve`.
//!
//! A resent retry is the same call `approved_call_id(K)` in `R`, so it is answered from the
//! ledger on any host and never runs twice.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use toolhost_contract::Caller;
use toolhost_contract::{ApprovalAnswer, ApprovalPrompt, Approver};
use toolhost_runtime::{parse_handle, ApprovalFailure};

/// The key of the approval question in `inputRequests` and of its answer in `inputResponses`.
pub const APPROVAL_INPUT: &str = "approval";
/// What the request-state key is derived for (see `ApprovalKey::derive`).
pub const STATE_KEY_PURPOSE: &str = "mcp request state";
/// Associated data of every sealed approval state: a state sealed for anything else never opens
/// as one.
const STATE_CONTEXT: &[u8] = b"toolhost.mrtr.approval.v1";
/// Appended to the first round's call id to name the approved round's call.
const APPROVED_SUFFIX: &str = "~approved";

/// What an approval's `requestState` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalState {
    run: String,
    call: String,
    handle: String,
    principal: String,
    tenant: String,
}

/// Where an answered approval runs: the first round's run, its call's approved id, the handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    pub run_id: String,
    /// The approved round's call id ([`approved_call_id`] of the first round's).
    pub call_id: String,
    /// The first round's call id.
    pub first_call_id: String,
    pub handle: String,
    pub expires_at: u64,
}

/// What the approval question is about: the call, where it runs, and the handle to approve.
#[derive(Debug, Clone)]
pub struct Question<'a> {
    pub tool: &'a str,
    /// The tool's risk (`None` when it is no longer served).
    pub risk: Option<toolhost_contract::Risk>,
    pub run_id: &'a str,
    pub call_id: &'a str,
    pub handle: &'a str,
    pub expires_at: u64,
    /// The call's arguments in canonical form (what the approval binds).
    pub arguments: &'a [u8],
}

/// What the client answered to the approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `accept` with `{"approve": true}`.
    Approve,
    /// `decline`, or `accept` with anything but `{"approve": true}`.
    Decline,
    /// `cancel`: the human dismissed the question.
    Cancelled,
    /// No answer to [`APPROVAL_INPUT`], or one that is not an elicitation result: the
    /// question is asked again.
    Missing,
}

/// Seals and opens approval states.
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    /// A seal under `key` (derived from the approval key for [`STATE_KEY_PURPOSE`]).
    pub fn new(key: [u8; 32]) -> StateSeal {
        StateSeal {
            codec: RequestStateCodec::try_new(key.to_vec())
                .expect("a 32-byte key is long enough for the codec"),
        }
    }

    /// The `input_required` answer that asks `q` of the client's human, with the sealed
    /// state its retry must carry; `None` for a handle that cannot be read.
    pub fn ask(&self, q: &Question<'_>, caller: &Caller) -> Option<InputRequiredResult> {
        let (digest, _) = parse_handle(q.handle).ok()?;
        let prompt = ApprovalPrompt {
            tool: q.tool.to_string(),
            risk: q.risk,
            canonical_arguments: String::from_utf8_lossy(q.arguments).into_owned(),
            caller: caller.clone(),
            run_id: q.run_id.to_string(),
            call_id: q.call_id.to_string(),
            digest,
            expires_at: q.expires_at,
        };
        let question: InputRequest = serde_json::from_value(serde_json::json!({
            "method": "elicitation/create",
            "params": super::elicit::params(&prompt),
        }))
        .ok()?;
        let state = ApprovalState {
            run: q.run_id.to_string(),
            call: q.call_id.to_string(),
            handle: q.handle.to_string(),
            principal: caller.principal.clone(),
            tenant: caller.tenant.clone(),
        };
        let sealed = self
            .codec
            .seal_json_with(&state, &SealOptions::new().associated_data(STATE_CONTEXT))
            .ok()?;
        let mut requests = InputRequests::new();
        requests.insert(APPROVAL_INPUT.to_string(), question);
        Some(InputRequiredResult::new(Some(requests), Some(sealed)))
    }

    /// Open a retry's `requestState` for `caller` at `now` (unix seconds), in the order the
    /// approval token's checks run: genuine, this caller's, unexpired.
    pub fn open(
        &self,
        sealed: &str,
        caller: &Caller,
        now: u64,
    ) -> Result<Resumed, ApprovalFailure> {
        let state: ApprovalState =
            self.codec
                .open_json_with(sealed, STATE_CONTEXT)
                .map_err(|e| ApprovalFailure::Invalid {
                    reason: format!("request state: {e}"),
                })?;
        if state.principal != caller.principal || state.tenant != caller.tenant {
            return Err(ApprovalFailure::WrongPrincipal);
        }
        let (_, expires_at) =
            parse_handle(&state.handle).map_err(|e| ApprovalFailure::Invalid {
                reason: e.to_string(),
            })?;
        if now >= expires_at {
            return Err(ApprovalFailure::Expired);
        }
        Ok(Resumed {
            call_id: approved_call_id(&state.call),
            first_call_id: state.call,
            run_id: state.run,
            handle: state.handle,
            expires_at,
        })
    }
}

/// The call id of the approved round of call `first`: `first~approved`, or
/// `approved:<SHA-256 of first>` when that would be longer than a call id may be.
pub fn approved_call_id(first: &str) -> String {
    let id = format!("{first}{APPROVED_SUFFIX}");
    if id.len() <= toolhost_contract::bounds::MAX_CALL_ID_BYTES {
        id
    } else {
        format!("approved:{}", hex::encode(Sha256::digest(first.as_bytes())))
    }
}

/// The client's answer to [`APPROVAL_INPUT`], read as an elicitation result.
pub fn answer(responses: Option<&InputResponses>) -> Answer {
    let Some(r) = responses.and_then(|r| r.get(APPROVAL_INPUT)) else {
        return Answer::Missing;
    };
    match r.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let yes = r.pointer("/content/approve").and_then(Value::as_bool);
            if yes == Some(true) {
                Answer::Approve
            } else {
                Answer::Decline
            }
        }
        Some("decline") => Answer::Decline,
        Some("cancel") => Answer::Cancelled,
        _ => Answer::Missing,
    }
}

/// The approver of a retry whose answer was a decline: it says no once more, so the approve
/// stage records `approval_denied` for the call, as it does for a decline in a session.
pub struct Declined;

impl Approver for Declined {
    fn channel(&self) -> toolhost_contract::Approvers {
        toolhost_contract::Approvers::Client
    }

    fn source(&self) -> String {
        "the MCP client (input_required)".into()
    }

    fn ask<'a>(
        &'a self,
        _prompt: &'a ApprovalPrompt,
    ) -> Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>> {
        Box::pin(std::future::ready(ApprovalAnswer::Declined))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_contract::{ApprovalNeeded, Code, ToolCall, ToolResult, Usage};

    fn seal() -> StateSeal {
        StateSeal::new([7; 32])
    }

    /// An `approval_required` result for `K` with a handle expiring at `expires_at`.
    fn needed(expires_at: u64) -> ToolResult {
        let call = ToolCall {
            call_id: "K".into(),
            name: "delete_file".into(),
            arguments: json!({"path": "a"}),
        };
        let mut r = ToolResult::failed(&call, Code::ApprovalRequired, "ask", Usage::default());
        let handle = format!("{}.{}.{expires_at}", "a".repeat(64), "b".repeat(64));
        r.approval = Some(ApprovalNeeded { handle, expires_at });
        r
    }

    fn sealed_for(caller: &Caller, expires_at: u64) -> String {
        let r = needed(expires_at);
        let approval = r.approval.as_ref().unwrap();
        let q = Question {
            tool: &r.tool,
            risk: None,
            run_id: "R",
            call_id: &r.call_id,
            handle: &approval.handle,
            expires_at,
            arguments: br#"{"path":"a"}"#,
        };
        let asked = seal().ask(&q, caller).unwrap();
        let wire = serde_json::to_value(&asked).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        let q = &wire["inputRequests"][APPROVAL_INPUT];
        assert_eq!(q["method"], "elicitation/create");
        let message = q["params"]["message"].as_str().unwrap();
        assert!(
            message.contains("delete_file") && message.contains("alice"),
            "{message}"
        );
        asked.request_state.unwrap()
    }

    /// A state opens for its caller before its expiry, naming the first round's run and the
    /// approved round's call.
    #[test]
    fn a_state_opens_for_its_caller() {
        let alice = Caller::new("alice", "t");
        let s = sealed_for(&alice, 1_000);
        let r = seal().open(&s, &alice, 999).unwrap();
        assert_eq!(r.run_id, "R");
        assert_eq!(r.call_id, "K~approved");
        assert_eq!(r.first_call_id, "K");
        assert_eq!(r.expires_at, 1_000);
        assert!(r.handle.ends_with(".1000"));
    }

    /// Another caller's state, an expired one, a forged or altered one, and one sealed under
    /// another key are each refused with the approval code a token would get.
    #[test]
    fn states_are_checked_like_tokens() {
        let alice = Caller::new("alice", "t");
        let s = sealed_for(&alice, 1_000);
        let mallory = Caller::new("mallory", "t");
        assert_eq!(
            seal().open(&s, &mallory, 0),
            Err(ApprovalFailure::WrongPrincipal)
        );
        assert_eq!(
            seal().open(&s, &alice, 1_000),
            Err(ApprovalFailure::Expired)
        );
        let other_key = StateSeal::new([8; 32]);
        assert!(matches!(
            other_key.open(&s, &alice, 0),
            Err(ApprovalFailure::Invalid { .. })
        ));
        let mut altered = s.clone();
        let mid = altered.len() / 2;
        let c = if &altered[mid..=mid] == "A" { "B" } else { "A" };
        altered.replace_range(mid..=mid, c);
        assert!(matches!(
            seal().open(&altered, &alice, 0),
            Err(ApprovalFailure::Invalid { .. })
        ));
        for forged in ["", "rs1..", "not a state", "rs1.e30.AAAA"] {
            assert!(
                matches!(
                    seal().open(forged, &alice, 0),
                    Err(ApprovalFailure::Invalid { .. })
                ),
                "{forged}"
            );
        }
        // Sealed by the same key for another purpose: refused too.
        let foreign = RequestStateCodec::try_new([7u8; 32].to_vec())
            .unwrap()
            .seal(b"{}");
        assert!(matches!(
            seal().open(&foreign, &alice, 0),
            Err(ApprovalFailure::Invalid { .. })
        ));
    }

    /// Only an accept that says `approve: true` approves; a decline or an accept that says
    /// anything else declines; a cancel is a cancel; no readable answer is missing.
    #[test]
    fn answers_are_read_strictly() {
        let one = |v: Value| {
            let mut r = InputResponses::new();
            r.insert(APPROVAL_INPUT.into(), v);
            answer(Some(&r))
        };
        assert_eq!(
            one(json!({"action": "accept", "content": {"approve": true}})),
            Answer::Approve
        );
        assert_eq!(
            one(json!({"action": "accept", "content": {"approve": "true"}})),
            Answer::Decline
        );
        assert_eq!(one(json!({"action": "accept"})), Answer::Decline);
        assert_eq!(one(json!({"action": "decline"})), Answer::Decline);
        assert_eq!(one(json!({"action": "cancel"})), Answer::Cancelled);
        assert_eq!(one(json!("yes")), Answer::Missing);
        assert_eq!(one(json!({"action": "maybe"})), Answer::Missing);
        assert_eq!(answer(None), Answer::Missing);
        assert_eq!(answer(Some(&InputResponses::new())), Answer::Missing);
    }

    /// The approved round's id stays within the call-id bound however long the first one is.
    #[test]
    fn approved_ids_fit_the_bound() {
        assert_eq!(approved_call_id("rpc-n:1"), "rpc-n:1~approved");
        let long = "x".repeat(toolhost_contract::bounds::MAX_CALL_ID_BYTES);
        let id = approved_call_id(&long);
        assert!(
            id.starts_with("approved:") && id.len() <= long.len(),
            "{id}"
        );
        assert_ne!(approved_call_id(&long), approved_call_id(&long[1..]));
    }
}
