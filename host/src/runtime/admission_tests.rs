//! A claim the ledger turns out to know leaves nothing behind in `pending` (the race between
//! a late claim and a conflicting duplicate, driven step by step).

use serde_json::json;

use super::admission::Late;
use super::{Diagnostics, Runtime, RuntimeParts};
use crate::contract::{RunContext, ToolCall};
use crate::ledger::{Ledger, LedgerOptions};
use crate::policy::{ApprovalKey, Policy};
use crate::registry::Registry;
use crate::sandbox::{EngineSettings, EpochMode, Sandbox};

/// A runtime with no tools over a ledger of its own in `dir`.
fn runtime(dir: &std::path::Path) -> Runtime {
    let settings = EngineSettings {
        max_memory_bytes: 1 << 20,
        max_table_elements: 100,
        max_instances: 1,
    };
    Runtime::new(RuntimeParts {
        sandbox: Sandbox::new(settings, EpochMode::Manual).unwrap(),
        registry: Registry::default(),
        diagnostics: Diagnostics::new(None),
        ledger: Ledger::open(&dir.join("ledger.sqlite"), LedgerOptions::default()).unwrap(),
        policy: Policy::allow_all(),
        approval_key: ApprovalKey::from_bytes([7; crate::policy::KEY_LEN]),
        approval_ttl: 60,
        run: Default::default(),
    })
}

/// [`runtime`] in a fresh temporary directory (kept alive by the guard), and a run context.
fn fresh() -> (tempfile::TempDir, Runtime, RunContext) {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let ctx = rt.context("p", "t");
    (dir, rt, ctx)
}

fn call(arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        call_id: "c1".into(),
        name: "t".into(),
        arguments,
    }
}

/// Claim `call`, let a duplicate with other arguments arrive while the ledger is asked (it is
/// refused after the ledger did not know the id either, and notes a conflict on the claim),
/// then settle the claim with `known`.
async fn race(rt: &Runtime, ctx: &RunContext, known: Result<bool, crate::ledger::LedgerError>) {
    let first = call(json!({"a": 1}));
    let claim = rt
        .claim(ctx, &first, "d1|caller", 10, false)
        .ok()
        .expect("claimed");
    let other = call(json!({"a": 2}));
    // Before the ledger answered the claim, another proposal asks the ledger itself.
    assert!(matches!(
        rt.claim(ctx, &other, "d2|caller", 10, false),
        Err(Late::Unsettled)
    ));
    // As after a ledger that did not know the id (another host may admit it meanwhile).
    assert!(matches!(
        rt.claim(ctx, &other, "d2|caller", 10, true),
        Err(Late::Conflict)
    ));
    let (late, claim) = rt.settle(ctx, &first, claim, known).await;
    assert!(claim.is_none());
    assert!(!matches!(late, Late::Claimed));
}

fn pending(rt: &Runtime) -> usize {
    rt.pending.lock().unwrap().len()
}

/// The ledger knows the id: the claim is gone from `pending` (it grew by one entry per race
/// before), and the duplicate's conflict is appended to the known call's record.
#[tokio::test]
async fn a_known_id_leaves_no_claim_and_keeps_the_conflict() {
    let (_dir, rt, ctx) = fresh();
    rt.ledger
        .admit(&ctx.run_id, "c1", "t", "d1|caller", 10)
        .expect("admitted");
    race(&rt, &ctx, Ok(true)).await;
    assert_eq!(pending(&rt), 0);
    let calls = rt.ledger.calls(Some(&ctx.run_id)).unwrap();
    let decisions: Vec<&str> = calls[0].events.iter().map(|e| &*e.decision).collect();
    assert_eq!(decisions, ["new", "conflict"], "{:?}", calls[0].events);
}

/// The ledger could not be read: the claim and what was noted on it are dropped.
#[tokio::test]
async fn a_ledger_fault_leaves_no_claim() {
    let (_dir, rt, ctx) = fresh();
    let fault = crate::ledger::LedgerError::Commit("down".into());
    race(&rt, &ctx, Err(fault)).await;
    assert_eq!(pending(&rt), 0);
}

/// A proposal that finds another's claim with other arguments, not yet answered by the
/// ledger, asks the ledger itself: an id the ledger knows is admitted the ordinary way (a
/// replay of the recorded call, not a conflict with the other proposal).
#[tokio::test]
async fn an_unanswered_claim_does_not_make_a_replay_a_conflict() {
    let (_dir, rt, ctx) = fresh();
    rt.ledger
        .admit(&ctx.run_id, "c1", "t", "d1|caller", 10)
        .expect("admitted");
    let other = rt.claim(&ctx, &call(json!({"a": 2})), "d2|caller", 10, false);
    let other = other.ok().expect("claimed");
    let (late, claim) = rt
        .admit_late(&ctx, &call(json!({"a": 1})), "d1|caller", 10)
        .await;
    assert!(matches!(late, Late::No) && claim.is_none());
    let (late, _) = rt
        .settle(&ctx, &call(json!({"a": 2})), other, Ok(true))
        .await;
    assert!(matches!(late, Late::No));
    assert_eq!(pending(&rt), 0);
}

/// The same, for an id the ledger does not know: the other claim runs, so this proposal is a
/// conflict with it (noted on the running call).
#[tokio::test]
async fn an_unanswered_claim_on_a_new_id_is_a_conflict() {
    let (_dir, rt, ctx) = fresh();
    let first = call(json!({"a": 2}));
    let claim = rt
        .claim(&ctx, &first, "d2|caller", 10, false)
        .ok()
        .expect("claimed");
    let (late, none) = rt
        .admit_late(&ctx, &call(json!({"a": 1})), "d1|caller", 10)
        .await;
    assert!(matches!(late, Late::Conflict) && none.is_none());
    let (late, claim) = rt.settle(&ctx, &first, claim, Ok(false)).await;
    assert!(matches!(late, Late::Claimed) && claim.is_some());
    let noted = rt
        .pending
        .lock()
        .unwrap()
        .values()
        .map(|l| l.events.len())
        .sum::<usize>();
    assert_eq!(noted, 1);
}

/// Another caller's proposal on an id claimed in this process is refused `Foreign` whatever
/// its arguments (never told to wait for the original's result), and who asked is noted on
/// the claim.
#[tokio::test]
async fn another_callers_claim_is_foreign() {
    let (_dir, rt, ctx) = fresh();
    let first = call(json!({"a": 1}));
    let _claim = rt
        .claim(&ctx, &first, "d1|alice", 10, false)
        .ok()
        .expect("claimed");
    for digest in ["d1|mallory", "d2|mallory", "d1"] {
        let asked = rt.claim(&ctx, &first, digest, 10, false);
        assert!(matches!(asked, Err(Late::Foreign)), "{digest}");
    }
    let noted = rt.take_pending(&ctx, &first).events;
    assert_eq!(noted.len(), 3);
}
