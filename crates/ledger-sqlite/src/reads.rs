//! The SQLite store's reads: admission questions, a call's outcome, approval requests and the
//! call listing.

use crate::Db;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::codec::decode_result;
use super::events::{CallRecord, RawCall, RawReconciliation, CALL_COLUMNS, CALL_JOINS};
use super::verdicts::UnknownFilter;
use super::LedgerError;
use toolhost_contract::ToolResult;

/// The admission digest of a call, if it was admitted.
pub(super) fn admitted_digest(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<String>, LedgerError> {
    conn.prepare_cached("SELECT args_digest FROM calls WHERE run_id = ?1 AND call_id = ?2")
        .db()?
        .query_row(params![run_id, call_id], |row| row.get(0))
        .optional()
        .db()
}

/// The recorded terminal result of a call; `UnknownCall` if it was never admitted.
pub(super) fn outcome(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<ToolResult>, LedgerError> {
    let row: Option<Option<String>> = conn
        .prepare_cached(
            "SELECT COALESCE(r.result_json, c.result_json) FROM calls c
             LEFT JOIN reconciliations r ON r.run_id = c.run_id AND r.call_id = c.call_id
             WHERE c.run_id = ?1 AND c.call_id = ?2",
        )
        .db()?
        .query_row(params![run_id, call_id], |row| row.get(0))
        .optional()
        .db()?;
    match row {
        None => Err(LedgerError::unknown(run_id, call_id)),
        Some(json) => json.as_deref().map(decode_result).transpose(),
    }
}

/// The first call that asked for approval of `digest`.
pub(super) fn approval_request(
    conn: &Connection,
    digest: &str,
) -> Result<Option<(String, String)>, LedgerError> {
    conn.prepare_cached("SELECT run_id, call_id FROM approval_requests WHERE digest = ?1")
        .db()?
        .query_row([digest], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
        .db()
}

/// Every call (of one run, or of all), in admission order, each with its events. One
/// statement: one snapshot, so every call comes with exactly its events.
pub(super) fn calls(conn: &Connection, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
    let filter = if run.is_some() {
        "WHERE c.run_id = ?1"
    } else {
        "WHERE ?1 IS NULL"
    };
    let sql = format!("SELECT {CALL_COLUMNS} FROM {CALL_JOINS} {filter} ORDER BY c.seq");
    let mut records = Vec::new();
    let mut stmt = conn.prepare_cached(&sql).db()?;
    let mut rows = stmt.query([run]).db()?;
    while let Some(row) = rows.next().db()? {
        records.push(call_record(row)?);
    }
    Ok(records)
}

/// One call, if it was admitted.
pub(super) fn call(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Option<CallRecord>, LedgerError> {
    let sql =
        format!("SELECT {CALL_COLUMNS} FROM {CALL_JOINS} WHERE c.run_id = ?1 AND c.call_id = ?2");
    let mut stmt = conn.prepare_cached(&sql).db()?;
    let mut rows = stmt.query(params![run_id, call_id]).db()?;
    rows.next().db()?.map(call_record).transpose()
}

/// The calls that ended `outcome_unknown` that `filter` selects, oldest first (through the
/// partial index `calls_unknown`).
pub(super) fn unknown_calls(
    conn: &Connection,
    filter: &UnknownFilter,
) -> Result<Vec<CallRecord>, LedgerError> {
    let sql = format!(
        "SELECT {CALL_COLUMNS} FROM {CALL_JOINS}
         WHERE c.status = 'outcome_unknown'
           AND (?1 IS NULL OR c.run_id = ?1) AND (?2 IS NULL OR c.tool = ?2)
           AND (?3 IS NULL OR c.finished_at_ms <= ?3) AND (?4 OR r.run_id IS NULL)
         ORDER BY c.seq LIMIT ?5"
    );
    let mut stmt = conn.prepare_cached(&sql).db()?;
    let mut rows = stmt
        .query(params![
            filter.run,
            filter.tool,
            filter.closed_before_ms,
            filter.include_reconciled,
            filter.limit
        ])
        .db()?;
    let mut records = Vec::new();
    while let Some(row) = rows.next().db()? {
        records.push(call_record(row)?);
    }
    Ok(records)
}

/// One row of the call listing query ([`calls`]).
fn call_record(row: &Row<'_>) -> Result<CallRecord, LedgerError> {
    RawCall {
        seq: row.get(0).db()?,
        run_id: row.get(1).db()?,
        call_id: row.get(2).db()?,
        tool: row.get(3).db()?,
        state: row.get(4).db()?,
        args_digest: row.get(5).db()?,
        args_size: row.get(6).db()?,
        admitted_at_ms: row.get(7).db()?,
        started_at_ms: row.get(8).db()?,
        status: row.get(9).db()?,
        code: row.get(10).db()?,
        message: row.get(11).db()?,
        diagnostic_id: row.get(12).db()?,
        output_digest: row.get(13).db()?,
        output_size: row.get(14).db()?,
        usage: [
            row.get(15).db()?,
            row.get(16).db()?,
            row.get(17).db()?,
            row.get(18).db()?,
        ],
        finished_at_ms: row.get(19).db()?,
        arguments: row.get(20).db()?,
        events: row.get(21).db()?,
        reconciliation: RawReconciliation {
            status: row.get(22).db()?,
            code: row.get(23).db()?,
            output_digest: row.get(24).db()?,
            output_size: row.get(25).db()?,
            operator: row.get(26).db()?,
            why: row.get(27).db()?,
            at_ms: row.get(28).db()?,
        },
        component_digest: row.get(29).db()?,
        definition_digest: row.get(30).db()?,
    }
    .into_record()
}
