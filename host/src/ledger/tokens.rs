//! Single-use approval tokens: the policy module spends a token here, once, across restarts.
//!
//! The ledger does not judge a token's signature or binding (the policy's business); it
//! remembers which token ids were spent, and keeps the expiry so that spent tokens can be
//! pruned once they could no longer be accepted anyway. On PostgreSQL it also judges the expiry
//! by the database's clock when the token is spent: hosts share one ledger but not one clock,
//! and a host whose clock is behind would otherwise accept a token past its expiry. (SQLite's
//! ledger lives on the one host whose clock the policy already used.)

/// What spending a token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSpend {
    /// Spent now, for the first time.
    Spent,
    /// Spent before (by this or any process on this ledger).
    AlreadySpent,
    /// Past its expiry by the ledger's clock (PostgreSQL): not spent.
    Expired,
}

use rusqlite::{params, TransactionBehavior};

use super::{now_ms, Conn, Ledger, LedgerError};

impl Ledger {
    /// Spend `token_id`, unless it was spent before or (PostgreSQL) the database's clock says it
    /// expired. Committed before it returns.
    pub fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        let mut conn = match self.conn() {
            Conn::Sqlite(conn) => conn,
            Conn::Postgres(pg) => return pg.consume_token(token_id, expires_at_unix),
        };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx
            .prepare_cached(
                "INSERT INTO used_tokens (token_id, expires_at_unix, used_at_ms)
                 VALUES (?1, ?2, ?3) ON CONFLICT (token_id) DO NOTHING",
            )?
            .execute(params![token_id, expires_at_unix, now_ms()])?;
        tx.commit()?;
        Ok(if inserted == 1 {
            TokenSpend::Spent
        } else {
            TokenSpend::AlreadySpent
        })
    }

    /// Forget spent tokens that expired before `before_unix`, returning how many. Only safe if
    /// the policy refuses every token past its expiry *before* it spends it, and with a margin
    /// for clock steps: a pruned token would otherwise be spendable again.
    pub fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError> {
        let conn = match self.conn() {
            Conn::Sqlite(conn) => conn,
            Conn::Postgres(pg) => return pg.prune_used_tokens(before_unix),
        };
        let n = conn
            .prepare_cached("DELETE FROM used_tokens WHERE expires_at_unix < ?1")?
            .execute([before_unix])?;
        Ok(n as u64)
    }
}
