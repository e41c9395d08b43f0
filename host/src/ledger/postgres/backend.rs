//! The call path's writes in PostgreSQL: a group per transaction, each write inside a savepoint
//! of its own so that one write's failure rolls back that write alone — the contract of
//! [`Backend`], as SQLite keeps it (`ledger/sqlite.rs`).
//!
//! The client is asynchronous; the backend owns a single-threaded runtime and blocks on it,
//! so it runs only on the group writer's own thread, never inline on an async worker
//! ([`Backend::commits_anywhere`] is `false`).

use tokio::runtime::Runtime;
use tokio_postgres::{Client, GenericClient};

use super::super::audit::pending_lines;
use super::super::write::{Applied, Backend, Write};
use super::super::{now_ms, Admission, LedgerError};
use super::calls::{
    admission_lines, append_lines, call_state, check_result_id, close_call, decide, insert,
    note_approval_requests,
};
use super::PgConfig;

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
