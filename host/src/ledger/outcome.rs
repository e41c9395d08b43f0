//! The one terminal outcome of a call, as a row stores it: computed by the caller before it
//! hands the write to the ledger's writer, written by the one statement that finishes the call.

use rusqlite::{params, Connection};

use super::admission::call_state;
use super::audit::event_lines;
use super::codec::to_sql_u64;
use super::write::CallKey;
use sha2::{Digest, Sha256};

use super::LedgerError;
use crate::contract::{Stage, ToolResult, Usage};

/// Everything a terminal result stores: its JSON for replay, the output's digest and size, the
/// summary columns and the content-free detail of its `record` event. Computed from the
/// [`ToolResult`] on the caller's thread, so the writer only runs SQL.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub(super) call_id: String,
    result_json: String,
    output: Option<(String, u64)>,
    status: &'static str,
    code: Option<&'static str>,
    message: String,
    diagnostic_id: Option<String>,
    usage: Usage,
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
        Ok(Outcome {
            call_id: result.call_id.clone(),
            result_json: serde_json::to_string(result)?,
            output,
            status: result.status.as_str(),
            code,
            message: result.message.clone(),
            diagnostic_id: result.diagnostic_id.clone(),
            usage: result.usage,
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

/// Insert a call that is admitted and finished in one write (a late admission that carries its
/// outcome): the row is written once, already `finished`, so it never enters the index of open
/// calls. `events` are its lines up to the outcome; the `record` line is added here. Returns
/// its `seq`.
#[allow(clippy::too_many_arguments)]
pub(super) fn insert_finished(
    conn: &Connection,
    key: &CallKey,
    owner: &str,
    at_ms: i64,
    events: &str,
    outcome: &Outcome,
    now: i64,
) -> Result<i64, LedgerError> {
    let mut lines = String::with_capacity(events.len() + 160);
    lines.push_str(events);
    lines.push_str(&outcome.record_line(now)?);
    let u = &outcome.usage;
    conn.prepare_cached(
        "INSERT INTO calls
           (run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms, owner, events,
            started_at_ms, status, code, message, diagnostic_id, output_digest, output_size,
            fuel_consumed, wall_ms, memory_peak_bytes, output_bytes, result_json,
            finished_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, 'finished', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                 ?16, ?17, ?18, ?19, ?20, ?21)",
    )?
    .execute(params![
        key.run_id,
        key.call_id,
        key.tool,
        key.args_digest,
        to_sql_u64(key.args_size),
        at_ms,
        owner,
        lines,
        outcome.started_at_ms,
        outcome.status,
        outcome.code,
        outcome.message,
        outcome.diagnostic_id,
        outcome.output.as_ref().map(|(d, _)| d.as_str()),
        outcome.output.as_ref().map(|(_, n)| to_sql_u64(*n)),
        to_sql_u64(u.fuel_consumed),
        to_sql_u64(u.wall_ms),
        to_sql_u64(u.memory_peak_bytes),
        to_sql_u64(u.output_bytes),
        outcome.result_json,
        now,
    ])?;
    Ok(conn.last_insert_rowid())
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
    let u = &outcome.usage;
    let changed = conn
        .prepare_cached(
            "UPDATE calls SET state = 'finished', status = ?3, code = ?4, message = ?5,
                 diagnostic_id = ?6, output_digest = ?7, output_size = ?8, fuel_consumed = ?9,
                 wall_ms = ?10, memory_peak_bytes = ?11, output_bytes = ?12, result_json = ?13,
                 finished_at_ms = ?14, events = events || ?15,
                 started_at_ms = COALESCE(started_at_ms, ?16)
             WHERE run_id = ?1 AND call_id = ?2 AND state <> 'finished'",
        )?
        .execute(params![
            run_id,
            call_id,
            outcome.status,
            outcome.code,
            outcome.message,
            outcome.diagnostic_id,
            outcome.output.as_ref().map(|(d, _)| d.as_str()),
            outcome.output.as_ref().map(|(_, n)| to_sql_u64(*n)),
            to_sql_u64(u.fuel_consumed),
            to_sql_u64(u.wall_ms),
            to_sql_u64(u.memory_peak_bytes),
            to_sql_u64(u.output_bytes),
            outcome.result_json,
            now,
            lines,
            outcome.started_at_ms,
        ])?;
    if changed == 1 {
        return Ok(());
    }
    match call_state(conn, run_id, call_id)? {
        None => Err(LedgerError::unknown(run_id, call_id)),
        Some(_) => Err(LedgerError::finished(run_id, call_id)),
    }
}
