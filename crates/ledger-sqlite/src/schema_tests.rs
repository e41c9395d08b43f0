//! Migrations keep what a ledger holds.

use rusqlite::Connection;
use toolhost_ledger_store::LedgerOptions;

use crate::schema::{self, MIGRATIONS, SCHEMA_VERSION};

/// A ledger of version 6 (value checks as `IN` lists) opens at the current version with its
/// calls as they were, and the tables that name `calls` still refer to it: their rows stay
/// joined, and a row for a call that does not exist is still refused.
#[test]
fn version_6_ledgers_migrate_to_comparison_checks_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v6.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        for step in &MIGRATIONS[..6] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 6).unwrap();
        conn.execute_batch(
            "INSERT INTO calls (seq, run_id, call_id, tool, args_digest, args_size, state,
                                admitted_at_ms, status, result_json, finished_at_ms, events)
             VALUES (7, 'r', 'lost', 't', 'd1', 2, 'finished', 10, 'outcome_unknown', '{}', 12,
                     'line 1\nline 2\n'),
                    (9, 'r', 'open', 't', 'd2', 3, 'started', 20, NULL, NULL, NULL, '');
             INSERT INTO reconciliations VALUES ('r', 'lost', 'completed', NULL, NULL, NULL,
                 '{\"ok\":1}', 'ops', 'checked by hand', 30);
             INSERT INTO call_content VALUES ('r', 'open', '{\"q\":1}', 20);",
        )
        .unwrap();
    }
    let mut conn = Connection::open(&path).unwrap();
    schema::configure(&conn, &LedgerOptions::default()).unwrap();
    schema::migrate(&mut conn).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let calls: Vec<(i64, String, String, Option<String>, String)> = conn
        .prepare("SELECT seq, call_id, state, status, events FROM calls ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        calls,
        [
            (
                7,
                "lost".into(),
                "finished".into(),
                Some("outcome_unknown".into()),
                "line 1\nline 2\n".into()
            ),
            (9, "open".into(), "started".into(), None, String::new()),
        ]
    );
    let joined: (String, String) = conn
        .query_row(
            "SELECT r.operator, x.arguments_json FROM calls c
             JOIN reconciliations r ON r.run_id = c.run_id AND r.call_id = 'lost'
             JOIN call_content x ON x.run_id = c.run_id AND x.call_id = 'open'
             WHERE c.seq = 7",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(joined, ("ops".into(), "{\"q\":1}".into()));
    let unknown: Vec<i64> = conn
        .prepare("SELECT seq FROM calls INDEXED BY calls_unknown WHERE status = 'outcome_unknown'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(unknown, [7]);
    let orphan = conn
        .execute(
            "INSERT INTO call_content VALUES ('r', 'nobody', '{}', 1)",
            [],
        )
        .unwrap_err();
    assert!(
        orphan.to_string().contains("FOREIGN KEY constraint failed"),
        "{orphan}"
    );
    let duplicate = conn
        .execute(
            "INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state,
                                admitted_at_ms)
             VALUES ('r', 'open', 't', 'd', 2, 'admitted', 1)",
            [],
        )
        .unwrap_err();
    assert!(
        duplicate.to_string().contains("UNIQUE constraint failed"),
        "{duplicate}"
    );
}
