//! Stage 1 and stage 9: admission, the start mark, the one terminal outcome, and recovery.
//!
//! A call's life in its `calls` row: `admitted` → (`started`) → `finished`. The outcome is
//! written by the one statement that sets `finished`, and only where the call is not finished
//! yet, so a call has at most one terminal outcome whatever happens. A call is never admitted twice:
//! a retry with the same arguments replays the recorded outcome (or learns that the call is
//! still running); a retry with other arguments is a conflict and leaves the original alone.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::audit::{
    append_lines, event_lines, note_approval_requests, parse_events, pending_lines, PendingEvent,
};
use super::codec::{decode_result, status_str, to_sql_u64};
use super::error::check_key;
use super::{digest_bytes, now_ms, Ledger, LedgerError};
use crate::contract::{Code, Status, ToolCall, ToolResult, Usage};

/// The model-safe message of a call that recovery closed.
pub const OUTCOME_UNKNOWN_MESSAGE: &str =
    "the host stopped before this call finished; its effect is unknown";

/// What admission decided for a `(run_id, call_id)`.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// A new call: run it. `seq` is its admission order across the ledger (from 1).
    New { seq: i64 },
    /// The same call (same tool, same argument digest) already ended: return this recorded
    /// result exactly, and do not run it again.
    Replay(ToolResult),
    /// The same call was admitted and has no outcome yet: it is running (or a host stopped
    /// while running it and `recover` has not closed it yet). Do not run it again.
    InFlight,
    /// The id was reused with another tool or other arguments. The caller answers this
    /// proposal with `failed`/`duplicate_call_id` **without calling `finish`**: the id's record
    /// belongs to the original call, which is left unchanged. The ledger has already appended
    /// an `admit`/`conflict` event to the original call.
    Conflict,
}

impl Ledger {
    /// Admit `(run_id, call_id)` in one `BEGIN IMMEDIATE` transaction. See [`Admission`].
    ///
    /// `args_digest` is the caller's digest of the canonical arguments (e.g. [`digest_bytes`]
    /// of their JCS form) and `args_size` the size of those bytes; the ledger never sees the
    /// arguments themselves. The decision is appended to the call's events (stage `admit`), in
    /// the same transaction.
    pub fn admit(
        &self,
        run_id: &str,
        call_id: &str,
        tool: &str,
        args_digest: &str,
        args_size: u64,
    ) -> Result<Admission, LedgerError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        let key = Key {
            run_id,
            call_id,
            tool,
            args_digest,
            args_size,
        };
        let admission = match existing(&tx, run_id, call_id)? {
            None => {
                let seq = self.insert(&tx, &key, now, &[], None)?;
                Admission::New { seq }
            }
            Some(found) => decide(&tx, &key, found, now)?,
        };
        tx.commit()?;
        Ok(admission)
    }

    /// Whether `(run_id, call_id)` was admitted. Read-only: the runtime asks before it admits a
    /// call late (see [`Ledger::admit_started`]).
    pub fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        let conn = self.conn();
        Ok(call_state(&conn, run_id, call_id)?.is_some())
    }

    /// Admit a call and mark it started in one transaction: the admission, `opening.events`
    /// (the stage decisions made before admission, with their own times) and the start mark
    /// are one commit. For a call whose stages ran before it was admitted, because the ledger
    /// said it was new; if another process admitted the same id meanwhile, nothing is written
    /// but what [`Ledger::admit`] would append, and its decision is returned instead of `New`.
    pub fn admit_started(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
    ) -> Result<Admission, LedgerError> {
        self.admit_late(run_id, call_id, opening, None)
    }

    /// [`Ledger::admit_started`] for a call that ended before it could start: the admission,
    /// its decisions and its one terminal outcome in one commit.
    pub fn admit_finished(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
        result: &ToolResult,
    ) -> Result<Admission, LedgerError> {
        self.admit_late(run_id, call_id, opening, Some(result))
    }

    fn admit_late(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
        finished: Option<&ToolResult>,
    ) -> Result<Admission, LedgerError> {
        if let Some(result) = finished {
            check_result_id(run_id, call_id, result)?;
        }
        let outcome = finished.map(Outcome::of).transpose()?;
        let content = match opening.content {
            Some(args) if self.options.record_content => Some(serde_json::to_string(args)?),
            _ => None,
        };
        let key = Key {
            run_id,
            call_id,
            tool: opening.tool,
            args_digest: opening.args_digest,
            args_size: opening.args_size,
        };
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        if let Some(found) = existing(&tx, run_id, call_id)? {
            let admission = decide(&tx, &key, found, now)?;
            tx.commit()?;
            return Ok(admission);
        }
        let seq = self.insert(&tx, &key, opening.at_ms, opening.events, content.as_deref())?;
        match (finished, &outcome) {
            (Some(result), Some(outcome)) => {
                let record = record_line(result, outcome, now)?;
                close_call(&tx, run_id, call_id, result, outcome, now, &record)?;
            }
            _ => {
                tx.prepare_cached(
                    "UPDATE calls SET state = 'started', started_at_ms = ?2 WHERE seq = ?1",
                )?
                .execute(params![seq, now])?;
            }
        }
        note_approval_requests(&tx, run_id, call_id, opening.events)?;
        tx.commit()?;
        Ok(Admission::New { seq })
    }

    /// Insert a new call `admitted` with its `admit` event and `events`, and its content if
    /// given; returns its `seq`.
    fn insert(
        &self,
        tx: &Connection,
        key: &Key<'_>,
        at_ms: i64,
        events: &[PendingEvent],
        content: Option<&str>,
    ) -> Result<i64, LedgerError> {
        check_key(key.run_id, key.call_id, key.tool)?;
        let detail = format!(
            "arguments sha256 {}, {} bytes",
            key.args_digest, key.args_size
        );
        let mut lines = event_lines([(at_ms, "admit", "new", detail.as_str())])?;
        lines.push_str(&pending_lines(events)?);
        tx.prepare_cached(
            "INSERT INTO calls
               (run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms, owner,
                events)
             VALUES (?1, ?2, ?3, ?4, ?5, 'admitted', ?6, ?7, ?8)",
        )?
        .execute(params![
            key.run_id,
            key.call_id,
            key.tool,
            key.args_digest,
            to_sql_u64(key.args_size),
            at_ms,
            self.lease.owner(),
            lines,
        ])?;
        let seq = tx.last_insert_rowid();
        if let Some(json) = content {
            tx.prepare_cached(
                "INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![key.run_id, key.call_id, json, at_ms])?;
        }
        Ok(seq)
    }

    /// The recorded terminal result of a call, if it has one. Read-only: a duplicate that got
    /// [`Admission::InFlight`] can poll this for the original's outcome without appending
    /// audit events. `UnknownCall` if the call was never admitted.
    pub fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        let conn = self.conn();
        let row: Option<Option<String>> = conn
            .prepare_cached("SELECT result_json FROM calls WHERE run_id = ?1 AND call_id = ?2")?
            .query_row(params![run_id, call_id], |row| row.get(0))
            .optional()?;
        match row {
            None => Err(LedgerError::unknown(run_id, call_id)),
            Some(json) => json.as_deref().map(decode_result).transpose(),
        }
    }

    /// Mark an admitted call `started`, right before the sandbox runs it. Marking a started
    /// call again is a no-op; a finished call is `AlreadyFinished`, an unknown one `UnknownCall`.
    pub fn mark_started(&self, run_id: &str, call_id: &str) -> Result<(), LedgerError> {
        self.mark_started_with(run_id, call_id, &[])
    }

    /// [`Ledger::mark_started`], committing `events` (stage decisions made so far) in the same
    /// transaction: one commit, and one changed page, for all of them.
    pub fn mark_started_with(
        &self,
        run_id: &str,
        call_id: &str,
        events: &[PendingEvent],
    ) -> Result<(), LedgerError> {
        let lines = pending_lines(events)?;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changed = tx
            .prepare_cached(
                "UPDATE calls SET state = 'started', started_at_ms = ?3, events = events || ?4
                 WHERE run_id = ?1 AND call_id = ?2 AND state = 'admitted'",
            )?
            .execute(params![run_id, call_id, now_ms(), lines])?;
        if changed != 1 {
            match call_state(&tx, run_id, call_id)? {
                None => return Err(LedgerError::unknown(run_id, call_id)),
                Some(state) if state == "finished" => {
                    return Err(LedgerError::finished(run_id, call_id))
                }
                Some(_) => append_lines(&tx, run_id, call_id, &lines)?,
            }
        }
        note_approval_requests(&tx, run_id, call_id, events)?;
        tx.commit()?;
        Ok(())
    }

    /// Record the one terminal outcome of an admitted call and commit it before returning.
    ///
    /// Stores the summary (status, code, message, output digest and size, usage) and the whole
    /// `result` for replay. A second `finish` for the same call is `AlreadyFinished` and changes
    /// nothing; `result.call_id` must be `call_id` (`ResultMismatch`), since replay returns the
    /// stored result as is. Appends a `record` event.
    pub fn finish(
        &self,
        run_id: &str,
        call_id: &str,
        result: &ToolResult,
    ) -> Result<(), LedgerError> {
        self.finish_with(run_id, call_id, result, &[])
    }

    /// [`Ledger::finish`], committing `events` (stage decisions not yet recorded) in the same
    /// transaction, before the `record` event.
    pub fn finish_with(
        &self,
        run_id: &str,
        call_id: &str,
        result: &ToolResult,
        events: &[PendingEvent],
    ) -> Result<(), LedgerError> {
        check_result_id(run_id, call_id, result)?;
        let outcome = Outcome::of(result)?;
        let now = now_ms();
        let mut lines = pending_lines(events)?;
        lines.push_str(&record_line(result, &outcome, now)?);
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        close_call(&tx, run_id, call_id, result, &outcome, now, &lines)?;
        note_approval_requests(&tx, run_id, call_id, events)?;
        tx.commit()?;
        Ok(())
    }

    /// Close every call a previous process left `admitted` or `started` as `outcome_unknown`
    /// (no code, [`OUTCOME_UNKNOWN_MESSAGE`]), with a `recover` event each, and return their
    /// `(run_id, call_id)` in admission order. Such a call is never run again: admitting it
    /// again replays the `outcome_unknown` result.
    ///
    /// Call it at startup, before serving, and only when no other live process writes to this
    /// ledger file: it cannot tell a call that a dead host left open from one that another
    /// host is running right now.
    ///
    /// It reads only the calls admitted since the last recovery left its watermark (the first
    /// call it had to leave open, or the end of the ledger), so a long ledger starts as fast
    /// as a short one.
    pub fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        let watermark: i64 = tx
            .prepare_cached("SELECT value FROM meta WHERE key = 'recovered_below'")?
            .query_row([], |row| row.get(0))
            .optional()?
            .unwrap_or(0);
        let open: Vec<(i64, String, String, String, String, Option<String>)> = tx
            .prepare_cached(
                "SELECT seq, run_id, call_id, tool, state, owner FROM calls
                 WHERE seq >= ?1 AND state <> 'finished' ORDER BY seq",
            )?
            .query_map([watermark], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        let mut next_watermark: i64 = tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM calls")?
            .query_row([], |row| row.get(0))?;
        let mut closed = Vec::with_capacity(open.len());
        let mut dead = std::collections::HashSet::new();
        for (seq, run_id, call_id, tool, state, owner) in open {
            // A call whose host still holds its lease is running, not lost.
            if let Some(owner) = &owner {
                if self.lease.is_alive(owner) {
                    next_watermark = next_watermark.min(seq);
                    continue;
                }
                dead.insert(owner.clone());
            }
            let result = outcome_unknown(&call_id, tool);
            let outcome = Outcome::of(&result)?;
            let detail = format!(
                "the host stopped while this call was {state}; closed as outcome_unknown, \
                 never re-run"
            );
            let lines = event_lines([(now, "recover", "outcome_unknown", detail.as_str())])?;
            close_call(&tx, &run_id, &call_id, &result, &outcome, now, &lines)?;
            closed.push((run_id, call_id));
        }
        tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES ('recovered_below', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute([next_watermark])?;
        tx.commit()?;
        for owner in dead {
            self.lease.forget(&owner);
        }
        Ok(closed)
    }
}

/// What a call is admitted under: its id and the caller's digest of `{tool, arguments}`.
struct Key<'a> {
    run_id: &'a str,
    call_id: &'a str,
    tool: &'a str,
    args_digest: &'a str,
    args_size: u64,
}

/// A call admitted after its first stages ran ([`Ledger::admit_started`],
/// [`Ledger::admit_finished`]): what admission would have been told, when it was decided that
/// the call is new, and what the stages decided meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Opening<'a> {
    pub tool: &'a str,
    pub args_digest: &'a str,
    pub args_size: u64,
    /// When the call was found new (unix milliseconds): its admission time.
    pub at_ms: i64,
    /// Stage decisions made before admission, in order.
    pub events: &'a [PendingEvent],
    /// The validated arguments, stored only if the ledger records content.
    pub content: Option<&'a serde_json::Value>,
}

/// A call already in the ledger, as admission compares it.
struct Existing {
    tool: String,
    args_digest: String,
    result_json: Option<String>,
    events: String,
}

fn existing(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<Existing>, LedgerError> {
    Ok(conn
        .prepare_cached(
            "SELECT tool, args_digest, result_json, events FROM calls
             WHERE run_id = ?1 AND call_id = ?2",
        )?
        .query_row(params![run_id, call_id], |row| {
            Ok(Existing {
                tool: row.get(0)?,
                args_digest: row.get(1)?,
                result_json: row.get(2)?,
                events: row.get(3)?,
            })
        })
        .optional()?)
}

/// Admission of an id the ledger already has: a replay, a call still in flight, or a conflict;
/// the decision is appended to the existing call's events.
fn decide(
    tx: &Connection,
    key: &Key<'_>,
    found: Existing,
    now: i64,
) -> Result<Admission, LedgerError> {
    let (run_id, call_id) = (key.run_id, key.call_id);
    let admit_event = |decision: &str, detail: &str| {
        append_lines(
            tx,
            run_id,
            call_id,
            &event_lines([(now, "admit", decision, detail)])?,
        )
    };
    if found.tool != key.tool || found.args_digest != key.args_digest {
        let detail = format!(
            "call id reused for tool {:?} with arguments sha256 {}, {} bytes (admitted: tool \
             {:?}, sha256 {}); refused as duplicate_call_id, this call unchanged",
            key.tool, key.args_digest, key.args_size, found.tool, found.args_digest
        );
        admit_event("conflict", &detail)?;
        return Ok(Admission::Conflict);
    }
    if let Some(result_json) = found.result_json {
        let result = decode_result(&result_json)?;
        admit_event(
            "replay",
            "same call again; answered from its recorded outcome, not re-run",
        )?;
        return Ok(Admission::Replay(result));
    }
    // A duplicate may poll admit until the original ends: one event per streak.
    let last = parse_events(found.events.lines().last().unwrap_or_default())?;
    if !matches!(last.as_slice(), [e] if e.stage == "admit" && e.decision == "in_flight") {
        admit_event(
            "in_flight",
            "same call again while it has no outcome yet; not run twice",
        )?;
    }
    Ok(Admission::InFlight)
}

/// `result` must be the result of `call_id`: replay returns it as stored.
fn check_result_id(run_id: &str, call_id: &str, result: &ToolResult) -> Result<(), LedgerError> {
    if result.call_id == call_id {
        return Ok(());
    }
    Err(LedgerError::ResultMismatch {
        run_id: run_id.to_owned(),
        call_id: call_id.to_owned(),
        result_call_id: result.call_id.clone(),
    })
}

/// The `record` event of an outcome.
fn record_line(result: &ToolResult, outcome: &Outcome, now: i64) -> Result<String, LedgerError> {
    event_lines([(
        now,
        "record",
        status_str(result.status),
        outcome.detail.as_str(),
    )])
}

/// The result recovery records for a call the host lost track of.
fn outcome_unknown(call_id: &str, tool: String) -> ToolResult {
    let call = ToolCall {
        call_id: call_id.to_owned(),
        name: tool,
        arguments: serde_json::Value::Null,
    };
    // Built from the contract's constructor so that fields added later get their defaults.
    let mut result = ToolResult::failed(
        &call,
        Code::HostError,
        OUTCOME_UNKNOWN_MESSAGE,
        Usage::default(),
    );
    result.status = Status::OutcomeUnknown;
    result.code = None;
    result
}

/// The state of a call, if it was admitted.
fn call_state(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<String>, LedgerError> {
    Ok(conn
        .prepare_cached("SELECT state FROM calls WHERE run_id = ?1 AND call_id = ?2")?
        .query_row(params![run_id, call_id], |row| row.get(0))
        .optional()?)
}

/// What a terminal result stores besides itself: its JSON for replay, the output's digest and
/// size, and the content-free summary for the `record` event. Computed before the ledger's
/// lock is taken.
struct Outcome {
    result_json: String,
    output: Option<(String, u64)>,
    detail: String,
}

impl Outcome {
    fn of(result: &ToolResult) -> Result<Outcome, LedgerError> {
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
fn close_call(
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
            status_str(result.status),
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
