//! The SQLite backend's own tests: its schema and migrations, its build, its recovery
//! watermark and file growth. The contract every backend keeps is `contract_tests.rs`.

use std::path::PathBuf;

use serde_json::json;

use super::contract_tests::{admit, args_key, call, usage, Site, SqliteSite};
use super::*;
use toolhost_contract::{Status, ToolResult};

/// A fresh ledger on a file of its own (the contract suite's SQLite site, kept alive by the
/// returned guard), and the file's path.
fn ledger(options: LedgerOptions) -> (SqliteSite, PathBuf, Ledger) {
    let site = SqliteSite::new();
    let ledger = site.open(options);
    let path = site.path.clone();
    (site, path, ledger)
}

/// `Ledger` can be shared by many tokio tasks.
#[test]
fn ledger_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Ledger>();
}

/// The schema version is set at creation, and a file from a newer build is refused.
#[test]
fn schema_version_is_checked() {
    let (_d, path, l) = ledger(LedgerOptions::default());
    drop(l);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, sqlite::schema::SCHEMA_VERSION);
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    assert!(matches!(
        Ledger::open(&path, LedgerOptions::default()),
        Err(LedgerError::SchemaTooNew { found: 99, .. })
    ));
}

/// Recovery's watermark never hides an open call: a call a live host kept open stays below
/// the watermark until a later recovery finds its host gone and closes it, however many calls
/// finished after it.
#[test]
fn recovery_watermark_keeps_calls_of_live_hosts_in_view() {
    let (_d, path, running) = ledger(LedgerOptions::default());
    admit(&running, "r", &call("long", json!(0)));
    running.mark_started("r", "long").unwrap();

    let other = Ledger::open(&path, LedgerOptions::default()).unwrap();
    assert!(other.recover().unwrap().is_empty());
    for i in 0..5 {
        let c = call(&format!("quick-{i}"), json!(i));
        admit(&other, "r", &c);
        let result = ToolResult::completed(&c, json!(i), usage());
        other.finish("r", &c.call_id, &result).unwrap();
        assert!(other.recover().unwrap().is_empty());
    }
    drop(running); // the host running "long" dies
    assert_eq!(
        other.recover().unwrap(),
        vec![("r".to_string(), "long".to_string())]
    );
    assert!(other.recover().unwrap().is_empty());
}

/// A ledger written by schema version 1 (calls, outcomes and events in their own tables) opens
/// as the current version with every call, outcome, event (in order), content row and approval
/// request, all chained.
#[test]
fn version_1_ledgers_migrate_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(sqlite::schema::MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let done = call("done", json!({"q": 1}));
        let result = ToolResult::completed(&done, json!({"a": 2}), usage());
        let (digest, size) = args_key(&done.arguments);
        conn.execute_batch(&format!(
            "INSERT INTO calls VALUES ('r', 'done', 1, 'echo', '{digest}', {size}, 'finished', 10,
                 11, NULL);
             INSERT INTO calls VALUES ('r', 'open', 2, 'echo', 'd2', 8, 'started', 20, 21, NULL);
             INSERT INTO outcomes VALUES ('r', 'done', 'completed', NULL, 'ok', NULL, 'od', 7,
                 1234, 7, 65536, 20, '{result}', 12);
             INSERT INTO events (run_id, call_id, at_ms, stage, decision, detail) VALUES
                 ('r', 'open', 20, 'admit', 'new', 'second'),
                 ('r', 'done', 10, 'admit', 'new', 'first'),
                 ('r', 'done', 11, 'approve', 'approval_required', 'digest-1'),
                 ('r', 'done', 12, 'record', 'completed', 'line\nbreak');
             INSERT INTO call_content VALUES ('r', 'done', '{{\"q\":1}}', 10);",
            result = serde_json::to_string(&result).unwrap().replace('\'', "''")
        ))
        .unwrap();
    }
    let l = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let calls = l.calls(None).unwrap();
    assert_eq!(calls.len(), 2);
    let (done, open) = (&calls[0], &calls[1]);
    assert_eq!((done.seq, done.call_id.as_str()), (1, "done"));
    assert_eq!(done.state, CallState::Finished);
    assert_eq!(done.status, Some(Status::Completed));
    assert_eq!(done.usage, Some(usage()));
    assert_eq!(done.output_digest.as_deref(), Some("od"));
    assert_eq!(done.finished_at_ms, Some(12));
    assert_eq!(done.arguments, Some(json!({"q": 1})));
    let events: Vec<_> = done
        .events
        .iter()
        .map(|e| (e.at_ms, e.stage.as_str(), e.detail.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            (10, "admit", "first"),
            (11, "approve", "digest-1"),
            (12, "record", "line\nbreak")
        ]
    );
    assert_eq!((open.state, open.events.len()), (CallState::Started, 1));
    assert_eq!(
        l.approval_request("digest-1").unwrap(),
        Some(("r".to_string(), "done".to_string()))
    );
    let Admission::Replay(replayed) = admit(&l, "r", &call("done", json!({"q": 1}))) else {
        panic!("the migrated outcome replays")
    };
    assert_eq!(replayed.output, Some(json!({"a": 2})));
    assert_eq!(
        l.recover().unwrap(),
        vec![("r".to_string(), "open".to_string())]
    );
    // Schema 9 chained the migrated rows in order, and the writes since followed them.
    let report = l.verify().unwrap();
    assert!(report.intact(), "{:#?}", report.findings);
    assert!(report.links >= 4, "{report:?}");
}

/// The bundled SQLite is built without loadable extensions and without the virtual-table
/// modules the ledger never uses (LIBSQLITE3_FLAGS in .cargo/config.toml).
#[test]
fn sqlite_is_built_without_extensions_or_unused_modules() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let err = |sql: &str| conn.execute_batch(sql).unwrap_err().to_string();
    assert!(
        err("SELECT load_extension('x')").contains("no such function: load_extension"),
        "load_extension exists"
    );
    for module in ["fts3", "fts4", "fts5", "rtree", "dbstat"] {
        let e = err(&format!("CREATE VIRTUAL TABLE t USING {module}(x)"));
        assert!(e.contains("no such module"), "{module}: {e}");
    }
    // What the ledger does use is there: JSON functions (the schema-1 migration).
    let j: String = conn
        .query_row("SELECT json_object('a', 1)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(j, r#"{"a":1}"#);
}

/// The ledger itself refuses oversized keys and names (the runtime's bounds are checked
/// first; this is the backstop): nothing is inserted, and the file does not grow.
#[test]
fn oversized_keys_are_refused_before_any_write() {
    use toolhost_contract::bounds::{MAX_CALL_ID_BYTES, MAX_RUN_ID_BYTES, MAX_TOOL_NAME_CHARS};
    let (_d, path, l) = ledger(LedgerOptions::default());
    let size = || {
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        std::fs::metadata(&path).map_or(0, |m| m.len())
            + std::fs::metadata(&wal).map_or(0, |m| m.len())
    };
    admit(&l, "r", &call("warm", json!(1)));
    let before = size();
    let huge = "x".repeat(1 << 20);
    let (digest, n) = args_key(&json!(1));
    let refused = [
        l.admit(&huge, "c", "t", &digest, n),
        l.admit("r", &huge, "t", &digest, n),
        l.admit("r", "c", &huge, &digest, n),
    ];
    for r in refused {
        assert!(matches!(r, Err(LedgerError::TooLong { .. })), "{r:?}");
    }
    assert!(matches!(
        l.transcript(&huge, 1, "model_request", &digest, 1, ""),
        Err(LedgerError::TooLong {
            field: "run id",
            ..
        })
    ));
    assert_eq!(l.calls(None).unwrap().len(), 1);
    assert!(size() <= before, "{} -> {}", before, size());
    // At the bounds, keys are stored as usual.
    let id = "i".repeat(MAX_CALL_ID_BYTES);
    let run = "r".repeat(MAX_RUN_ID_BYTES);
    let tool = "é".repeat(MAX_TOOL_NAME_CHARS);
    assert!(matches!(
        l.admit(&run, &id, &tool, &digest, n).unwrap(),
        Admission::New { .. }
    ));
}
