//! Recovery: calls a previous process left open are closed as `outcome_unknown`, never re-run.

use rusqlite::{OptionalExtension, TransactionBehavior};

use super::admission::OUTCOME_UNKNOWN_MESSAGE;
use super::audit::event_lines;
use super::outcome::{close_call, Outcome};
use super::{now_ms, Ledger, LedgerError, Store};
use crate::contract::{Code, Status, ToolCall, ToolResult, Usage};
use crate::contract::{Decision, Stage};

impl Ledger {
    /// Close every call a previous process left `admitted` or `started` as `outcome_unknown`
    /// (no code, [`OUTCOME_UNKNOWN_MESSAGE`]), with a `recover` event each, and return their
    /// `(run_id, call_id)` in admission order. Such a call is never run again: admitting it
    /// again replays the `outcome_unknown` result.
    ///
    /// Call it at startup, before serving, and only when no other live process writes to this
    /// ledger file: it cannot tell a call that a dead host left open from one that another
    /// host is running right now.
    ///
    /// It reads only the calls admitted since the last recovery left its watermark (the first
    /// call it had to leave open, or the end of the ledger), so a long ledger starts as fast
    /// as a short one.
    pub fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        let (mut conn, lease) = match &self.store {
            Store::Sqlite { conn, lease, .. } => {
                (conn.lock().unwrap_or_else(|e| e.into_inner()), lease)
            }
            Store::Postgres(pg) => return pg.recover(),
        };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        let watermark: i64 = tx
            .prepare_cached("SELECT value FROM meta WHERE key = 'recovered_below'")?
            .query_row([], |row| row.get(0))
            .optional()?
            .unwrap_or(0);
        let open: Vec<(i64, String, String, String, String, Option<String>)> = tx
            .prepare_cached(
                "SELECT seq, run_id, call_id, tool, state, owner FROM calls
                 WHERE seq >= ?1 AND state <> 'finished' ORDER BY seq",
            )?
            .query_map([watermark], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        let mut next_watermark: i64 = tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM calls")?
            .query_row([], |row| row.get(0))?;
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
        )?
        .execute([next_watermark])?;
        tx.commit()?;
        for owner in dead {
            lease.forget(&owner);
        }
        Ok(closed)
    }
}

/// What closing a lost call writes: its `outcome_unknown` outcome and its `recover` event,
/// saying `why` the call (which was `state`) is closed.
pub(super) fn closing(
    call_id: &str,
    tool: String,
    why: &str,
    state: &str,
    now: i64,
) -> Result<(Outcome, String), LedgerError> {
    let outcome = Outcome::of(&outcome_unknown(call_id, tool))?;
    let detail =
        format!("{why} while this call was {state}; closed as outcome_unknown, never re-run");
    let lines = event_lines([(
        now,
        Stage::Recover.as_str(),
        Decision::OutcomeUnknown.as_str(),
        detail.as_str(),
    )])?;
    Ok((outcome, lines))
}

/// The result recovery records for a call the host lost track of.
fn outcome_unknown(call_id: &str, tool: String) -> ToolResult {
    let call = ToolCall {
        call_id: call_id.to_owned(),
        name: tool,
        arguments: serde_json::Value::Null,
    };
    // Built from the contract's constructor so that fields added later get their defaults.
    let mut result = ToolResult::failed(
        &call,
        Code::HostError,
        OUTCOME_UNKNOWN_MESSAGE,
        Usage::default(),
    );
    result.status = Status::OutcomeUnknown;
    result.code = None;
    result
}
