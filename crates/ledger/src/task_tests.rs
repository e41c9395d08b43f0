//! Tasks' contract, run on every backend by `contract!` (`contract_tests.rs`): a task is
//! answered by every host from its call's row, only to the caller that created it; a cancel
//! set on one host reaches the host that runs the call; a host's death leaves its tasks lost
//! or `outcome_unknown` (and reconcilable); expired tasks are gone and pruned.

use serde_json::json;

use super::contract_tests::{admit, call, usage, Site};
use super::{
    Ledger, LedgerOptions, NewTask, Reconciliation, TaskCall, TaskCaps, TaskCreated, TaskRecord,
    Verdict, MAX_TASK_TTL_MS,
};
use toolhost_contract::{Status, ToolResult};

/// Task `id` of alice at acme, running call `call_id` of run `r`, kept `ttl_ms`.
fn task(id: &str, call_id: &str, ttl_ms: i64) -> NewTask {
    NewTask {
        task_id: id.into(),
        caller: toolhost_contract::Caller::new("alice", "acme"),
        run_id: "r".into(),
        call_id: call_id.into(),
        tool: "echo".into(),
        arguments: r#"{"n":1}"#.into(),
        call_digest: format!("digest-of-{call_id}"),
        for_approval: false,
        ttl_ms,
    }
}

/// Caps no test of another concern reaches.
const ROOMY: TaskCaps = TaskCaps {
    open: 1_000,
    bytes: 1 << 30,
};

/// Create `task` on `l` under [`ROOMY`] caps; it must be new.
fn create(l: &Ledger, task: &NewTask) {
    assert_eq!(l.create_task(task, &ROOMY).unwrap(), TaskCreated::Created);
}

fn state(t: Option<TaskRecord>) -> TaskCall {
    t.expect("the task is there").call
}

/// Created on one host, a task is read on another from its call's row: running, then the
/// call's result; to another principal or tenant it does not exist.
pub(super) fn a_task_is_answered_on_every_host_to_its_caller(site: &dyn Site) {
    let a = site.open(LedgerOptions::default());
    let b = site.open(LedgerOptions::default());
    create(&a, &task("t1", "c1", 60_000));
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
    assert_eq!(
        seen.arguments, None,
        "record_content is off and no approval waits"
    );
    assert_eq!(seen.call_digest, "digest-of-c1");
    assert!(seen.open);
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
    create(&runner, &task("t1", "c1", 60_000));
    create(&runner, &task("t2", "c2", 60_000));
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
    let mut stopped = ToolResult::failed(&c, toolhost_contract::Code::Cancelled, "x", usage());
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
    create(&first, &task("t1", "c1", 60_000));
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
    create(&doomed, &task("never", "n1", 60_000));
    create(&doomed, &task("began", "b1", 60_000));
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
    create(&l, &task("short", "s1", 1));
    create(&l, &task("long", "l1", i64::MAX));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(l.task("short", "alice", "acme").unwrap(), None);
    assert!(!l.cancel_task("short", "alice", "acme").unwrap());
    let long = l.task("long", "alice", "acme").unwrap().unwrap();
    assert_eq!(long.expires_at_ms - long.created_at_ms, MAX_TASK_TTL_MS);
    assert_eq!(l.prune_tasks().unwrap(), 1);
    assert_eq!(l.prune_tasks().unwrap(), 0);
    assert!(l.task("long", "alice", "acme").unwrap().is_some());
}

/// A caller's open tasks are bounded in number and argument bytes across hosts; another
/// caller has room of its own, and a closed task frees its place.
pub(super) fn a_callers_open_tasks_are_capped_on_every_host(site: &dyn Site) {
    let a = site.open(LedgerOptions::default());
    let b = site.open(LedgerOptions::default());
    let two = TaskCaps {
        open: 2,
        bytes: 1 << 20,
    };
    assert_eq!(
        a.create_task(&task("t1", "c1", 60_000), &two).unwrap(),
        TaskCreated::Created
    );
    assert_eq!(
        b.create_task(&task("t2", "c2", 60_000), &two).unwrap(),
        TaskCreated::Created
    );
    assert_eq!(
        b.create_task(&task("t3", "c3", 60_000), &two).unwrap(),
        TaskCreated::Full
    );
    assert_eq!(
        b.task("t3", "alice", "acme").unwrap(),
        None,
        "nothing recorded"
    );
    assert_eq!(
        a.create_task(&task("t1", "c1", 60_000), &two).unwrap(),
        TaskCreated::Exists
    );
    let mut bob = task("t4", "c4", 60_000);
    bob.caller.principal = "bob".into();
    assert_eq!(a.create_task(&bob, &two).unwrap(), TaskCreated::Created);
    a.close_task("t1").unwrap();
    a.close_task("t1").unwrap(); // idempotent
    assert!(!b.task("t1", "alice", "acme").unwrap().unwrap().open);
    assert_eq!(
        b.create_task(&task("t3", "c3", 60_000), &two).unwrap(),
        TaskCreated::Created
    );
    // Bytes: the arguments of "{\"n\":1}" are 7 bytes; two fit in 15, a third does not.
    let bytes = TaskCaps {
        open: 100,
        bytes: 15,
    };
    let carol = |id: &str| {
        let mut t = task(id, id, 60_000);
        t.caller.principal = "carol".into();
        a.create_task(&t, &bytes).unwrap()
    };
    assert_eq!(carol("k1"), TaskCreated::Created);
    assert_eq!(carol("k2"), TaskCreated::Created);
    assert_eq!(carol("k3"), TaskCreated::Full);
    // An expired task holds no place.
    let short = |id: &str| {
        let mut t = task(id, id, 1);
        t.caller.principal = "dave".into();
        t
    };
    let one = TaskCaps {
        open: 1,
        bytes: 1 << 20,
    };
    assert_eq!(
        a.create_task(&short("d1"), &one).unwrap(),
        TaskCreated::Created
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        a.create_task(&short("d2"), &one).unwrap(),
        TaskCreated::Created
    );
}

/// Hosts racing for a caller's last places never take more than the cap between them.
pub(super) fn task_caps_hold_under_concurrency(site: &dyn Site) {
    let hosts: Vec<_> = (0..2)
        .map(|_| site.open(LedgerOptions::default()))
        .collect();
    let three = TaskCaps {
        open: 3,
        bytes: 1 << 20,
    };
    let created = std::thread::scope(|s| {
        let racers: Vec<_> = (0..8)
            .map(|i| {
                let l = &hosts[i % 2];
                s.spawn(move || {
                    let id = format!("race-{i}");
                    l.create_task(&task(&id, &id, 60_000), &three).unwrap()
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|r| r.join().unwrap())
            .filter(|c| *c == TaskCreated::Created)
            .count()
    });
    assert_eq!(created, 3);
}

/// A row keeps its call's arguments only while the task is open, and only under
/// `record_content` or for a call that waits for approval; a cancel of a task whose call has
/// ended closes it.
pub(super) fn a_task_keeps_arguments_only_while_they_are_needed(site: &dyn Site) {
    let off = site.open(LedgerOptions::default());
    let on = site.open(LedgerOptions {
        record_content: true,
        ..LedgerOptions::default()
    });
    let args = |l: &Ledger, id: &str| l.task(id, "alice", "acme").unwrap().unwrap().arguments;
    create(&off, &task("plain", "p1", 60_000));
    assert_eq!(args(&off, "plain"), None);
    let mut waits = task("waits", "w1", 60_000);
    waits.for_approval = true;
    create(&off, &waits);
    assert_eq!(args(&off, "waits"), Some(json!({"n": 1})));
    create(&on, &task("kept", "k1", 60_000));
    assert_eq!(args(&on, "kept"), Some(json!({"n": 1})));
    on.close_task("kept").unwrap();
    assert_eq!(args(&on, "kept"), None, "closed: forgotten");
    // The approval-waiting call ends; a cancel closes its task and forgets the arguments.
    let c = call("w1", json!({"n": 1}));
    admit(&off, "r", &c);
    let waiting = ToolResult::failed(&c, toolhost_contract::Code::ApprovalRequired, "x", usage());
    off.finish("r", "w1", &waiting).unwrap();
    assert!(off.cancel_task("waits", "alice", "acme").unwrap());
    let t = off.task("waits", "alice", "acme").unwrap().unwrap();
    assert!(!t.open);
    assert_eq!(t.arguments, None);
    // A running task is closed by its host when its call ends, not by the cancel.
    assert!(off.cancel_task("plain", "alice", "acme").unwrap());
    assert!(off.task("plain", "alice", "acme").unwrap().unwrap().open);
}

/// Every host lists the tasks that wait for approval, oldest first and at most as many as
/// asked: not a running one, nor a cancelled, closed, moved or expired one.
pub(super) fn tasks_that_wait_for_approval_are_listed_on_every_host(site: &dyn Site) {
    let first = site.open(LedgerOptions::default());
    let second = site.open(LedgerOptions::default());
    let waits = |l: &Ledger, id: &str, call_id: &str, ttl_ms: i64| {
        let mut t = task(id, call_id, ttl_ms);
        t.for_approval = true;
        create(l, &t);
        let c = call(call_id, json!({"n": 1}));
        admit(l, "r", &c);
        let mut asked =
            ToolResult::failed(&c, toolhost_contract::Code::ApprovalRequired, "x", usage());
        asked.approval = Some(toolhost_contract::ApprovalNeeded {
            handle: format!("handle-of-{call_id}"),
            expires_at: u64::MAX,
        });
        l.finish("r", call_id, &asked).unwrap();
    };
    waits(&first, "w1", "c1", 60_000);
    std::thread::sleep(std::time::Duration::from_millis(2));
    waits(&first, "w2", "c2", 60_000);
    waits(&first, "cancelled", "c3", 60_000);
    assert!(first.cancel_task("cancelled", "alice", "acme").unwrap());
    waits(&first, "expired", "c4", 1);
    let mut running = task("running", "c5", 60_000);
    running.for_approval = true;
    create(&first, &running);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let ids = |l: &Ledger, limit: u32| -> Vec<String> {
        let listed = l.waiting_tasks(limit).unwrap();
        listed.into_iter().map(|t| t.task_id).collect()
    };
    assert_eq!(ids(&second, 10), ["w1", "w2"]);
    assert_eq!(ids(&second, 1), ["w1"]);
    assert!(ids(&second, 0).is_empty());
    let listed = second.waiting_tasks(10).unwrap();
    assert_eq!(listed[0].arguments, Some(json!({"n": 1})));
    assert_eq!(
        (listed[0].principal.as_str(), listed[0].run_id.as_str()),
        ("alice", "r")
    );
    // Moved to its approved call (which runs), then closed: no longer waiting.
    assert!(second.retarget_task("w1", "c1", "c1~approved").unwrap());
    assert_eq!(ids(&first, 10), ["w2"]);
    first.close_task("w2").unwrap();
    assert!(ids(&first, 10).is_empty());
}
