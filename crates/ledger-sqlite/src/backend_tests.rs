//! The call path's writes compile no SQL once their statements are cached, and build no
//! temporary table.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rusqlite::hooks::Authorization;
use rusqlite::Connection;
use serde_json::json;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{ToolCall, ToolResult, Usage};
use toolhost_ledger_store::events::PendingEvent;
use toolhost_ledger_store::outcome::Outcome;
use toolhost_ledger_store::write::{Backend, CallKey, Write};
use toolhost_ledger_store::LedgerOptions;

use crate::schema;
use crate::SqliteBackend;

/// A connection to a new ledger file at the current schema.
fn ledger(dir: &std::path::Path) -> Connection {
    let mut conn = Connection::open(dir.join("ledger.sqlite")).unwrap();
    conn.set_prepared_statement_cache_capacity(64);
    schema::configure(&conn, &LedgerOptions::default()).unwrap();
    schema::migrate(&mut conn).unwrap();
    conn
}

fn key(call_id: &str) -> CallKey {
    CallKey {
        run_id: "r".into(),
        call_id: call_id.into(),
        tool: "echo".into(),
        args_digest: digest_bytes(b"{}"),
        args_size: 2,
        ..Default::default()
    }
}

fn outcome(call_id: &str) -> Outcome {
    let call = ToolCall {
        call_id: call_id.into(),
        name: "echo".into(),
        arguments: json!({}),
    };
    Outcome::of(&ToolResult::completed(
        &call,
        json!({"ok": call_id}),
        Usage::default(),
    ))
    .unwrap()
}

/// Every kind of write of the call path for a call id of `round`, and the same call again.
fn calls(round: usize) -> Vec<Write> {
    let (a, b, c) = (
        format!("a{round}"),
        format!("b{round}"),
        format!("c{round}"),
    );
    let decision = || vec![PendingEvent::now("authorize", "allowed", "")];
    vec![
        // A write call: admitted, started, finished.
        Write::Admit(key(&a)),
        Write::MarkStarted {
            run_id: "r".into(),
            call_id: a.clone(),
            events: decision(),
        },
        Write::Event {
            run_id: "r".into(),
            call_id: a.clone(),
            event: PendingEvent::now("check", "allowed", ""),
        },
        Write::Finish {
            run_id: "r".into(),
            call_id: a.clone(),
            outcome: outcome(&a),
            events: decision(),
        },
        // A read call: admitted late with its outcome; one admitted late and started.
        Write::AdmitLate {
            key: key(&b),
            at_ms: 1,
            events: decision(),
            content: None,
            finished: Some(outcome(&b)),
        },
        Write::AdmitLate {
            key: key(&c),
            at_ms: 1,
            events: decision(),
            content: None,
            finished: None,
        },
        // The same ids again: a replay and a call in flight.
        Write::Admit(key(&a)),
        Write::Admit(key(&c)),
    ]
}

/// After the first round of calls, the next rounds prepare no statement: no SQL text is
/// parsed or planned on the call path, and no cached statement is planned again for its new
/// bindings (SQLite's authorizer runs for every statement it compiles, re-preparing included).
/// Without the planner stability setting in `schema::configure`, the admission read is
/// compiled again on every call.
#[test]
fn the_call_path_compiles_no_sql_after_its_first_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = ledger(dir.path());
    let compiled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&compiled);
    conn.authorizer(Some(move |_: rusqlite::hooks::AuthContext<'_>| {
        counter.fetch_add(1, Ordering::Relaxed);
        Authorization::Allow
    }))
    .unwrap();
    let mut backend = SqliteBackend::new(conn, "owner".into());
    for round in 0..4 {
        let before = compiled.load(Ordering::Relaxed);
        // One write per group, then all of them in one group (the savepoint path).
        for write in calls(round) {
            for result in backend.apply(std::slice::from_ref(&write)).unwrap() {
                result.unwrap();
            }
        }
        for result in backend.apply(&calls(round + 100)).unwrap() {
            result.unwrap();
        }
        let during = compiled.load(Ordering::Relaxed) - before;
        if round == 0 {
            assert!(during > 0, "the first round prepares its statements");
        } else {
            assert_eq!(during, 0, "round {round} compiled SQL");
        }
    }
}

/// Writing a call's row or its state and status builds no temporary table: SQLite evaluates a
/// `CHECK (x IN (…))` of three or more values through one, on every row written (the checks
/// of schema version 6). Every check of `calls` is compiled into an insert of a row.
#[test]
fn writing_a_call_builds_no_temporary_table() {
    let dir = tempfile::tempdir().unwrap();
    let conn = ledger(dir.path());
    for sql in [
        "INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        "UPDATE calls SET state = ?1, status = ?2, result_json = ?3 WHERE seq = ?4",
    ] {
        let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let nulls = std::iter::repeat_n(rusqlite::types::Null, explain.parameter_count());
        let opcodes: Vec<String> = explain
            .query_map(rusqlite::params_from_iter(nulls), |row| row.get(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            opcodes.iter().any(|op| op == "Insert"),
            "{sql}: {opcodes:?}"
        );
        assert!(
            !opcodes.iter().any(|op| op == "OpenEphemeral"),
            "{sql}: {opcodes:?}"
        );
    }
}

/// Version 7's checks refuse what version 6's did: a state or a status outside its set, and a
/// finished call without its outcome.
#[test]
fn the_checks_of_calls_still_refuse_bad_rows() {
    let dir = tempfile::tempdir().unwrap();
    let conn = ledger(dir.path());
    let insert = |state: &str, status: Option<&str>, result: Option<&str>| {
        conn.execute(
            "INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state,
                                admitted_at_ms, status, result_json)
             VALUES ('r', ?1, 't', 'd', 2, ?2, 1, ?3, ?4)",
            rusqlite::params![format!("{state}-{status:?}"), state, status, result],
        )
    };
    for state in ["admitted", "started"] {
        insert(state, None, None).unwrap();
    }
    for status in ["completed", "failed", "cancelled", "outcome_unknown"] {
        insert("finished", Some(status), Some("{}")).unwrap();
    }
    for (state, status, result) in [
        ("running", None, None),
        ("Admitted", None, None),
        ("finished", Some("done"), Some("{}")),
        ("finished", None, Some("{}")),
        ("finished", Some("completed"), None),
        ("started", Some("completed"), Some("{}")),
    ] {
        let err = insert(state, status, result).unwrap_err();
        assert!(
            err.to_string().contains("CHECK constraint failed"),
            "{state} {status:?} {result:?}: {err}"
        );
    }
}
