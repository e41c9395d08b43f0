//! The one terminal outcome of a call, as a row stores it: computed before the lock is taken,
//! written by the one statement that finishes the call.

use rusqlite::{params, Connection};

use super::admission::call_state;
use super::codec::to_sql_u64;
use super::{digest_bytes, LedgerError};
use crate::contract::ToolResult;

/// What a terminal result stores besides itself: its JSON for replay, the output's digest and
/// size, and the content-free summary for the `record` event. Computed before the ledger's
/// lock is taken.
pub(super) struct Outcome {
    result_json: String,
    output: Option<(String, u64)>,
    pub(super) detail: String,
}

impl Outcome {
    pub(super) fn of(result: &ToolResult) -> Result<Outcome, LedgerError> {
        let output = match &result.output {
            Some(out) => {
                // The same bytes and digest as `ToolResult::ledger_summary`.
                let bytes = serde_json::to_vec(out)?;
                Some((digest_bytes(&bytes), bytes.len() as u64))
            }
            None => None,
        };
        let code = result.code.map(|c| c.as_str()).unwrap_or("none");
        let detail = match &output {
            Some((digest, size)) => format!("code {code}; output sha256 {digest}, {size} bytes"),
            None => format!("code {code}; no output"),
        };
        Ok(Outcome {
            result_json: serde_json::to_string(result)?,
            output,
            detail,
        })
    }
}

/// Write the outcome of an admitted call, mark it finished and append `lines` to its events,
/// in one statement; `AlreadyFinished` (and no change) if it has one, `UnknownCall` if it was
/// never admitted.
pub(super) fn close_call(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
    result: &ToolResult,
    outcome: &Outcome,
    now: i64,
    lines: &str,
) -> Result<(), LedgerError> {
    let u = &result.usage;
    let changed = conn
        .prepare_cached(
            "UPDATE calls SET state = 'finished', status = ?3, code = ?4, message = ?5,
                 diagnostic_id = ?6, output_digest = ?7, output_size = ?8, fuel_consumed = ?9,
                 wall_ms = ?10, memory_peak_bytes = ?11, output_bytes = ?12, result_json = ?13,
                 finished_at_ms = ?14, events = events || ?15
             WHERE run_id = ?1 AND call_id = ?2 AND state <> 'finished'",
        )?
        .execute(params![
            run_id,
            call_id,
            result.status.as_str(),
            result.code.map(|c| c.as_str()),
            result.message,
            result.diagnostic_id,
            outcome.output.as_ref().map(|(d, _)| d.as_str()),
            outcome.output.as_ref().map(|(_, n)| to_sql_u64(*n)),
            to_sql_u64(u.fuel_consumed),
            to_sql_u64(u.wall_ms),
            to_sql_u64(u.memory_peak_bytes),
            to_sql_u64(u.output_bytes),
            outcome.result_json,
            now,
            lines,
        ])?;
    if changed == 1 {
        return Ok(());
    }
    match call_state(conn, run_id, call_id)? {
        None => Err(LedgerError::unknown(run_id, call_id)),
        Some(_) => Err(LedgerError::finished(run_id, call_id)),
    }
}
