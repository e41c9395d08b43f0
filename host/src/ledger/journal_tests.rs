//! Claims on ids admitted late leave nothing behind (the race between a late claim and a
//! conflicting duplicate, driven step by step), and what duplicates note is kept.

use super::claims::Claiming;
use super::journal::Opened;
use super::{CallKey, Held, Inline, Ledger, LedgerError, LedgerOptions, OpenCall};

/// A ledger of its own in a fresh temporary directory (kept alive by the guard).
fn fresh() -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite"), LedgerOptions::default());
    (dir, ledger.unwrap())
}

/// Call `c1` of run `r` with the admission digest `digest`, admitted late.
fn call(digest: &str) -> OpenCall {
    OpenCall {
        key: CallKey {
            run_id: "r".into(),
            call_id: "c1".into(),
            tool: "t".into(),
            args_digest: digest.into(),
            args_size: 10,
        },
        principal: "p".into(),
        tenant: "t".into(),
        late: true,
    }
}

fn claiming<T>(claimed: Result<T, Box<(OpenCall, Claiming)>>) -> Option<Claiming> {
    claimed.err().map(|refused| refused.1)
}

/// Claim `d1`, let a duplicate with other arguments arrive while the ledger is asked (it is
/// refused after the ledger did not know the id either, and notes a conflict on the claim),
/// then settle the claim with `known`.
async fn race(ledger: &Ledger, known: Result<bool, LedgerError>) {
    let claim = ledger.claim(call("d1|caller"), false).expect("claimed");
    // Before the ledger answered the claim, another proposal asks the ledger itself.
    let other = ledger.claim(call("d2|caller"), false);
    assert_eq!(claiming(other), Some(Claiming::Unsettled));
    // As after a ledger that did not know the id (another host may admit it meanwhile).
    let other = ledger.claim(call("d2|caller"), true);
    assert_eq!(claiming(other), Some(Claiming::Reused));
    let settled = ledger.settle(claim, known, Inline::Never).await;
    assert!(!matches!(settled, Opened::Journal(_)));
}

/// The ledger knows the id: the claim is gone (it grew by one entry per race before), and
/// the duplicate's conflict is appended to the known call's record.
#[tokio::test]
async fn a_known_id_leaves_no_claim_and_keeps_the_conflict() {
    let (_dir, ledger) = fresh();
    ledger
        .admit("r", "c1", "t", "d1|caller", 10)
        .expect("admitted");
    race(&ledger, Ok(true)).await;
    assert_eq!(ledger.claims.len(), 0);
    let calls = ledger.calls(Some("r")).unwrap();
    let decisions: Vec<&str> = calls[0].events.iter().map(|e| &*e.decision).collect();
    assert_eq!(decisions, ["new", "conflict"], "{:?}", calls[0].events);
}

/// The ledger could not be read: the claim and what was noted on it are dropped.
#[tokio::test]
async fn a_ledger_fault_leaves_no_claim() {
    let (_dir, ledger) = fresh();
    race(&ledger, Err(LedgerError::Commit("down".into()))).await;
    assert_eq!(ledger.claims.len(), 0);
}

/// A proposal that finds another's claim with other arguments, not yet answered by the
/// ledger, asks the ledger itself: an id the ledger knows is admitted the ordinary way (a
/// replay of the recorded call, not a conflict with the other proposal).
#[tokio::test]
async fn an_unanswered_claim_does_not_make_a_replay_a_conflict() {
    let (_dir, ledger) = fresh();
    ledger
        .admit("r", "c1", "t", "d1|caller", 10)
        .expect("admitted");
    let other = ledger.claim(call("d2|caller"), false).expect("claimed");
    let opened = ledger.open_late(call("d1|caller"), Inline::Never).await;
    assert!(matches!(opened, Opened::Ordinary(_)));
    let settled = ledger.settle(other, Ok(true), Inline::Never).await;
    assert!(matches!(settled, Opened::Ordinary(_)));
    assert_eq!(ledger.claims.len(), 0);
}

/// The same, for an id the ledger does not know: the other claim runs, so this proposal is a
/// conflict with it (noted on the running call).
#[tokio::test]
async fn an_unanswered_claim_on_a_new_id_is_a_conflict() {
    let (_dir, ledger) = fresh();
    let first = ledger.claim(call("d2|caller"), false).expect("claimed");
    let opened = ledger.open_late(call("d1|caller"), Inline::Never).await;
    assert!(matches!(opened, Opened::Held(Held::Reused)));
    let settled = ledger.settle(first, Ok(false), Inline::Never).await;
    let Opened::Journal(journal) = settled else {
        panic!("the first claim runs");
    };
    let noted = ledger.claims.release(&("r".into(), "c1".into()));
    assert_eq!(noted.len(), 1);
    drop(journal);
}

/// Another caller's proposal on an id claimed in this process is refused `Foreign` whatever
/// its arguments (never told to wait for the original's result), and who asked is noted on
/// the claim.
#[tokio::test]
async fn another_callers_claim_is_foreign() {
    let (_dir, ledger) = fresh();
    let _claim = ledger.claim(call("d1|alice"), false).expect("claimed");
    for digest in ["d1|mallory", "d2|mallory", "d1"] {
        let asked = ledger.claim(call(digest), false);
        assert_eq!(claiming(asked), Some(Claiming::Foreign), "{digest}");
    }
    let noted = ledger.claims.release(&("r".into(), "c1".into()));
    assert_eq!(noted.len(), 3);
}

/// Dropping a journal that holds a claim (a call whose future was dropped) releases it: a
/// proposal of the same call then claims the id instead of waiting for nobody.
#[tokio::test]
async fn a_dropped_journal_releases_its_claim() {
    let (_dir, ledger) = fresh();
    let claim = ledger.claim(call("d1|caller"), false).expect("claimed");
    let copy = ledger.claim(call("d1|caller"), false);
    assert_eq!(claiming(copy), Some(Claiming::Running));
    drop(claim);
    assert_eq!(ledger.claims.len(), 0);
    assert!(ledger.claim(call("d1|caller"), false).is_ok());
}
