//! The PostgreSQL backend against a real server. Each test works in a schema of its own
//! (dropped at the end), so tests run in parallel. They are ignored unless run with
//! `--ignored` (`just test` does when `TOOLHOST_TEST_POSTGRES_URL` is set; `.ci/run` sets it),
//! and then they fail — not skip — when the server cannot be reached.

use std::sync::{Arc, Barrier};

use super::*;
use crate::testing::TestSchema;
use toolhost_contract::{Status, ToolResult};
use toolhost_ledger_store::outcome::Outcome;
use toolhost_ledger_store::{Admission, Applied, Backend, CallKey, LedgerError, Write};

fn key(call_id: &str) -> CallKey {
    CallKey {
        run_id: "run".into(),
        call_id: call_id.into(),
        tool: "add".into(),
        args_digest: "d1".into(),
        args_size: 7,
        ..Default::default()
    }
}

fn outcome(call_id: &str) -> Outcome {
    let result = ToolResult {
        call_id: call_id.into(),
        tool: "add".into(),
        status: Status::Completed,
        code: None,
        output: Some(serde_json::json!({"sum": 3})),
        message: "ok".into(),
        diagnostic_id: None,
        approval: None,
        usage: Default::default(),
        reconciled: None,
        replayed: false,
    };
    Outcome::of(&result).unwrap()
}

fn one(backend: &mut PgBackend, write: Write) -> Result<Applied, LedgerError> {
    backend.apply(&[write]).unwrap().pop().unwrap()
}

/// Three hosts (three connections) admit the same `(run, call id)` at the same moment:
/// exactly one admits it; the others learn it is in flight, and once it has its outcome all
/// three get the recorded result.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_one_call_is_admitted_once_across_hosts() {
    let db = TestSchema::new();
    let hosts: Vec<PgBackend> = (0..3).map(|i| db.host(&format!("host{i}"))).collect();
    let start = Arc::new(Barrier::new(3));
    let answers: Vec<(PgBackend, Admission)> = std::thread::scope(|s| {
        let running: Vec<_> = hosts
            .into_iter()
            .map(|mut h| {
                let start = start.clone();
                s.spawn(move || {
                    start.wait();
                    let a = one(&mut h, Write::Admit(key("c1"))).unwrap();
                    let Applied::Admission(a) = a else {
                        panic!("{a:?}")
                    };
                    (h, a)
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let new = answers
        .iter()
        .filter(|(_, a)| matches!(a, Admission::New { .. }))
        .count();
    let in_flight = answers
        .iter()
        .filter(|(_, a)| *a == Admission::InFlight)
        .count();
    assert_eq!(
        (new, in_flight),
        (1, 2),
        "{answers:?}",
        answers = answers.iter().map(|(_, a)| a).collect::<Vec<_>>()
    );
    assert_eq!(db.query("SELECT count(*) FROM calls"), ["1"]);
    let mut hosts: Vec<PgBackend> = answers.into_iter().map(|(h, _)| h).collect();
    let finish = Write::Finish {
        run_id: "run".into(),
        call_id: "c1".into(),
        outcome: outcome("c1"),
        events: vec![],
    };
    assert_eq!(one(&mut hosts[1], finish.clone()).unwrap(), Applied::Done);
    assert!(matches!(
        one(&mut hosts[2], finish),
        Err(LedgerError::AlreadyFinished { .. })
    ));
    for h in &mut hosts {
        match one(h, Write::Admit(key("c1"))).unwrap() {
            Applied::Admission(Admission::Replay(r)) => {
                assert_eq!(r.output, Some(serde_json::json!({"sum": 3})))
            }
            other => panic!("{other:?}"),
        }
    }
    // Other arguments under the same id: a conflict, the original unchanged.
    let mut other = key("c1");
    other.args_digest = "d2".into();
    assert_eq!(
        one(&mut hosts[0], Write::Admit(other)).unwrap(),
        Applied::Admission(Admission::Conflict)
    );
    assert_eq!(
        db.query("SELECT state || ' ' || args_digest FROM calls"),
        ["finished d1"]
    );
}

/// In one group, a write that fails changes nothing and the others are committed.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_failing_write_fails_alone_in_its_group() {
    let db = TestSchema::new();
    let mut h = db.host("host");
    let answers = h
        .apply(&[
            Write::Admit(key("a")),
            Write::Finish {
                run_id: "run".into(),
                call_id: "never-admitted".into(),
                outcome: outcome("never-admitted"),
                events: vec![],
            },
            Write::AdmitLate {
                key: key("b"),
                at_ms: 1,
                events: vec![],
                content: None,
                finished: Some(outcome("b")),
            },
        ])
        .unwrap();
    assert!(matches!(
        answers[0],
        Ok(Applied::Admission(Admission::New { .. }))
    ));
    assert!(matches!(answers[1], Err(LedgerError::UnknownCall { .. })));
    assert!(matches!(
        answers[2],
        Ok(Applied::Admission(Admission::New { .. }))
    ));
    assert_eq!(
        db.query("SELECT call_id || ' ' || state FROM calls ORDER BY seq"),
        ["a admitted", "b finished"]
    );
    // Each kind of write, and each one's own refusal, in one more group.
    let answers = h
        .apply(&[
            Write::AdmitLate {
                key: key("c"),
                at_ms: 2,
                events: vec![],
                content: Some("{\"x\":1}".into()),
                finished: None,
            },
            Write::MarkStarted {
                run_id: "run".into(),
                call_id: "a".into(),
                events: vec![],
            },
            Write::MarkStarted {
                run_id: "run".into(),
                call_id: "b".into(),
                events: vec![],
            },
            Write::Event {
                run_id: "run".into(),
                call_id: "nobody".into(),
                event: toolhost_ledger_store::PendingEvent::now("limit", "ok", ""),
            },
            Write::Finish {
                run_id: "run".into(),
                call_id: "b".into(),
                outcome: outcome("b"),
                events: vec![],
            },
        ])
        .unwrap();
    assert!(matches!(
        answers[0],
        Ok(Applied::Admission(Admission::New { .. }))
    ));
    assert!(matches!(answers[1], Ok(Applied::Done)));
    assert!(matches!(
        answers[2],
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert!(matches!(answers[3], Err(LedgerError::UnknownCall { .. })));
    assert!(matches!(
        answers[4],
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert_eq!(
        db.query("SELECT call_id || ' ' || state FROM calls ORDER BY seq"),
        ["a started", "b finished", "c started"]
    );
    assert_eq!(
        db.query("SELECT arguments_json FROM call_content"),
        ["{\"x\":1}"]
    );
}

/// Migration is idempotent, and a schema newer than this build is refused.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_migration_runs_once_and_refuses_a_newer_schema() {
    let db = TestSchema::new();
    drop(db.host("first"));
    drop(db.host("second"));
    assert_eq!(
        db.query("SELECT version FROM ledger_version"),
        [SCHEMA_VERSION.to_string()]
    );
    db.query("UPDATE ledger_version SET version = 99");
    match PgBackend::connect(&db.config, "late".into()) {
        Err(LedgerError::SchemaTooNew { found: 99, .. }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// A password in the url is refused (it belongs in the variable `password_env` names), and so
/// is a variable that is not set, and a schema name that is not a plain identifier — all
/// before any connection is made.
#[test]
fn pg_settings_refuse_what_must_not_be_in_a_config() {
    let config = |url: &str, env: Option<&str>, schema: &str| PgConfig {
        url: url.into(),
        password_env: env.map(Into::into),
        schema: schema.into(),
        ca_file: None,
    };
    let err = config("postgres://u:secret@127.0.0.1/db", None, "toolhost")
        .settings()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("password_env") && !err.contains("secret"),
        "{err}"
    );
    let err = config(
        "postgres://u@127.0.0.1/db",
        Some("TOOLHOST_TEST_UNSET_VAR"),
        "toolhost",
    )
    .settings()
    .unwrap_err()
    .to_string();
    assert!(err.contains("TOOLHOST_TEST_UNSET_VAR"), "{err}");
    for bad in [
        "",
        "Toolhost",
        "a; DROP TABLE calls",
        "1abc",
        &"a".repeat(64),
    ] {
        assert!(check_schema_name(bad).is_err(), "{bad:?}");
    }
    assert!(check_schema_name("toolhost_2").is_ok());
}

/// A group sent again under the same id (its connection dropped, the writer cannot tell
/// whether it committed) is answered from the server's record, not applied twice: the
/// admission it carried stays `new` with the same seq, and there is still one call.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_group_sent_twice_is_applied_once() {
    let db = TestSchema::new();
    drop(db.host("migrates"));
    let group = serde_json::Value::Array(vec![
        super::backend::encode(&Write::Admit(key("g")), 1).unwrap(),
        super::backend::encode(&Write::Admit(key("h")), 1).unwrap(),
    ]);
    let send = || {
        db.query(&format!(
            "SELECT toolhost_apply('group-1', 'host', '{group}'::JSONB, 65536, 'marker')::TEXT"
        ))
    };
    let first = send();
    assert_eq!(send(), first);
    let answers: serde_json::Value = serde_json::from_str(&first[0]).unwrap();
    assert_eq!(answers[0]["admission"], "new", "{answers}");
    assert_eq!(answers[1]["admission"], "new", "{answers}");
    assert_eq!(db.query("SELECT count(*) FROM calls"), ["2"]);
    // A new group with the same write is a second admission of the same key: in flight.
    let again = db.query(&format!(
        "SELECT toolhost_apply('group-2', 'host', '{group}'::JSONB, 65536, 'marker')::TEXT"
    ));
    let again: serde_json::Value = serde_json::from_str(&again[0]).unwrap();
    assert_eq!(again[0]["admission"], "in_flight", "{again}");
    // (A host opening now closes these ownerless calls; that is recovery's business.)
    // Old answers are forgotten (a resend comes within seconds), recent ones kept.
    let store = PgStore::start(
        &db.config,
        "pruner".into(),
        std::time::Duration::from_secs(60),
    )
    .expect("the test server answers");
    assert_eq!(store.prune().unwrap(), (0, 0));
    db.query("UPDATE applied_groups SET at_ms = 0");
    assert_eq!(store.prune().unwrap(), (2, 0));
    // A host long gone is forgotten once it owns no open call; one that does is kept.
    db.query(
        "INSERT INTO hosts VALUES ('gone', 0, 0), ('gone-busy', 0, 0);
         UPDATE calls SET owner = 'gone-busy', state = 'admitted', status = NULL,
                          result_json = NULL WHERE call_id = 'g'",
    );
    assert_eq!(store.prune().unwrap(), (0, 1));
    assert_eq!(
        db.query("SELECT owner FROM hosts WHERE owner LIKE 'gone%'"),
        ["gone-busy"]
    );
}

/// Rows a ledger held before the chain (schema 10) are chained in order when version 11 is
/// applied, so an upgraded ledger verifies whole, writes since included.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_rows_stored_before_the_chain_are_chained_by_its_migration() {
    let db = TestSchema::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = db.config.connect().await.unwrap();
        crate::schema::migrate_to(&mut client, &db.config.schema, 10)
            .await
            .unwrap();
    });
    db.query(
        "INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms,
                            events)
         VALUES ('run', 'old', 'add', 'd1', 7, 'started', 1, E'{\"stage\":\"admit\"}\n');
         INSERT INTO transcript (run_id, step, kind, digest, size, at_ms) VALUES ('run', 0,
                                 'request', 'aa', 1, 2);
         INSERT INTO used_tokens VALUES ('tok', 3, 4);",
    );
    assert_eq!(db.query("SELECT version FROM ledger_version"), ["10"]);
    let store = PgStore::start(
        &db.config,
        "host".into(),
        std::time::Duration::from_secs(60),
    )
    .unwrap();
    let mut backend = db.host("host");
    let answers = backend
        .apply(&[Write::Finish {
            run_id: "run".into(),
            call_id: "old".into(),
            outcome: outcome("old"),
            events: Vec::new(),
        }])
        .unwrap();
    assert!(matches!(answers[..], [Ok(Applied::Done)]), "{answers:?}");
    let evidence = store.chain_evidence().unwrap();
    let report = toolhost_ledger_store::chain::verify(&evidence);
    assert!(report.intact(), "{:#?}", report.findings);
    // Three rows chained by the migration, and the outcome written since.
    assert_eq!(report.links, 4, "{report:?}");
}
