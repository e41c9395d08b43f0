//! Recovery on SQLite: the calls whose host no longer holds its lease are closed as
//! `outcome_unknown`, from the watermark the last recovery left.

use crate::Db;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::lease::Lease;
use super::outcome::closing;
use super::rows::close_call;
use toolhost_ledger_store::{now_ms, LedgerError};

/// Close every open call whose host is gone (see [`Ledger::recover`](super::Ledger::recover)).
pub(super) fn recover(
    conn: &mut Connection,
    lease: &Lease,
) -> Result<Vec<(String, String)>, LedgerError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db()?;
    let now = now_ms();
    let watermark: i64 = tx
        .prepare_cached("SELECT value FROM meta WHERE key = 'recovered_below'")
        .db()?
        .query_row([], |row| row.get(0))
        .optional()
        .db()?
        .unwrap_or(0);
    let open: Vec<(i64, String, String, String, String, Option<String>)> = tx
        .prepare_cached(
            "SELECT seq, run_id, call_id, tool, state, owner FROM calls
             WHERE seq >= ?1 AND state <> 'finished' ORDER BY seq",
        )
        .db()?
        .query_map([watermark], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .db()?
        .collect::<Result<_, _>>()
        .db()?;
    let mut next_watermark: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM calls")
        .db()?
        .query_row([], |row| row.get(0))
        .db()?;
    let mut closed = Vec::with_capacity(open.len());
    let mut dead = std::collections::HashSet::new();
    for (seq, run_id, call_id, tool, state, owner) in open {
        // A call whose host still holds its lease is running, not lost.
        if let Some(owner) = &owner {
            if lease.is_alive(owner) {
                next_watermark = next_watermark.min(seq);
                continue;
            }
            dead.insert(owner.clone());
        }
        let (outcome, lines) = closing(&call_id, tool, "the host stopped", &state, now)?;
        close_call(&tx, &run_id, &call_id, &outcome, now, &lines)?;
        closed.push((run_id, call_id));
    }
    tx.prepare_cached(
        "INSERT INTO meta (key, value) VALUES ('recovered_below', ?1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .db()?
    .execute([next_watermark])
    .db()?;
    tx.commit().db()?;
    for owner in dead {
        lease.forget(&owner);
    }
    Ok(closed)
}
