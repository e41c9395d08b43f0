//! Tasks on SQLite: the task's row, read with its call's state; cancel marks; pruning.

use rusqlite::{params, Connection, OptionalExtension};

use super::super::codec::decode_result;
use super::super::task_record::{NewTask, TaskCall, TaskRecord};
use super::super::LedgerError;
use super::lease::Lease;

/// Insert `task`, run by `owner`, created at `now`.
pub(super) fn create(
    conn: &Connection,
    task: &NewTask,
    owner: &str,
    now: i64,
) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "INSERT INTO tasks (task_id, principal, tenant, run_id, call_id, tool, owner,
             created_at_ms, updated_at_ms, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)",
    )?
    .execute(params![
        task.task_id,
        task.principal,
        task.tenant,
        task.run_id,
        task.call_id,
        task.tool,
        owner,
        now,
        now.saturating_add(task.ttl_ms)
    ])?;
    Ok(())
}

/// The task with its call's state, unless missing or expired by `now`.
pub(super) fn read(
    conn: &Connection,
    lease: &Lease,
    task_id: &str,
    now: i64,
) -> Result<Option<TaskRecord>, LedgerError> {
    type Row = (TaskRecord, Option<String>, Option<String>);
    let found: Option<Row> = conn
        .prepare_cached(
            "SELECT t.task_id, t.principal, t.tenant, t.run_id, t.call_id, t.tool, t.owner,
                    t.created_at_ms, t.updated_at_ms, t.expires_at_ms, t.cancel_requested_at_ms,
                    c.state, COALESCE(r.result_json, c.result_json)
             FROM tasks t
             LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
             LEFT JOIN reconciliations r ON r.run_id = t.run_id AND r.call_id = t.call_id
             WHERE t.task_id = ?1 AND t.expires_at_ms > ?2",
        )?
        .query_row(params![task_id, now], |row| {
            Ok((
                TaskRecord {
                    task_id: row.get(0)?,
                    principal: row.get(1)?,
                    tenant: row.get(2)?,
                    run_id: row.get(3)?,
                    call_id: row.get(4)?,
                    tool: row.get(5)?,
                    owner: row.get(6)?,
                    created_at_ms: row.get(7)?,
                    updated_at_ms: row.get(8)?,
                    expires_at_ms: row.get(9)?,
                    cancel_requested_at_ms: row.get(10)?,
                    call: TaskCall::Running,
                },
                row.get(11)?,
                row.get(12)?,
            ))
        })
        .optional()?;
    let Some((mut task, state, result)) = found else {
        return Ok(None);
    };
    task.call = match (state, result) {
        (_, Some(json)) => TaskCall::Finished(Box::new(decode_result(&json)?)),
        (Some(_), None) => TaskCall::Running,
        (None, None) if lease.is_alive(&task.owner) => TaskCall::Running,
        (None, None) => TaskCall::Lost,
    };
    Ok(Some(task))
}

/// Mark the task cancelled at `now` unless it is marked already.
pub(super) fn cancel(conn: &Connection, task_id: &str, now: i64) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "UPDATE tasks SET cancel_requested_at_ms = ?2, updated_at_ms = ?2
         WHERE task_id = ?1 AND cancel_requested_at_ms IS NULL",
    )?
    .execute(params![task_id, now])?;
    Ok(())
}

/// `owner`'s tasks marked cancelled whose calls have no outcome yet.
pub(super) fn cancelled(conn: &Connection, owner: &str) -> Result<Vec<String>, LedgerError> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.task_id FROM tasks t
         LEFT JOIN calls c ON c.run_id = t.run_id AND c.call_id = t.call_id
         WHERE t.owner = ?1 AND t.cancel_requested_at_ms IS NOT NULL
           AND (c.state IS NULL OR c.state <> 'finished')",
    )?;
    let ids = stmt
        .query_map([owner], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}

/// Delete the tasks expired by `now`: how many.
pub(super) fn prune(conn: &Connection, now: i64) -> Result<u64, LedgerError> {
    let n = conn
        .prepare_cached("DELETE FROM tasks WHERE expires_at_ms <= ?1")?
        .execute([now])?;
    Ok(n as u64)
}
