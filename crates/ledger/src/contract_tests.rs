//! The ledger's contract, one suite for every backend. Each test body takes a [`Site`] — a
//! store and a way to open hosts on it — and `contract!` runs every body on SQLite
//! (`sqlite_contract::*`) and on PostgreSQL (`pg_contract::*`, ignored unless
//! `TOOLHOST_TEST_POSTGRES_URL` names a server; `just test` runs them then).
//!
//! A body that `contract!` does not list is dead code, which `cargo clippy --all-targets -D
//! warnings` refuses: a contract test cannot exist for one backend only. Tests of one
//! backend's own mechanics (its schema, its file, its groups) stay with that backend
//! (`tests.rs`, `postgres/tests.rs`).
//!
//! Longer than 500 lines: it is nothing but tests, one per guarantee every backend keeps.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use super::journal_tests::*;
use super::reconcile_tests::*;
use super::task_tests::*;
use super::*;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{Code, Status, ToolCall, ToolResult, Usage};

/// Where a contract test runs: one store, and hosts opened on it.
pub(super) trait Site {
    /// A host on this store: another process on the same file, another host on the same
    /// database.
    fn open(&self, options: LedgerOptions) -> Ledger;
    /// `ledger`'s host stops for good: its lease ends (SQLite: its process lets go of the
    /// file; PostgreSQL: its lease passes).
    fn stop(&self, ledger: Ledger);
    /// Everything the store keeps, as bytes to scan.
    fn stored(&self) -> Vec<u8>;
}

/// A SQLite file in a temporary directory of its own.
pub(super) struct SqliteSite {
    _dir: tempfile::TempDir,
    pub(super) path: PathBuf,
}

impl SqliteSite {
    pub(super) fn new() -> SqliteSite {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("ledger.db");
        SqliteSite { _dir: dir, path }
    }
}

impl Site for SqliteSite {
    fn open(&self, options: LedgerOptions) -> Ledger {
        Ledger::open(&self.path, options).unwrap()
    }

    fn stop(&self, ledger: Ledger) {
        drop(ledger);
    }

    fn stored(&self) -> Vec<u8> {
        ledger_bytes(&self.path)
    }
}

/// A schema of its own on the test server.
pub(super) struct PgSite {
    db: postgres::testing::TestSchema,
}

impl PgSite {
    pub(super) fn new() -> PgSite {
        PgSite {
            db: postgres::testing::TestSchema::new(),
        }
    }
}

/// A ledger (a host) on the test schema, with a lease that only the tests end.
pub(crate) fn pg_ledger(db: &postgres::testing::TestSchema) -> Ledger {
    pg_ledger_with(db, Default::default())
}

/// [`pg_ledger`], opened with `options`.
pub(crate) fn pg_ledger_with(db: &postgres::testing::TestSchema, options: LedgerOptions) -> Ledger {
    Ledger::open_postgres(&db.config, std::time::Duration::from_secs(60), options)
        .expect("the test server answers")
}

impl Site for PgSite {
    fn open(&self, options: LedgerOptions) -> Ledger {
        pg_ledger_with(&self.db, options)
    }

    fn stop(&self, ledger: Ledger) {
        let owner = ledger.store.owner().to_owned();
        drop(ledger);
        self.db.query(&format!(
            "UPDATE hosts SET lease_until_ms = 0 WHERE owner = '{owner}'"
        ));
    }

    fn stored(&self) -> Vec<u8> {
        let tables = self.db.query(&format!(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = '{}'",
            self.db.config.schema
        ));
        let mut all = Vec::new();
        for table in tables {
            for row in self.db.query(&format!("SELECT t::text FROM {table} t")) {
                all.extend(row.into_bytes());
            }
        }
        all
    }
}

impl chain_tests::Access for SqliteSite {
    fn past_triggers(&self, sql: &str) {
        sqlite::testing::edit_past_triggers(&self.path, sql);
    }

    fn through_triggers(&self, sql: &str) {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        sqlite::chain::register(&conn).unwrap();
        conn.execute_batch(sql).unwrap();
    }

    fn events(&self, run: &str, call: &str) -> String {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        conn.query_row(
            "SELECT events FROM calls WHERE run_id = ?1 AND call_id = ?2",
            [run, call],
            |r| r.get(0),
        )
        .unwrap()
    }
}

impl chain_tests::Access for PgSite {
    fn past_triggers(&self, sql: &str) {
        self.db
            .query(&format!("SET session_replication_role = replica; {sql}"));
    }

    fn through_triggers(&self, sql: &str) {
        self.db.query(&format!(
            "SELECT set_config('toolhost.host', 'intruder/store', false); {sql}"
        ));
    }

    fn events(&self, run: &str, call: &str) -> String {
        self.db
            .query(&format!(
                "SELECT events FROM calls WHERE run_id = '{run}' AND call_id = '{call}'"
            ))
            .remove(0)
    }
}

/// Every body below, on each backend.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        /// The contract on SQLite.
        mod sqlite_contract {
            $(
                #[test]
                fn $name() {
                    let site = super::SqliteSite::new();
                    super::$name(&site);
                    super::super::chain_tests::assert_intact(&site);
                }
            )*
        }

        /// The contract on PostgreSQL.
        mod pg_contract {
            $(
                #[test]
                #[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
                fn $name() {
                    let site = super::PgSite::new();
                    super::$name(&site);
                    super::super::chain_tests::assert_intact(&site);
                }
            )*
        }
    };
}

contract!(
    new_then_replay_returns_the_recorded_result,
    same_call_without_outcome_is_in_flight,
    same_id_other_arguments_is_a_conflict,
    conflict_does_not_overwrite_the_original,
    finish_exactly_once,
    unknown_calls_and_mismatched_results_are_refused,
    recovery_closes_open_calls_as_outcome_unknown,
    recovery_spares_calls_of_live_hosts,
    reopened_ledger_replays_a_completed_call,
    tokens_are_single_use_across_reopen,
    concurrent_admission_through_one_ledger_admits_once,
    concurrent_admission_across_connections_admits_once,
    audit_events_come_back_in_order,
    listing_filters_by_run_and_serializes,
    no_argument_content_is_stored_by_default,
    transcript_records_steps,
    late_admission_yields_to_an_earlier_one,
    late_admission_commits_admission_decisions_and_state,
    repeated_admissions_are_capped,
    hosts_on_one_store_share_tokens_and_reads,
    a_ledger_opens_and_closes_inside_an_async_runtime,
    a_call_records_which_code_it_named,
    budgets_and_rates_are_exact_under_concurrency,
    a_journal_records_one_call_from_open_to_outcome,
    a_journal_that_lost_its_admission_records_nothing,
    a_known_id_leaves_no_claim_and_keeps_the_conflict,
    a_ledger_fault_leaves_no_claim,
    an_unanswered_claim_does_not_make_a_replay_a_conflict,
    an_unanswered_claim_on_a_new_id_is_a_conflict,
    another_callers_claim_is_foreign,
    a_dropped_journal_releases_its_claim,
    a_copy_is_answered_only_with_its_own_calls_outcome,
    a_copy_waits_while_the_id_has_no_outcome,
    a_reconciled_call_replays_the_operators_record,
    failed_and_not_run_reconciliations_replay_their_codes,
    only_a_lost_call_is_reconciled,
    concurrent_reconciliations_keep_one,
    lost_calls_are_listed_for_an_operator,
    a_task_is_answered_on_every_host_to_its_caller,
    a_cancel_on_one_host_reaches_the_host_that_runs_it,
    a_dead_hosts_tasks_are_lost_or_unknown,
    a_task_moves_to_its_approved_call_once,
    expired_tasks_are_gone_and_pruned,
    a_callers_open_tasks_are_capped_on_every_host,
    task_caps_hold_under_concurrency,
    a_task_keeps_arguments_only_while_they_are_needed,
    tasks_that_wait_for_approval_are_listed_on_every_host,
);

pub(super) fn call(id: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: "echo".into(),
        arguments: args,
    }
}

/// The digest and size a caller would hand to `admit`.
pub(super) fn args_key(args: &Value) -> (String, u64) {
    let bytes = serde_json::to_vec(args).unwrap();
    (digest_bytes(&bytes), bytes.len() as u64)
}

pub(super) fn admit(l: &Ledger, run: &str, c: &ToolCall) -> Admission {
    let (d, n) = args_key(&c.arguments);
    l.admit(run, &c.call_id, &c.name, &d, n).unwrap()
}

pub(super) fn usage() -> Usage {
    Usage {
        fuel_consumed: 1234,
        wall_ms: 7,
        memory_peak_bytes: 65536,
        output_bytes: 20,
    }
}

pub(super) fn stages(l: &Ledger, run: &str, call_id: &str) -> Vec<(String, String)> {
    l.calls(Some(run))
        .unwrap()
        .into_iter()
        .find(|r| r.call_id == call_id)
        .unwrap()
        .events
        .into_iter()
        .map(|e| (e.stage, e.decision))
        .collect()
}

/// Every byte the ledger keeps on disk: the database, its WAL and shared-memory files.
pub(super) fn ledger_bytes(path: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(path.parent().unwrap()).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            all.extend(std::fs::read(p).unwrap());
        }
    }
    all
}

pub(super) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// A new id is admitted with increasing seq; the same id and args after finish replay exactly.
fn new_then_replay_returns_the_recorded_result(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c1 = call("c1", json!({"text": "hi"}));
    let c2 = call("c2", json!({"text": "ho"}));
    assert_eq!(admit(&l, "r", &c1), Admission::New { seq: 1 });
    assert_eq!(admit(&l, "r", &c2), Admission::New { seq: 2 });
    // Same call id in another run is another call.
    assert_eq!(admit(&l, "r2", &c1), Admission::New { seq: 3 });

    l.mark_started("r", "c1").unwrap();
    let output = json!({"n": 18446744073709551615u64, "f": 0.1, "s": "é\u{0}\"", "neg": -0.0});
    let mut result = ToolResult::completed(&c1, output, usage());
    result.diagnostic_id = Some("diag-1".into());
    l.finish("r", "c1", &result).unwrap();

    assert_eq!(admit(&l, "r", &c1), Admission::Replay(Box::new(result)));
    assert_eq!(
        stages(&l, "r", "c1"),
        [
            ("admit", "new"),
            ("record", "completed"),
            ("admit", "replay")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

/// The same id and args while the call has no outcome is in flight, admitted or started.
fn same_call_without_outcome_is_in_flight(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!([1, 2]));
    assert!(matches!(admit(&l, "r", &c), Admission::New { .. }));
    assert_eq!(admit(&l, "r", &c), Admission::InFlight);
    l.mark_started("r", "c").unwrap();
    l.mark_started("r", "c").unwrap(); // idempotent
    for _ in 0..5 {
        assert_eq!(admit(&l, "r", &c), Admission::InFlight);
    }
    assert_eq!(l.outcome("r", "c").unwrap(), None);
    let rec = &l.calls(Some("r")).unwrap()[0];
    assert_eq!(rec.state, CallState::Started);
    assert!(rec.started_at_ms.is_some() && rec.status.is_none());
    // A duplicate polling admit leaves one in_flight event per streak, not one per poll.
    let in_flight = rec
        .events
        .iter()
        .filter(|e| e.decision == "in_flight")
        .count();
    assert_eq!(in_flight, 1);

    let result = ToolResult::completed(&c, json!(3), usage());
    l.finish("r", "c", &result).unwrap();
    assert_eq!(l.outcome("r", "c").unwrap(), Some(result));
    assert!(matches!(
        l.outcome("r", "nope"),
        Err(LedgerError::UnknownCall { .. })
    ));
}

/// The same id with other arguments, or for another tool, is a conflict.
fn same_id_other_arguments_is_a_conflict(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({"a": 1}));
    admit(&l, "r", &c);
    assert_eq!(
        admit(&l, "r", &call("c", json!({"a": 2}))),
        Admission::Conflict
    );
    let (d, n) = args_key(&c.arguments);
    assert_eq!(
        l.admit("r", "c", "other_tool", &d, n).unwrap(),
        Admission::Conflict
    );
}

/// A conflict leaves the original record alone, whether it is running or finished, and is
/// recorded as an audit event on the original call.
fn conflict_does_not_overwrite_the_original(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let orig = call("c", json!({"a": 1}));
    let other = call("c", json!({"a": 2}));
    admit(&l, "r", &orig);
    l.mark_started("r", "c").unwrap();

    // While the original runs.
    assert_eq!(admit(&l, "r", &other), Admission::Conflict);
    let result = ToolResult::completed(&orig, json!("original"), usage());
    l.finish("r", "c", &result).unwrap();
    // After it finished.
    assert_eq!(admit(&l, "r", &other), Admission::Conflict);

    assert_eq!(admit(&l, "r", &orig), Admission::Replay(Box::new(result)));
    let recs = l.calls(Some("r")).unwrap();
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.args_digest, args_key(&orig.arguments).0);
    assert_eq!(rec.status, Some(Status::Completed));
    let conflicts: Vec<_> = rec
        .events
        .iter()
        .filter(|e| e.stage == "admit" && e.decision == "conflict")
        .collect();
    assert_eq!(conflicts.len(), 2);
    assert!(conflicts[0].detail.contains(&args_key(&other.arguments).0));
}

/// A call has exactly one terminal outcome: a second finish is refused and changes nothing.
fn finish_exactly_once(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({}));
    admit(&l, "r", &c);
    let first = ToolResult::failed(&c, Code::FuelExhausted, "out of fuel", usage());
    l.finish("r", "c", &first).unwrap();
    let second = ToolResult::completed(&c, json!(1), Usage::default());
    assert!(matches!(
        l.finish("r", "c", &second),
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert!(matches!(
        l.mark_started("r", "c"),
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert_eq!(admit(&l, "r", &c), Admission::Replay(Box::new(first)));
    let rec = &l.calls(None).unwrap()[0];
    assert_eq!(rec.code, Some(Code::FuelExhausted));
    assert_eq!(rec.usage, Some(usage()));
    let records = rec.events.iter().filter(|e| e.stage == "record").count();
    assert_eq!(records, 1);
}

/// Operations on a call that was never admitted are `UnknownCall`; a result for another call
/// id is refused.
fn unknown_calls_and_mismatched_results_are_refused(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({}));
    let r = ToolResult::completed(&c, json!(1), Usage::default());
    assert!(matches!(
        l.finish("r", "c", &r),
        Err(LedgerError::UnknownCall { .. })
    ));
    assert!(matches!(
        l.mark_started("r", "c"),
        Err(LedgerError::UnknownCall { .. })
    ));
    assert!(matches!(
        l.event("r", "c", "validate", "ok", ""),
        Err(LedgerError::UnknownCall { .. })
    ));
    admit(&l, "r", &c);
    assert!(matches!(
        l.finish("r", "other", &r),
        Err(LedgerError::ResultMismatch { .. })
    ));
    assert!(l.calls(None).unwrap()[0].status.is_none());
}

/// Recovery closes admitted and started calls as outcome_unknown (after a restart), leaves
/// finished calls alone, and the closed calls replay that outcome instead of running again.
fn recovery_closes_open_calls_as_outcome_unknown(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let admitted = call("a", json!(1));
    let started = call("s", json!(2));
    let done = call("d", json!(3));
    admit(&l, "r", &admitted);
    admit(&l, "r", &started);
    l.mark_started("r", "s").unwrap();
    admit(&l, "r", &done);
    let done_result = ToolResult::completed(&done, json!("ok"), usage());
    l.finish("r", "d", &done_result).unwrap();
    site.stop(l);

    let l = site.open(LedgerOptions::default());
    let closed = l.recover().unwrap();
    assert_eq!(
        closed,
        vec![
            ("r".to_string(), "a".to_string()),
            ("r".to_string(), "s".to_string())
        ]
    );
    assert!(l.recover().unwrap().is_empty());

    for c in [&admitted, &started] {
        let Admission::Replay(r) = admit(&l, "r", c) else {
            panic!("expected a replay of {}", c.call_id)
        };
        assert_eq!(r.status, Status::OutcomeUnknown);
        assert_eq!(r.code, None);
        assert_eq!(r.message, OUTCOME_UNKNOWN_MESSAGE);
        assert_eq!(
            (r.call_id.as_str(), r.tool.as_str()),
            (c.call_id.as_str(), "echo")
        );
        assert!(matches!(
            l.finish(
                "r",
                &c.call_id,
                &ToolResult::completed(c, json!(0), usage())
            ),
            Err(LedgerError::AlreadyFinished { .. })
        ));
    }
    assert_eq!(
        admit(&l, "r", &done),
        Admission::Replay(Box::new(done_result))
    );
    let s = stages(&l, "r", "s");
    assert_eq!(s[1], ("recover".to_string(), "outcome_unknown".to_string()));
}

/// Recovery never closes a call another live host is running: only once that host's lease is
/// released (its process ended) does a starting host close the call.
fn recovery_spares_calls_of_live_hosts(site: &dyn Site) {
    let running = site.open(LedgerOptions::default());
    let c = call("live", json!(1));
    admit(&running, "r", &c);
    running.mark_started("r", "live").unwrap();

    let other = site.open(LedgerOptions::default());
    assert!(other.recover().unwrap().is_empty());
    let result = ToolResult::completed(&c, json!("done"), usage());
    running.finish("r", "live", &result).unwrap();

    let c2 = call("lost", json!(2));
    admit(&running, "r", &c2);
    site.stop(running);
    assert_eq!(
        other.recover().unwrap(),
        vec![("r".to_string(), "lost".to_string())]
    );
}

/// A completed call still replays after its host stopped and another opened the store.
fn reopened_ledger_replays_a_completed_call(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({"q": "x"}));
    let Admission::New { seq: first } = admit(&l, "r", &c) else {
        panic!("a new call")
    };
    let result = ToolResult::completed(&c, json!({"answer": [1, 2, 3]}), usage());
    l.finish("r", "c", &result).unwrap();
    site.stop(l);

    let l = site.open(LedgerOptions::default());
    assert_eq!(admit(&l, "r", &c), Admission::Replay(Box::new(result)));
    // Admission order goes on after a restart (PostgreSQL's sequence may leave gaps).
    let Admission::New { seq } = admit(&l, "r", &call("c2", json!(1))) else {
        panic!("a new call")
    };
    assert!(seq > first, "{seq} after {first}");
}

/// An approval token is spent once, and stays spent across a restart; pruning forgets only
/// the tokens that expired before the given time.
fn tokens_are_single_use_across_reopen(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let spend = |l: &Ledger, id: &str, at: i64| l.consume_token(id, at).unwrap();
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::Spent);
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::AlreadySpent);
    assert_eq!(spend(&l, "tok-2", 2_000_000_100), TokenSpend::Spent);
    site.stop(l);
    let l = site.open(LedgerOptions::default());
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::AlreadySpent);
    assert_eq!(l.prune_used_tokens(2_000_000_050).unwrap(), 1);
    assert_eq!(spend(&l, "tok-2", 2_000_000_100), TokenSpend::AlreadySpent);
}

/// Eight threads admitting the same call through one shared ledger: exactly one `New`.
fn concurrent_admission_through_one_ledger_admits_once(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let l = Arc::new(l);
    let outcomes = race(8, |_| Arc::clone(&l));
    check_race(&outcomes);
}

/// Eight threads, each with its own connection to the same file: exactly one `New`.
fn concurrent_admission_across_connections_admits_once(site: &dyn Site) {
    let outcomes = race(8, |_| Arc::new(site.open(LedgerOptions::default())));
    check_race(&outcomes);
}

/// Stage events come back in the order they were appended, between admit and record.
fn audit_events_come_back_in_order(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({}));
    admit(&l, "r", &c);
    let pipeline = [
        ("resolve", "ok"),
        ("validate", "ok"),
        ("authorize", "allow"),
        ("approve", "not_required"),
        ("limit", "ok"),
        ("execute", "ok"),
        ("check", "ok"),
    ];
    for (i, (stage, decision)) in pipeline.iter().enumerate() {
        l.event("r", "c", stage, decision, &format!("rule {i}"))
            .unwrap();
    }
    l.finish("r", "c", &ToolResult::completed(&c, json!(null), usage()))
        .unwrap();
    let rec = &l.calls(Some("r")).unwrap()[0];
    let got: Vec<_> = rec
        .events
        .iter()
        .map(|e| (e.stage.as_str(), e.decision.as_str()))
        .collect();
    let mut want = vec![("admit", "new")];
    want.extend(pipeline);
    want.push(("record", "completed"));
    assert_eq!(got, want);
    assert_eq!(rec.events[3].detail, "rule 2");
    assert!(rec.events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
}

/// The listing filters by run and carries sizes, digests, usage and the outcome summary.
fn listing_filters_by_run_and_serializes(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let c = call("c", json!({"x": 1}));
    admit(&l, "r1", &c);
    admit(&l, "r2", &c);
    l.finish("r1", "c", &ToolResult::completed(&c, json!("abc"), usage()))
        .unwrap();
    assert_eq!(l.calls(None).unwrap().len(), 2);
    let recs = l.calls(Some("r1")).unwrap();
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    let (digest, size) = args_key(&c.arguments);
    assert_eq!(
        (r.args_digest.as_str(), r.args_size),
        (digest.as_str(), size)
    );
    assert_eq!(r.output_size, Some(5)); // "abc" with quotes
    assert_eq!(
        r.output_digest.as_deref(),
        Some(digest_bytes(b"\"abc\"").as_str())
    );
    assert_eq!(r.state, CallState::Finished);
    assert!(r.finished_at_ms.is_some());
    let v = serde_json::to_value(r).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"], "finished");
    assert!(v.get("arguments").is_none());
    assert!(l.calls(Some("nope")).unwrap().is_empty());
}

/// With content recording off, no argument content reaches what the store keeps; with it on,
/// the same scan finds it (the scan works). Replay storage does keep the output the model saw.
fn no_argument_content_is_stored_by_default(site: &dyn Site) {
    // One call per case, each with a marker of its own in its arguments.
    let run = |case: &str, record_content: bool, echo: bool| -> bool {
        let marker = format!("MARKER-7f3a9c-secret-{case}");
        let l = site.open(LedgerOptions {
            synchronous_full: false,
            record_content,
        });
        let c = call(case, json!({"password": marker}));
        admit(&l, "r", &c);
        let stored = l.record_content("r", case, &c.arguments).unwrap();
        assert_eq!(stored, record_content);
        let (digest, size) = args_key(&c.arguments);
        l.event(
            "r",
            case,
            "validate",
            "ok",
            &format!("sha256 {digest}, {size} bytes"),
        )
        .unwrap();
        l.mark_started("r", case).unwrap();
        let output = if echo {
            json!({"echo": marker})
        } else {
            json!({"ok": true})
        };
        l.finish("r", case, &ToolResult::completed(&c, output, usage()))
            .unwrap();
        assert!(matches!(admit(&l, "r", &c), Admission::Replay(_)));
        if record_content {
            let rec = l.calls(Some("r")).unwrap();
            let rec = rec.iter().find(|r| r.call_id == case).unwrap();
            assert_eq!(rec.arguments, Some(c.arguments.clone()));
        }
        // While the host runs, and after it stopped (SQLite: closing checkpoints the log).
        let mut found = contains(&site.stored(), &marker);
        site.stop(l);
        found |= contains(&site.stored(), &marker);
        found
    };
    assert!(
        !run("off", false, false),
        "argument content stored with record_content off"
    );
    assert!(
        run("on", true, false),
        "the scan must find recorded content"
    );
    // The honest boundary: a tool that echoes its input puts it into its output, and the
    // output is kept for replay.
    assert!(run("echo", false, true));
}

/// Transcript steps come back by step, in append order, with their detail (cut at its cap).
fn transcript_records_steps(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    l.transcript("r", 1, "response", "bb", 20, "").unwrap();
    l.transcript("r", 0, "request", "aa", 10, "").unwrap();
    l.transcript("r", 1, "request", "cc", 30, "attempt 2: ok")
        .unwrap();
    l.transcript("other", 0, "request", "dd", 1, "").unwrap();
    let long = "d".repeat(super::MAX_TRANSCRIPT_DETAIL + 10);
    l.transcript("r", 2, "run_stopped", "", 0, &long).unwrap();
    let got: Vec<_> = l
        .transcript_entries("r")
        .unwrap()
        .into_iter()
        .map(|e| (e.step, e.kind, e.digest, e.size, e.detail))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "request".into(), "aa".into(), 10, "".into()),
            (1, "response".into(), "bb".into(), 20, "".into()),
            (1, "request".into(), "cc".into(), 30, "attempt 2: ok".into()),
            (
                2,
                "run_stopped".into(),
                "".into(),
                0,
                long[..super::MAX_TRANSCRIPT_DETAIL].to_string()
            ),
        ]
    );
}

/// A late admission (stages first, admission with the start or the outcome) that finds the
/// id already admitted by another process writes nothing of its own: it gets the admission
/// decision instead (in flight, then replay), and the original call is unchanged.
fn late_admission_yields_to_an_earlier_one(site: &dyn Site) {
    let first = site.open(LedgerOptions::default());
    let second = site.open(LedgerOptions::default());
    let c = call("c", json!({"q": 1}));
    let (digest, size) = args_key(&c.arguments);
    let events = [PendingEvent::now("authorize", "allowed", "rule r")];
    let opening = Opening {
        tool: "echo",
        args_digest: &digest,
        args_size: size,
        at_ms: 1,
        events: &events,
        content: Some(&c.arguments),
    };
    assert!(!second.is_admitted("r", "c").unwrap());
    assert!(matches!(admit(&first, "r", &c), Admission::New { .. }));
    assert_eq!(
        second.admit_started("r", "c", &opening).unwrap(),
        Admission::InFlight
    );
    let result = ToolResult::completed(&c, json!("done"), usage());
    first.finish("r", "c", &result).unwrap();
    let mine = ToolResult::completed(&c, json!("mine"), usage());
    assert_eq!(
        second.admit_finished("r", "c", &opening, &mine).unwrap(),
        Admission::Replay(Box::new(result.clone()))
    );
    assert_eq!(second.outcome("r", "c").unwrap(), Some(result));
    assert_eq!(
        stages(&second, "r", "c"),
        [
            ("admit", "new"),
            ("admit", "in_flight"),
            ("record", "completed"),
            ("admit", "replay")
        ]
        .map(|(s, d)| (s.to_string(), d.to_string()))
    );
}

/// A late admission of a new call commits the admission, the decisions made before it, the
/// content (when recorded) and the start mark or the outcome, in that order.
fn late_admission_commits_admission_decisions_and_state(site: &dyn Site) {
    let l = site.open(LedgerOptions {
        synchronous_full: false,
        record_content: true,
    });
    let events = [
        PendingEvent::now("authorize", "allowed", "rule r"),
        PendingEvent::now("approve", "approval_required", "digest-9"),
    ];
    let started = call("s", json!({"q": 1}));
    let (digest, size) = args_key(&started.arguments);
    let opening = Opening {
        tool: "echo",
        args_digest: &digest,
        args_size: size,
        at_ms: 5,
        events: &events,
        content: Some(&started.arguments),
    };
    assert!(matches!(
        l.admit_started("r", "s", &opening).unwrap(),
        Admission::New { .. }
    ));
    let ended = call("e", json!({"q": 1}));
    let failed = ToolResult::failed(&ended, Code::Unauthorized, "no", Usage::default());
    let opening = Opening {
        content: None,
        ..opening
    };
    assert!(matches!(
        l.admit_finished("r", "e", &opening, &failed).unwrap(),
        Admission::New { .. }
    ));
    let calls = l.calls(Some("r")).unwrap();
    assert_eq!(calls[0].state, CallState::Started);
    assert_eq!(calls[0].admitted_at_ms, 5);
    assert_eq!(calls[0].arguments, Some(json!({"q": 1})));
    assert_eq!(calls[1].state, CallState::Finished);
    assert_eq!(calls[1].arguments, None);
    assert_eq!(
        stages(&l, "r", "s"),
        [
            ("admit", "new"),
            ("authorize", "allowed"),
            ("approve", "approval_required")
        ]
        .map(|(s, d)| (s.to_string(), d.to_string()))
    );
    assert_eq!(stages(&l, "r", "e").last().unwrap().0, "record");
    assert_eq!(
        l.approval_request("digest-9").unwrap(),
        Some(("r".to_string(), "s".to_string()))
    );
    assert!(matches!(
        l.finish("r", "e", &failed),
        Err(LedgerError::AlreadyFinished { .. })
    ));
}

/// A call id repeated without end costs bounded ledger space: past the cap one `not_recorded`
/// event ends the repeats, the call still replays, and a running call still records its
/// outcome after the cap.
fn repeated_admissions_are_capped(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let done = call("done", json!(1));
    admit(&l, "r", &done);
    let result = ToolResult::completed(&done, json!("ok"), usage());
    l.finish("r", "done", &result).unwrap();
    let running = call("running", json!(2));
    admit(&l, "r", &running);
    for i in 0..1500 {
        assert_eq!(
            admit(&l, "r", &done),
            Admission::Replay(Box::new(result.clone()))
        );
        // Conflicts land on the running call's record.
        let other = call("running", json!(1000 + i));
        assert_eq!(admit(&l, "r", &other), Admission::Conflict);
    }
    l.finish(
        "r",
        "running",
        &ToolResult::completed(&running, json!("late"), usage()),
    )
    .unwrap();
    for c in l.calls(Some("r")).unwrap() {
        let chars: usize = c
            .events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap().len() + 1)
            .sum();
        assert!(
            chars as i64 <= MAX_APPENDED_EVENTS_CHARS + 1024,
            "{}: {chars}",
            c.call_id
        );
        let capped = c
            .events
            .iter()
            .filter(|e| e.decision == "not_recorded")
            .count();
        assert_eq!(capped, 1, "{}", c.call_id);
        assert_eq!(c.status, Some(Status::Completed));
    }
    assert_eq!(
        stages(&l, "r", "running").last().unwrap(),
        &("record".to_string(), "completed".to_string())
    );
}

/// Run `n` threads that admit the same call at once; the one that wins finishes it at once.
fn race(n: usize, ledger_for: impl Fn(usize) -> Arc<Ledger>) -> Vec<Admission> {
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let l = ledger_for(i);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let c = call("same", json!({"k": "v"}));
                barrier.wait();
                let a = admit(&l, "run", &c);
                if let Admission::New { .. } = a {
                    l.mark_started("run", "same").unwrap();
                    let r = ToolResult::completed(&c, json!("done"), Usage::default());
                    l.finish("run", "same", &r).unwrap();
                }
                a
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn check_race(outcomes: &[Admission]) {
    let new = outcomes
        .iter()
        .filter(|a| matches!(a, Admission::New { .. }))
        .count();
    assert_eq!(new, 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|a| matches!(
        a,
        Admission::New { .. } | Admission::InFlight | Admission::Replay(_)
    )));
}

/// Two hosts on one store: a token spent on one is refused on the other, and each reads the
/// calls the other recorded.
fn hosts_on_one_store_share_tokens_and_reads(site: &dyn Site) {
    let (a, b) = (
        site.open(LedgerOptions::default()),
        site.open(LedgerOptions::default()),
    );
    assert_eq!(
        a.consume_token("tok-1", i64::MAX).unwrap(),
        TokenSpend::Spent
    );
    assert_eq!(
        b.consume_token("tok-1", i64::MAX).unwrap(),
        TokenSpend::AlreadySpent
    );
    assert_eq!(
        a.consume_token("tok-1", i64::MAX).unwrap(),
        TokenSpend::AlreadySpent
    );
    let c = call("c1", json!({}));
    assert_eq!(admit(&a, "run", &c), Admission::New { seq: 1 });
    assert!(b.is_admitted("run", "c1").unwrap());
    assert_eq!(admit(&b, "run", &c), Admission::InFlight);
    let result = ToolResult::completed(&c, json!({"sum": 3}), Usage::default());
    a.finish("run", "c1", &result).unwrap();
    assert_eq!(b.outcome("run", "c1").unwrap(), Some(result));
    let listed = b.calls(Some("run")).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].output_digest.as_deref().map(str::len), Some(64));
    assert_eq!(
        stages(&b, "run", "c1"),
        [
            ("admit", "new"),
            ("admit", "in_flight"),
            ("record", "completed")
        ]
        .map(|(s, d)| (s.to_string(), d.to_string()))
    );
}

/// The ledger opens, answers, commits and closes from inside an async runtime (the CLI and
/// the servers open it there), where blocking on another runtime would panic.
fn a_ledger_opens_and_closes_inside_an_async_runtime(site: &dyn Site) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = site.open(LedgerOptions::default());
        assert!(!l.is_admitted("run", "x").unwrap());
        let (digest, size) = args_key(&json!({}));
        let key = CallKey {
            run_id: "run".into(),
            call_id: "x".into(),
            tool: "echo".into(),
            args_digest: digest,
            args_size: size,
            ..Default::default()
        };
        let admitted = l.commit(Write::Admit(key), Inline::Allowed).await.unwrap();
        assert!(matches!(
            admitted,
            Applied::Admission(Admission::New { .. })
        ));
        assert!(l
            .is_admitted_async("run", "x", Inline::Allowed)
            .await
            .unwrap());
        assert_eq!(
            l.admitted_digest("run", "x")
                .await
                .unwrap()
                .map(|d| d.len()),
            Some(64)
        );
        drop(l);
    });
}

/// A call's row keeps the digests of the component and the tool definition it named, admitted
/// at once or late with its outcome; a call of no loaded tool keeps none.
fn a_call_records_which_code_it_named(site: &dyn Site) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = site.open(LedgerOptions::default());
        let (digest, size) = args_key(&json!({}));
        let pinned = |id: &str| CallKey {
            run_id: "run".into(),
            call_id: id.into(),
            tool: "echo".into(),
            args_digest: digest.clone(),
            args_size: size,
            component_digest: Some(format!("sha256:{}", "c".repeat(64))),
            definition_digest: Some(format!("sha256:{}", "d".repeat(64))),
        };
        l.commit(Write::Admit(pinned("now")), Inline::Allowed)
            .await
            .unwrap();
        let result = ToolResult::completed(&call("late", json!({})), json!(1), Usage::default());
        let late = Write::AdmitLate {
            key: pinned("late"),
            at_ms: 1,
            events: Vec::new(),
            content: None,
            finished: Some(Outcome::of(&result).unwrap()),
        };
        l.commit(late, Inline::Allowed).await.unwrap();
        let unknown = CallKey {
            call_id: "unknown".into(),
            component_digest: None,
            definition_digest: None,
            ..pinned("unknown")
        };
        l.commit(Write::Admit(unknown), Inline::Allowed)
            .await
            .unwrap();
        let calls = l.calls(Some("run")).unwrap();
        let digests: Vec<_> = calls
            .iter()
            .map(|c| {
                (
                    c.call_id.as_str(),
                    c.component_digest.as_deref().map(|d| &d[..8]),
                    c.definition_digest.as_deref().map(|d| &d[..8]),
                )
            })
            .collect();
        assert_eq!(
            digests,
            [
                ("now", Some("sha256:c"), Some("sha256:d")),
                ("late", Some("sha256:c"), Some("sha256:d")),
                ("unknown", None, None),
            ]
        );
        let listed = serde_json::to_value(&calls[0]).unwrap();
        assert_eq!(
            listed["definition_digest"],
            json!(format!("sha256:{}", "d".repeat(64)))
        );
        drop(l);
    });
}

/// Run budgets and a principal's rate are exact when many threads of one host take from them
/// at once: a budget of 10 taken 30 times counts 10, a burst of 3 taken 12 times allows 3.
fn budgets_and_rates_are_exact_under_concurrency(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let budget = toolhost_contract::Budgets {
        max_calls: Some(10),
        max_calls_per_tool: None,
    };
    let start = Barrier::new(3);
    let (taken, allowed): (usize, usize) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (l, start, budget) = (&l, &start, &budget);
                s.spawn(move || {
                    start.wait();
                    let taken = (0..10)
                        .filter(|_| l.take_budget("run", "add", budget).unwrap().is_none())
                        .count();
                    // 0.001 calls per second: nothing refills during the test.
                    let allowed = (0..4)
                        .filter(|_| l.take_rate("alice", 0.001, 3.0).unwrap())
                        .count();
                    (taken, allowed)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .fold((0, 0), |(t, a), (t2, a2)| (t + t2, a + a2))
    });
    assert_eq!((taken, allowed), (10, 3));
    assert_eq!(
        l.take_budget("run", "add", &budget).unwrap(),
        Some(Budget::Run)
    );
    // Another run and another principal have their own.
    assert_eq!(l.take_budget("other", "add", &budget).unwrap(), None);
    assert!(l.take_rate("bob", 0.001, 3.0).unwrap());
    let per_tool = toolhost_contract::Budgets {
        max_calls: None,
        max_calls_per_tool: Some(1),
    };
    assert_eq!(l.take_budget("r2", "echo", &per_tool).unwrap(), None);
    assert_eq!(
        l.take_budget("r2", "echo", &per_tool).unwrap(),
        Some(Budget::Tool)
    );
    assert_eq!(l.take_budget("r2", "other", &per_tool).unwrap(), None);
}
