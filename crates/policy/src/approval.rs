//! Human approval of high-impact calls: bindings, handles, tokens, and why a token fails.
//!
//! # Flow
//!
//! 1. A call needs approval ([`needs_approval`]) and carries no token. The host answers
//!    `approval_required` with an [`ApprovalRequest`]; its *handle* goes to the human.
//! 2. The human runs `toolhost approve HANDLE`; [`ApprovalKey::mint_at`] returns a *token*.
//!    Only the host key is needed to mint (the CLI also checks that some call asked for the
//!    handle).
//! 3. The call is resubmitted with the token. [`ApprovalKey::verify`] checks the token's MAC
//!    (constant time) over the bindings the token carries, then compares them with the
//!    *current* call, then the expiry, then single use through the ledger's `consume` callback.
//!
//! # Formats (`toolhost.approval.v4`)
//!
//! - **call binding**: lower-case hex SHA-256 of [`canonical_json`] of
//!   `{"domain": "toolhost.approval.v4", "part": "call", "tool", "definition", "policy",
//!   "arguments", "run_id"}` — `definition` is the digest of the tool's definition as the model
//!   saw it (`sha256:…`, `crates/registry/src/lock.rs`) and `policy` the revision of the rules
//!   in force ([`crate::Policy::revision`]), so that a tool replaced or changed, or a rule
//!   changed, after the call asked does not inherit its approval; `arguments` is the validated
//!   input as a JSON value, canonicalized with everything else.
//! - **principal binding**: the same over
//!   `{"domain": "toolhost.approval.v4", "part": "principal", "principal", "tenant"}`.
//! - **handle** (what the human approves, not secret): `"{call}.{principal}.{expires_at}"`,
//!   `expires_at` in unix seconds.
//! - **token** (what the call carries): `"{handle}.{mac}"`, where `mac` is lower-case hex
//!   HMAC-SHA256 under the host key of `"toolhost.approval.v4:" + handle`. Without the key a
//!   token cannot be derived from a handle; the bindings it names are the ones the MAC covers.
//! - **approval id** ([`digest`]; the ledger's `approval_requests` key and single-use id):
//!   lower-case hex SHA-256 of `"toolhost.approval.v4:" + handle`.
//!
//! `expires_at` is canonical decimal (no sign, no leading zeros) and at most `i64::MAX`.
//!
//! # Failures, in the order they are checked
//!
//! | the token | code |
//! |---|---|
//! | is malformed, forged or altered (the MAC does not verify: another key, an edited binding or expiry), or expires beyond the TTL | `approval_invalid` |
//! | is genuine, for another principal or tenant | `approval_wrong_principal` |
//! | is genuine, for another call (tool, its definition, the rules in force, arguments or run) | `approval_mismatch` |
//! | is genuine and for this call, past its expiry | `approval_expired` |
//! | is genuine and for this call, already used | `approval_reused` |
//!
//! A human's "no" (an approver that declines) is `approval_denied`. Because the MAC is checked
//! first and over the token's own bindings, only a token this host minted can be told apart
//! as mismatched, wrong-principal, expired or reused: a forgery is always `approval_invalid`.
//! The model sees the code and a fixed message per code ([`ApprovalFailure::message`]); the
//! reason for the operator goes to the ledger.
//!
//! Longer than 500 lines: 280 of them are its unit tests, kept beside the code they test (the code is 510 lines).

use std::path::Path;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::config::DEFAULT_TTL_SECS;
use super::keyfile::{self, KEY_LEN};
use super::PolicyError;
use toolhost_contract::canonical::{canonical_json, canonical_object, Member};
pub use toolhost_contract::ApprovalMode;
use toolhost_contract::Caller;
use toolhost_contract::Risk;
use toolhost_contract::{Code, ToolCall, ToolResult, Usage};

/// Domain separation for approval digests and MACs.
pub const APPROVAL_DOMAIN: &str = "toolhost.approval.v4";

/// Clock difference tolerated between the host that asked and the one that mints or verifies,
/// when refusing expiries further out than the TTL. Expiry itself is never stretched.
pub const CLOCK_SKEW_SECS: u64 = 60;

/// Whether a call to a tool with this mode and risk needs a human approval.
pub fn needs_approval(mode: ApprovalMode, risk: Risk) -> bool {
    match mode {
        ApprovalMode::Required => true,
        ApprovalMode::Never => false,
        ApprovalMode::Default => risk == Risk::Destructive,
    }
}

/// The call an approval is bound to: everything but the expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalSubject {
    /// The model-facing tool name.
    pub tool: String,
    /// The digest of the tool's definition (`sha256:…`): what the model was shown.
    pub definition: String,
    /// The revision of the rules in force ([`crate::Policy::revision`]).
    pub policy: String,
    /// The validated arguments, in canonical JSON (RFC 8785).
    pub canonical_arguments: Vec<u8>,
    /// From the trusted run context, never from the arguments.
    pub caller: Caller,
    pub run_id: String,
}

impl ApprovalSubject {
    pub fn new(
        (tool, definition, policy): (&str, &str, &str),
        arguments: &Value,
        subject: &Caller,
        run_id: &str,
    ) -> Self {
        let arguments = canonical_json(arguments);
        ApprovalSubject::from_canonical((tool, definition, policy), &arguments, subject, run_id)
    }

    /// The subject of a call whose arguments are already in canonical form (the pipeline's
    /// [`toolhost_contract::canonical::CanonicalCall::arguments`]).
    pub fn from_canonical(
        (tool, definition, policy): (&str, &str, &str),
        arguments: &[u8],
        subject: &Caller,
        run_id: &str,
    ) -> Self {
        ApprovalSubject {
            tool: tool.to_string(),
            definition: definition.to_string(),
            policy: policy.to_string(),
            canonical_arguments: arguments.to_vec(),
            caller: subject.clone(),
            run_id: run_id.to_string(),
        }
    }
}

/// Domain-separated SHA-256 of one binding's canonical JSON.
fn binding(part: &str, fields: Value) -> String {
    let mut doc = fields;
    doc["domain"] = json!(APPROVAL_DOMAIN);
    doc["part"] = json!(part);
    hex::encode(Sha256::digest(canonical_json(&doc)))
}

/// What a token binds of the call itself: tool, its definition, the rules, arguments and run —
/// the canonical form of `{"arguments", "definition", "domain", "part": "call", "policy",
/// "run_id", "tool"}`, written around the arguments' canonical bytes rather than parsing them
/// back.
fn call_binding_of(
    (tool, definition, policy): (&str, &str, &str),
    canonical_arguments: &[u8],
    run_id: &str,
) -> String {
    let doc = canonical_object(&[
        ("arguments", Member::Canonical(canonical_arguments)),
        ("definition", Member::Str(definition)),
        ("domain", Member::Str(APPROVAL_DOMAIN)),
        ("part", Member::Str("call")),
        ("policy", Member::Str(policy)),
        ("run_id", Member::Str(run_id)),
        ("tool", Member::Str(tool)),
    ]);
    hex::encode(Sha256::digest(doc))
}

/// What a token binds of the call itself: tool, arguments and run.
fn call_binding(call: &ApprovalSubject) -> String {
    call_binding_of(
        (&call.tool, &call.definition, &call.policy),
        &call.canonical_arguments,
        &call.run_id,
    )
}

/// What a token binds of the caller: principal and tenant.
fn principal_binding(call: &ApprovalSubject) -> String {
    binding(
        "principal",
        json!({"principal": call.caller.principal, "tenant": call.caller.tenant}),
    )
}

/// The approval id of a handle (see the module doc).
fn approval_id(handle: &str) -> String {
    let mut h = Sha256::new();
    h.update(APPROVAL_DOMAIN.as_bytes());
    h.update(b":");
    h.update(handle.as_bytes());
    hex::encode(h.finalize())
}

/// The handle of a call with this expiry.
fn handle_of(call: &ApprovalSubject, expires_at: u64) -> String {
    format_handle(&call_binding(call), &principal_binding(call), expires_at)
}

/// The approval id of a call with this expiry (see the module doc for the exact input).
pub fn digest(call: &ApprovalSubject, expires_at: u64) -> String {
    approval_id(&handle_of(call, expires_at))
}

/// What an `approval_required` result carries: the handle to approve and the call it describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The approval id (what the ledger records the request under).
    pub digest: String,
    /// What the human approves with `toolhost approve HANDLE`:
    /// `"{call}.{principal}.{expires_at}"`.
    pub handle: String,
    pub tool: String,
    pub principal: String,
    pub tenant: String,
    pub run_id: String,
    /// Unix seconds; the approval is valid strictly before this instant.
    pub expires_at: u64,
}

impl ApprovalRequest {
    /// A model-safe message for the `approval_required` result.
    pub fn model_message(&self) -> String {
        format!(
            "this call needs a human approval; ask the operator to approve handle {} and \
             resubmit the same call with the approval token",
            self.handle
        )
    }
}

/// Describe a pending approval for `tool(args)` by `subject` in `run_id`, valid `ttl_secs` from `now`.
pub fn request(
    shown: (&str, &str, &str),
    args: &Value,
    subject: &Caller,
    run_id: &str,
    now: u64,
    ttl_secs: u64,
) -> ApprovalRequest {
    let call = ApprovalSubject::new(shown, args, subject, run_id);
    request_for(&call, now, ttl_secs)
}

/// [`request`] for a call already bound as an [`ApprovalSubject`].
fn request_for(call: &ApprovalSubject, now: u64, ttl_secs: u64) -> ApprovalRequest {
    let expires_at = now.saturating_add(ttl_secs).min(i64::MAX as u64);
    let handle = handle_of(call, expires_at);
    ApprovalRequest {
        digest: approval_id(&handle),
        handle,
        tool: call.tool.clone(),
        principal: call.caller.principal.clone(),
        tenant: call.caller.tenant.clone(),
        run_id: call.run_id.clone(),
        expires_at,
    }
}

fn format_handle(call: &str, principal: &str, expires_at: u64) -> String {
    format!("{call}.{principal}.{expires_at}")
}

/// Parse canonical decimal unix seconds (no sign, no leading zero, at most `i64::MAX`).
fn parse_expiry(s: &str) -> Result<u64, &'static str> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    let n: u64 = s
        .parse()
        .ok()
        .filter(|_| canonical)
        .ok_or("the expiry is not canonical decimal unix seconds")?;
    if n > i64::MAX as u64 {
        return Err("the expiry is out of range");
    }
    Ok(n)
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A handle's parts: call binding, principal binding, expiry.
struct Handle<'a> {
    call: &'a str,
    principal: &'a str,
    expires_at: u64,
}

/// Parse `"{call}.{principal}.{expires_at}"`, or say what is wrong with it.
fn split_handle(handle: &str) -> Result<Handle<'_>, &'static str> {
    let mut parts = handle.split('.');
    let (Some(call), Some(principal), Some(expiry), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("expected CALL.PRINCIPAL.EXPIRES_AT, as printed with approval_required");
    };
    if !is_lower_hex(call, 64) || !is_lower_hex(principal, 64) {
        return Err("each binding must be 64 lower-case hex characters");
    }
    Ok(Handle {
        call,
        principal,
        expires_at: parse_expiry(expiry)?,
    })
}

/// Whether `handle` was issued for a call of `tool` with this `definition` digest under the
/// rules of revision `policy`, with exactly `canonical_arguments` (RFC 8785) in `run_id` (its
/// call binding), so a human shown those arguments is shown what the token will run.
pub fn handle_binds_call(
    handle: &str,
    shown: (&str, &str, &str),
    canonical_arguments: &[u8],
    run_id: &str,
) -> bool {
    let Ok(h) = split_handle(handle.trim()) else {
        return false;
    };
    h.call == call_binding_of(shown, canonical_arguments, run_id)
}

/// A handle's approval id and expiry.
pub fn parse_handle(handle: &str) -> Result<(String, u64), PolicyError> {
    let handle = handle.trim();
    let h = split_handle(handle).map_err(|message| PolicyError::Handle {
        handle: shorten(handle),
        message: message.to_string(),
    })?;
    Ok((approval_id(handle), h.expires_at))
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Why a token did not approve a call (see the module doc for the order of the checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalFailure {
    /// Not a token this host minted and would accept: malformed, forged, altered, another
    /// key, or an expiry beyond the TTL. `reason` is for the operator.
    #[error("invalid approval token: {reason}")]
    Invalid { reason: String },
    /// A genuine token, minted for another principal or tenant.
    #[error("the approval token was minted for another principal or tenant")]
    WrongPrincipal,
    /// A genuine token for this caller, minted for another call (tool, arguments or run).
    #[error("the approval token was minted for another call (tool, arguments or run)")]
    Mismatch,
    /// A genuine token for this call, past its expiry.
    #[error("approval expired")]
    Expired,
    /// A genuine, unexpired token for this call, already used once.
    #[error("the approval token was already used")]
    Reused,
}

impl ApprovalFailure {
    /// The stable code of this failure.
    pub fn code(&self) -> Code {
        match self {
            ApprovalFailure::Invalid { .. } => Code::ApprovalInvalid,
            ApprovalFailure::WrongPrincipal => Code::ApprovalWrongPrincipal,
            ApprovalFailure::Mismatch => Code::ApprovalMismatch,
            ApprovalFailure::Expired => Code::ApprovalExpired,
            ApprovalFailure::Reused => Code::ApprovalReused,
        }
    }

    /// A fixed message per code, safe to show the model: what to do, never which part of a
    /// token or binding failed, nor any digest.
    pub fn message(&self) -> &'static str {
        match self {
            ApprovalFailure::Invalid { .. } => {
                "the approval token is not valid; a human must approve the call again"
            }
            ApprovalFailure::WrongPrincipal => {
                "the approval token was issued to another caller; it cannot approve this call"
            }
            ApprovalFailure::Mismatch => {
                "the approval token was issued for a different call; resubmit the approved call \
                 unchanged, or ask for a new approval"
            }
            ApprovalFailure::Expired => {
                "the approval for this call has expired; a new approval is needed"
            }
            ApprovalFailure::Reused => {
                "the approval token was already used; an approval runs one call once"
            }
        }
    }

    /// The result of `call` refused for this failure: its code and fixed message, no usage.
    pub fn refusal(&self, call: &ToolCall) -> ToolResult {
        ToolResult::failed(call, self.code(), self.message(), Usage::default())
    }

    fn invalid(reason: impl Into<String>) -> Self {
        ApprovalFailure::Invalid {
            reason: reason.into(),
        }
    }
}

type HmacSha256 = Hmac<Sha256>;

/// The host's approval secret and the longest lifetime it grants.
#[derive(Clone)]
pub struct ApprovalKey {
    key: [u8; KEY_LEN],
    ttl_secs: u64,
}

impl std::fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalKey")
            .field("key", &"<redacted>")
            .field("ttl_secs", &self.ttl_secs)
            .finish()
    }
}

impl ApprovalKey {
    /// Read the key file, creating it (0600, 32 random bytes) if missing. TTL: 900 s.
    pub fn load_or_create(path: &Path) -> Result<ApprovalKey, PolicyError> {
        Ok(ApprovalKey::from_bytes(keyfile::load_or_create(path)?))
    }

    /// A key from raw bytes (tests, or a key kept elsewhere). TTL: 900 s.
    pub fn from_bytes(key: [u8; KEY_LEN]) -> ApprovalKey {
        ApprovalKey {
            key,
            ttl_secs: DEFAULT_TTL_SECS,
        }
    }

    /// The same key granting approvals of at most `ttl_secs`.
    pub fn with_ttl(mut self, ttl_secs: u64) -> ApprovalKey {
        self.ttl_secs = ttl_secs;
        self
    }

    /// The longest lifetime this key grants, in seconds.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    /// [`request`] for this call: valid `ttl_secs` from `now`, capped at this key's TTL.
    pub fn request(&self, call: &ApprovalSubject, now: u64, ttl_secs: u64) -> ApprovalRequest {
        request_for(call, now, ttl_secs.min(self.ttl_secs))
    }

    fn mac(&self, handle: &str) -> HmacSha256 {
        let mut mac =
            HmacSha256::new_from_slice(&self.key).expect("HMAC-SHA256 takes a key of any length");
        mac.update(APPROVAL_DOMAIN.as_bytes());
        mac.update(b":");
        mac.update(handle.as_bytes());
        mac
    }

    /// A key for another purpose, derived from this one (HMAC-SHA256 of
    /// `"toolhost.derive:" + purpose`): every host sharing the approval key derives the same
    /// key, and no derived key tells anything about the approval key or another derived key.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        let mut mac =
            HmacSha256::new_from_slice(&self.key).expect("HMAC-SHA256 takes a key of any length");
        mac.update(b"toolhost.derive:");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Mint the token `"{handle}.{mac}"` for a handle at `now` (unix seconds). Refuses a
    /// handle already expired, or one expiring further out than this key's TTL (no call of this
    /// host asked for it).
    pub fn mint_at(&self, handle: &str, now: u64) -> Result<String, PolicyError> {
        let handle = handle.trim();
        let (_, expires_at) = parse_handle(handle)?;
        let bad = |message: String| PolicyError::Handle {
            handle: shorten(handle),
            message,
        };
        if expires_at <= now {
            return Err(bad(format!(
                "it expired {} s ago; resubmit the call to get a new handle",
                now - expires_at
            )));
        }
        if expires_at - now > self.ttl_secs.saturating_add(CLOCK_SKEW_SECS) {
            return Err(bad(format!(
                "it expires in {} s, beyond policy.approval.ttl_secs = {}; this host did not issue it",
                expires_at - now,
                self.ttl_secs
            )));
        }
        let mac = self.mac(handle).finalize().into_bytes();
        Ok(format!("{handle}.{}", hex::encode(mac)))
    }

    /// Check that `token` approves exactly `current` at `now`, then consume it.
    ///
    /// `consume(id, expires_at)` is called only for a genuine, unexpired token for this call,
    /// and must return true on the first use only (the ledger records it).
    pub fn verify(
        &self,
        token: &str,
        current: &ApprovalSubject,
        now: u64,
        consume: impl FnOnce(&str, i64) -> bool,
    ) -> Result<(), ApprovalFailure> {
        let token = token.trim();
        if split_handle(token).is_ok() {
            return Err(ApprovalFailure::invalid(
                "malformed token: this is an approval handle; approve it with `toolhost approve` \
                 and pass the token it prints",
            ));
        }
        let (handle, mac_hex) = token.rsplit_once('.').ok_or_else(|| {
            ApprovalFailure::invalid("malformed token: expected CALL.PRINCIPAL.EXPIRES_AT.MAC")
        })?;
        let h = split_handle(handle)
            .map_err(|why| ApprovalFailure::invalid(format!("malformed token: {why}")))?;
        if !is_lower_hex(mac_hex, 64) {
            return Err(ApprovalFailure::invalid(
                "malformed token: the MAC must be 64 lower-case hex characters",
            ));
        }
        let mac = hex::decode(mac_hex)
            .map_err(|_| ApprovalFailure::invalid("malformed token: the MAC is not hex"))?;
        self.mac(handle).verify_slice(&mac).map_err(|_| {
            ApprovalFailure::invalid(
                "the MAC does not verify: not minted with this host's key, or altered",
            )
        })?;
        // Genuine from here on: the bindings below are the ones a human approved.
        if h.principal != principal_binding(current) {
            return Err(ApprovalFailure::WrongPrincipal);
        }
        if h.call != call_binding(current) {
            return Err(ApprovalFailure::Mismatch);
        }
        let expires_at = h.expires_at;
        if now >= expires_at {
            return Err(ApprovalFailure::Expired);
        }
        if expires_at - now > self.ttl_secs.saturating_add(CLOCK_SKEW_SECS) {
            return Err(ApprovalFailure::invalid(format!(
                "the token expires in {} s, beyond policy.approval.ttl_secs = {}",
                expires_at - now,
                self.ttl_secs
            )));
        }
        let expires = i64::try_from(expires_at)
            .map_err(|_| ApprovalFailure::invalid("malformed token: the expiry is out of range"))?;
        if !consume(&approval_id(handle), expires) {
            return Err(ApprovalFailure::Reused);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashSet;

    const NOW: u64 = 1_700_000_000;
    /// A tool definition's digest.
    const DEF: &str = "sha256:0d";
    const POLICY: &str = "sha256:p0";
    const RUN: &str = "run-1";

    fn key() -> ApprovalKey {
        ApprovalKey::from_bytes([7u8; KEY_LEN])
    }

    fn args() -> Value {
        json!({"path": "projects/alice/old", "recursive": true})
    }

    fn alice() -> Caller {
        Caller::new("alice", "acme")
    }

    /// A set of consumed token ids standing in for the ledger.
    #[derive(Default)]
    struct Ledger(RefCell<HashSet<String>>);

    impl Ledger {
        fn consume(&self) -> impl FnOnce(&str, i64) -> bool + '_ {
            move |id, _| self.0.borrow_mut().insert(id.to_string())
        }
    }

    /// Alice's request to approve `delete_tree` with [`args`], asked at `NOW` for 900 s.
    fn alice_request() -> ApprovalRequest {
        request(
            ("delete_tree", DEF, POLICY),
            &args(),
            &alice(),
            RUN,
            NOW,
            900,
        )
    }

    fn token_for(k: &ApprovalKey) -> String {
        k.mint_at(&alice_request().handle, NOW + 10).unwrap()
    }

    /// The call binding written around canonical arguments is the canonical form of the whole
    /// binding document, so handles minted either way bind the same calls.
    #[test]
    fn the_call_binding_is_the_canonical_document() {
        for (tool, args, run) in [
            ("delete_tree", json!({"path": "a", "depth": 3}), "run-1"),
            (
                "t\u{2028}\"",
                json!({"é": [1.5, null, 9007199254740993u64]}),
                "",
            ),
        ] {
            let whole = binding(
                "call",
                json!({"tool": tool, "definition": DEF, "policy": POLICY, "arguments": args,
                    "run_id": run}),
            );
            assert_eq!(
                call_binding_of((tool, DEF, POLICY), &canonical_json(&args), run),
                whole
            );
        }
    }

    fn verify_err(k: &ApprovalKey, token: &str, call: &ApprovalSubject) -> ApprovalFailure {
        let ledger = Ledger::default();
        let err = k
            .verify(token, call, NOW + 20, ledger.consume())
            .unwrap_err();
        assert!(ledger.0.borrow().is_empty(), "consumed by a failure: {err}");
        err
    }

    /// The approval mode and risk decide whether a call needs an approval.
    #[test]
    fn needs_approval_defaults() {
        assert!(needs_approval(ApprovalMode::Default, Risk::Destructive));
        assert!(!needs_approval(ApprovalMode::Default, Risk::Write));
        assert!(needs_approval(ApprovalMode::Required, Risk::Read));
        assert!(!needs_approval(ApprovalMode::Never, Risk::Destructive));
        let m: ApprovalMode = serde_json::from_value(json!("never")).unwrap();
        assert_eq!(m, ApprovalMode::Never);
    }

    /// request -> mint -> verify succeeds once; the second use is approval_reused.
    #[test]
    fn round_trip_is_single_use() {
        let k = key();
        let req = alice_request();
        assert_eq!(req.expires_at, NOW + 900);
        let handle = req.handle;
        assert_eq!(
            parse_handle(&handle).unwrap(),
            (req.digest.clone(), req.expires_at)
        );
        let token = k.mint_at(&handle, NOW + 10).unwrap();
        assert!(token.starts_with(&format!("{handle}.")));
        let ledger = Ledger::default();
        let a = args();
        let s = alice();
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, RUN);
        assert_eq!(k.verify(&token, &call, NOW + 20, ledger.consume()), Ok(()));
        assert!(ledger.0.borrow().contains(&req.digest));
        let again = k
            .verify(&token, &call, NOW + 21, ledger.consume())
            .unwrap_err();
        assert_eq!(again, ApprovalFailure::Reused);
        assert_eq!(again.code(), Code::ApprovalReused);
    }

    /// A genuine token for another tool, tool definition, arguments or run is approval_mismatch; for another
    /// principal or tenant approval_wrong_principal; nothing is consumed either way.
    #[test]
    fn changed_call_or_caller_is_told_apart() {
        let k = key();
        let token = token_for(&k);
        let s = alice();
        let a = args();
        let changed_args = json!({"path": "projects/alice/old", "recursive": false});
        let bob = Caller::new("bob", "acme");
        let other_tenant = Caller::new("alice", "globex");
        let cases = [
            (
                ApprovalSubject::new(("delete_file", DEF, POLICY), &a, &s, RUN),
                Code::ApprovalMismatch,
            ),
            (
                ApprovalSubject::new(("delete_tree", DEF, POLICY), &changed_args, &s, RUN),
                Code::ApprovalMismatch,
            ),
            (
                ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, "run-2"),
                Code::ApprovalMismatch,
            ),
            // The same tool name, replaced or changed since the token was minted.
            (
                ApprovalSubject::new(("delete_tree", "sha256:0e", POLICY), &a, &s, RUN),
                Code::ApprovalMismatch,
            ),
            // The same call under rules changed since the token was minted.
            (
                ApprovalSubject::new(("delete_tree", DEF, "sha256:p1"), &a, &s, RUN),
                Code::ApprovalMismatch,
            ),
            (
                ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &bob, RUN),
                Code::ApprovalWrongPrincipal,
            ),
            (
                ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &other_tenant, RUN),
                Code::ApprovalWrongPrincipal,
            ),
            (
                ApprovalSubject::new(("delete_file", DEF, POLICY), &changed_args, &bob, RUN),
                Code::ApprovalWrongPrincipal,
            ),
        ];
        for (call, code) in cases {
            assert_eq!(verify_err(&k, &token, &call).code(), code, "{call:?}");
        }
        // The unchanged call still verifies (reordered keys are the same canonical arguments).
        let reordered = json!({"recursive": true, "path": "projects/alice/old"});
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &reordered, &s, RUN);
        assert_eq!(
            k.verify(&token, &call, NOW + 20, Ledger::default().consume()),
            Ok(())
        );
    }

    /// A genuine token past its expiry is approval_expired, and is not consumed.
    #[test]
    fn expired_token() {
        let k = key();
        let token = token_for(&k);
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, RUN);
        let ledger = Ledger::default();
        let err = k
            .verify(&token, &call, NOW + 900, ledger.consume())
            .unwrap_err();
        assert_eq!(err, ApprovalFailure::Expired);
        assert_eq!(err.code(), Code::ApprovalExpired);
        assert!(ledger.0.borrow().is_empty());
    }

    /// Tampering with the MAC, a binding or the expiry, passing the handle, or a malformed
    /// token is approval_invalid — even when the forged bindings name another principal or
    /// call: only a genuine token is told apart.
    #[test]
    fn forged_or_malformed_token_is_invalid() {
        let k = key();
        let token = token_for(&k);
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, RUN);
        let (handle, mac) = token.rsplit_once('.').unwrap();
        let flip = |h: &str| format!("{}{}", if h.starts_with('0') { '1' } else { '0' }, &h[1..]);
        let parts: Vec<&str> = handle.split('.').collect();
        let bob = ApprovalSubject::new(
            ("delete_tree", DEF, POLICY),
            &a,
            &Caller::new("bob", "acme"),
            RUN,
        );
        let forged_principal = format!(
            "{}.{}.{}.{mac}",
            parts[0],
            principal_binding(&bob),
            parts[2]
        );
        let forged_call = format!("{}.{}.{}.{mac}", flip(parts[0]), parts[1], parts[2]);
        let later = format!("{}.{}.{}.{mac}", parts[0], parts[1], NOW + 899);
        let req = request(("delete_tree", DEF, POLICY), &a, &s, RUN, NOW, 900);
        for bad in [
            format!("{handle}.{}", flip(mac)),
            forged_principal,
            forged_call,
            later,
            format!("0{token}"),
            format!("{token}.00"),
            token.to_uppercase(),
            req.handle,
            String::new(),
            "x.y".into(),
            "123.abc".into(),
        ] {
            let err = verify_err(&k, &bad, &call);
            assert_eq!(err.code(), Code::ApprovalInvalid, "{bad}: {err}");
        }
        // Model-facing messages say nothing about the reason, and name no digest.
        let err = verify_err(&k, "x.y", &call);
        assert!(!err.message().contains("malformed") && !err.message().contains("MAC"));
    }

    /// A token minted with another key is approval_invalid.
    #[test]
    fn other_key_is_invalid() {
        let token = token_for(&ApprovalKey::from_bytes([8u8; KEY_LEN]));
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, RUN);
        assert_eq!(
            verify_err(&key(), &token, &call).code(),
            Code::ApprovalInvalid
        );
    }

    /// A genuine token expiring beyond this key's TTL (the TTL was lowered) is approval_invalid.
    #[test]
    fn expiry_beyond_the_ttl_is_invalid() {
        let token = token_for(&key());
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new(("delete_tree", DEF, POLICY), &a, &s, RUN);
        let short = key().with_ttl(10);
        assert_eq!(
            verify_err(&short, &token, &call).code(),
            Code::ApprovalInvalid
        );
    }

    /// Every failure has its own code and its own model message, none of them a digest.
    #[test]
    fn failures_have_distinct_codes_and_messages() {
        let all = [
            ApprovalFailure::invalid("x"),
            ApprovalFailure::WrongPrincipal,
            ApprovalFailure::Mismatch,
            ApprovalFailure::Expired,
            ApprovalFailure::Reused,
        ];
        let codes: HashSet<Code> = all.iter().map(ApprovalFailure::code).collect();
        let messages: HashSet<&str> = all.iter().map(ApprovalFailure::message).collect();
        assert_eq!((codes.len(), messages.len()), (all.len(), all.len()));
        assert!(!codes.contains(&Code::ApprovalDenied));
        let digest = request(("t", DEF, POLICY), &json!({}), &alice(), RUN, NOW, 9).digest;
        assert!(messages.iter().all(|m| !m.contains(&digest[..8])));
    }

    /// Minting refuses malformed, expired and too-far-future handles.
    #[test]
    fn mint_checks_the_handle() {
        let k = key();
        let req = request(
            ("delete_tree", DEF, POLICY),
            &args(),
            &alice(),
            RUN,
            NOW,
            900,
        );
        assert!(k.mint_at(&req.handle, NOW + 900).is_err(), "expired");
        let (bindings, _) = req.handle.rsplit_once('.').unwrap();
        let far = format!("{bindings}.{}", NOW + 10_000);
        let e = k.mint_at(&far, NOW).unwrap_err().to_string();
        assert!(e.contains("ttl_secs"), "{e}");
        for bad in [
            "",
            "abc",
            &req.digest,
            &format!("{}.{}", req.digest, NOW + 10),
            &format!("{bindings}.-1"),
            &format!("{bindings}.0900"),
            &format!("{}.{}", req.handle, NOW + 10),
        ] {
            assert!(k.mint_at(bad, NOW).is_err(), "{bad}");
        }
        assert!(format!("{k:?}").contains("redacted"));
    }

    /// The bindings and the id are pinned: their canonical inputs and hashes do not drift.
    #[test]
    fn digest_is_stable() {
        let a = json!({"b": 1.0, "a": "x"});
        let s = Caller::new("p", "t");
        let call = ApprovalSubject::new(("tool", DEF, POLICY), &a, &s, "r");
        let call_input = br#"{"arguments":{"a":"x","b":1},"definition":"sha256:0d","domain":"toolhost.approval.v4","part":"call","policy":"sha256:p0","run_id":"r","tool":"tool"}"#;
        let principal_input =
            br#"{"domain":"toolhost.approval.v4","part":"principal","principal":"p","tenant":"t"}"#;
        let handle = format!(
            "{}.{}.5",
            hex::encode(Sha256::digest(call_input)),
            hex::encode(Sha256::digest(principal_input))
        );
        assert_eq!(
            request(("tool", DEF, POLICY), &a, &s, "r", 0, 5).handle,
            handle
        );
        let id_input = format!("toolhost.approval.v4:{handle}");
        assert_eq!(
            digest(&call, 5),
            hex::encode(Sha256::digest(id_input.as_bytes()))
        );
    }

    /// Derived keys are the same for the same key and purpose, and differ across purposes and
    /// keys (and from the key itself).
    #[test]
    fn derived_keys_separate_purposes() {
        let k = key();
        assert_eq!(k.derive("a"), k.derive("a"));
        assert_ne!(k.derive("a"), k.derive("b"));
        assert_ne!(
            k.derive("a"),
            ApprovalKey::from_bytes([9; KEY_LEN]).derive("a")
        );
        assert_ne!(k.derive("a").to_vec(), k.key.to_vec());
    }
}
