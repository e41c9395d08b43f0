//! Target `approval`: approval handles and tokens, which arrive as untrusted strings (a token
//! in a model's resubmitted call or an MCP `_meta` field, a handle pasted by a human).
//!
//! Input: UTF-8 text; its first line is the string under test (as a handle, then as a token),
//! the rest is the approved call's arguments (JSON, or else taken as a string). Invariants,
//! beyond "no panic":
//!
//! - a handle that parses yields a 64-hex approval id and the expiry it ends with;
//! - the key mints only for a handle that parses, is unexpired and within the TTL; the token is
//!   the trimmed handle and a 64-hex MAC, and the key never calls its own token invalid;
//! - only the key's own token gets past `approval_invalid`: a token that verifies, or fails as
//!   wrong principal, mismatch or expired, is exactly what the key mints for its handle — a
//!   forgery is always `approval_invalid`; a token that verifies consumed the call's own
//!   approval id once, and fails for another key and another principal; one that does not
//!   verify consumed nothing;
//! - the genuine token for the call verifies once, then is `approval_reused`; it is
//!   `approval_expired` at its expiry, `approval_wrong_principal` for another principal,
//!   `approval_mismatch` for another call, `approval_invalid` under another key, and the
//!   handle itself is no token.

use serde_json::Value;
use toolhost::contract::Caller;
use toolhost_policy::{
    digest, parse_handle, ApprovalFailure, ApprovalKey, ApprovalSubject, CLOCK_SKEW_SECS, KEY_LEN,
};

/// The clock every check runs at (unix seconds).
const NOW: u64 = 1_767_225_600;

fn key() -> ApprovalKey {
    ApprovalKey::from_bytes([0x5a; KEY_LEN])
}

fn other_key() -> ApprovalKey {
    ApprovalKey::from_bytes([0xa5; KEY_LEN])
}

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (candidate, rest) = text.split_once('\n').unwrap_or((text, ""));
    let arguments =
        serde_json::from_str::<Value>(rest).unwrap_or_else(|_| Value::String(rest.to_string()));
    let call = ApprovalSubject::new(
        ("delete_file", "sha256:0d", "sha256:p0"),
        &arguments,
        &Caller::new("alice", "acme"),
        "run-1",
    );
    as_handle(candidate, &call);
    as_token(candidate, &call);
    genuine(&call, 1 + data.len() as u64 % 1800);
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Verify `token` for `call` at `now` under `key`; the (id, expiry) pairs the single-use
/// callback saw, which answers `fresh`.
fn verify(
    key: &ApprovalKey,
    token: &str,
    call: &ApprovalSubject,
    now: u64,
    fresh: bool,
) -> (Result<(), ApprovalFailure>, Vec<(String, i64)>) {
    let mut seen = Vec::new();
    let result = key.verify(token, call, now, |id, e| {
        seen.push((id.to_string(), e));
        fresh
    });
    (result, seen)
}

fn invalid(r: &Result<(), ApprovalFailure>) -> bool {
    matches!(r, Err(ApprovalFailure::Invalid { .. }))
}

fn another_principal(call: &ApprovalSubject) -> ApprovalSubject {
    let principal = format!("{}-not", call.caller.principal);
    ApprovalSubject {
        caller: Caller::new(principal, call.caller.tenant.clone()),
        ..call.clone()
    }
}

fn as_handle(s: &str, call: &ApprovalSubject) {
    let parsed = parse_handle(s);
    if let Ok((id, expires_at)) = &parsed {
        assert!(is_lower_hex(id, 64), "approval id {id:?}");
        assert!(*expires_at <= i64::MAX as u64, "expiry {expires_at}");
        assert!(
            s.trim().ends_with(&format!(".{expires_at}")),
            "expiry of {s:?}"
        );
    }
    let k = key();
    let Ok(token) = k.mint_at(s, NOW) else {
        return;
    };
    let (_, expires_at) = parsed.expect("only a handle that parses is minted");
    assert!(expires_at > NOW, "minted an expired handle");
    assert!(
        expires_at - NOW <= k.ttl_secs() + CLOCK_SKEW_SECS,
        "minted beyond the TTL"
    );
    let (handle, mac) = token.rsplit_once('.').expect("HANDLE.MAC");
    assert_eq!(handle, s.trim(), "the token names its handle");
    assert!(is_lower_hex(mac, 64), "token {token:?}");
    let (result, _) = verify(&k, &token, call, NOW, true);
    assert!(
        !invalid(&result),
        "the key refuses its own token: {result:?}"
    );
}

fn as_token(token: &str, call: &ApprovalSubject) {
    let k = key();
    let (result, seen) = verify(&k, token, call, NOW, true);
    assert!(
        !matches!(result, Err(ApprovalFailure::Reused)),
        "reused, though never consumed"
    );
    if result.is_err() {
        assert!(seen.is_empty(), "a refused token was consumed");
    }
    if invalid(&result) {
        return;
    }
    // Past the MAC: the token must be exactly what this key mints for its own handle.
    let (handle, _) = token.trim().rsplit_once('.').expect("HANDLE.MAC");
    let (_, expires_at) = parse_handle(handle).expect("its handle parses");
    let minted = k
        .mint_at(handle, expires_at - 1)
        .expect("the key mints its own handle");
    assert_eq!(
        token.trim(),
        minted,
        "a forged token got past the MAC: {result:?}"
    );
    if result.is_err() {
        return;
    }
    assert_eq!(seen.len(), 1, "a verified token is consumed exactly once");
    let (id, e) = &seen[0];
    assert_eq!(*e, expires_at as i64);
    assert_eq!(id, &digest(call, expires_at), "consumed another call's id");
    assert!(invalid(&verify(&other_key(), token, call, NOW, true).0));
    assert_eq!(
        verify(&k, token, &another_principal(call), NOW, true).0,
        Err(ApprovalFailure::WrongPrincipal)
    );
}

fn genuine(call: &ApprovalSubject, ttl: u64) {
    let k = key();
    let req = k.request(call, NOW, ttl);
    assert_eq!(req.digest, digest(call, req.expires_at));
    assert_eq!(
        parse_handle(&req.handle).expect("a request's handle parses"),
        (req.digest.clone(), req.expires_at)
    );
    let token = k.mint_at(&req.handle, NOW).expect("a fresh handle mints");
    let (result, seen) = verify(&k, &token, call, NOW, true);
    assert_eq!(result, Ok(()), "the genuine token");
    assert_eq!(seen, vec![(req.digest.clone(), req.expires_at as i64)]);
    assert_eq!(
        verify(&k, &token, call, NOW, false).0,
        Err(ApprovalFailure::Reused)
    );
    assert_eq!(
        verify(&k, &token, call, req.expires_at, true).0,
        Err(ApprovalFailure::Expired)
    );
    assert_eq!(
        verify(&k, &token, &another_principal(call), NOW, true).0,
        Err(ApprovalFailure::WrongPrincipal)
    );
    let another_call = ApprovalSubject {
        tool: format!("{}_2", call.tool),
        ..call.clone()
    };
    assert_eq!(
        verify(&k, &token, &another_call, NOW, true).0,
        Err(ApprovalFailure::Mismatch)
    );
    assert!(invalid(&verify(&other_key(), &token, call, NOW, true).0));
    assert!(invalid(&verify(&k, &req.handle, call, NOW, true).0));
}
