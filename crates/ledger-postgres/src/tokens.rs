//! Spent approval tokens on PostgreSQL: spent once across hosts, and only while unexpired by
//! the database's clock (`toolhost_now_ms()`, one clock for every host).

use super::store::PgStore;
use crate::Db;
use toolhost_ledger_store::{now_ms, LedgerError, TokenSpend};

impl PgStore {
    /// Spend a token unless it was spent before or is past its expiry by the database's clock
    /// (one clock for every host).
    pub fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        let (c, t) = (self.connector(), token_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let row = c
                .query_one(
                    "WITH live AS (SELECT $2::BIGINT > toolhost_now_ms() / 1000 AS ok),
                          ins AS (INSERT INTO used_tokens (token_id, expires_at_unix, used_at_ms)
                                  SELECT $1, $2, $3 FROM live WHERE live.ok
                                  ON CONFLICT (token_id) DO NOTHING RETURNING 1)
                     SELECT (SELECT count(*) FROM ins), (SELECT ok FROM live)",
                    &[&t, &expires_at_unix, &now_ms()],
                )
                .await
                .db()?;
            let (inserted, live): (i64, bool) = (row.get(0), row.get(1));
            Ok(match (inserted, live) {
                (1, _) => TokenSpend::Spent,
                (_, false) => TokenSpend::Expired,
                _ => TokenSpend::AlreadySpent,
            })
        })
    }

    pub fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError> {
        let c = self.connector();
        self.run(async move {
            let c = c.get().await?;
            c.execute(
                "DELETE FROM used_tokens WHERE expires_at_unix < $1",
                &[&before_unix],
            )
            .await
            .db()
        })
    }
}
