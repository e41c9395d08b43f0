//! Single-use approval tokens: the policy module spends a token here, once, across restarts.
//!
//! The ledger does not judge a token's signature or binding (the policy's business); it
//! remembers which token ids were spent, and keeps the expiry so that spent tokens can be
//! pruned once they could no longer be accepted anyway. On PostgreSQL it also judges the expiry
//! by the database's clock when the token is spent: hosts share one ledger but not one clock,
//! and a host whose clock is behind would otherwise accept a token past its expiry. (SQLite's
//! ledger lives on the one host whose clock the policy already used.)

use super::store::TokenSpend;
use super::{Ledger, LedgerError};

impl Ledger {
    /// Spend `token_id`, unless it was spent before or (PostgreSQL) the database's clock says it
    /// expired. Committed before it returns.
    pub fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        self.store.consume_token(token_id, expires_at_unix)
    }

    /// Forget spent tokens that expired before `before_unix`, returning how many. Only safe if
    /// the policy refuses every token past its expiry *before* it spends it, and with a margin
    /// for clock steps: a pruned token would otherwise be spendable again.
    pub fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError> {
        self.store.prune_used_tokens(before_unix)
    }
}
