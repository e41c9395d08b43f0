//! Tasks in PostgreSQL: the task's row, read with its call's state and its host's lease;
//! cancel marks any host may set; pruning.

use crate::Db;
use serde_json::json;

use super::task_schema::DB_NOW_MS;
use super::PgStore;
use toolhost_ledger_store::task_record::{
    task_arguments, task_call, NewTask, TaskCaps, TaskCreated, TaskRecord,
};
use toolhost_ledger_store::LedgerError;

impl PgStore {
    pub fn create_task(
        &self,
        task: &NewTask,
        content: Option<&str>,
        caps: &TaskCaps,
        now: i64,
    ) -> Result<TaskCreated, LedgerError> {
        let (c, owner) = (self.connector(), self.owner().to_owned());
        let content = content.map(str::to_owned);
        let t = serde_json::to_string(&json!({
            "task_id": task.task_id,
            "principal": task.caller.principal,
            "tenant": task.caller.tenant,
            "run_id": task.run_id,
            "call_id": task.call_id,
            "tool": task.tool,
            "call_digest": task.call_digest,
            "size": task.arguments.len(),
            "expires_at_ms": now.saturating_add(task.ttl_ms),
        }))?;
        let open = i64::from(caps.open);
        let bytes = i64::try_from(caps.bytes).unwrap_or(i64::MAX);
        self.run(async move {
            let row = c
                .get()
                .await?
                .query_one(
                    "SELECT toolhost_create_task(($1::TEXT)::JSONB, $2, $3, $4, $5, $6)",
                    &[&t, &content, &owner, &now, &open, &bytes],
                )
                .await
                .db()?;
            Ok(match row.get::<_, String>(0).as_str() {
                "created" => TaskCreated::Created,
                "full" => TaskCreated::Full,
                _ => TaskCreated::Exists,
            })
        })
    }

    pub fn close_task(&self, task_id: &str) -> Result<(), LedgerError> {
        let (c, id) = (self.connector(), task_id.to_owned());
        self.run(async move {
            c.get()
                .await?
                .execute(
                    "UPDATE tasks SET open_bytes = NULL, arguments_json = NULL
                     WHERE task_id = $1 AND open_bytes IS NOT NULL",
                    &[&id],
                )
                .await
                .db()?;
            Ok(())
        })
    }

    pub fn task(&self, task_id: &str, now: i64) -> Result<Option<TaskRecord>, LedgerError> {
        let (c, id) = (self.connector(), task_id.to_owned());
        self.run(async move {
            let sql = format!(
                "{} WHERE t.task_id = $1 AND t.expires_at_ms > $2",
                task_sql()
            );
            let row = c.get().await?.query_opt(&sql, &[&id, &now]).await.db()?;
            row.as_ref().map(task_of).transpose()
        })
    }

    pub fn tasks_of_run(&self, run_id: &str, now: i64) -> Result<Vec<TaskRecord>, LedgerError> {
        let (c, run) = (self.connector(), run_id.to_owned());
        self.run(async move {
            let sql = format!(
                "{} WHERE t.run_id = $1 AND t.expires_at_ms > $2
                 ORDER BY t.created_at_ms, t.task_id",
                task_sql()
            );
            let rows = c.get().await?.query(&sql, &[&run, &now]).await.db()?;
            rows.iter().map(task_of).collect()
        })
    }

    pub fn waiting_tasks(&self, now: i64, limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        let c = self.connector();
        let limit = i64::from(limit);
        self.run(async move {
            let sql = format!(
                "{} WHERE {WAITING} AND t.expires_at_ms > $1
                 ORDER BY t.created_at_ms, t.task_id LIMIT $2",
                task_sql()
            );
            let rows = c.get().await?.query(&sql, &[&now, &limit]).await.db()?;
            rows.iter().map(task_of).collect()
        })
    }

    pub fn cancel_task(&self, task_id: &str, now: i64) -> Result<(), LedgerError> {
        let (c, id) = (self.connector(), task_id.to_owned());
        self.run(async move {
            c.get()
                .await?
                .execute(
                    "UPDATE tasks SET cancel_requested_at_ms = $2, updated_at_ms = $2
                     WHERE task_id = $1 AND cancel_requested_at_ms IS NULL",
                    &[&id, &now],
                )
                .await
                .db()?;
            Ok(())
        })
    }

    pub fn retarget_task(
        &self,
        task_id: &str,
        from: &str,
        to: &str,
        now: i64,
    ) -> Result<bool, LedgerError> {
        let (c, owner) = (self.connector(), self.owner().to_owned());
        let (id, from, to) = (task_id.to_owned(), from.to_owned(), to.to_owned());
        self.run(async move {
            let n = c
                .get()
                .await?
                .execute(
                    "UPDATE tasks SET call_id = $3, owner = $4, updated_at_ms = $5
                     WHERE task_id = $1 AND call_id = $2 AND expires_at_ms > $5",
                    &[&id, &from, &to, &owner, &now],
                )
                .await
                .db()?;
            Ok(n == 1)
        })
    }

    pub fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError> {
        let (c, owner) = (self.connector(), self.owner().to_owned());
        self.run(async move {
            let rows = c
                .get()
                .await?
                .query(
                    "SELECT t.task_id FROM tasks t
                     LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
                     WHERE t.owner = $1 AND t.cancel_requested_at_ms IS NOT NULL
                       AND (c.state IS NULL OR c.state <> 'finished')",
                    &[&owner],
                )
                .await
                .db()?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    pub fn prune_tasks(&self, now: i64) -> Result<u64, LedgerError> {
        let c = self.connector();
        self.run(async move {
            c.get()
                .await?
                .execute("DELETE FROM tasks WHERE expires_at_ms <= $1", &[&now])
                .await
                .db()
        })
    }
}

/// A task and its call's state, with whether its host holds its lease ([`task_of`] reads it).
fn task_sql() -> String {
    format!(
        "SELECT t.task_id, t.principal, t.tenant, t.run_id, t.call_id, t.tool, t.owner,
                t.created_at_ms, GREATEST(t.updated_at_ms, c.started_at_ms, c.finished_at_ms),
                t.expires_at_ms, t.cancel_requested_at_ms, c.state,
                COALESCE(r.result_json, c.result_json),
                EXISTS (SELECT 1 FROM hosts h
                        WHERE h.owner = t.owner AND h.lease_until_ms > {DB_NOW_MS}),
                t.arguments_json, t.call_digest, t.open_bytes IS NOT NULL
         FROM tasks t
         LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
         LEFT JOIN reconciliations r ON r.run_id = t.run_id AND r.call_id = t.call_id"
    )
}

/// A task that waits for approval: open, not cancelled, keeping its arguments, its call
/// finished (an open task's call ends only to wait for approval, or just before the task is
/// closed; the reader checks the outcome).
const WAITING: &str = "t.open_bytes IS NOT NULL AND t.arguments_json IS NOT NULL
     AND t.cancel_requested_at_ms IS NULL AND c.state = 'finished'";

/// One row of [`task_sql`].
fn task_of(row: &tokio_postgres::Row) -> Result<TaskRecord, LedgerError> {
    let state: Option<String> = row.get(11);
    let result: Option<String> = row.get(12);
    let alive: bool = row.get(13);
    let arguments: Option<String> = row.get(14);
    let call = task_call(state, result, || alive)?;
    Ok(TaskRecord {
        task_id: row.get(0),
        principal: row.get(1),
        tenant: row.get(2),
        run_id: row.get(3),
        call_id: row.get(4),
        tool: row.get(5),
        arguments: task_arguments(arguments)?,
        call_digest: row.get(15),
        open: row.get(16),
        owner: row.get(6),
        created_at_ms: row.get(7),
        updated_at_ms: row.get(8),
        expires_at_ms: row.get(9),
        cancel_requested_at_ms: row.get(10),
        call,
    })
}
