//! The PostgreSQL backend against a real server. Each test works in a schema of its own
//! (dropped at the end), so tests run in parallel. They are ignored unless run with
//! `--ignored` (`just test` does when `TOOLHOST_TEST_POSTGRES_URL` is set; `.ci/run` sets it),
//! and then they fail — not skip — when the server cannot be reached.

use std::sync::{Arc, Barrier};

use super::*;
use crate::contract::{Status, ToolResult};
use crate::ledger::{Admission, Applied, Backend, CallKey, LedgerError, Outcome, Write};

const NEEDS_SERVER: &str = "set TOOLHOST_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test) and run with --ignored";

/// A schema of the test's own on the test server, dropped when the test ends.
struct TestSchema {
    config: PgConfig,
}

impl TestSchema {
    fn new() -> TestSchema {
        let url = std::env::var("TOOLHOST_TEST_POSTGRES_URL").expect(NEEDS_SERVER);
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        TestSchema {
            config: PgConfig {
                url,
                password_env: None,
                schema,
            },
        }
    }

    /// A backend on its own connection, as one host would have.
    fn host(&self, owner: &str) -> PgBackend {
        PgBackend::connect(&self.config, owner.into()).expect("the test server answers")
    }

    /// Run `sql` on a fresh connection and return the first column of each row, as text.
    fn query(&self, sql: &str) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = self.config.connect().await.unwrap();
            client
                .simple_query(sql)
                .await
                .unwrap()
                .into_iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => {
                        Some(r.get(0).unwrap_or("NULL").to_owned())
                    }
                    _ => None,
                })
                .collect()
        })
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let schema = self.config.schema.clone();
        let _ = std::panic::catch_unwind(|| self.query(&format!("DROP SCHEMA {schema} CASCADE")));
    }
}

fn key(call_id: &str) -> CallKey {
    CallKey {
        run_id: "run".into(),
        call_id: call_id.into(),
        tool: "add".into(),
        args_digest: "d1".into(),
        args_size: 7,
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
                event: crate::ledger::PendingEvent::now("limit", "ok", ""),
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

/// A ledger (a host) on the test schema, with a lease that only the tests end.
fn ledger(db: &TestSchema) -> crate::ledger::Ledger {
    crate::ledger::Ledger::open_postgres(
        &db.config,
        std::time::Duration::from_secs(60),
        Default::default(),
    )
    .expect("the test server answers")
}

/// Through the ledger's own API on two hosts: an approval token spent on one is refused on
/// the other, and each host reads the calls the other recorded.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_tokens_and_reads_are_shared_between_hosts() {
    let db = TestSchema::new();
    let (a, b) = (ledger(&db), ledger(&db));
    assert!(a.consume_token("tok-1", i64::MAX).unwrap());
    assert!(!b.consume_token("tok-1", i64::MAX).unwrap());
    assert!(!a.consume_token("tok-1", i64::MAX).unwrap());
    assert_eq!(
        a.admit("run", "c1", "add", "d1", 7).unwrap(),
        Admission::New { seq: 1 }
    );
    assert!(b.is_admitted("run", "c1").unwrap());
    assert_eq!(
        b.admit("run", "c1", "add", "d1", 7).unwrap(),
        Admission::InFlight
    );
    let call = crate::contract::ToolCall {
        call_id: "c1".into(),
        name: "add".into(),
        arguments: serde_json::json!({}),
    };
    let result = ToolResult::completed(&call, serde_json::json!({"sum": 3}), Default::default());
    a.finish("run", "c1", &result).unwrap();
    assert_eq!(b.outcome("run", "c1").unwrap(), Some(result.clone()));
    let listed = b.calls(Some("run")).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].output_digest.as_deref().map(str::len), Some(64));
    let stages: Vec<_> = listed[0]
        .events
        .iter()
        .map(|e| e.decision.as_str())
        .collect();
    assert_eq!(stages, ["new", "in_flight", "completed"]);
}

/// A host whose lease has passed has its open calls closed as `outcome_unknown` by another
/// host — once, never re-run (a retry replays it) — and its own late outcome is refused; a
/// host that holds its lease keeps its calls.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_lapsed_hosts_calls_end_outcome_unknown_and_live_ones_are_kept() {
    let db = TestSchema::new();
    let (a, b) = (ledger(&db), ledger(&db));
    a.admit("run", "lost", "add", "d1", 7).unwrap();
    a.mark_started("run", "lost").unwrap();
    b.admit("run", "kept", "add", "d1", 7).unwrap();
    // Nothing has lapsed: nobody's calls are closed.
    assert!(b.recover().unwrap().is_empty());
    // a's lease passes (as if it had stopped renewing it long ago).
    let a_owner = match &a.store {
        crate::ledger::Store::Postgres(pg) => pg.owner().to_owned(),
        crate::ledger::Store::Sqlite { .. } => unreachable!("opened on PostgreSQL"),
    };
    db.query(&format!(
        "UPDATE hosts SET lease_until_ms = 0 WHERE owner = '{a_owner}'"
    ));
    assert_eq!(
        b.recover().unwrap(),
        [("run".to_owned(), "lost".to_owned())]
    );
    assert!(b.recover().unwrap().is_empty(), "closed once");
    let recorded = b.outcome("run", "lost").unwrap().unwrap();
    assert_eq!(recorded.status, Status::OutcomeUnknown);
    match b.admit("run", "lost", "add", "d1", 7).unwrap() {
        Admission::Replay(r) => assert_eq!(r.status, Status::OutcomeUnknown),
        other => panic!("{other:?}"),
    }
    let call = crate::contract::ToolCall {
        call_id: "lost".into(),
        name: "add".into(),
        arguments: serde_json::json!({}),
    };
    let late = ToolResult::completed(&call, serde_json::json!({"sum": 3}), Default::default());
    assert!(matches!(
        a.finish("run", "lost", &late),
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert_eq!(
        db.query("SELECT call_id || ' ' || state || ' ' || COALESCE(status, '-') FROM calls ORDER BY seq"),
        ["lost finished outcome_unknown", "kept admitted -"]
    );
}

/// A run budget of 10 taken by three hosts at once, 30 attempts in all: exactly 10 counted,
/// and the per-tool budget is shared the same way.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_run_budgets_are_exact_across_hosts() {
    let db = TestSchema::new();
    let hosts: Vec<_> = (0..3).map(|_| ledger(&db)).collect();
    let start = Barrier::new(3);
    let taken: usize = std::thread::scope(|s| {
        let running: Vec<_> = hosts
            .iter()
            .map(|h| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let pg = h.shared_limits().expect("PostgreSQL keeps the limits");
                    (0..10)
                        .filter(|_| {
                            pg.take_budget("run", "add", Some(10), None)
                                .unwrap()
                                .is_none()
                        })
                        .count()
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(taken, 10);
    let pg = hosts[0].shared_limits().unwrap();
    assert_eq!(
        pg.take_budget("run", "add", Some(10), None).unwrap(),
        Some(Budget::Run)
    );
    // Per tool: 2 of `echo` in another run, whichever host asks.
    assert_eq!(
        hosts[1]
            .shared_limits()
            .unwrap()
            .take_budget("r2", "echo", None, Some(2))
            .unwrap(),
        None
    );
    assert_eq!(
        hosts[2]
            .shared_limits()
            .unwrap()
            .take_budget("r2", "echo", None, Some(2))
            .unwrap(),
        None
    );
    assert_eq!(
        hosts[0]
            .shared_limits()
            .unwrap()
            .take_budget("r2", "echo", None, Some(2))
            .unwrap(),
        Some(Budget::Tool)
    );
    assert_eq!(
        hosts[0]
            .shared_limits()
            .unwrap()
            .take_budget("r2", "other", None, Some(2))
            .unwrap(),
        None
    );
}

/// A principal's token bucket is one bucket for every host: a burst of 3 spent across two
/// hosts leaves none on either; another principal has its own.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_rate_buckets_are_shared_between_hosts() {
    let db = TestSchema::new();
    let (a, b) = (ledger(&db), ledger(&db));
    let (a, b) = (a.shared_limits().unwrap(), b.shared_limits().unwrap());
    // 0.001 calls per second: nothing refills during the test.
    let take = |pg: &PgStore| pg.take_rate("alice", 0.001, 3.0).unwrap();
    assert!(take(a) && take(b) && take(a));
    assert!(!take(b) && !take(a));
    assert!(b.take_rate("bob", 0.001, 3.0).unwrap());
}

/// The ledger opens, answers and closes from inside an async runtime (the CLI and the
/// servers open it there), where blocking on another runtime would panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
async fn pg_a_ledger_opens_and_closes_inside_an_async_runtime() {
    let db = TestSchema::new();
    let l = ledger(&db);
    assert!(!l.is_admitted("run", "x").unwrap());
    l.commit(Write::Admit(key("x")), crate::ledger::Inline::Allowed)
        .await
        .unwrap();
    assert!(l.is_admitted("run", "x").unwrap());
    drop(l);
    // The schema is dropped on a runtime of the test's own, off this one.
    tokio::task::spawn_blocking(move || drop(db)).await.unwrap();
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
            "SELECT toolhost_apply('group-1', 'host', '{group}'::JSONB, 65536, 'marker', 1)::TEXT"
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
        "SELECT toolhost_apply('group-2', 'host', '{group}'::JSONB, 65536, 'marker', 1)::TEXT"
    ));
    let again: serde_json::Value = serde_json::from_str(&again[0]).unwrap();
    assert_eq!(again[0]["admission"], "in_flight", "{again}");
    // (A host opening now closes these ownerless calls; that is recovery's business.)
    // Old answers are forgotten (a resend comes within seconds), recent ones kept.
    let hosts = ledger(&db);
    let store = hosts.shared_limits().unwrap();
    assert_eq!(store.prune_groups().unwrap(), 0);
    db.query("UPDATE applied_groups SET at_ms = 0");
    assert_eq!(store.prune_groups().unwrap(), 2);
}
