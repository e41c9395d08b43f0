//! Reconciliation's contract, run on every backend by `contract!` (`contract_tests.rs`): a
//! call a stopped host left `outcome_unknown`, reconciled on another host, replays what the
//! operator recorded; the original outcome and the reconciliation are two events; a call is
//! reconciled once, and only a call that ended `outcome_unknown` is.

use std::sync::{Arc, Barrier};

use serde_json::json;

use super::contract_tests::{admit, call, stages, usage, Site};
use super::{
    Admission, Ledger, LedgerError, LedgerOptions, Reconciliation, UnknownFilter, Verdict,
};
use toolhost_contract::{Code, Status, ToolResult};

/// `verdict`, by an operator with a reason.
fn by_ops(verdict: Verdict) -> Reconciliation {
    Reconciliation {
        verdict,
        operator: "ops@example".into(),
        why: "checked the payments system: charge ch_1 exists".into(),
    }
}

/// Calls `ids` of run `run`, admitted and started on a host that then stops, closed as
/// `outcome_unknown` by another host's recovery; that host is returned.
fn lost_calls(site: &dyn Site, run: &str, ids: &[&str]) -> Ledger {
    let doomed = site.open(LedgerOptions::default());
    for id in ids {
        admit(&doomed, run, &call(id, json!({"n": id})));
        doomed.mark_started(run, id).unwrap();
    }
    site.stop(doomed);
    let survivor = site.open(LedgerOptions::default());
    assert_eq!(survivor.recover().unwrap().len(), ids.len());
    survivor
}

/// Reconciled on a third host, a lost call replays the operator's output (marked reconciled,
/// never run) on every host; its row keeps `outcome_unknown` and both events; a second
/// reconciliation is refused and changes nothing.
pub(super) fn a_reconciled_call_replays_the_operators_record(site: &dyn Site) {
    let survivor = lost_calls(site, "r", &["c1"]);
    let operator = site.open(LedgerOptions::default());
    let recorded = operator
        .reconcile(
            "r",
            "c1",
            &by_ops(Verdict::Completed(json!({"charge": "ch_1"}))),
        )
        .unwrap();
    assert_eq!(recorded.status, Status::Completed);
    assert_eq!(recorded.output, Some(json!({"charge": "ch_1"})));
    assert!(recorded.reconciled.is_some());
    assert_eq!(
        (recorded.call_id.as_str(), recorded.tool.as_str()),
        ("c1", "echo")
    );

    for host in [&survivor, &operator] {
        let Admission::Replay(replayed) = admit(host, "r", &call("c1", json!({"n": "c1"}))) else {
            panic!("a reconciled call replays")
        };
        assert_eq!(*replayed, recorded);
        assert_eq!(host.outcome("r", "c1").unwrap(), Some(recorded.clone()));
    }
    let record = survivor.call("r", "c1").unwrap();
    assert_eq!(
        record.status,
        Some(Status::OutcomeUnknown),
        "the original stays"
    );
    let r = record
        .reconciliation
        .expect("listed with its reconciliation");
    assert_eq!((r.status, r.code), (Status::Completed, None));
    assert_eq!(r.operator, "ops@example");
    assert!(r.output_digest.is_some());
    let events = stages(&survivor, "r", "c1");
    let recover = events.iter().position(|e| e.0 == "recover").unwrap();
    assert_eq!(events[recover].1, "outcome_unknown");
    assert_eq!(
        events[recover + 1],
        ("reconcile".to_string(), "completed".to_string())
    );

    let again = survivor.reconcile("r", "c1", &by_ops(Verdict::ConfirmedNotRun));
    assert!(
        matches!(again, Err(LedgerError::AlreadyReconciled { .. })),
        "{again:?}"
    );
    assert_eq!(stages(&survivor, "r", "c1"), events, "nothing written");
    assert_eq!(survivor.outcome("r", "c1").unwrap(), Some(recorded));
}

/// `failed` and `confirmed_not_run` replay as failures with their codes and a model-safe
/// message that says an operator recorded them.
pub(super) fn failed_and_not_run_reconciliations_replay_their_codes(site: &dyn Site) {
    let l = lost_calls(site, "r", &["f", "n"]);
    let failed = l
        .reconcile("r", "f", &by_ops(Verdict::Failed(Code::ToolError)))
        .unwrap();
    let not_run = l
        .reconcile("r", "n", &by_ops(Verdict::ConfirmedNotRun))
        .unwrap();
    for (id, r, code) in [
        ("f", &failed, Code::ToolError),
        ("n", &not_run, Code::ConfirmedNotRun),
    ] {
        assert_eq!((r.status, r.code), (Status::Failed, Some(code)));
        assert!(r.message.contains("operator"), "{}", r.message);
        assert!(
            !r.message.contains("payments"),
            "the reason stays in the ledger"
        );
        assert_eq!(
            admit(&l, "r", &call(id, json!({"n": id}))),
            Admission::Replay(Box::new(r.clone()))
        );
        let e = stages(&l, "r", id);
        assert!(e.contains(&("reconcile".to_string(), code.as_str().to_string())));
    }
}

/// Only a call that ended `outcome_unknown` is reconciled: a completed one, one still
/// running, one never admitted and a bad reconciliation are refused, and nothing is written.
pub(super) fn only_a_lost_call_is_reconciled(site: &dyn Site) {
    let l = lost_calls(site, "lost", &["c"]);
    let done = call("done", json!(1));
    admit(&l, "r", &done);
    let result = ToolResult::completed(&done, json!("ok"), usage());
    l.finish("r", "done", &result).unwrap();
    admit(&l, "r", &call("running", json!(2)));
    let any = || by_ops(Verdict::Completed(json!("x")));
    assert!(matches!(
        l.reconcile("r", "done", &any()),
        Err(LedgerError::NotOutcomeUnknown { ended, .. }) if ended == "completed"
    ));
    assert!(matches!(
        l.reconcile("r", "running", &any()),
        Err(LedgerError::NotOutcomeUnknown { ended, .. }) if ended == "no outcome yet"
    ));
    assert!(matches!(
        l.reconcile("r", "never", &any()),
        Err(LedgerError::UnknownCall { .. })
    ));
    let mut blank = any();
    blank.why = "  ".into();
    let mut long = any();
    long.operator = "o".repeat(super::MAX_RECONCILE_TEXT_BYTES + 1);
    for bad in [
        blank,
        long,
        by_ops(Verdict::Failed(Code::ApprovalRequired)),
        by_ops(Verdict::Failed(Code::ConfirmedNotRun)),
    ] {
        let refused = l.reconcile("lost", "c", &bad);
        assert!(
            matches!(
                refused,
                Err(LedgerError::BadReconciliation(_) | LedgerError::TooLong { .. })
            ),
            "{refused:?}"
        );
    }
    assert_eq!(l.call("r", "done").unwrap().reconciliation, None);
    assert_eq!(l.call("lost", "c").unwrap().reconciliation, None);
    assert!(!stages(&l, "lost", "c").iter().any(|e| e.0 == "reconcile"));
    assert_eq!(
        l.outcome("r", "done").unwrap(),
        Some(result),
        "a completed call is untouched"
    );
}

/// Two operators on two hosts reconcile one call at once: exactly one reconciliation is kept.
pub(super) fn concurrent_reconciliations_keep_one(site: &dyn Site) {
    drop(lost_calls(site, "r", &["c"]));
    let hosts: Vec<Arc<Ledger>> = (0..4)
        .map(|_| Arc::new(site.open(LedgerOptions::default())))
        .collect();
    let barrier = Arc::new(Barrier::new(hosts.len()));
    let threads: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (l, barrier) = (l.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let verdict = Verdict::Completed(json!({"by": i}));
                l.reconcile("r", "c", &by_ops(verdict)).map(|r| r.output)
            })
        })
        .collect();
    let answers: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let won: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    for lost in answers.iter().filter(|a| a.is_err()) {
        assert!(
            matches!(lost, Err(LedgerError::AlreadyReconciled { .. })),
            "{lost:?}"
        );
    }
    assert_eq!(hosts[0].outcome("r", "c").unwrap().unwrap().output, *won[0]);
    let reconciles = stages(&hosts[0], "r", "c")
        .into_iter()
        .filter(|e| e.0 == "reconcile")
        .count();
    assert_eq!(reconciles, 1);
}

/// The listing of lost calls: filtered by run, tool and age, without reconciled ones unless
/// asked, oldest first, bounded by its limit.
pub(super) fn lost_calls_are_listed_for_an_operator(site: &dyn Site) {
    let l = lost_calls(site, "a", &["1", "2", "3"]);
    drop(lost_calls(site, "b", &["1"]));
    let done = call("ok", json!(0));
    admit(&l, "a", &done);
    l.finish("a", "ok", &ToolResult::completed(&done, json!(0), usage()))
        .unwrap();
    l.reconcile("a", "2", &by_ops(Verdict::ConfirmedNotRun))
        .unwrap();
    let ids = |f: UnknownFilter| -> Vec<(String, String)> {
        l.unknown_calls(&UnknownFilter { limit: 100, ..f })
            .unwrap()
            .into_iter()
            .map(|c| (c.run_id, c.call_id))
            .collect()
    };
    let pair = |r: &str, c: &str| (r.to_string(), c.to_string());
    assert_eq!(
        ids(UnknownFilter::default()),
        [pair("a", "1"), pair("a", "3"), pair("b", "1")]
    );
    assert_eq!(
        ids(UnknownFilter {
            include_reconciled: true,
            ..Default::default()
        }),
        [
            pair("a", "1"),
            pair("a", "2"),
            pair("a", "3"),
            pair("b", "1")
        ]
    );
    assert_eq!(
        ids(UnknownFilter {
            run: Some("b".into()),
            ..Default::default()
        }),
        [pair("b", "1")]
    );
    assert!(ids(UnknownFilter {
        tool: Some("other".into()),
        ..Default::default()
    })
    .is_empty());
    assert!(ids(UnknownFilter {
        closed_before_ms: Some(0),
        ..Default::default()
    })
    .is_empty());
    let first = l
        .unknown_calls(&UnknownFilter {
            limit: 1,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].status, Some(Status::OutcomeUnknown));
}
