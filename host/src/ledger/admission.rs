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
use super::codec::{decode_result, to_sql_u64};
use super::error::check_key;
use super::outcome::{close_call, Outcome};
use super::{now_ms, Ledger, LedgerError};
use crate::contract::ToolResult;
use crate::contract::{Decision, Stage};

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
        let mut lines = event_lines([(
            at_ms,
            Stage::Admit.as_str(),
            Decision::New.as_str(),
            detail.as_str(),
        )])?;
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
            &event_lines([(now, Stage::Admit.as_str(), decision, detail)])?,
        )
    };
    if found.tool != key.tool || found.args_digest != key.args_digest {
        let detail = format!(
            "call id reused for tool {:?} with arguments sha256 {}, {} bytes (admitted: tool \
             {:?}, sha256 {}); refused as duplicate_call_id, this call unchanged",
            key.tool, key.args_digest, key.args_size, found.tool, found.args_digest
        );
        admit_event(Decision::Conflict.as_str(), &detail)?;
        return Ok(Admission::Conflict);
    }
    if let Some(result_json) = found.result_json {
        let result = decode_result(&result_json)?;
        admit_event(
            Decision::Replay.as_str(),
            "same call again; answered from its recorded outcome, not re-run",
        )?;
        return Ok(Admission::Replay(result));
    }
    // A duplicate may poll admit until the original ends: one event per streak.
    let last = parse_events(found.events.lines().last().unwrap_or_default())?;
    if !matches!(last.as_slice(), [e] if e.stage == Stage::Admit.as_str() && e.decision == Decision::InFlight.as_str())
    {
        admit_event(
            Decision::InFlight.as_str(),
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
        Stage::Record.as_str(),
        result.status.as_str(),
        outcome.detail.as_str(),
    )])
}

/// The state of a call, if it was admitted.
pub(super) fn call_state(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<String>, LedgerError> {
    Ok(conn
        .prepare_cached("SELECT state FROM calls WHERE run_id = ?1 AND call_id = ?2")?
        .query_row(params![run_id, call_id], |row| row.get(0))
        .optional()?)
}
