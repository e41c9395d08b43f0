//! Signed receipts: one call's record as a self-contained statement, signed with the host's
//! receipt key (`receipt_key.rs` has the key and the envelope), checked offline with the public
//! key alone (`toolhost receipt verify`).
//!
//! The statement is an in-toto Statement v1 (`docs/ledger-chain.md` says why): its subjects are
//! the call's arguments and output by digest; its predicate (`https://toolhost.dev/receipt/v1`)
//! is the call's tool and definition digest, its caller's tag, every decision in order, its
//! outcome, the approval it ran under, its reconciliation, and the position and hash of each
//! chain link that recorded it. A receipt is signed only for a finished call whose record still
//! matches its chain.

use serde_json::{json, Value};

use super::chain::{self, Link};
use super::events::CallRecord;
use super::receipt_key::{ReceiptError, ReceiptKey};
use super::{Ledger, LedgerError};

/// The statement type of in-toto v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// The predicate type of a toolhost receipt.
pub const PREDICATE_TYPE: &str = "https://toolhost.dev/receipt/v1";

impl Ledger {
    /// The signed receipt of call `call_id` of run `run_id`, issued at `now_ms`.
    pub fn receipt(
        &self,
        run_id: &str,
        call_id: &str,
        key: &ReceiptKey,
        now_ms: i64,
    ) -> Result<super::receipt_key::Envelope, ReceiptError> {
        let record = self
            .store
            .call(run_id, call_id)?
            .ok_or_else(|| LedgerError::unknown(run_id, call_id))?;
        if record.status.is_none() {
            return Err(ReceiptError::NotFinished {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
            });
        }
        let evidence = self.store.chain_of_call(run_id, call_id)?;
        let report = chain::verify_call(&evidence);
        if !report.intact() {
            let findings: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
            return Err(ReceiptError::Tampered {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
                findings: findings.join("; "),
            });
        }
        let statement = statement(&record, &evidence.links, now_ms);
        let bytes = serde_json::to_vec(&statement).map_err(LedgerError::from)?;
        Ok(key.seal(&bytes))
    }
}

/// The statement of `record`, recorded by `links`.
fn statement(record: &CallRecord, links: &[Link], now_ms: i64) -> Value {
    let (args_sha256, caller_tag) = match record.args_digest.split_once('|') {
        Some((digest, tag)) => (digest, Some(tag)),
        None => (record.args_digest.as_str(), None),
    };
    let subject_name = |what: &str| format!("toolhost:{}/{}/{what}", record.run_id, record.call_id);
    let mut subject = vec![json!({
        "name": subject_name("arguments"),
        "digest": {"sha256": args_sha256},
    })];
    if let Some(output) = &record.output_digest {
        subject.push(json!({"name": subject_name("output"), "digest": {"sha256": output}}));
    }
    let mut ordered: Vec<&Link> = links.iter().collect();
    ordered.sort_by_key(|l| (l.at_ms, l.chain.as_str(), l.seq));
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "run_id": record.run_id,
            "call_id": record.call_id,
            "tool": record.tool,
            "definition_digest": record.definition_digest,
            "component_digest": record.component_digest,
            "arguments": {"sha256": args_sha256, "size": record.args_size},
            "caller": {"tag": caller_tag},
            "decisions": record.events,
            "outcome": {
                "status": record.status,
                "code": record.code,
                "message": record.message,
                "output": record.output_digest.as_ref().map(|d| json!({
                    "sha256": d, "size": record.output_size,
                })),
                "admitted_at_ms": record.admitted_at_ms,
                "finished_at_ms": record.finished_at_ms,
            },
            "approval": approval_digest(record).map(|d| json!({"digest": d})),
            "reconciliation": record.reconciliation,
            "chain": {
                "format": chain::CHAIN_FORMAT,
                "links": ordered.iter().map(|l| json!({
                    "chain": l.chain, "position": l.seq, "kind": l.kind, "hash": l.hash,
                })).collect::<Vec<_>>(),
            },
            "issued_at_ms": now_ms,
        },
    })
}

/// The approval a call ran under or asked for: the id its `approve` decisions name.
fn approval_digest(record: &CallRecord) -> Option<String> {
    let is_id = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    record
        .events
        .iter()
        .filter(|e| e.stage == "approve")
        .find_map(|e| {
            if is_id(&e.detail) {
                return Some(e.detail.clone());
            }
            // `approved`: "… (approval ID, expires at …)".
            let after = e.detail.split("approval ").nth(1)?;
            let id = after.get(..64)?;
            is_id(id).then(|| id.to_owned())
        })
}

impl super::receipt_key::Envelope {
    /// The statement this envelope carries, as its issuer shows it (its signature unchecked:
    /// [`super::PublicReceiptKey::open`] checks one received from elsewhere).
    pub fn statement(&self) -> Result<Value, ReceiptError> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.payload)
            .map_err(|e| ReceiptError::Envelope(format!("the payload is not base64: {e}")))?;
        read_statement(&bytes)
    }
}

/// What a receipt's statement says, read from its bytes: the statement, if it is a toolhost
/// receipt.
pub fn read_statement(bytes: &[u8]) -> Result<Value, ReceiptError> {
    let statement: Value = serde_json::from_slice(bytes)
        .map_err(|e| ReceiptError::Envelope(format!("the statement is not JSON: {e}")))?;
    if statement["_type"] != STATEMENT_TYPE || statement["predicateType"] != PREDICATE_TYPE {
        return Err(ReceiptError::Envelope(format!(
            "the statement is not a toolhost receipt (_type {}, predicateType {})",
            statement["_type"], statement["predicateType"]
        )));
    }
    Ok(statement)
}
