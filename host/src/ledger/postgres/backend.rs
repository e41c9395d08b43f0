//! The call path's writes in PostgreSQL: a group per transaction, each write inside a savepoint
//! of its own so that one write's failure rolls back that write alone — the contract of
//! [`Backend`], as SQLite keeps it (`ledger/sqlite.rs`).
//!
//! The client is asynchronous; the backend owns a single-threaded runtime and blocks on it,
//! so it runs only on the group writer's own thread, never inline on an async worker
//! ([`Backend::commits_anywhere`] is `false`).

use tokio::runtime::Runtime;
use tokio_postgres::{Client, GenericClient};

use super::super::audit::{event_lines, pending_lines, PendingEvent, MAX_APPENDED_EVENTS_CHARS};
use super::super::codec::{decode_result, to_sql_u64};
use super::super::error::check_key;
use super::super::outcome::Outcome;
use super::super::write::{Applied, Backend, CallKey, Write};
use super::super::{now_ms, Admission, LedgerError};
use super::PgConfig;
use crate::contract::{Code, Decision, Stage};

/// The writer's own connection to the PostgreSQL ledger, and the lease its calls are owned by.
pub struct PgBackend {
    /// Taken only by `Drop`.
    runtime: Option<Runtime>,
    /// `None` after the server dropped the connection: the next group connects again.
    client: Option<Client>,
    config: PgConfig,
    owner: String,
}

impl PgBackend {
    /// Connect (and migrate the schema, under its lock); new calls are owned by `owner`. Safe
    /// to call from any thread: the connecting is done on a thread of its own, since a
    /// runtime cannot be blocked on from inside another.
    pub fn connect(config: &PgConfig, owner: String) -> Result<PgBackend, LedgerError> {
        let kept = config.clone();
        let config = config.clone();
        let connecting = std::thread::Builder::new()
            .name("toolhost-ledger-connect".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let client = runtime.block_on(async {
                    let mut client = config.connect().await?;
                    super::migrate(&mut client, &config.schema).await?;
                    Ok::<_, LedgerError>(client)
                })?;
                Ok::<_, LedgerError>((runtime, client))
            })?;
        let (runtime, client) = connecting.join().map_err(|_| {
            LedgerError::Commit("connecting to the ledger's server panicked".into())
        })??;
        Ok(PgBackend {
            runtime: Some(runtime),
            client: Some(client),
            config: kept,
            owner,
        })
    }

    /// Apply one group in one transaction. A `BEGIN` that fails is [`Group::NotStarted`]:
    /// nothing of the group reached the server, so it may be sent again on a new connection.
    async fn apply_group(client: &mut Client, owner: &str, writes: &[Write]) -> Group {
        let mut tx = match client.transaction().await {
            Ok(tx) => tx,
            Err(e) => return Group::NotStarted(e.into()),
        };
        let mut results = Vec::with_capacity(writes.len());
        for write in writes {
            let sp = match tx.savepoint("w").await {
                Ok(sp) => sp,
                Err(e) => return Group::Failed(e.into()),
            };
            let result = apply_one(&sp, owner, write).await;
            let ended = match &result {
                Ok(_) => sp.commit().await,
                Err(_) => sp.rollback().await,
            };
            if let Err(e) = ended {
                return Group::Failed(e.into());
            }
            results.push(result);
        }
        match tx.commit().await {
            Ok(()) => Group::Applied(results),
            Err(e) => Group::Failed(LedgerError::Commit(e.to_string())),
        }
    }
}

/// How applying a group ended.
enum Group {
    Applied(Vec<Result<Applied, LedgerError>>),
    /// The transaction never began (typically: the connection was found closed).
    NotStarted(LedgerError),
    /// The transaction failed: nothing of the group is committed.
    Failed(LedgerError),
}

impl Backend for PgBackend {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        let PgBackend {
            runtime,
            client,
            config,
            owner,
        } = self;
        let runtime = runtime
            .as_ref()
            .ok_or_else(|| LedgerError::Commit("the ledger's writer has stopped".into()))?;
        runtime.block_on(async {
            // A connection the server dropped (a restart, an outage) is made again here, so
            // the group after an outage commits without restarting the host. This runtime
            // only runs while a group is applied, so a connection cut meanwhile is found
            // closed by the group's `BEGIN`: then the group, which did not start, is sent
            // once more on a new connection.
            for attempt in 0..2 {
                if client.as_ref().is_none_or(Client::is_closed) {
                    *client = None;
                    *client = Some(config.connect().await?);
                }
                let Some(c) = client.as_mut() else {
                    return Err(LedgerError::Commit(
                        "no connection to the ledger's server".into(),
                    ));
                };
                let group = tokio::time::timeout(
                    super::store::OPERATION_TIMEOUT,
                    Self::apply_group(c, owner, writes),
                )
                .await
                .unwrap_or_else(|_| {
                    Group::Failed(LedgerError::Commit(
                        "the ledger's server did not answer in time".into(),
                    ))
                });
                match group {
                    Group::Applied(results) => return Ok(results),
                    Group::NotStarted(e) => {
                        *client = None;
                        if attempt == 1 {
                            return Err(e);
                        }
                    }
                    Group::Failed(e) => {
                        // A group cut short may leave the connection mid-transaction.
                        *client = None;
                        return Err(e);
                    }
                }
            }
            Err(LedgerError::Commit(
                "no connection to the ledger's server".into(),
            ))
        })
    }

    fn commits_anywhere(&self) -> bool {
        false
    }
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        // The last owner may be an async worker, where dropping a runtime (which blocks) is
        // refused.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn apply_one(
    c: &impl GenericClient,
    owner: &str,
    write: &Write,
) -> Result<Applied, LedgerError> {
    let now = now_ms();
    match write {
        Write::Admit(key) => {
            let lines = admission_lines(key, now, &[])?;
            Ok(Applied::Admission(
                match insert(c, owner, key, now, &lines, None).await? {
                    Some(seq) => Admission::New { seq },
                    None => decide(c, key, now).await?,
                },
            ))
        }
        Write::AdmitLate {
            key,
            at_ms,
            events,
            content,
            finished,
        } => {
            let mut lines = admission_lines(key, *at_ms, events)?;
            if let Some(outcome) = finished {
                check_result_id(&key.run_id, &key.call_id, outcome)?;
                lines.push_str(&outcome.record_line(now)?);
            }
            let finished = finished.as_ref().map(|o| (o, now));
            let Some(seq) = insert(c, owner, key, *at_ms, &lines, finished).await? else {
                return Ok(Applied::Admission(decide(c, key, now).await?));
            };
            if finished.is_none() {
                c.execute(
                    "UPDATE calls SET state = 'started', started_at_ms = $2 WHERE seq = $1",
                    &[&seq, &now],
                )
                .await?;
            }
            if let Some(json) = content {
                c.execute(
                    "INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
                     VALUES ($1, $2, $3, $4)",
                    &[&key.run_id, &key.call_id, json, at_ms],
                )
                .await?;
            }
            note_approval_requests(c, &key.run_id, &key.call_id, events).await?;
            Ok(Applied::Admission(Admission::New { seq }))
        }
        Write::MarkStarted {
            run_id,
            call_id,
            events,
        } => {
            let lines = pending_lines(events)?;
            let changed = c
                .execute(
                    "UPDATE calls SET state = 'started', started_at_ms = $3,
                         events = events || $4
                     WHERE run_id = $1 AND call_id = $2 AND state = 'admitted'",
                    &[run_id, call_id, &now, &lines],
                )
                .await?;
            if changed != 1 {
                match call_state(c, run_id, call_id).await? {
                    None => return Err(LedgerError::unknown(run_id, call_id)),
                    Some(state) if state == "finished" => {
                        return Err(LedgerError::finished(run_id, call_id))
                    }
                    Some(_) => append_lines(c, run_id, call_id, &lines).await?,
                }
            }
            note_approval_requests(c, run_id, call_id, events).await?;
            Ok(Applied::Done)
        }
        Write::Finish {
            run_id,
            call_id,
            outcome,
            events,
        } => {
            check_result_id(run_id, call_id, outcome)?;
            let mut lines = pending_lines(events)?;
            lines.push_str(&outcome.record_line(now)?);
            close_call(c, run_id, call_id, outcome, now, &lines).await?;
            note_approval_requests(c, run_id, call_id, events).await?;
            Ok(Applied::Done)
        }
        Write::Event {
            run_id,
            call_id,
            event,
        } => {
            let events = std::slice::from_ref(event);
            append_lines(c, run_id, call_id, &pending_lines(events)?).await?;
            note_approval_requests(c, run_id, call_id, events).await?;
            Ok(Applied::Done)
        }
    }
}

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
fn check_result_id(run_id: &str, call_id: &str, outcome: &Outcome) -> Result<(), LedgerError> {
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
fn admission_lines(
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
async fn insert(
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
async fn decide(c: &impl GenericClient, key: &CallKey, now: i64) -> Result<Admission, LedgerError> {
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

async fn call_state(
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
async fn append_lines(
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
async fn note_approval_requests(
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
