//! The one terminal outcome of a call, as a row stores it: computed by the caller before it
//! hands the write to the ledger's writer, written by the one statement that finishes the call.

use rusqlite::types::Null;
use rusqlite::{params_from_iter, Connection, ToSql};

use super::admission::call_state;
use super::audit::event_lines;
use super::codec::to_sql_u64;
use sha2::{Digest, Sha256};

use super::LedgerError;
use crate::contract::{Stage, ToolResult};

/// Everything a terminal result stores: its JSON for replay, the output's digest and size, the
/// summary columns and the content-free detail of its `record` event. Computed from the
/// [`ToolResult`] on the caller's thread, so the writer only runs SQL.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub(super) call_id: String,
    result_json: String,
    output_digest: Option<String>,
    output_size: Option<i64>,
    status: &'static str,
    code: Option<&'static str>,
    message: String,
    diagnostic_id: Option<String>,
    /// Fuel, wall milliseconds, peak memory and output bytes, as stored.
    usage: [i64; 4],
    detail: String,
    /// When a call whose start was not committed (a `read`, see `docs/pipeline.md`) started.
    started_at_ms: Option<i64>,
}

impl Outcome {
    /// The stored form of `result`.
    pub fn of(result: &ToolResult) -> Result<Outcome, LedgerError> {
        let output = match &result.output {
            // The same bytes and digest as `ToolResult::ledger_summary`, hashed as they are
            // written rather than collected first.
            Some(out) => Some(digest_json(out)?),
            None => None,
        };
        let code = result.code.map(|c| c.as_str());
        let detail = match &output {
            Some((digest, size)) => format!(
                "code {}; output sha256 {digest}, {size} bytes",
                code.unwrap_or("none")
            ),
            None => format!("code {}; no output", code.unwrap_or("none")),
        };
        let u = &result.usage;
        let (output_digest, output_size) = match output {
            Some((digest, size)) => (Some(digest), Some(to_sql_u64(size))),
            None => (None, None),
        };
        Ok(Outcome {
            call_id: result.call_id.clone(),
            result_json: serde_json::to_string(result)?,
            output_digest,
            output_size,
            status: result.status.as_str(),
            code,
            message: result.message.clone(),
            diagnostic_id: result.diagnostic_id.clone(),
            usage: [
                u.fuel_consumed,
                u.wall_ms,
                u.memory_peak_bytes,
                u.output_bytes,
            ]
            .map(to_sql_u64),
            detail,
            started_at_ms: None,
        })
    }

    /// Record that the call started at `at_ms` (unix milliseconds), for a call whose start
    /// mark is committed with its outcome.
    pub fn started_at(mut self, at_ms: Option<i64>) -> Outcome {
        self.started_at_ms = at_ms;
        self
    }

    /// The columns an outcome sets, bound as parameters `?1`…`?12` (status, code, message,
    /// diagnostic_id, output_digest, output_size, fuel_consumed, wall_ms, memory_peak_bytes,
    /// output_bytes, result_json, started_at_ms) by the statements that write it; `None` binds
    /// them all to NULL (a call not finished). Each statement's own parameters follow from `?13`.
    pub(super) fn columns(outcome: Option<&Outcome>) -> [&dyn ToSql; OUTCOME_COLUMNS] {
        let Some(o) = outcome else {
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

    /// The `record` event of this outcome, at `now`.
    pub(super) fn record_line(&self, now: i64) -> Result<String, LedgerError> {
        event_lines([(
            now,
            Stage::Record.as_str(),
            self.status,
            self.detail.as_str(),
        )])
    }
}

/// An outcome's stored columns, by reference, for a backend that binds them its own way
/// (PostgreSQL, `postgres/backend.rs`).
pub(super) struct Stored<'a> {
    pub(in crate::ledger) status: &'a str,
    pub(in crate::ledger) code: Option<&'a str>,
    pub(in crate::ledger) message: &'a str,
    pub(in crate::ledger) diagnostic_id: Option<&'a str>,
    pub(in crate::ledger) output_digest: Option<&'a str>,
    pub(in crate::ledger) output_size: Option<i64>,
    /// Fuel, wall milliseconds, peak memory and output bytes.
    pub(in crate::ledger) usage: [i64; 4],
    pub(in crate::ledger) result_json: &'a str,
    pub(in crate::ledger) started_at_ms: Option<i64>,
}

impl Outcome {
    /// The columns [`Outcome::columns`] binds, as values.
    pub(super) fn stored(&self) -> Stored<'_> {
        Stored {
            status: self.status,
            code: self.code,
            message: &self.message,
            diagnostic_id: self.diagnostic_id.as_deref(),
            output_digest: self.output_digest.as_deref(),
            output_size: self.output_size,
            usage: self.usage,
            result_json: &self.result_json,
            started_at_ms: self.started_at_ms,
        }
    }
}

/// The SHA-256 (lowercase hex) and length of `value` as compact JSON.
fn digest_json(value: &serde_json::Value) -> Result<(String, u64), LedgerError> {
    struct Hashing(Sha256, u64);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            self.1 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new(), 0);
    serde_json::to_writer(&mut h, value)?;
    Ok((hex::encode(h.0.finalize()), h.1))
}

/// How many parameters [`Outcome::columns`] binds.
pub(super) const OUTCOME_COLUMNS: usize = 12;

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
    let changed = conn
        .prepare_cached(
            "UPDATE calls SET state = 'finished', status = ?1, code = ?2, message = ?3,
                 diagnostic_id = ?4, output_digest = ?5, output_size = ?6, fuel_consumed = ?7,
                 wall_ms = ?8, memory_peak_bytes = ?9, output_bytes = ?10, result_json = ?11,
                 started_at_ms = COALESCE(started_at_ms, ?12),
                 finished_at_ms = ?15, events = events || ?16
             WHERE run_id = ?13 AND call_id = ?14 AND state <> 'finished'",
        )?
        .execute(params_from_iter(
            Outcome::columns(Some(outcome)).into_iter().chain(own),
        ))?;
    if changed == 1 {
        return Ok(());
    }
    match call_state(conn, run_id, call_id)? {
        None => Err(LedgerError::unknown(run_id, call_id)),
        Some(_) => Err(LedgerError::finished(run_id, call_id)),
    }
}
