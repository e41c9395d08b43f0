//! Closing a call with its outcome in PostgreSQL, outside the group writer: recovery
//! (`lease.rs`) closes a lapsed host's calls with it. The call path's own writes are applied
//! by the server (`toolhost_apply`, schema version 4, sent by `backend.rs`).

use crate::Db;
use tokio_postgres::GenericClient;

use toolhost_ledger_store::outcome::Outcome;
use toolhost_ledger_store::LedgerError;

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
        .await
        .db()?;
    if changed == 1 {
        return Ok(());
    }
    Err(match call_state(c, run_id, call_id).await? {
        None => LedgerError::unknown(run_id, call_id),
        Some(_) => LedgerError::finished(run_id, call_id),
    })
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
    .await
    .db()?
    .map(|r| r.get(0)))
}
