//! Host leases and recovery on a shared ledger (schema version 2): a host renews its lease by
//! the database's clock; any host closes the open calls of hosts whose lease has passed as
//! `outcome_unknown`, once each.

use crate::Db;
use std::time::Duration;

use tokio_postgres::Client;

use super::calls::close_call;
use super::task_schema::DB_NOW_MS;
use toolhost_ledger_store::outcome::closing;
use toolhost_ledger_store::{now_ms, LedgerError};

pub(super) fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

pub(super) async fn renew(c: &Client, owner: &str, lease_ms: i64) -> Result<(), LedgerError> {
    c.execute(
        &format!(
            "INSERT INTO hosts (owner, lease_until_ms, started_at_ms)
             VALUES ($1, {DB_NOW_MS} + $2, {DB_NOW_MS})
             ON CONFLICT (owner) DO UPDATE SET lease_until_ms = excluded.lease_until_ms"
        ),
        &[&owner, &lease_ms],
    )
    .await
    .db()?;
    Ok(())
}

pub(super) async fn recover(c: &Client) -> Result<Vec<(String, String)>, LedgerError> {
    let rows = c
        .query(
            &format!(
                "SELECT run_id, call_id, tool, state FROM calls c
                 WHERE state <> 'finished'
                   AND NOT EXISTS (SELECT 1 FROM hosts h
                                   WHERE h.owner = c.owner AND h.lease_until_ms >= {DB_NOW_MS})
                 ORDER BY seq"
            ),
            &[],
        )
        .await
        .db()?;
    let mut closed = Vec::new();
    for row in rows {
        let (run_id, call_id, tool, state): (String, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let now = now_ms();
        let (outcome, lines) = closing(&call_id, tool, "the host's lease passed", &state, now)?;
        match close_call(c, &run_id, &call_id, &outcome, now, &lines).await {
            Ok(()) => closed.push((run_id, call_id)),
            // Its host finished it, or another host recovered it, in between: one outcome.
            Err(LedgerError::AlreadyFinished { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(closed)
}

/// How long after its lease passed a host's row is kept: past it, a host with no open calls
/// left (recovery closed them) is forgotten, so hosts that come and go (every `toolhost call`
/// is one) do not grow the table without end. A host that comes back takes a new lease.
pub(super) const LAPSED_HOSTS_KEPT_MS: i64 = 60 * 60 * 1000;

/// Forget hosts whose lease passed long ago and that own no open call.
pub(super) async fn prune_hosts(c: &Client) -> Result<u64, LedgerError> {
    c.execute(
        &format!(
            "DELETE FROM hosts h WHERE h.lease_until_ms < {DB_NOW_MS} - $1
               AND NOT EXISTS (SELECT 1 FROM calls c
                               WHERE c.owner = h.owner AND c.state <> 'finished')"
        ),
        &[&LAPSED_HOSTS_KEPT_MS],
    )
    .await
    .db()
}

/// How long a group's answers are kept for a resend (which comes within two operation
/// timeouts): far longer than that, and short enough that the table stays small.
pub(super) const APPLIED_GROUPS_KEPT_MS: i64 = 10 * 60 * 1000;

/// Forget the answers of groups old enough that nobody can send them again.
pub(super) async fn prune_groups(c: &Client) -> Result<u64, LedgerError> {
    c.execute(
        &format!("DELETE FROM applied_groups WHERE at_ms < {DB_NOW_MS} - $1"),
        &[&APPLIED_GROUPS_KEPT_MS],
    )
    .await
    .db()
}
