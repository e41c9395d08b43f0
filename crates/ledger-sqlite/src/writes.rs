//! The SQLite store's writes outside the call path: recorded content, spent tokens and
//! transcripts.

use crate::Db;
use rusqlite::{params, Connection, TransactionBehavior};

use super::codec::{from_sql_u64, to_sql_u64};
use super::store::TranscriptEntry;
use toolhost_ledger_store::{now_ms, LedgerError, TokenSpend};

/// Store an admitted call's arguments unless some are stored: whether they were.
pub(super) fn record_content(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
    json: &str,
) -> Result<bool, LedgerError> {
    let n = conn
        .prepare_cached(
            "INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, call_id) DO NOTHING",
        )
        .db()?
        .execute(params![run_id, call_id, json, now_ms()])
        .map_err(|e| super::for_call(e, run_id, call_id))?;
    Ok(n == 1)
}

/// Spend `token_id` unless it was spent before. The policy has judged its expiry by this
/// host's clock, the ledger's only one.
pub(super) fn consume_token(
    conn: &mut Connection,
    token_id: &str,
    expires_at_unix: i64,
) -> Result<TokenSpend, LedgerError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db()?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO used_tokens (token_id, expires_at_unix, used_at_ms)
             VALUES (?1, ?2, ?3) ON CONFLICT (token_id) DO NOTHING",
        )
        .db()?
        .execute(params![token_id, expires_at_unix, now_ms()])
        .db()?;
    tx.commit().db()?;
    Ok(if inserted == 1 {
        TokenSpend::Spent
    } else {
        TokenSpend::AlreadySpent
    })
}

/// Forget spent tokens that expired before `before_unix`: how many.
pub(super) fn prune_used_tokens(conn: &Connection, before_unix: i64) -> Result<u64, LedgerError> {
    let n = conn
        .prepare_cached("DELETE FROM used_tokens WHERE expires_at_unix < ?1")
        .db()?
        .execute([before_unix])
        .db()?;
    Ok(n as u64)
}

/// Append one transcript entry, now.
pub(super) fn transcript(
    conn: &Connection,
    run_id: &str,
    step: u32,
    kind: &str,
    digest: &str,
    size: u64,
    detail: &str,
) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "INSERT INTO transcript (run_id, step, kind, digest, size, at_ms, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .db()?
    .execute(params![
        run_id,
        step,
        kind,
        digest,
        to_sql_u64(size),
        now_ms(),
        detail
    ])
    .db()?;
    Ok(())
}

/// A run's transcript, by step and then append order.
pub(super) fn transcript_entries(
    conn: &Connection,
    run_id: &str,
) -> Result<Vec<TranscriptEntry>, LedgerError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT run_id, step, kind, digest, size, at_ms, detail FROM transcript
         WHERE run_id = ?1 ORDER BY step, id",
        )
        .db()?;
    let rows = stmt
        .query_map([run_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
                row.get::<_, String>(6)?,
            ))
        })
        .db()?;
    let mut out = Vec::new();
    for row in rows {
        let (run_id, step, kind, digest, size, at_ms, detail) = row.db()?;
        out.push(TranscriptEntry {
            run_id,
            step,
            kind,
            digest,
            size: from_sql_u64("transcript size", size)?,
            at_ms,
            detail,
        });
    }
    Ok(out)
}
