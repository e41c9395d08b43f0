//! What the Rust side of the PostgreSQL ledger knows about one call's row: the event lines of
//! an admission, the checks a write passes before it is sent, the approval digests a write
//! notes, and closing a call with its outcome (recovery, `lease.rs`). The group writes
//! themselves are applied by the server (`toolhost_apply`, schema version 4).

use tokio_postgres::GenericClient;

use super::super::audit::{event_lines, pending_lines, PendingEvent};
use super::super::outcome::Outcome;
use super::super::write::CallKey;
use super::super::LedgerError;
use crate::contract::{Code, Decision, Stage};

/// Write the outcome of an admitted call, mark it finished and append `lines` to its events,
/// in one statement; `AlreadyFinished` (and no change) if it has one, `UnknownCall` if it was
/// never admitted.
pub(super) async fn close_call(
    c: &impl GenericClient,
    run_id: &str,
    call_id: &str,
    outcome: &Outcome,
    now: i64,
    lines: &str,
) -> Result<(), LedgerError> {
    let o = outcome.stored();
    let changed = c
        .execute(
            "UPDATE calls SET state = 'finished', status = $1, code = $2, message = $3,
                 diagnostic_id = $4, output_digest = $5, output_size = $6,
                 fuel_consumed = $7, wall_ms = $8, memory_peak_bytes = $9,
                 output_bytes = $10, result_json = $11,
                 started_at_ms = COALESCE(started_at_ms, $12),
                 finished_at_ms = $15, events = events || $16
             WHERE run_id = $13 AND call_id = $14 AND state <> 'finished'",
            &[
                &o.status,
                &o.code,
                &o.message,
                &o.diagnostic_id,
                &o.output_digest,
                &o.output_size,
                &o.usage[0],
                &o.usage[1],
                &o.usage[2],
                &o.usage[3],
                &o.result_json,
                &o.started_at_ms,
                &run_id,
                &call_id,
                &now,
                &lines,
            ],
        )
        .await?;
    if changed == 1 {
        return Ok(());
    }
    Err(match call_state(c, run_id, call_id).await? {
        None => LedgerError::unknown(run_id, call_id),
        Some(_) => LedgerError::finished(run_id, call_id),
    })
}

/// `outcome` must be the outcome of `call_id`: replay returns it as stored.
pub(super) fn check_result_id(
    run_id: &str,
    call_id: &str,
    outcome: &Outcome,
) -> Result<(), LedgerError> {
    if outcome.call_id == call_id {
        return Ok(());
    }
    Err(LedgerError::ResultMismatch {
        run_id: run_id.to_owned(),
        call_id: call_id.to_owned(),
        result_call_id: outcome.call_id.clone(),
    })
}

/// The event lines of a new call: its `admit` event, then `events`.
pub(super) fn admission_lines(
    key: &CallKey,
    at_ms: i64,
    events: &[PendingEvent],
) -> Result<String, LedgerError> {
    let detail = format!(
        "arguments sha256 {}, {} bytes",
        key.args_digest, key.args_size
    );
    let mut lines = event_lines([(
        at_ms,
        Stage::Admit.as_str(),
        Decision::New.as_str(),
        detail.as_str(),
    )])?;
    lines.push_str(&pending_lines(events)?);
    Ok(lines)
}

pub(super) async fn call_state(
    c: &impl GenericClient,
    run_id: &str,
    call_id: &str,
) -> Result<Option<String>, LedgerError> {
    Ok(c.query_opt(
        "SELECT state FROM calls WHERE run_id = $1 AND call_id = $2",
        &[&run_id, &call_id],
    )
    .await?
    .map(|r| r.get(0)))
}

/// The decision of the event that marks a call's events as capped, and its detail (as
/// `audit.rs` writes them for SQLite).
pub(super) const CAPPED: &str = "not_recorded";
pub(super) const CAPPED_DETAIL: &str =
    "this call's audit trail is full; later repeats of it are not recorded";

/// The approval digests among `events`: those that asked a human for approval.
pub(super) fn approval_digests(events: &[PendingEvent]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| {
            e.stage.as_str() == Stage::Approve.as_str()
                && e.decision.as_str() == Code::ApprovalRequired.as_str()
        })
        .map(|e| e.detail.as_str())
        .collect()
}
