//! Unit tests for the ledger: admission, exactly-once outcomes, recovery, durability across a
//! reopen, single-use tokens, concurrency, audit order and the no-content default.
//!
//! Longer than 500 lines: it is nothing but tests, one per guarantee of the ledger.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use super::*;
use crate::contract::{Code, Status, ToolCall, ToolResult, Usage};

/// A fresh ledger in a temporary directory (kept alive by the returned guard).
fn ledger(options: LedgerOptions) -> (tempfile::TempDir, PathBuf, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state").join("ledger.db");
    let ledger = Ledger::open(&path, options).unwrap();
    (dir, path, ledger)
}

fn call(id: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: "echo".into(),
        arguments: args,
    }
}

/// The digest and size a caller would hand to `admit`.
fn args_key(args: &Value) -> (String, u64) {
    let bytes = serde_json::to_vec(args).unwrap();
    (digest_bytes(&bytes), bytes.len() as u64)
}

fn admit(l: &Ledger, run: &str, c: &ToolCall) -> Admission {
    let (d, n) = args_key(&c.arguments);
    l.admit(run, &c.call_id, &c.name, &d, n).unwrap()
}

fn usage() -> Usage {
    Usage {
        fuel_consumed: 1234,
        wall_ms: 7,
        memory_peak_bytes: 65536,
        output_bytes: 20,
    }
}

fn stages(l: &Ledger, run: &str, call_id: &str) -> Vec<(String, String)> {
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
fn ledger_bytes(path: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(path.parent().unwrap()).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            all.extend(std::fs::read(p).unwrap());
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `Ledger` can be shared by many tokio tasks.
#[test]
fn ledger_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Ledger>();
}

/// A new id is admitted with increasing seq; the same id and args after finish replay exactly.
#[test]
fn new_then_replay_returns_the_recorded_result() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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

    assert_eq!(admit(&l, "r", &c1), Admission::Replay(result));
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
#[test]
fn same_call_without_outcome_is_in_flight() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
#[test]
fn same_id_other_arguments_is_a_conflict() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
#[test]
fn conflict_does_not_overwrite_the_original() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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

    assert_eq!(admit(&l, "r", &orig), Admission::Replay(result));
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
#[test]
fn finish_exactly_once() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
    assert_eq!(admit(&l, "r", &c), Admission::Replay(first));
    let rec = &l.calls(None).unwrap()[0];
    assert_eq!(rec.code, Some(Code::FuelExhausted));
    assert_eq!(rec.usage, Some(usage()));
    let records = rec.events.iter().filter(|e| e.stage == "record").count();
    assert_eq!(records, 1);
}

/// Operations on a call that was never admitted are `UnknownCall`; a result for another call
/// id is refused.
#[test]
fn unknown_calls_and_mismatched_results_are_refused() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
#[test]
fn recovery_closes_open_calls_as_outcome_unknown() {
    let (_d, path, l) = ledger(LedgerOptions::default());
    let admitted = call("a", json!(1));
    let started = call("s", json!(2));
    let done = call("d", json!(3));
    admit(&l, "r", &admitted);
    admit(&l, "r", &started);
    l.mark_started("r", "s").unwrap();
    admit(&l, "r", &done);
    let done_result = ToolResult::completed(&done, json!("ok"), usage());
    l.finish("r", "d", &done_result).unwrap();
    drop(l); // the host stops

    let l = Ledger::open(&path, LedgerOptions::default()).unwrap();
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
    assert_eq!(admit(&l, "r", &done), Admission::Replay(done_result));
    let s = stages(&l, "r", "s");
    assert_eq!(s[1], ("recover".to_string(), "outcome_unknown".to_string()));
}

/// Recovery never closes a call another live host is running: only once that host's lease is
/// released (its process ended) does a starting host close the call.
#[test]
fn recovery_spares_calls_of_live_hosts() {
    let (_d, path, running) = ledger(LedgerOptions::default());
    let c = call("live", json!(1));
    admit(&running, "r", &c);
    running.mark_started("r", "live").unwrap();

    let other = Ledger::open(&path, LedgerOptions::default()).unwrap();
    assert!(other.recover().unwrap().is_empty());
    let result = ToolResult::completed(&c, json!("done"), usage());
    running.finish("r", "live", &result).unwrap();

    let c2 = call("lost", json!(2));
    admit(&running, "r", &c2);
    drop(running); // the running host dies
    assert_eq!(
        other.recover().unwrap(),
        vec![("r".to_string(), "lost".to_string())]
    );
}

/// A completed call still replays after the ledger is dropped and the file reopened.
#[test]
fn reopened_ledger_replays_a_completed_call() {
    let (_d, path, l) = ledger(LedgerOptions {
        synchronous_full: true,
        record_content: false,
    });
    let c = call("c", json!({"q": "x"}));
    admit(&l, "r", &c);
    let result = ToolResult::completed(&c, json!({"answer": [1, 2, 3]}), usage());
    l.finish("r", "c", &result).unwrap();
    drop(l);

    let l = Ledger::open(&path, LedgerOptions::default()).unwrap();
    assert_eq!(admit(&l, "r", &c), Admission::Replay(result));
    assert_eq!(
        admit(&l, "r", &call("c2", json!(1))),
        Admission::New { seq: 2 }
    );
}

/// An approval token is spent once, and stays spent across a reopen.
#[test]
fn tokens_are_single_use_across_reopen() {
    let (_d, path, l) = ledger(LedgerOptions::default());
    let spend = |l: &Ledger, id: &str, at: i64| l.consume_token(id, at).unwrap();
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::Spent);
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::AlreadySpent);
    assert_eq!(spend(&l, "tok-2", 1_000), TokenSpend::Spent);
    drop(l);
    let l = Ledger::open(&path, LedgerOptions::default()).unwrap();
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::AlreadySpent);
    assert_eq!(l.prune_used_tokens(1_500).unwrap(), 1);
    assert_eq!(spend(&l, "tok-1", 2_000_000_000), TokenSpend::AlreadySpent);
}

/// Eight threads admitting the same call through one shared ledger: exactly one `New`.
#[test]
fn concurrent_admission_through_one_ledger_admits_once() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
    let l = Arc::new(l);
    let outcomes = race(8, |_| Arc::clone(&l));
    check_race(&outcomes);
}

/// Eight threads, each with its own connection to the same file: exactly one `New`.
#[test]
fn concurrent_admission_across_connections_admits_once() {
    let (_d, path, l) = ledger(LedgerOptions::default());
    drop(l);
    let outcomes = race(8, |_| {
        Arc::new(Ledger::open(&path, LedgerOptions::default()).unwrap())
    });
    check_race(&outcomes);
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

/// Stage events come back in the order they were appended, between admit and record.
#[test]
fn audit_events_come_back_in_order() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
#[test]
fn listing_filters_by_run_and_serializes() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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

/// With content recording off, no argument content reaches the ledger's files; with it on,
/// the same scan finds it (the scan works). Replay storage does keep the output the model saw.
#[test]
fn no_argument_content_is_stored_by_default() {
    const MARKER: &str = "MARKER-7f3a9c-secret-argument";
    let run = |record_content: bool, echo: bool| -> bool {
        let (_d, path, l) = ledger(LedgerOptions {
            synchronous_full: false,
            record_content,
        });
        let c = call("c", json!({"password": MARKER}));
        admit(&l, "r", &c);
        let stored = l.record_content("r", "c", &c.arguments).unwrap();
        assert_eq!(stored, record_content);
        let (digest, size) = args_key(&c.arguments);
        l.event(
            "r",
            "c",
            "validate",
            "ok",
            &format!("sha256 {digest}, {size} bytes"),
        )
        .unwrap();
        l.mark_started("r", "c").unwrap();
        let output = if echo {
            json!({"echo": MARKER})
        } else {
            json!({"ok": true})
        };
        l.finish("r", "c", &ToolResult::completed(&c, output, usage()))
            .unwrap();
        assert!(matches!(admit(&l, "r", &c), Admission::Replay(_)));
        if record_content {
            assert_eq!(
                l.calls(None).unwrap()[0].arguments,
                Some(c.arguments.clone())
            );
        }
        // While open: the main file, the WAL and the shared-memory index.
        let mut found = contains(&ledger_bytes(&path), MARKER);
        drop(l); // closing checkpoints the WAL into the main file
        found |= contains(&ledger_bytes(&path), MARKER);
        found
    };
    assert!(
        !run(false, false),
        "argument content stored with record_content off"
    );
    assert!(run(true, false), "the scan must find recorded content");
    // The honest boundary: a tool that echoes its input puts it into its output, and the
    // output is kept for replay.
    assert!(run(false, true));
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

/// Transcript steps come back by step, in append order, with their detail (cut at its cap).
#[test]
fn transcript_records_steps() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
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
/// as version 2 with every call, outcome, event (in order), content row and approval request.
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
}

/// A late admission (stages first, admission with the start or the outcome) that finds the
/// id already admitted by another process writes nothing of its own: it gets the admission
/// decision instead (in flight, then replay), and the original call is unchanged.
#[test]
fn late_admission_yields_to_an_earlier_one() {
    let (_d, path, first) = ledger(LedgerOptions::default());
    let second = Ledger::open(&path, LedgerOptions::default()).unwrap();
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
        Admission::Replay(result.clone())
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
#[test]
fn late_admission_commits_admission_decisions_and_state() {
    let (_d, _p, l) = ledger(LedgerOptions {
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
#[test]
fn repeated_admissions_are_capped() {
    let (_d, _p, l) = ledger(LedgerOptions::default());
    let done = call("done", json!(1));
    admit(&l, "r", &done);
    let result = ToolResult::completed(&done, json!("ok"), usage());
    l.finish("r", "done", &result).unwrap();
    let running = call("running", json!(2));
    admit(&l, "r", &running);
    for i in 0..1500 {
        assert_eq!(admit(&l, "r", &done), Admission::Replay(result.clone()));
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
    use crate::contract::bounds::{MAX_CALL_ID_BYTES, MAX_RUN_ID_BYTES, MAX_TOOL_NAME_CHARS};
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
