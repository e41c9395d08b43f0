//! Human approval of high-impact calls: digests, handles, tokens.
//!
//! # Flow
//!
//! 1. A call needs approval ([`needs_approval`]) and carries no token. The host answers
//!    `approval_required` with an [`ApprovalRequest`]; its *handle* goes to the human.
//! 2. The human runs `toolhost approve HANDLE`; [`ApprovalKey::mint`] returns a *token*. Only the
//!    host key is needed — no pending-request store.
//! 3. The call is resubmitted with the token. [`ApprovalKey::verify`] recomputes the digest from
//!    the *current* call and the expiry inside the token, checks the MAC in constant time, then
//!    the expiry, then single use through the ledger's `consume` callback.
//!
//! # Formats
//!
//! - **digest**: lower-case hex SHA-256 of [`canonical_json`] of the object
//!   `{"domain": "toolhost.approval.v1", "tool", "arguments", "principal", "tenant", "run_id",
//!   "expires_at"}` — `arguments` is the validated input as a JSON value (canonicalized with
//!   everything else), `expires_at` is unix seconds.
//! - **handle** (what the human approves, not secret): `"{digest}.{expires_at}"`, e.g.
//!   `9f2c…64 hex….1767225600`.
//! - **token** (what the call carries): `"{expires_at}.{mac}"`, where `mac` is lower-case hex
//!   HMAC-SHA256 under the host key of `"toolhost.approval.v1:" + handle`. Without the key a token
//!   cannot be derived from a handle, and a token names no call: it verifies only against the
//!   call whose digest it was minted for.
//!
//! `expires_at` is canonical decimal (no sign, no leading zeros) and at most `i64::MAX`. The token
//! id passed to `consume` is the digest, which is unique per approved call and expiry.
//!
//! Whatever changes — a tool, an argument, the principal, the tenant, the run, or the expiry
//! written in the token — changes the digest, so the MAC no longer verifies: `approval_denied`.
//! A genuine token past its expiry is `approval_expired`; a second use is `approval_denied`.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::canonical::canonical_json;
use super::config::DEFAULT_TTL_SECS;
use super::keyfile::{self, KEY_LEN};
use super::{PolicyError, Subject};
use crate::contract::Code;
use crate::registry::config::Risk;

/// Domain separation for approval digests and MACs.
pub const APPROVAL_DOMAIN: &str = "toolhost.approval.v1";

/// Clock difference tolerated between the host that asked and the one that mints or verifies,
/// when refusing expiries further out than the TTL. Expiry itself is never stretched.
pub const CLOCK_SKEW_SECS: u64 = 60;

/// Whether a tool's calls need a human approval (per-tool `approval = "…"` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Every call needs an approval.
    Required,
    /// No call needs an approval, even for a `destructive` tool.
    Never,
    /// Only calls of `destructive` tools need an approval.
    #[default]
    Default,
}

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
    /// The validated arguments.
    pub arguments: Value,
    /// From the trusted run context, never from the arguments.
    pub principal: String,
    pub tenant: String,
    pub run_id: String,
}

impl ApprovalSubject {
    pub fn new(tool: &str, arguments: &Value, subject: &Subject, run_id: &str) -> Self {
        ApprovalSubject {
            tool: tool.to_string(),
            arguments: arguments.clone(),
            principal: subject.principal.clone(),
            tenant: subject.tenant.clone(),
            run_id: run_id.to_string(),
        }
    }
}

/// The approval digest of a call with this expiry (see the module doc for the exact input).
pub fn digest(call: &ApprovalSubject, expires_at: u64) -> String {
    let doc = json!({
        "domain": APPROVAL_DOMAIN,
        "tool": call.tool,
        "arguments": call.arguments,
        "principal": call.principal,
        "tenant": call.tenant,
        "run_id": call.run_id,
        "expires_at": expires_at,
    });
    hex::encode(Sha256::digest(canonical_json(&doc)))
}

/// What an `approval_required` result carries: the handle to approve and the call it describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub digest: String,
    /// What the human approves with `toolhost approve HANDLE`: `"{digest}.{expires_at}"`.
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
    tool: &str,
    args: &Value,
    subject: &Subject,
    run_id: &str,
    now: u64,
    ttl_secs: u64,
) -> ApprovalRequest {
    let expires_at = now.saturating_add(ttl_secs).min(i64::MAX as u64);
    let call = ApprovalSubject::new(tool, args, subject, run_id);
    let digest = digest(&call, expires_at);
    ApprovalRequest {
        handle: format_handle(&digest, expires_at),
        digest,
        tool: tool.to_string(),
        principal: subject.principal.clone(),
        tenant: subject.tenant.clone(),
        run_id: run_id.to_string(),
        expires_at,
    }
}

fn format_handle(digest: &str, expires_at: u64) -> String {
    format!("{digest}.{expires_at}")
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

/// Split a handle into digest and expiry.
pub fn parse_handle(handle: &str) -> Result<(String, u64), PolicyError> {
    let bad = |message: &str| PolicyError::Handle {
        handle: shorten(handle),
        message: message.to_string(),
    };
    let (digest, expiry) = handle
        .trim()
        .split_once('.')
        .ok_or_else(|| bad("expected DIGEST.EXPIRES_AT, as printed with approval_required"))?;
    if !is_lower_hex(digest, 64) {
        return Err(bad("the digest must be 64 lower-case hex characters"));
    }
    let expires_at = parse_expiry(expiry).map_err(bad)?;
    Ok((digest.to_string(), expires_at))
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Why a token did not approve a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalFailure {
    /// Malformed, forged, minted for another call or key, too far in the future, or reused.
    #[error("approval denied: {reason}")]
    Denied { reason: String },
    /// A genuine token for this call, past its expiry.
    #[error("approval expired")]
    Expired,
}

impl ApprovalFailure {
    /// `approval_denied` or `approval_expired`.
    pub fn code(&self) -> Code {
        match self {
            ApprovalFailure::Denied { .. } => Code::ApprovalDenied,
            ApprovalFailure::Expired => Code::ApprovalExpired,
        }
    }

    /// A message safe to show the model.
    pub fn message(&self) -> &'static str {
        match self {
            ApprovalFailure::Denied { .. } => "the approval token is not valid for this call",
            ApprovalFailure::Expired => {
                "the approval for this call has expired; a new approval is needed"
            }
        }
    }

    fn denied(reason: impl Into<String>) -> Self {
        ApprovalFailure::Denied {
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
        let subject = Subject::new(call.principal.as_str(), call.tenant.as_str());
        let ttl_secs = ttl_secs.min(self.ttl_secs);
        request(
            &call.tool,
            &call.arguments,
            &subject,
            &call.run_id,
            now,
            ttl_secs,
        )
    }

    fn mac(&self, handle: &str) -> HmacSha256 {
        let mut mac =
            HmacSha256::new_from_slice(&self.key).expect("HMAC-SHA256 takes a key of any length");
        mac.update(APPROVAL_DOMAIN.as_bytes());
        mac.update(b":");
        mac.update(handle.as_bytes());
        mac
    }

    /// Mint the token for a handle, against the system clock (see [`ApprovalKey::mint_at`]).
    pub fn mint(&self, handle: &str) -> Result<String, PolicyError> {
        self.mint_at(handle, unix_now())
    }

    /// Mint the token `"{expires_at}.{mac}"` for a handle at `now` (unix seconds). Refuses a
    /// handle already expired, or one expiring further out than this key's TTL (no call of this
    /// host asked for it).
    pub fn mint_at(&self, handle: &str, now: u64) -> Result<String, PolicyError> {
        let (digest, expires_at) = parse_handle(handle)?;
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
        let mac = self
            .mac(&format_handle(&digest, expires_at))
            .finalize()
            .into_bytes();
        Ok(format!("{expires_at}.{}", hex::encode(mac)))
    }

    /// Check that `token` approves exactly `current` at `now`, then consume it.
    ///
    /// `consume(digest, expires_at)` is called only for a genuine, unexpired token, and must
    /// return true on the first use only (the ledger records it).
    pub fn verify(
        &self,
        token: &str,
        current: &ApprovalSubject,
        now: u64,
        consume: impl FnOnce(&str, i64) -> bool,
    ) -> Result<(), ApprovalFailure> {
        if parse_handle(token).is_ok() {
            return Err(ApprovalFailure::denied(
                "malformed token: this is an approval handle; approve it with `toolhost approve` \
                 and pass the token it prints",
            ));
        }
        let (expiry, mac_hex) = token
            .trim()
            .split_once('.')
            .ok_or_else(|| ApprovalFailure::denied("malformed token: expected EXPIRES_AT.MAC"))?;
        let expires_at = parse_expiry(expiry)
            .map_err(|why| ApprovalFailure::denied(format!("malformed token: {why}")))?;
        if !is_lower_hex(mac_hex, 64) {
            return Err(ApprovalFailure::denied(
                "malformed token: the MAC must be 64 lower-case hex characters",
            ));
        }
        let mac = hex::decode(mac_hex)
            .map_err(|_| ApprovalFailure::denied("malformed token: the MAC is not hex"))?;
        let digest = digest(current, expires_at);
        self.mac(&format_handle(&digest, expires_at))
            .verify_slice(&mac)
            .map_err(|_| {
                ApprovalFailure::denied(
                    "the token was not minted for this call (tool, arguments, principal, tenant, \
                     run or expiry differ) or not with this host's key",
                )
            })?;
        if now >= expires_at {
            return Err(ApprovalFailure::Expired);
        }
        if expires_at - now > self.ttl_secs.saturating_add(CLOCK_SKEW_SECS) {
            return Err(ApprovalFailure::denied(format!(
                "the token expires in {} s, beyond policy.approval.ttl_secs = {}",
                expires_at - now,
                self.ttl_secs
            )));
        }
        let expires = i64::try_from(expires_at)
            .map_err(|_| ApprovalFailure::denied("malformed token: the expiry is out of range"))?;
        if !consume(&digest, expires) {
            return Err(ApprovalFailure::denied("the token was already used"));
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashSet;

    const NOW: u64 = 1_700_000_000;
    const RUN: &str = "run-1";

    fn key() -> ApprovalKey {
        ApprovalKey::from_bytes([7u8; KEY_LEN])
    }

    fn args() -> Value {
        json!({"path": "projects/alice/old", "recursive": true})
    }

    fn alice() -> Subject {
        Subject::new("alice", "acme")
    }

    /// A set of consumed token ids standing in for the ledger.
    #[derive(Default)]
    struct Ledger(RefCell<HashSet<String>>);

    impl Ledger {
        fn consume(&self) -> impl FnOnce(&str, i64) -> bool + '_ {
            move |id, _| self.0.borrow_mut().insert(id.to_string())
        }
    }

    fn token_for(k: &ApprovalKey) -> String {
        let req = request("delete_tree", &args(), &alice(), RUN, NOW, 900);
        k.mint_at(&req.handle, NOW + 10).unwrap()
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

    /// request -> mint -> verify succeeds once; the second use is denied via consume.
    #[test]
    fn round_trip_is_single_use() {
        let k = key();
        let req = request("delete_tree", &args(), &alice(), RUN, NOW, 900);
        assert_eq!(req.expires_at, NOW + 900);
        let handle = req.handle;
        assert_eq!(
            parse_handle(&handle).unwrap(),
            (req.digest.clone(), req.expires_at)
        );
        let token = k.mint_at(&handle, NOW + 10).unwrap();
        assert!(
            !token.contains(&req.digest),
            "a token does not carry the digest"
        );
        let ledger = Ledger::default();
        let a = args();
        let s = alice();
        let call = ApprovalSubject::new("delete_tree", &a, &s, RUN);
        assert_eq!(k.verify(&token, &call, NOW + 20, ledger.consume()), Ok(()));
        assert!(ledger.0.borrow().contains(&req.digest));
        let again = k
            .verify(&token, &call, NOW + 21, ledger.consume())
            .unwrap_err();
        assert_eq!(again.code(), Code::ApprovalDenied);
        assert!(again.to_string().contains("already used"));
    }

    /// Any change to tool, argument, principal, tenant or run denies the token.
    #[test]
    fn changed_call_is_denied() {
        let k = key();
        let token = token_for(&k);
        let s = alice();
        let a = args();
        let changed_args = json!({"path": "projects/alice/old", "recursive": false});
        let bob = Subject::new("bob", "acme");
        let other_tenant = Subject::new("alice", "globex");
        let cases = [
            ApprovalSubject::new("delete_file", &a, &s, RUN),
            ApprovalSubject::new("delete_tree", &changed_args, &s, RUN),
            ApprovalSubject::new("delete_tree", &a, &bob, RUN),
            ApprovalSubject::new("delete_tree", &a, &other_tenant, RUN),
            ApprovalSubject::new("delete_tree", &a, &s, "run-2"),
        ];
        for call in cases {
            let ledger = Ledger::default();
            let err = k
                .verify(&token, &call, NOW + 20, ledger.consume())
                .unwrap_err();
            assert_eq!(err.code(), Code::ApprovalDenied, "{call:?}");
            assert!(
                ledger.0.borrow().is_empty(),
                "nothing consumed for {call:?}"
            );
        }
        // The unchanged call still verifies (reordered keys are the same canonical arguments).
        let reordered = json!({"recursive": true, "path": "projects/alice/old"});
        let call = ApprovalSubject::new("delete_tree", &reordered, &s, RUN);
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
        let call = ApprovalSubject::new("delete_tree", &a, &s, RUN);
        let ledger = Ledger::default();
        let err = k
            .verify(&token, &call, NOW + 900, ledger.consume())
            .unwrap_err();
        assert_eq!(err, ApprovalFailure::Expired);
        assert_eq!(err.code(), Code::ApprovalExpired);
        assert!(ledger.0.borrow().is_empty());
    }

    /// Tampering with the MAC or the expiry, or passing the handle, denies the call.
    #[test]
    fn tampered_token_is_denied() {
        let k = key();
        let token = token_for(&k);
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new("delete_tree", &a, &s, RUN);
        let (expiry, mac) = token.split_once('.').unwrap();
        let flipped = format!(
            "{expiry}.{}{}",
            if mac.starts_with('0') { '1' } else { '0' },
            &mac[1..]
        );
        let later = format!("{}.{mac}", NOW + 899);
        let padded = format!("0{token}");
        let req = request("delete_tree", &a, &s, RUN, NOW, 900);
        for bad in [
            flipped,
            later,
            padded,
            req.handle,
            String::new(),
            "x.y".into(),
        ] {
            let err = k
                .verify(&bad, &call, NOW + 20, Ledger::default().consume())
                .unwrap_err();
            assert_eq!(err.code(), Code::ApprovalDenied, "{bad}");
        }
        // Model-facing messages say nothing about the reason.
        let err = k
            .verify("x.y", &call, NOW, Ledger::default().consume())
            .unwrap_err();
        assert!(!err.message().contains("malformed"));
    }

    /// A token minted with another key is denied.
    #[test]
    fn other_key_is_denied() {
        let token = token_for(&ApprovalKey::from_bytes([8u8; KEY_LEN]));
        let (a, s) = (args(), alice());
        let call = ApprovalSubject::new("delete_tree", &a, &s, RUN);
        let err = key()
            .verify(&token, &call, NOW + 20, Ledger::default().consume())
            .unwrap_err();
        assert_eq!(err.code(), Code::ApprovalDenied);
    }

    /// Minting refuses malformed, expired and too-far-future handles.
    #[test]
    fn mint_checks_the_handle() {
        let k = key();
        let req = request("delete_tree", &args(), &alice(), RUN, NOW, 900);
        assert!(k.mint_at(&req.handle, NOW + 900).is_err(), "expired");
        let far = format!("{}.{}", req.digest, NOW + 10_000);
        let e = k.mint_at(&far, NOW).unwrap_err().to_string();
        assert!(e.contains("ttl_secs"), "{e}");
        for bad in [
            "",
            "abc",
            &req.digest,
            &format!("{}.-1", req.digest),
            &format!("{}.0900", req.digest),
        ] {
            assert!(k.mint_at(bad, NOW).is_err(), "{bad}");
        }
        assert!(format!("{k:?}").contains("redacted"));
    }

    /// The digest is pinned: the canonical input and its hash do not drift between releases.
    #[test]
    fn digest_is_stable() {
        let a = json!({"b": 1.0, "a": "x"});
        let s = Subject::new("p", "t");
        let call = ApprovalSubject::new("tool", &a, &s, "r");
        let expected_input = br#"{"arguments":{"a":"x","b":1},"domain":"toolhost.approval.v1","expires_at":5,"principal":"p","run_id":"r","tenant":"t","tool":"tool"}"#;
        assert_eq!(
            digest(&call, 5),
            hex::encode(Sha256::digest(expected_input))
        );
    }
}
