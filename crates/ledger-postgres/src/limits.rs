//! Run budgets and rate limits every host on the ledger shares (schema version 3): a call
//! takes from them in the database, not in one host's memory.

use super::store::PgStore;
use super::task_schema::DB_NOW_MS;
use crate::Db;
use toolhost_ledger_store::codec::to_sql_u64;
use toolhost_ledger_store::limits::Budget;
use toolhost_ledger_store::LedgerError;

impl PgStore {
    /// Count one call of `tool` in `run` against its budgets, shared by every host: `None` when
    /// counted, else the budget it would break (nothing counted).
    pub fn take_budget(
        &self,
        run: &str,
        tool: &str,
        max_calls: Option<u64>,
        max_calls_per_tool: Option<u64>,
    ) -> Result<Option<Budget>, LedgerError> {
        let (c, r, t) = (self.connector(), run.to_owned(), tool.to_owned());
        let (total, per_tool) = (
            max_calls.map(to_sql_u64),
            max_calls_per_tool.map(to_sql_u64),
        );
        self.run(async move {
            let c = c.get().await?;
            let row = c
                .query_one(
                    "SELECT take_budget($1, $2, $3, $4)",
                    &[&r, &t, &total, &per_tool],
                )
                .await
                .db()?;
            Ok(match row.get::<_, Option<String>>(0).as_deref() {
                None => None,
                Some("run") => Some(Budget::Run),
                Some(_) => Some(Budget::Tool),
            })
        })
    }

    /// Take one call from `principal`'s token bucket (`rate` per second, at most `burst`),
    /// shared by every host: `false` when it is empty.
    pub fn take_rate(&self, principal: &str, rate: f64, burst: f64) -> Result<bool, LedgerError> {
        let (c, p) = (self.connector(), principal.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let refill = format!(
                "LEAST($3::FLOAT8, b.tokens + ({DB_NOW_MS} - b.at_ms) * $2::FLOAT8 / 1000.0)"
            );
            let row = c
                .query_opt(
                    &format!(
                        "INSERT INTO rate_buckets AS b (principal, tokens, at_ms)
                         VALUES ($1, $3::FLOAT8 - 1, {DB_NOW_MS})
                         ON CONFLICT (principal) DO UPDATE
                             SET tokens = {refill} - 1, at_ms = {DB_NOW_MS}
                             WHERE {refill} >= 1
                         RETURNING tokens"
                    ),
                    &[&p, &rate, &burst],
                )
                .await
                .db()?;
            Ok(row.is_some())
        })
    }
}
