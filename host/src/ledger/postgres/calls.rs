//! The statements on one call's row in PostgreSQL: insert it unless its key exists, decide
//! an admission of an id already there, append events (capped), close it with its outcome,
//! and note approval requests. The group writer (`backend.rs`) and recovery (`lease.rs`) run
//! them; each is one statement or a few, inside the caller's transaction.

use tokio_postgres::GenericClient;

use super::super::audit::{event_lines, pending_lines, PendingEvent, MAX_APPENDED_EVENTS_CHARS};
use super::super::codec::{decode_result, to_sql_u64};
use super::super::error::check_key;
use super::super::outcome::Outcome;
use super::super::write::CallKey;
use super::super::{now_ms, Admission, LedgerError};
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

/// Insert a new call unless its key exists: `Some(seq)` when this write admitted it, `None`
/// when another admission holds the key (after waiting for it to commit or roll back).
pub(super) async fn insert(
    c: &impl GenericClient,
    owner: &str,
    key: &CallKey,
    at_ms: i64,
    lines: &str,
    finished: Option<(&Outcome, i64)>,
) -> Result<Option<i64>, LedgerError> {
    check_key(&key.run_id, &key.call_id, &key.tool)?;
    let args_size = to_sql_u64(key.args_size);
    let row = match finished {
        None => {
            c.query_opt(
                "INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state,
                                    admitted_at_ms, owner, events)
                 VALUES ($1, $2, $3, $4, $5, 'admitted', $6, $7, $8)
                 ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq",
                &[
                    &key.run_id,
                    &key.call_id,
                    &key.tool,
                    &key.args_digest,
                    &args_size,
                    &at_ms,
                    &owner,
                    &lines,
                ],
            )
            .await?
        }
        Some((outcome, now)) => {
            let o = outcome.stored();
            c.query_opt(
                "INSERT INTO calls (status, code, message, diagnostic_id, output_digest,
                                    output_size, fuel_consumed, wall_ms, memory_peak_bytes,
                                    output_bytes, result_json, started_at_ms,
                                    run_id, call_id, tool, args_digest, args_size, state,
                                    admitted_at_ms, owner, events, finished_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
                         $13, $14, $15, $16, $17, 'finished', $18, $19, $20, $21)
                 ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq",
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
                    &key.run_id,
                    &key.call_id,
                    &key.tool,
                    &key.args_digest,
                    &args_size,
                    &at_ms,
                    &owner,
                    &lines,
                    &now,
                ],
            )
            .await?
        }
    };
    Ok(row.map(|r| r.get(0)))
}

/// Admission of an id the ledger already has: a replay, a call still in flight, or a
/// conflict; the decision is appended to the existing call's events.
pub(super) async fn decide(
    c: &impl GenericClient,
    key: &CallKey,
    now: i64,
) -> Result<Admission, LedgerError> {
    let (run_id, call_id) = (key.run_id.as_str(), key.call_id.as_str());
    let row = c
        .query_one(
            "SELECT tool, args_digest, result_json, events FROM calls
             WHERE run_id = $1 AND call_id = $2 FOR UPDATE",
            &[&run_id, &call_id],
        )
        .await?;
    let (tool, digest): (String, String) = (row.get(0), row.get(1));
    let result_json: Option<String> = row.get(2);
    let events: String = row.get(3);
    let admit_event = |decision: &'static str, detail: String| async move {
        let lines = event_lines([(now, Stage::Admit.as_str(), decision, detail.as_str())])?;
        append_lines(c, run_id, call_id, &lines).await
    };
    if tool != key.tool || digest != key.args_digest {
        let detail = format!(
            "call id reused for tool {:?} with arguments sha256 {}, {} bytes (admitted: tool \
             {tool:?}, sha256 {digest}); refused as duplicate_call_id, this call unchanged",
            key.tool, key.args_digest, key.args_size
        );
        admit_event(Decision::Conflict.as_str(), detail).await?;
        return Ok(Admission::Conflict);
    }
    if let Some(result_json) = result_json {
        let result = decode_result(&result_json)?;
        admit_event(
            Decision::Replay.as_str(),
            "same call again; answered from its recorded outcome, not re-run".into(),
        )
        .await?;
        return Ok(Admission::Replay(result));
    }
    // A duplicate may poll admit until the original ends: one event per streak.
    let in_flight = format!(
        "\"stage\":\"{}\",\"decision\":\"{}\"",
        Stage::Admit.as_str(),
        Decision::InFlight.as_str()
    );
    if !events
        .lines()
        .last()
        .unwrap_or_default()
        .contains(&in_flight)
    {
        admit_event(
            Decision::InFlight.as_str(),
            "same call again while it has no outcome yet; not run twice".into(),
        )
        .await?;
    }
    Ok(Admission::InFlight)
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

/// Append event lines to an admitted call, up to [`MAX_APPENDED_EVENTS_CHARS`] (then one
/// `not_recorded` marker); `UnknownCall` if it was never admitted.
pub(super) async fn append_lines(
    c: &impl GenericClient,
    run_id: &str,
    call_id: &str,
    lines: &str,
) -> Result<(), LedgerError> {
    const CAPPED: &str = "not_recorded";
    let marker = event_lines([(
        now_ms(),
        Stage::Admit.as_str(),
        CAPPED,
        "this call's audit trail is full; later repeats of it are not recorded",
    )])?;
    let changed = c
        .execute(
            "UPDATE calls SET events = events || CASE
                 WHEN length(events) + length($3) <= $4::BIGINT THEN $3
                 WHEN strpos(events, $5) > 0 THEN ''
                 ELSE $6 END
             WHERE run_id = $1 AND call_id = $2",
            &[
                &run_id,
                &call_id,
                &lines,
                &MAX_APPENDED_EVENTS_CHARS,
                &format!("\"decision\":\"{CAPPED}\""),
                &marker,
            ],
        )
        .await?;
    if changed == 0 {
        return Err(LedgerError::unknown(run_id, call_id));
    }
    Ok(())
}

/// Remember the calls among `events` that asked for approval (the first call per digest
/// stays).
pub(super) async fn note_approval_requests(
    c: &impl GenericClient,
    run_id: &str,
    call_id: &str,
    events: &[PendingEvent],
) -> Result<(), LedgerError> {
    for e in events {
        if e.stage.as_str() == Stage::Approve.as_str()
            && e.decision.as_str() == Code::ApprovalRequired.as_str()
        {
            c.execute(
                "INSERT INTO approval_requests (digest, run_id, call_id) VALUES ($1, $2, $3)
                 ON CONFLICT (digest) DO NOTHING",
                &[&e.detail, &run_id, &call_id],
            )
            .await?;
        }
    }
    Ok(())
}
