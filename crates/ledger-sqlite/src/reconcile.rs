//! Reconciliation on SQLite: the one reconciliation of a call that ended `outcome_unknown`
//! and its `reconcile` event, in one `BEGIN IMMEDIATE` transaction.

use crate::Db;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::verdicts::Settled;
use super::LedgerError;

/// Store `settled` for `(run_id, call_id)` (see `Store::reconcile`).
pub(super) fn reconcile(
    conn: &mut Connection,
    run_id: &str,
    call_id: &str,
    settled: &Settled,
) -> Result<(), LedgerError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db()?;
    let o = settled.stored();
    // Only where the call ended outcome_unknown; the primary key keeps the first one.
    let inserted = tx
        .prepare_cached(
            "INSERT INTO reconciliations (run_id, call_id, status, code, output_digest,
                 output_size, result_json, operator, why, at_ms)
             SELECT run_id, call_id, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 FROM calls
             WHERE run_id = ?1 AND call_id = ?2 AND status = 'outcome_unknown'
             ON CONFLICT (run_id, call_id) DO NOTHING",
        )
        .db()?
        .execute(params![
            run_id,
            call_id,
            o.status,
            o.code,
            o.output_digest,
            o.output_size,
            o.result_json,
            settled.operator,
            settled.why,
            settled.at_ms
        ])
        .db()?;
    if inserted == 0 {
        let status: Option<Option<String>> = tx
            .prepare_cached("SELECT status FROM calls WHERE run_id = ?1 AND call_id = ?2")
            .db()?
            .query_row(params![run_id, call_id], |row| row.get(0))
            .optional()
            .db()?;
        return Err(match status {
            None => LedgerError::unknown(run_id, call_id),
            Some(Some(s)) if s == "outcome_unknown" => LedgerError::reconciled(run_id, call_id),
            Some(s) => LedgerError::NotOutcomeUnknown {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
                ended: s.unwrap_or_else(|| "no outcome yet".into()),
            },
        });
    }
    // The call's own decision: appended whatever the cap on repeats says.
    tx.prepare_cached("UPDATE calls SET events = events || ?3 WHERE run_id = ?1 AND call_id = ?2")
        .db()?
        .execute(params![run_id, call_id, settled.event])
        .db()?;
    tx.commit().db()?;
    Ok(())
}
