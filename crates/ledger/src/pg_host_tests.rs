//! The PostgreSQL ledger through the ledger's own API, as hosts use it: tokens, reads, leases
//! and recovery, budgets and rates shared between hosts. Against a real server, like
//! the backend's own tests (`toolhost-ledger-postgres`); ignored unless run with `--ignored`.

use std::sync::Barrier;

use crate::contract_tests::pg_ledger as ledger;
use crate::postgres::testing::TestSchema;
use crate::{Admission, Budget, Ledger, LedgerError, TokenSpend};
use toolhost_contract::{Budgets, Status, ToolResult};

/// Spending a token judges its expiry by the database's clock, whatever the host's: with the
/// database's clock set an hour ahead of the host's, a token the host holds valid for another
/// minute is expired; set an hour behind, a token 10 s past by the host's clock is spent.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_tokens_expire_by_the_database_clock() {
    let db = TestSchema::new();
    let a = ledger(&db);
    let skew = |ms: i64| {
        db.query(&format!(
            "CREATE OR REPLACE FUNCTION toolhost_now_ms() RETURNS BIGINT LANGUAGE SQL VOLATILE AS \
             $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT + ({ms}) $$"
        ));
    };
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    skew(3_600_000);
    assert_eq!(
        a.consume_token("ahead", host_now + 60).unwrap(),
        TokenSpend::Expired
    );
    skew(-3_600_000);
    assert_eq!(
        a.consume_token("behind", host_now - 10).unwrap(),
        TokenSpend::Spent
    );
    assert_eq!(
        a.consume_token("behind", host_now - 10).unwrap(),
        TokenSpend::AlreadySpent
    );
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
    let a_owner = a.store.owner().to_owned();
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
    let call = toolhost_contract::ToolCall {
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
    let run_budget = Budgets {
        max_calls: Some(10),
        max_calls_per_tool: None,
    };
    let start = Barrier::new(3);
    let taken: usize = std::thread::scope(|s| {
        let running: Vec<_> = hosts
            .iter()
            .map(|h| {
                let (start, run_budget) = (&start, &run_budget);
                s.spawn(move || {
                    start.wait();
                    (0..10)
                        .filter(|_| h.take_budget("run", "add", run_budget).unwrap().is_none())
                        .count()
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(taken, 10);
    assert_eq!(
        hosts[0].take_budget("run", "add", &run_budget).unwrap(),
        Some(Budget::Run)
    );
    // Per tool: 2 of `echo` in another run, whichever host asks.
    let per_tool = Budgets {
        max_calls: None,
        max_calls_per_tool: Some(2),
    };
    let take = |host: usize, tool: &str| hosts[host].take_budget("r2", tool, &per_tool).unwrap();
    assert_eq!(take(1, "echo"), None);
    assert_eq!(take(2, "echo"), None);
    assert_eq!(take(0, "echo"), Some(Budget::Tool));
    assert_eq!(take(0, "other"), None);
}

/// A principal's token bucket is one bucket for every host: a burst of 3 spent across two
/// hosts leaves none on either; another principal has its own.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_rate_buckets_are_shared_between_hosts() {
    let db = TestSchema::new();
    let (a, b) = (ledger(&db), ledger(&db));
    // 0.001 calls per second: nothing refills during the test.
    let take = |host: &Ledger| host.take_rate("alice", 0.001, 3.0).unwrap();
    assert!(take(&a) && take(&b) && take(&a));
    assert!(!take(&b) && !take(&a));
    assert!(b.take_rate("bob", 0.001, 3.0).unwrap());
}
