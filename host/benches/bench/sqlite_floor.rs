//! The ledger's floor: what SQLite itself costs for one call's ledger work, on a bare
//! connection to a ledger file toolhost created (the same schema, indexes, page size and
//! pragmas) and a row toolhost recorded, with none of toolhost's ledger code around it.
//! `pipeline − pipeline_no_ledger` can go no lower than this on the embedded ledger. The
//! file's triggers append the hash chain's links as they do for toolhost, so the connection
//! gets the chain's two SQL functions from the backend.

use std::path::Path;
use std::time::Instant;

use rusqlite::types::Value as Sql;
use rusqlite::{params, Connection, OptionalExtension};
use toolhost::contract::canonical::digest_bytes;
use toolhost::contract::ToolResult;
use toolhost_ledger::{Ledger, LedgerOptions, PendingEvent};

use crate::stats::micros;

/// The columns an outcome fills (set by the second commit of a write call).
const OUTCOME: [&str; 13] = [
    "status",
    "code",
    "message",
    "diagnostic_id",
    "output_digest",
    "output_size",
    "fuel_consumed",
    "wall_ms",
    "memory_peak_bytes",
    "output_bytes",
    "result_json",
    "finished_at_ms",
    "events",
];

/// Per-call microseconds of the SQL a call's ledger work comes down to. Every call: the
/// pre-admission read (is the id known?). A read (`write` false): one `BEGIN IMMEDIATE`
/// transaction that looks the id up again and inserts the finished row. A write: one that
/// inserts the row started, one that writes its outcome. Checkpoints are left out (toolhost
/// runs them on a thread of their own).
pub fn samples(path: &Path, write: bool, n: usize, sample: &ToolResult) -> Vec<f64> {
    let seed = seed_row(path, sample);
    let conn = Connection::open(path).expect("the ledger file opens");
    toolhost_ledger_sqlite::chain::register(&conn).expect("the chain's SQL functions");
    conn.pragma_update(None, "synchronous", "NORMAL")
        .expect("synchronous");
    conn.pragma_update(None, "foreign_keys", true)
        .expect("foreign keys");
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .expect("no automatic checkpoints");
    let names: Vec<&str> = seed.iter().map(|(n, _)| n.as_str()).collect();
    let insert = format!(
        "INSERT INTO calls (call_id, {}) VALUES (?1, {})",
        names.join(", "),
        (2..names.len() + 2)
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let finish = format!(
        "UPDATE calls SET state = 'finished', {} WHERE run_id = 'R' AND call_id = ?1",
        OUTCOME
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = ?{}", i + 2))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let started: Vec<(String, Sql)> = seed
        .iter()
        .map(|(name, value)| match name.as_str() {
            "state" => (name.clone(), Sql::Text("started".into())),
            n if OUTCOME.contains(&n) && n != "events" => (name.clone(), Sql::Null),
            _ => (name.clone(), value.clone()),
        })
        .collect();
    let outcome: Vec<Sql> = OUTCOME
        .iter()
        .map(|c| {
            let (_, v) = seed
                .iter()
                .find(|(n, _)| n == c)
                .expect("an outcome column");
            v.clone()
        })
        .collect();
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("floor-{i}");
        let t = Instant::now();
        let known = conn
            .prepare_cached("SELECT 1 FROM calls WHERE run_id = 'R' AND call_id = ?1")
            .expect("the read")
            .query_row([&id], |_| Ok(()))
            .optional()
            .expect("the read runs");
        assert!(known.is_none());
        transaction(&conn, || {
            let found = conn
                .prepare_cached(
                    "SELECT tool, args_digest, result_json, events FROM calls
                     WHERE run_id = 'R' AND call_id = ?1",
                )
                .expect("the lookup")
                .query_row([&id], |_| Ok(()))
                .optional()
                .expect("the lookup runs");
            assert!(found.is_none());
            let row = if write { &started } else { &seed };
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&id];
            values.extend(row.iter().map(|(_, v)| v as &dyn rusqlite::ToSql));
            conn.prepare_cached(&insert)
                .expect("the insert")
                .execute(values.as_slice())
                .expect("the insert runs");
        });
        if write {
            transaction(&conn, || {
                let mut values: Vec<&dyn rusqlite::ToSql> = vec![&id];
                values.extend(outcome.iter().map(|v| v as &dyn rusqlite::ToSql));
                let changed = conn
                    .prepare_cached(&finish)
                    .expect("the update")
                    .execute(values.as_slice())
                    .expect("the update runs");
                assert_eq!(changed, 1);
            });
        }
        v.push(micros(t.elapsed()));
    }
    v
}

fn transaction(conn: &Connection, body: impl FnOnce()) {
    conn.prepare_cached("BEGIN IMMEDIATE")
        .and_then(|mut s| s.execute([]))
        .expect("BEGIN IMMEDIATE");
    body();
    conn.prepare_cached("COMMIT")
        .and_then(|mut s| s.execute([]))
        .expect("COMMIT");
}

/// Create the ledger at `path` through toolhost and record one finished call (`sample`'s
/// result) as a read call records it; return that row's columns but `seq` and `call_id`.
fn seed_row(path: &Path, sample: &ToolResult) -> Vec<(String, Sql)> {
    {
        let ledger = Ledger::open(path, LedgerOptions::default()).expect("the ledger opens");
        let digest = digest_bytes(b"{\"a\":40,\"b\":2}");
        let events: Vec<PendingEvent> = ["authorize", "limit", "approve"]
            .iter()
            .map(|s| PendingEvent::now(s, "ok", ""))
            .collect();
        let mut result = sample.clone();
        result.call_id = "seed".into();
        ledger
            .admit_started("R", "seed", &crate::add_opening(&digest, &events))
            .expect("the seed call is admitted");
        ledger
            .finish_with(
                "R",
                "seed",
                &result,
                &[PendingEvent::now("execute", "completed", "")],
            )
            .expect("the seed call is recorded");
    }
    let conn = Connection::open(path).expect("the ledger file opens");
    let mut stmt = conn
        .prepare("SELECT * FROM calls WHERE run_id = 'R' AND call_id = 'seed'")
        .expect("the seed row");
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    stmt.query_row(params![], |row| {
        Ok(names
            .iter()
            .enumerate()
            .filter(|(_, n)| *n != "seq" && *n != "call_id")
            .map(|(i, n)| Ok((n.clone(), row.get::<_, Sql>(i)?)))
            .collect::<rusqlite::Result<Vec<_>>>())
    })
    .expect("the seed row reads")
    .expect("its columns read")
}
