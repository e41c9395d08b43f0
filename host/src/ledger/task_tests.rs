//! Tasks' contract, run on every backend by `contract!` (`contract_tests.rs`): a task is
//! answered by every host from its call's row, only to the caller that created it; a cancel
//! set on one host reaches the host that runs the call; a host's death leaves its tasks lost
//! or `outcome_unknown` (and reconcilable); expired tasks are gone and pruned.

use serde_json::json;

use super::contract_tests::{admit, call, usage, Site};
use super::{
    LedgerOptions, NewTask, Reconciliation, TaskCall, TaskRecord, Verdict, MAX_TASK_TTL_MS,
};
use crate::contract::{Status, ToolResult};

/// Task `id` of alice at acme, running call `call_id` of run `r`, kept `ttl_ms`.
fn task(id: &str, call_id: &str, ttl_ms: i64) -> NewTask {
    NewTask {
        task_id: id.into(),
        principal: "alice".into(),
        tenant: "acme".into(),
        run_id: "r".into(),
        call_id: call_id.into(),
        tool: "echo".into(),
        arguments: r#"{"n":1}"#.into(),
        ttl_ms,
    }
}

fn state(t: Option<TaskRecord>) -> TaskCall {
    t.expect("the task is there").call
}

/// Created on one host, a task is read on another from its call's row: running, then the
/// call's result; to another principal or tenant it does not exist.
pub(super) fn a_task_is_answered_on_every_host_to_its_caller(site: &dyn Site) {
    let a = site.open(LedgerOptions::default());
    let b = site.open(LedgerOptions::default());
    a.create_task(&task("t1", "c1", 60_000)).unwrap();
    assert_eq!(
        state(b.task("t1", "alice", "acme").unwrap()),
        TaskCall::Running
    );
    let c = call("c1", json!(1));
    admit(&a, "r", &c);
    a.mark_started("r", "c1").unwrap();
    let seen = b.task("t1", "alice", "acme").unwrap().unwrap();
    assert_eq!(seen.call, TaskCall::Running);
    assert_eq!((seen.run_id.as_str(), seen.call_id.as_str()), ("r", "c1"));
    assert_eq!(seen.arguments, json!({"n": 1}));
    assert!(seen.expires_at_ms >= seen.created_at_ms + 60_000);
    let done = ToolResult::completed(&c, json!("ok"), usage());
    std::thread::sleep(std::time::Duration::from_millis(5));
    a.finish("r", "c1", &done).unwrap();
    let ended = b.task("t1", "alice", "acme").unwrap().unwrap();
    assert!(
        ended.updated_at_ms > seen.created_at_ms,
        "the call's end updates it"
    );
    assert_eq!(
        state(b.task("t1", "alice", "acme").unwrap()),
        TaskCall::Finished(Box::new(done))
    );
    for (p, t) in [("mallory", "acme"), ("alice", "other")] {
        assert_eq!(b.task("t1", p, t).unwrap(), None, "{p}/{t}");
        assert!(!b.cancel_task("t1", p, t).unwrap());
    }
    assert_eq!(b.task("no-such-task", "alice", "acme").unwrap(), None);
    let listed = b.tasks_of_run("r").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].task_id, "t1");
    assert!(b.tasks_of_run("other-run").unwrap().is_empty());
    assert!(!b.cancel_task("no-such-task", "alice", "acme").unwrap());
}

/// A cancel asked on one host is read by the host that runs the task, until its call has an
/// outcome; no other host is told to stop anything.
pub(super) fn a_cancel_on_one_host_reaches_the_host_that_runs_it(site: &dyn Site) {
    let runner = site.open(LedgerOptions::default());
    let other = site.open(LedgerOptions::default());
    runner.create_task(&task("t1", "c1", 60_000)).unwrap();
    runner.create_task(&task("t2", "c2", 60_000)).unwrap();
    let c = call("c1", json!(1));
    admit(&runner, "r", &c);
    assert!(runner.cancelled_tasks().unwrap().is_empty());
    assert!(other.cancel_task("t1", "alice", "acme").unwrap());
    assert!(
        other.cancel_task("t1", "alice", "acme").unwrap(),
        "idempotent"
    );
    assert_eq!(runner.cancelled_tasks().unwrap(), ["t1"]);
    assert!(other.cancelled_tasks().unwrap().is_empty());
    let marked = other.task("t1", "alice", "acme").unwrap().unwrap();
    assert!(marked.cancel_requested_at_ms.is_some());
    assert_eq!(
        other
            .task("t2", "alice", "acme")
            .unwrap()
            .unwrap()
            .cancel_requested_at_ms,
        None
    );
    let mut stopped = ToolResult::failed(&c, crate::contract::Code::Cancelled, "x", usage());
    stopped.status = Status::Cancelled;
    runner.finish("r", "c1", &stopped).unwrap();
    assert!(
        runner.cancelled_tasks().unwrap().is_empty(),
        "it has its outcome"
    );
}

/// An approved retry moves a task to its new call and to the host that runs it, once: the
/// second host to try is told it lost, and the cancel marks follow the task.
pub(super) fn a_task_moves_to_its_approved_call_once(site: &dyn Site) {
    let first = site.open(LedgerOptions::default());
    let second = site.open(LedgerOptions::default());
    first.create_task(&task("t1", "c1", 60_000)).unwrap();
    assert!(second.retarget_task("t1", "c1", "c1~approved").unwrap());
    assert!(!first.retarget_task("t1", "c1", "c1~other").unwrap());
    assert!(!first.retarget_task("nope", "c1", "c2").unwrap());
    let moved = first.task("t1", "alice", "acme").unwrap().unwrap();
    assert_eq!(moved.call_id, "c1~approved");
    assert!(first.cancel_task("t1", "alice", "acme").unwrap());
    assert!(first.cancelled_tasks().unwrap().is_empty());
    assert_eq!(second.cancelled_tasks().unwrap(), ["t1"]);
}

/// When the host that runs a task dies, a task whose call it never admitted is lost; one it
/// started ends `outcome_unknown` once recovered, and then answers its reconciliation.
pub(super) fn a_dead_hosts_tasks_are_lost_or_unknown(site: &dyn Site) {
    let doomed = site.open(LedgerOptions::default());
    doomed.create_task(&task("never", "n1", 60_000)).unwrap();
    doomed.create_task(&task("began", "b1", 60_000)).unwrap();
    admit(&doomed, "r", &call("b1", json!(1)));
    doomed.mark_started("r", "b1").unwrap();
    site.stop(doomed);
    let survivor = site.open(LedgerOptions::default());
    assert_eq!(
        state(survivor.task("never", "alice", "acme").unwrap()),
        TaskCall::Lost
    );
    survivor.recover().unwrap();
    let TaskCall::Finished(r) = state(survivor.task("began", "alice", "acme").unwrap()) else {
        panic!("recovered")
    };
    assert_eq!(r.status, Status::OutcomeUnknown);
    let record = Reconciliation {
        verdict: Verdict::ConfirmedNotRun,
        operator: "ops".into(),
        why: "checked".into(),
    };
    survivor.reconcile("r", "b1", &record).unwrap();
    let TaskCall::Finished(r) = state(survivor.task("began", "alice", "acme").unwrap()) else {
        panic!("reconciled")
    };
    assert!(r.reconciled.is_some());
}

/// A task is gone once past its expiry, and pruning deletes it; the longest ttl is capped.
pub(super) fn expired_tasks_are_gone_and_pruned(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    l.create_task(&task("short", "s1", 1)).unwrap();
    l.create_task(&task("long", "l1", i64::MAX)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(l.task("short", "alice", "acme").unwrap(), None);
    assert!(!l.cancel_task("short", "alice", "acme").unwrap());
    let long = l.task("long", "alice", "acme").unwrap().unwrap();
    assert_eq!(long.expires_at_ms - long.created_at_ms, MAX_TASK_TTL_MS);
    assert_eq!(l.prune_tasks().unwrap(), 1);
    assert_eq!(l.prune_tasks().unwrap(), 0);
    assert!(l.task("long", "alice", "acme").unwrap().is_some());
}
