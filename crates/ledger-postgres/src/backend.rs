//! The call path's writes in PostgreSQL: a group in one round trip. `toolhost_apply` (schema
//! version 4) applies the group's writes in order in the one transaction of its statement,
//! each in a subtransaction of its own so that one write's failure is that write's alone —
//! the contract of [`Backend`], as SQLite keeps it (`crates/ledger-sqlite/src/backend.rs`) — and answers for
//! each. Everything a write stores that does not depend on the database (event lines, the
//! outcome's columns) is computed here, by the same code SQLite's writes use (`group.rs`
//! gets them ready on the callers' threads).
//!
//! A group carries an id the server remembers with its answers: when a connection drops
//! mid-group the writer cannot tell whether the group committed, so it sends the same group
//! once more on a new connection, and the server either applies it (it had not) or answers
//! from its record (it had) — never both.
//!
//! The client is asynchronous; the backend owns a single-threaded runtime and blocks on it,
//! so it runs only on the group writer's own thread, never inline on an async worker
//! ([`Backend::commits_anywhere`] is `false`).

use serde_json::{json, Value};
use tokio::runtime::Runtime;
use tokio_postgres::Client;

use super::PgConfig;
use toolhost_contract::Stage;
use toolhost_ledger_store::codec::decode_result;
use toolhost_ledger_store::error::check_key;
use toolhost_ledger_store::events::{
    approval_digests, event_lines, pending_lines, PendingEvent, CAPPED, CAPPED_DETAIL,
    MAX_APPENDED_EVENTS_CHARS,
};
use toolhost_ledger_store::outcome::Outcome;
use toolhost_ledger_store::write::{
    admission_lines, check_result_id, finish_lines, Applied, Backend, CallKey, Write,
};
use toolhost_ledger_store::{now_ms, Admission, LedgerError};

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
    pub fn connect(config: &PgConfig, owner: String) -> Result<PgBackend, LedgerError> {
        let kept = config.clone();
        let config = config.clone();
        let chain = format!("{owner}/writer");
        let connecting = std::thread::Builder::new()
            .name("toolhost-ledger-connect".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let client = runtime.block_on(async {
                    let mut client = config.connect_as(&chain).await?;
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
}

impl Backend for PgBackend {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        let now = now_ms();
        // A write the host refuses itself (an outcome for another call, an oversized key)
        // never goes to the server; the others are sent in one message.
        let mut answers = Vec::with_capacity(writes.len());
        let mut sent = Vec::with_capacity(writes.len());
        for write in writes {
            match encode(write, now) {
                Ok(v) => {
                    sent.push(v);
                    answers.push(None);
                }
                Err(e) => answers.push(Some(Err(e))),
            }
        }
        let mut replies = if sent.is_empty() {
            Vec::new()
        } else {
            self.send(Value::Array(sent), now)?
        }
        .into_iter();
        writes
            .iter()
            .zip(answers)
            .map(|(write, answer)| match answer {
                Some(refused) => Ok(refused),
                None => replies
                    .next()
                    .map(|reply| decode(write, reply))
                    .ok_or_else(|| {
                        LedgerError::Commit("the server answered too few writes".into())
                    }),
            })
            .collect()
    }

    fn commits_anywhere(&self) -> bool {
        false
    }
}

impl PgBackend {
    /// Send one group and return the server's answer for each of its writes.
    fn send(&mut self, group: Value, now: i64) -> Result<Vec<Value>, LedgerError> {
        let PgBackend {
            runtime,
            client,
            config,
            owner,
        } = self;
        let runtime = runtime
            .as_ref()
            .ok_or_else(|| LedgerError::Commit("the ledger's writer has stopped".into()))?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let writes = group.to_string();
        let marker = event_lines([(now, Stage::Admit.as_str(), CAPPED, CAPPED_DETAIL)])?;
        runtime.block_on(async {
            // A connection the server dropped (a restart, an outage) is made again here, so
            // the group after an outage commits without restarting the host. This runtime
            // only runs while a group is sent, so a connection cut meanwhile may be found
            // closed only now: the same group (same id) is then sent once more.
            let mut last = None;
            for _ in 0..2 {
                if client.as_ref().is_none_or(Client::is_closed) {
                    *client = None;
                    match config.connect_as(&format!("{owner}/writer")).await {
                        Ok(c) => *client = Some(c),
                        Err(e) => return Err(e),
                    }
                }
                let Some(c) = client.as_ref() else {
                    break;
                };
                let sent = tokio::time::timeout(
                    super::store::OPERATION_TIMEOUT,
                    c.query_one(
                        "SELECT toolhost_apply($1, $2, ($3::TEXT)::JSONB, $4, $5)::TEXT",
                        &[&id, &*owner, &writes, &MAX_APPENDED_EVENTS_CHARS, &marker],
                    ),
                )
                .await;
                match sent {
                    Ok(Ok(row)) => {
                        let text: String = row.get(0);
                        return serde_json::from_str::<Vec<Value>>(&text).map_err(|e| {
                            LedgerError::Corrupt(format!("the server's answer to a group: {e}"))
                        });
                    }
                    Ok(Err(e)) if e.is_closed() || c.is_closed() => {
                        *client = None;
                        last = Some(crate::database(e));
                    }
                    Ok(Err(e)) => return Err(LedgerError::Commit(e.to_string())),
                    Err(_) => {
                        *client = None;
                        return Err(LedgerError::Commit(
                            "the ledger's server did not answer in time".into(),
                        ));
                    }
                }
            }
            Err(last.unwrap_or_else(|| {
                LedgerError::Commit("no connection to the ledger's server".into())
            }))
        })
    }
}

/// A write as `toolhost_apply` takes it.
pub(super) fn encode(write: &Write, now: i64) -> Result<Value, LedgerError> {
    Ok(match write {
        Write::Admit(key) => {
            check_key(&key.run_id, &key.call_id, &key.tool)?;
            json!({
                "op": "admit", "key": key_json(key), "at_ms": now, "now": now,
                "lines": admission_lines(key, now, &[])?,
            })
        }
        Write::AdmitLate {
            key,
            at_ms,
            events,
            content,
            finished,
        } => {
            check_key(&key.run_id, &key.call_id, &key.tool)?;
            let mut lines = admission_lines(key, *at_ms, events)?;
            if let Some(outcome) = finished {
                check_result_id(&key.run_id, &key.call_id, outcome)?;
                lines.push_str(&outcome.record_line(now)?);
            }
            json!({
                "op": "admit_late", "key": key_json(key), "at_ms": at_ms, "now": now,
                "lines": lines, "content": content,
                "outcome": finished.as_ref().map(outcome_json),
                "approvals": approval_digests(events).collect::<Vec<_>>(),
            })
        }
        Write::MarkStarted {
            run_id,
            call_id,
            events,
        } => json!({
            "op": "mark_started", "run_id": run_id, "call_id": call_id, "now": now,
            "lines": pending_lines(events)?, "approvals": approval_digests(events).collect::<Vec<_>>(),
        }),
        Write::Finish {
            run_id,
            call_id,
            outcome,
            events,
        } => {
            let lines = finish_lines(run_id, call_id, outcome, events, now)?;
            json!({
                "op": "finish", "run_id": run_id, "call_id": call_id, "now": now,
                "lines": lines, "outcome": outcome_json(outcome),
                "approvals": approval_digests(events).collect::<Vec<_>>(),
            })
        }
        Write::Event {
            run_id,
            call_id,
            event,
        } => {
            let events: &[PendingEvent] = std::slice::from_ref(event);
            json!({
                "op": "event", "run_id": run_id, "call_id": call_id, "now": now,
                "lines": pending_lines(events)?, "approvals": approval_digests(events).collect::<Vec<_>>(),
            })
        }
    })
}

fn key_json(key: &CallKey) -> Value {
    json!({
        "run_id": key.run_id, "call_id": key.call_id, "tool": key.tool,
        "args_digest": key.args_digest, "args_size": key.args_size,
        "component_digest": key.component_digest, "definition_digest": key.definition_digest,
    })
}

fn outcome_json(outcome: &Outcome) -> Value {
    let o = outcome.stored();
    json!({
        "status": o.status, "code": o.code, "message": o.message,
        "diagnostic_id": o.diagnostic_id, "output_digest": o.output_digest,
        "output_size": o.output_size, "fuel_consumed": o.usage[0], "wall_ms": o.usage[1],
        "memory_peak_bytes": o.usage[2], "output_bytes": o.usage[3],
        "result_json": o.result_json, "started_at_ms": o.started_at_ms,
    })
}

/// What the server answered for `write`.
fn decode(write: &Write, reply: Value) -> Result<Applied, LedgerError> {
    let (run_id, call_id) = match write {
        Write::Admit(key) | Write::AdmitLate { key, .. } => (&key.run_id, &key.call_id),
        Write::MarkStarted {
            run_id, call_id, ..
        }
        | Write::Finish {
            run_id, call_id, ..
        }
        | Write::Event {
            run_id, call_id, ..
        } => (run_id, call_id),
    };
    if reply == json!("done") {
        return Ok(Applied::Done);
    }
    if let Some(error) = reply.get("error").and_then(Value::as_str) {
        return Err(if error.starts_with("toolhost:unknown_call") {
            LedgerError::unknown(run_id, call_id)
        } else if error.starts_with("toolhost:already_finished") {
            LedgerError::finished(run_id, call_id)
        } else {
            let state = reply.get("state").and_then(Value::as_str).unwrap_or("?");
            LedgerError::Commit(format!(
                "the ledger's server refused a write ({state}): {error}"
            ))
        });
    }
    let admission = match reply.get("admission").and_then(Value::as_str) {
        Some("new") => Admission::New {
            seq: reply.get("seq").and_then(Value::as_i64).ok_or_else(|| {
                LedgerError::Corrupt("an admission answered without its seq".into())
            })?,
        },
        Some("replay") => Admission::Replay(Box::new(decode_result(
            reply
                .get("result")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )?)),
        Some("in_flight") => Admission::InFlight,
        Some("conflict") => Admission::Conflict,
        _ => {
            return Err(LedgerError::Corrupt(format!(
                "the server's answer to a write: {reply}"
            )))
        }
    };
    Ok(Applied::Admission(admission))
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
