//! The embedded backend: the call path's writes in SQLite, a group per `BEGIN IMMEDIATE`
//! transaction, each write inside a savepoint of its own so that one write's failure rolls
//! back that write alone.

use crate::Db;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, ToSql};

use super::codec::{decode_result, to_sql_u64};
use super::events::{event_lines, parse_events, pending_lines, PendingEvent};
use super::outcome::Outcome;
use super::rows::{
    append_lines, call_state, close_call, columns, note_approval_requests, OUTCOME_COLUMNS,
};
use super::write::{
    admission_lines, check_result_id, finish_lines, Applied, Backend, CallKey, Write,
};
use toolhost_contract::{Decision, Stage};
use toolhost_ledger_store::error::check_key;
use toolhost_ledger_store::{now_ms, Admission, LedgerError};

/// The writer's own connection to the ledger file, and the lease its calls are owned by.
pub struct SqliteBackend {
    conn: Connection,
    owner: String,
}

impl SqliteBackend {
    /// A backend over an open, configured and migrated connection; new calls are owned by
    /// `owner` (this host's lease).
    pub fn new(conn: Connection, owner: String) -> SqliteBackend {
        SqliteBackend { conn, owner }
    }

    /// Apply `writes` in one transaction and end it: commit it, or — for a test that needs a
    /// commit to fail after every statement succeeded — roll it back.
    pub fn apply_and(
        &mut self,
        writes: &[Write],
        commit: bool,
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        let conn = &self.conn;
        // A group cut short (a panic mid-group) may have left its transaction open.
        rollback(conn);
        run(conn, "BEGIN IMMEDIATE")?;
        // A group of one needs no savepoint: its failure is the transaction's.
        let savepoints = writes.len() > 1;
        let mut results = Vec::with_capacity(writes.len());
        for write in writes {
            if savepoints {
                if let Err(e) = run(conn, "SAVEPOINT w") {
                    rollback(conn);
                    return Err(e);
                }
            }
            let result = apply_one(conn, &self.owner, write);
            let ended = match (&result, savepoints) {
                (Ok(_), true) => run(conn, "RELEASE w"),
                (Err(_), true) => run(conn, "ROLLBACK TO w").and_then(|()| run(conn, "RELEASE w")),
                (_, false) => Ok(()),
            };
            // After some errors (a full disk, an I/O error) SQLite has rolled back the whole
            // transaction itself: then the group fails as a whole.
            if conn.is_autocommit() || ended.is_err() {
                rollback(conn);
                return Err(match result {
                    Err(e) => e,
                    Ok(_) => LedgerError::Commit("the transaction ended early".into()),
                });
            }
            if !savepoints && result.is_err() {
                rollback(conn);
                return Ok(vec![result]);
            }
            results.push(result);
        }
        if let Err(e) = run(conn, if commit { "COMMIT" } else { "ROLLBACK" }) {
            rollback(conn);
            return Err(e);
        }
        Ok(results)
    }
}

impl Backend for SqliteBackend {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        self.apply_and(writes, true)
    }

    fn is_admitted(&mut self, run_id: &str, call_id: &str) -> Option<Result<bool, LedgerError>> {
        // A group cut short (a panic mid-group) may have left its transaction open.
        rollback(&self.conn);
        Some(call_state(&self.conn, run_id, call_id).map(|state| state.is_some()))
    }
}

/// One transaction-control statement, prepared once.
fn run(conn: &Connection, sql: &str) -> Result<(), LedgerError> {
    conn.prepare_cached(sql).db()?.execute([]).db()?;
    Ok(())
}

/// Roll back whatever is open (nothing, if SQLite already did).
fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

fn apply_one(conn: &Connection, owner: &str, write: &Write) -> Result<Applied, LedgerError> {
    let now = now_ms();
    match write {
        Write::Admit(key) => {
            let admission = match existing(conn, &key.run_id, &key.call_id)? {
                None => Admission::New {
                    seq: insert(conn, owner, key, now, &[], None, Inserted::Admitted)?,
                },
                Some(found) => decide(conn, key, found, now)?,
            };
            Ok(Applied::Admission(admission))
        }
        Write::AdmitLate {
            key,
            at_ms,
            events,
            content,
            finished,
        } => {
            if let Some(outcome) = finished {
                check_result_id(&key.run_id, &key.call_id, outcome)?;
            }
            if let Some(found) = existing(conn, &key.run_id, &key.call_id)? {
                return Ok(Applied::Admission(decide(conn, key, found, now)?));
            }
            // A call that carries its outcome is inserted finished: one row write, and it
            // never enters the index of open calls. One without is inserted started.
            let finished = finished.as_ref().map(|outcome| (outcome, now));
            let seq = insert(
                conn,
                owner,
                key,
                *at_ms,
                events,
                content.as_deref(),
                match finished {
                    Some(done) => Inserted::Finished(done),
                    None => Inserted::Started(now),
                },
            )?;
            note_approval_requests(conn, &key.run_id, &key.call_id, events)?;
            Ok(Applied::Admission(Admission::New { seq }))
        }
        Write::MarkStarted {
            run_id,
            call_id,
            events,
        } => {
            let lines = pending_lines(events)?;
            let changed = conn
                .prepare_cached(
                    "UPDATE calls SET state = 'started', started_at_ms = ?3,
                         events = events || ?4
                     WHERE run_id = ?1 AND call_id = ?2 AND state = 'admitted'",
                )
                .db()?
                .execute(params![run_id, call_id, now, lines])
                .db()?;
            if changed != 1 {
                match call_state(conn, run_id, call_id)? {
                    None => return Err(LedgerError::unknown(run_id, call_id)),
                    Some(state) if state == "finished" => {
                        return Err(LedgerError::finished(run_id, call_id))
                    }
                    Some(_) => append_lines(conn, run_id, call_id, &lines)?,
                }
            }
            note_approval_requests(conn, run_id, call_id, events)?;
            Ok(Applied::Done)
        }
        Write::Finish {
            run_id,
            call_id,
            outcome,
            events,
        } => {
            let lines = finish_lines(run_id, call_id, outcome, events, now)?;
            close_call(conn, run_id, call_id, outcome, now, &lines)?;
            note_approval_requests(conn, run_id, call_id, events)?;
            Ok(Applied::Done)
        }
        Write::Event {
            run_id,
            call_id,
            event,
        } => {
            let events = std::slice::from_ref(event);
            append_lines(conn, run_id, call_id, &pending_lines(events)?)?;
            note_approval_requests(conn, run_id, call_id, events)?;
            Ok(Applied::Done)
        }
    }
}

/// The state a new call is inserted in.
#[derive(Clone, Copy)]
enum Inserted<'a> {
    Admitted,
    /// Started at this time (unix milliseconds).
    Started(i64),
    /// Finished with this outcome, recorded at this time.
    Finished((&'a Outcome, i64)),
}

/// Insert a new call with its `admit` event and `events`, and its content if given: admitted,
/// started, or — given its outcome and the time it is recorded — already finished, with the
/// `record` event. Returns its `seq`.
fn insert(
    conn: &Connection,
    owner: &str,
    key: &CallKey,
    at_ms: i64,
    events: &[PendingEvent],
    content: Option<&str>,
    inserted: Inserted<'_>,
) -> Result<i64, LedgerError> {
    check_key(&key.run_id, &key.call_id, &key.tool)?;
    let mut lines = admission_lines(key, at_ms, events)?;
    let finished = match inserted {
        Inserted::Finished(done) => Some(done),
        _ => None,
    };
    if let Some((outcome, now)) = finished {
        lines.push_str(&outcome.record_line(now)?);
    }
    let state = match inserted {
        Inserted::Admitted => "admitted",
        Inserted::Started(_) => "started",
        Inserted::Finished(_) => "finished",
    };
    let finished_at_ms = finished.map(|(_, now)| now);
    let args_size = to_sql_u64(key.args_size);
    let own: [&dyn ToSql; 12] = [
        &key.run_id,
        &key.call_id,
        &key.tool,
        &key.args_digest,
        &args_size,
        &state,
        &at_ms,
        &owner,
        &lines,
        &finished_at_ms,
        &key.component_digest,
        &key.definition_digest,
    ];
    // ?1…?12 are the outcome's columns (`rows::columns`), NULL for a call not finished but for
    // the start time of a call inserted started.
    let stored = finished.map(|(outcome, _)| outcome.stored());
    let mut outcome = columns(&stored);
    let started_at_ms = match inserted {
        Inserted::Started(at) => Some(at),
        _ => None,
    };
    if started_at_ms.is_some() {
        outcome[OUTCOME_COLUMNS - 1] = &started_at_ms;
    }
    conn.prepare_cached(
        "INSERT INTO calls
           (status, code, message, diagnostic_id, output_digest, output_size, fuel_consumed,
            wall_ms, memory_peak_bytes, output_bytes, result_json, started_at_ms,
            run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms, owner, events,
            finished_at_ms, component_digest, definition_digest)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
                 ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)",
    )
    .db()?
    .execute(params_from_iter(outcome.into_iter().chain(own)))
    .db()?;
    let seq = conn.last_insert_rowid();
    insert_content(conn, key, at_ms, content)?;
    Ok(seq)
}

/// Store a new call's arguments, when the ledger records content.
fn insert_content(
    conn: &Connection,
    key: &CallKey,
    at_ms: i64,
    content: Option<&str>,
) -> Result<(), LedgerError> {
    if let Some(json) = content {
        conn.prepare_cached(
            "INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
             VALUES (?1, ?2, ?3, ?4)",
        )
        .db()?
        .execute(params![key.run_id, key.call_id, json, at_ms])
        .db()?;
    }
    Ok(())
}

/// A call already in the ledger, as admission compares it.
struct Existing {
    tool: String,
    args_digest: String,
    /// What a replay answers: its reconciliation's result if it has one, else its own.
    result_json: Option<String>,
    events: String,
}

fn existing(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<Existing>, LedgerError> {
    conn.prepare_cached(
        "SELECT c.tool, c.args_digest, COALESCE(r.result_json, c.result_json), c.events
             FROM calls c
             LEFT JOIN reconciliations r ON r.run_id = c.run_id AND r.call_id = c.call_id
             WHERE c.run_id = ?1 AND c.call_id = ?2",
    )
    .db()?
    .query_row(params![run_id, call_id], |row| {
        Ok(Existing {
            tool: row.get(0)?,
            args_digest: row.get(1)?,
            result_json: row.get(2)?,
            events: row.get(3)?,
        })
    })
    .optional()
    .db()
}

/// Admission of an id the ledger already has: a replay, a call still in flight, or a conflict;
/// the decision is appended to the existing call's events.
fn decide(
    conn: &Connection,
    key: &CallKey,
    found: Existing,
    now: i64,
) -> Result<Admission, LedgerError> {
    let (run_id, call_id) = (key.run_id.as_str(), key.call_id.as_str());
    let admit_event = |decision: &str, detail: &str| {
        append_lines(
            conn,
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
        return Ok(Admission::Replay(Box::new(result)));
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
