//! The call listing in PostgreSQL, and reconciliation: every call or one run's, one call, the
//! calls that ended `outcome_unknown`, and the one reconciliation of such a call.

use crate::Db;
use tokio_postgres::Row;

use super::PgStore;
use toolhost_ledger_store::events::{RawCall, RawReconciliation, CALL_COLUMNS, CALL_JOINS};
use toolhost_ledger_store::verdicts::{Settled, UnknownFilter};
use toolhost_ledger_store::{CallRecord, LedgerError};

impl PgStore {
    pub fn calls(&self, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
        let (c, run) = (self.connector(), run.map(str::to_owned));
        self.run(async move {
            let c = c.get().await?;
            let sql = format!(
                "SELECT {CALL_COLUMNS} FROM {CALL_JOINS}
                 WHERE $1::TEXT IS NULL OR c.run_id = $1 ORDER BY c.seq"
            );
            let rows = c.query(&sql, &[&run]).await.db()?;
            rows.iter().map(call_record).collect()
        })
    }

    pub fn call(&self, run_id: &str, call_id: &str) -> Result<Option<CallRecord>, LedgerError> {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let sql = format!(
                "SELECT {CALL_COLUMNS} FROM {CALL_JOINS} WHERE c.run_id = $1 AND c.call_id = $2"
            );
            c.query_opt(&sql, &[&r, &k])
                .await
                .db()?
                .as_ref()
                .map(call_record)
                .transpose()
        })
    }

    pub fn unknown_calls(&self, filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError> {
        let (c, f) = (self.connector(), filter.clone());
        self.run(async move {
            let c = c.get().await?;
            let sql = format!(
                "SELECT {CALL_COLUMNS} FROM {CALL_JOINS}
                 WHERE c.status = 'outcome_unknown'
                   AND ($1::TEXT IS NULL OR c.run_id = $1) AND ($2::TEXT IS NULL OR c.tool = $2)
                   AND ($3::BIGINT IS NULL OR c.finished_at_ms <= $3)
                   AND ($4 OR r.run_id IS NULL)
                 ORDER BY c.seq LIMIT $5"
            );
            let limit = i64::from(f.limit);
            let rows = c
                .query(
                    &sql,
                    &[
                        &f.run,
                        &f.tool,
                        &f.closed_before_ms,
                        &f.include_reconciled,
                        &limit,
                    ],
                )
                .await
                .db()?;
            rows.iter().map(call_record).collect()
        })
    }

    /// One statement: the reconciliation is inserted only where the call ended
    /// `outcome_unknown` and has none (the primary key waits for a concurrent one to commit),
    /// and its event is appended only where it was inserted.
    pub fn reconcile(
        &self,
        run_id: &str,
        call_id: &str,
        settled: &Settled,
    ) -> Result<(), LedgerError> {
        let o = settled.stored();
        let values = (
            o.status.to_owned(),
            o.code.map(str::to_owned),
            o.output_digest.map(str::to_owned),
            o.output_size,
            o.result_json.to_owned(),
        );
        let (operator, why, at_ms, event) = (
            settled.operator.clone(),
            settled.why.clone(),
            settled.at_ms,
            settled.event.clone(),
        );
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let (status, code, digest, size, result) = values;
            let row = c
                .query_one(
                    "WITH ins AS (
                         INSERT INTO reconciliations (run_id, call_id, status, code,
                             output_digest, output_size, result_json, operator, why, at_ms)
                         SELECT run_id, call_id, $3, $4, $5, $6, $7, $8, $9, $10 FROM calls
                         WHERE run_id = $1 AND call_id = $2 AND status = 'outcome_unknown'
                         ON CONFLICT (run_id, call_id) DO NOTHING
                         RETURNING run_id, call_id
                     ), appended AS (
                         UPDATE calls c SET events = c.events || $11 FROM ins
                         WHERE c.run_id = ins.run_id AND c.call_id = ins.call_id
                         RETURNING 1
                     )
                     SELECT (SELECT count(*) FROM ins),
                            EXISTS (SELECT 1 FROM calls WHERE run_id = $1 AND call_id = $2),
                            (SELECT status FROM calls WHERE run_id = $1 AND call_id = $2)",
                    &[
                        &r, &k, &status, &code, &digest, &size, &result, &operator, &why, &at_ms,
                        &event,
                    ],
                )
                .await
                .db()?;
            let (inserted, exists, ended): (i64, bool, Option<String>) =
                (row.get(0), row.get(1), row.get(2));
            match (inserted, exists, ended) {
                (1, _, _) => Ok(()),
                (_, false, _) => Err(LedgerError::unknown(&r, &k)),
                (_, true, Some(s)) if s == "outcome_unknown" => {
                    Err(LedgerError::reconciled(&r, &k))
                }
                (_, true, s) => Err(LedgerError::NotOutcomeUnknown {
                    run_id: r,
                    call_id: k,
                    ended: s.unwrap_or_else(|| "no outcome yet".into()),
                }),
            }
        })
    }
}

/// One row of a listing query ([`CALL_COLUMNS`]).
fn call_record(row: &Row) -> Result<CallRecord, LedgerError> {
    RawCall {
        seq: row.get(0),
        run_id: row.get(1),
        call_id: row.get(2),
        tool: row.get(3),
        state: row.get(4),
        args_digest: row.get(5),
        args_size: row.get(6),
        admitted_at_ms: row.get(7),
        started_at_ms: row.get(8),
        status: row.get(9),
        code: row.get(10),
        message: row.get(11),
        diagnostic_id: row.get(12),
        output_digest: row.get(13),
        output_size: row.get(14),
        usage: [row.get(15), row.get(16), row.get(17), row.get(18)],
        finished_at_ms: row.get(19),
        arguments: row.get(20),
        events: row.get(21),
        reconciliation: RawReconciliation {
            status: row.get(22),
            code: row.get(23),
            output_digest: row.get(24),
            output_size: row.get(25),
            operator: row.get(26),
            why: row.get(27),
            at_ms: row.get(28),
        },
        component_digest: row.get(29),
        definition_digest: row.get(30),
    }
    .into_record()
}
