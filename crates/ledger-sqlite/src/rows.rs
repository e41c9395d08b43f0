//! The statements the SQLite backend's writer and store share: a call's state, its closing
//! update, appended events and noted approval requests.

use crate::Db;
use rusqlite::types::Null;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, ToSql};

use super::events::{
    approval_digests, event_lines, PendingEvent, CAPPED, CAPPED_DETAIL, MAX_APPENDED_EVENTS_CHARS,
};
use super::outcome::{Outcome, Stored};
use toolhost_contract::Stage;
use toolhost_ledger_store::{now_ms, LedgerError};

/// How many parameters [`columns`] binds.
pub(super) const OUTCOME_COLUMNS: usize = 12;

/// The columns an outcome sets, bound as parameters `?1`…`?12` (status, code, message,
/// diagnostic_id, output_digest, output_size, fuel_consumed, wall_ms, memory_peak_bytes,
/// output_bytes, result_json, started_at_ms) by the statements that write it; `None` binds
/// them all to NULL (a call not finished). Each statement's own parameters follow from `?13`.
pub(super) fn columns<'a>(stored: &'a Option<Stored<'a>>) -> [&'a dyn ToSql; OUTCOME_COLUMNS] {
    let Some(o) = stored else {
        return [&Null; OUTCOME_COLUMNS];
    };
    [
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
    ]
}

/// The state of a call, if it was admitted.
pub(super) fn call_state(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<String>, LedgerError> {
    conn.prepare_cached("SELECT state FROM calls WHERE run_id = ?1 AND call_id = ?2")
        .db()?
        .query_row(params![run_id, call_id], |row| row.get(0))
        .optional()
        .db()
}

/// Write the outcome of an admitted call, mark it finished and append `lines` to its events,
/// in one statement; `AlreadyFinished` (and no change) if it has one, `UnknownCall` if it was
/// never admitted.
pub(super) fn close_call(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
    outcome: &Outcome,
    now: i64,
    lines: &str,
) -> Result<(), LedgerError> {
    let own: [&dyn ToSql; 4] = [&run_id, &call_id, &now, &lines];
    let stored = Some(outcome.stored());
    let changed = conn
        .prepare_cached(
            "UPDATE calls SET state = 'finished', status = ?1, code = ?2, message = ?3,
                 diagnostic_id = ?4, output_digest = ?5, output_size = ?6, fuel_consumed = ?7,
                 wall_ms = ?8, memory_peak_bytes = ?9, output_bytes = ?10, result_json = ?11,
                 started_at_ms = COALESCE(started_at_ms, ?12),
                 finished_at_ms = ?15, events = events || ?16
             WHERE run_id = ?13 AND call_id = ?14 AND state <> 'finished'",
        )
        .db()?
        .execute(params_from_iter(columns(&stored).into_iter().chain(own)))
        .db()?;
    if changed == 1 {
        return Ok(());
    }
    match call_state(conn, run_id, call_id)? {
        None => Err(LedgerError::unknown(run_id, call_id)),
        Some(_) => Err(LedgerError::finished(run_id, call_id)),
    }
}

/// Append event lines to an admitted call inside the caller's transaction (or on its own),
/// up to [`MAX_APPENDED_EVENTS_CHARS`]; `UnknownCall` if it was never admitted.
pub(super) fn append_lines(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
    lines: &str,
) -> Result<(), LedgerError> {
    let marker = event_lines([(now_ms(), Stage::Admit.as_str(), CAPPED, CAPPED_DETAIL)])?;
    let changed = conn
        .prepare_cached(
            "UPDATE calls SET events = events || CASE
                 WHEN length(events) + length(?3) <= ?4 THEN ?3
                 WHEN instr(events, ?5) > 0 THEN ''
                 ELSE ?6 END
             WHERE run_id = ?1 AND call_id = ?2",
        )
        .db()?
        .execute(params![
            run_id,
            call_id,
            lines,
            MAX_APPENDED_EVENTS_CHARS,
            format!("\"decision\":\"{CAPPED}\""),
            marker
        ])
        .db()?;
    if changed == 0 {
        return Err(LedgerError::unknown(run_id, call_id));
    }
    Ok(())
}

/// Remember the calls among `events` that asked for approval (the first call per digest
/// stays), so that `toolhost approve` finds them without reading every call's events.
pub(super) fn note_approval_requests(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
    events: &[PendingEvent],
) -> Result<(), LedgerError> {
    for digest in approval_digests(events) {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO approval_requests (digest, run_id, call_id)
             VALUES (?1, ?2, ?3)",
        )
        .db()?
        .execute(params![digest, run_id, call_id])
        .db()?;
    }
    Ok(())
}
