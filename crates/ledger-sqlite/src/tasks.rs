//! Tasks on SQLite: the task's row, read with its call's state; cancel marks; pruning.

use crate::Db;
use rusqlite::{params, Connection, TransactionBehavior};

use super::lease::Lease;
use super::task_record::{task_arguments, task_call, NewTask, TaskCaps, TaskCreated, TaskRecord};
use super::LedgerError;

/// Insert `task` (its row keeping `content`), run by `owner`, created at `now`, unless its id
/// exists or its caller's open tasks would pass `caps`; one `BEGIN IMMEDIATE` transaction, so
/// that two processes never both take the last place.
pub(super) fn create(
    conn: &mut Connection,
    (task, content): (&NewTask, Option<&str>),
    caps: &TaskCaps,
    owner: &str,
    now: i64,
) -> Result<TaskCreated, LedgerError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db()?;
    let exists = tx
        .prepare_cached("SELECT 1 FROM tasks WHERE task_id = ?1")
        .db()?
        .exists([&task.task_id])
        .db()?;
    if exists {
        return Ok(TaskCreated::Exists);
    }
    let (open, bytes): (i64, i64) = tx
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(SUM(open_bytes), 0) FROM tasks
             WHERE principal = ?1 AND tenant = ?2 AND open_bytes IS NOT NULL
               AND expires_at_ms > ?3",
        )
        .db()?
        .query_row(
            params![task.caller.principal, task.caller.tenant, now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .db()?;
    let size = i64::try_from(task.arguments.len()).unwrap_or(i64::MAX);
    if !caps.admit(open, bytes, size) {
        return Ok(TaskCreated::Full);
    }
    tx.prepare_cached(
        "INSERT INTO tasks (task_id, principal, tenant, run_id, call_id, tool, arguments_json,
             call_digest, open_bytes, owner, created_at_ms, updated_at_ms, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)",
    )
    .db()?
    .execute(params![
        task.task_id,
        task.caller.principal,
        task.caller.tenant,
        task.run_id,
        task.call_id,
        task.tool,
        content,
        task.call_digest,
        size,
        owner,
        now,
        now.saturating_add(task.ttl_ms),
    ])
    .db()?;
    tx.commit().db()?;
    Ok(TaskCreated::Created)
}

/// Close the task: it no longer counts against its caller's caps, and forgets its arguments.
pub(super) fn close(conn: &Connection, task_id: &str) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "UPDATE tasks SET open_bytes = NULL, arguments_json = NULL
         WHERE task_id = ?1 AND open_bytes IS NOT NULL",
    )
    .db()?
    .execute([task_id])
    .db()?;
    Ok(())
}

/// The columns of a task and its call's state, for [`TASK_JOINS`] ([`task_of`] reads them).
const TASK_SELECT: &str = "SELECT t.task_id, t.principal, t.tenant, t.run_id, t.call_id, t.tool,
        t.owner, t.created_at_ms,
        MAX(t.updated_at_ms, COALESCE(c.started_at_ms, 0), COALESCE(c.finished_at_ms, 0)),
        t.expires_at_ms, t.cancel_requested_at_ms,
        c.state, COALESCE(r.result_json, c.result_json), t.arguments_json, t.call_digest,
        t.open_bytes IS NOT NULL";

/// The tables a task is read from.
const TASK_JOINS: &str = "FROM tasks t
     LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
     LEFT JOIN reconciliations r ON r.run_id = t.run_id AND r.call_id = t.call_id";

/// The task with its call's state, unless missing or expired by `now`.
pub(super) fn read(
    conn: &Connection,
    lease: &Lease,
    task_id: &str,
    now: i64,
) -> Result<Option<TaskRecord>, LedgerError> {
    let sql = format!("{TASK_SELECT} {TASK_JOINS} WHERE t.task_id = ?1 AND t.expires_at_ms > ?2");
    let mut stmt = conn.prepare_cached(&sql).db()?;
    let mut rows = stmt.query(params![task_id, now]).db()?;
    rows.next().db()?.map(|row| task_of(row, lease)).transpose()
}

/// The tasks of run `run_id` not expired by `now`, oldest first.
pub(super) fn of_run(
    conn: &Connection,
    lease: &Lease,
    run_id: &str,
    now: i64,
) -> Result<Vec<TaskRecord>, LedgerError> {
    let sql = format!(
        "{TASK_SELECT} {TASK_JOINS} WHERE t.run_id = ?1 AND t.expires_at_ms > ?2
         ORDER BY t.created_at_ms, t.task_id"
    );
    tasks_of(conn, lease, &sql, params![run_id, now])
}

/// At most `limit` tasks that wait for approval, oldest first: open, not cancelled nor
/// expired by `now`, keeping their arguments, their call finished (an open task's call ends
/// only to wait for approval, or just before the task is closed; the reader checks the
/// outcome).
pub(super) fn waiting(
    conn: &Connection,
    lease: &Lease,
    now: i64,
    limit: u32,
) -> Result<Vec<TaskRecord>, LedgerError> {
    let sql = format!(
        "{TASK_SELECT} {TASK_JOINS}
         WHERE t.open_bytes IS NOT NULL AND t.arguments_json IS NOT NULL
           AND t.cancel_requested_at_ms IS NULL AND c.state = 'finished'
           AND t.expires_at_ms > ?1
         ORDER BY t.created_at_ms, t.task_id LIMIT ?2"
    );
    tasks_of(conn, lease, &sql, params![now, limit])
}

/// Every task `sql` (a [`TASK_SELECT`]) reads with `values`, in its order.
fn tasks_of(
    conn: &Connection,
    lease: &Lease,
    sql: &str,
    values: impl rusqlite::Params,
) -> Result<Vec<TaskRecord>, LedgerError> {
    let mut stmt = conn.prepare_cached(sql).db()?;
    let mut rows = stmt.query(values).db()?;
    let mut tasks = Vec::new();
    while let Some(row) = rows.next().db()? {
        tasks.push(task_of(row, lease)?);
    }
    Ok(tasks)
}

/// One row of [`TASK_SELECT`]: the task, its call's state judged with `lease`.
fn task_of(row: &rusqlite::Row<'_>, lease: &Lease) -> Result<TaskRecord, LedgerError> {
    let owner: String = row.get(6).db()?;
    let state: Option<String> = row.get(11).db()?;
    let result: Option<String> = row.get(12).db()?;
    let arguments: Option<String> = row.get(13).db()?;
    let call = task_call(state, result, || lease.is_alive(&owner))?;
    Ok(TaskRecord {
        task_id: row.get(0).db()?,
        principal: row.get(1).db()?,
        tenant: row.get(2).db()?,
        run_id: row.get(3).db()?,
        call_id: row.get(4).db()?,
        tool: row.get(5).db()?,
        arguments: task_arguments(arguments)?,
        call_digest: row.get(14).db()?,
        open: row.get(15).db()?,
        owner,
        created_at_ms: row.get(7).db()?,
        updated_at_ms: row.get(8).db()?,
        expires_at_ms: row.get(9).db()?,
        cancel_requested_at_ms: row.get(10).db()?,
        call,
    })
}

/// Mark the task cancelled at `now` unless it is marked already.
pub(super) fn cancel(conn: &Connection, task_id: &str, now: i64) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "UPDATE tasks SET cancel_requested_at_ms = ?2, updated_at_ms = ?2
         WHERE task_id = ?1 AND cancel_requested_at_ms IS NULL",
    )
    .db()?
    .execute(params![task_id, now])
    .db()?;
    Ok(())
}

/// Point the task from call `from` to call `to`, run by `owner`: whether it was on `from`.
pub(super) fn retarget(
    conn: &Connection,
    task_id: &str,
    (from, to): (&str, &str),
    owner: &str,
    now: i64,
) -> Result<bool, LedgerError> {
    let n = conn
        .prepare_cached(
            "UPDATE tasks SET call_id = ?3, owner = ?4, updated_at_ms = ?5
             WHERE task_id = ?1 AND call_id = ?2 AND expires_at_ms > ?5",
        )
        .db()?
        .execute(params![task_id, from, to, owner, now])
        .db()?;
    Ok(n == 1)
}

/// `owner`'s tasks marked cancelled whose calls have no outcome yet.
pub(super) fn cancelled(conn: &Connection, owner: &str) -> Result<Vec<String>, LedgerError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT t.task_id FROM tasks t
         LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
         WHERE t.owner = ?1 AND t.cancel_requested_at_ms IS NOT NULL
           AND (c.state IS NULL OR c.state <> 'finished')",
        )
        .db()?;
    let ids = stmt
        .query_map([owner], |row| row.get(0))
        .db()?
        .collect::<Result<_, _>>()
        .db()?;
    Ok(ids)
}

/// Delete the tasks expired by `now`: how many.
pub(super) fn prune(conn: &Connection, now: i64) -> Result<u64, LedgerError> {
    let n = conn
        .prepare_cached("DELETE FROM tasks WHERE expires_at_ms <= ?1")
        .db()?
        .execute([now])
        .db()?;
    Ok(n as u64)
}
