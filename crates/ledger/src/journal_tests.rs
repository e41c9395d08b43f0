//! The call journal's contract, run on every backend by `contract!` (`contract_tests.rs`): a
//! call from open to outcome, a late admission lost to another host, and claims that leave
//! nothing behind (the race between a late claim and a conflicting duplicate, driven step by
//! step) while what duplicates note is kept.

use serde_json::json;

use super::claims::Claiming;
use super::contract_tests::{stages, usage, Site};
use super::journal::Opened;
use super::{CallKey, Held, Inline, Ledger, LedgerError, LedgerOptions, OpenCall, Waited};
use toolhost_contract::{Decision, Stage, ToolCall, ToolResult};

/// Run `body` on a runtime of its own (the journal is async; the contract's bodies are not).
fn block_on<F: std::future::Future>(body: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(body)
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
            ..Default::default()
        },
        caller: toolhost_contract::Caller::new("p", "t"),
        late: true,
    }
}

/// A completed result for `c1`.
fn completed(output: &str) -> ToolResult {
    let call = ToolCall {
        call_id: "c1".into(),
        name: "t".into(),
        arguments: json!({}),
    };
    ToolResult::completed(&call, json!(output), usage())
}

fn claiming<T>(claimed: Result<T, Box<(OpenCall, Claiming)>>) -> Option<Claiming> {
    claimed.err().map(|refused| refused.1)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(s, d)| (s.to_string(), d.to_string()))
        .collect()
}

/// A call opened late, noted, started and finished is one record: its admission first, then
/// its decisions in order, then its outcome; opening it again replays that outcome.
pub(super) fn a_journal_records_one_call_from_open_to_outcome(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    block_on(async {
        let mut journal = ledger.open_call(call("d1|p"), Inline::Never).await.unwrap();
        journal.note(Stage::Authorize, Decision::Allowed.as_str(), "rule r");
        journal.start(Inline::Never).await.unwrap();
        journal.note(Stage::Execute, Decision::Completed.as_str(), "");
        journal
            .finish(&completed("done"), Inline::Never)
            .await
            .unwrap();
        let again = ledger.open_call(call("d1|p"), Inline::Never).await;
        assert!(matches!(again, Err(Held::Replay(r)) if *r == completed("done")));
    });
    assert_eq!(
        stages(&ledger, "r", "c1"),
        pairs(&[
            ("admit", "new"),
            ("authorize", "allowed"),
            ("execute", "completed"),
            ("record", "completed"),
            ("admit", "replay"),
        ])
    );
}

/// A call claimed on one host whose id another host admitted first does not start: its
/// journal answers with the other call's outcome and records nothing of its own.
pub(super) fn a_journal_that_lost_its_admission_records_nothing(site: &dyn Site) {
    let first = site.open(LedgerOptions::default());
    let second = site.open(LedgerOptions::default());
    block_on(async {
        let mut journal = first.open_call(call("d1|p"), Inline::Never).await.unwrap();
        journal.note(Stage::Authorize, Decision::Allowed.as_str(), "rule r");
        second.admit("r", "c1", "t", "d1|p", 10).unwrap();
        second.finish("r", "c1", &completed("theirs")).unwrap();
        let started = journal.start(Inline::Never).await;
        assert!(matches!(started, Err(Held::Replay(r)) if *r == completed("theirs")));
        journal
            .finish(&completed("mine"), Inline::Never)
            .await
            .unwrap();
    });
    assert_eq!(first.outcome("r", "c1").unwrap(), Some(completed("theirs")));
    assert_eq!(
        stages(&first, "r", "c1"),
        pairs(&[
            ("admit", "new"),
            ("record", "completed"),
            ("admit", "replay")
        ])
    );
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
pub(super) fn a_known_id_leaves_no_claim_and_keeps_the_conflict(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    ledger.admit("r", "c1", "t", "d1|caller", 10).unwrap();
    block_on(race(&ledger, Ok(true)));
    assert_eq!(ledger.claims.len(), 0);
    assert_eq!(
        stages(&ledger, "r", "c1"),
        pairs(&[("admit", "new"), ("admit", "conflict")])
    );
}

/// The ledger could not be read: the claim and what was noted on it are dropped.
pub(super) fn a_ledger_fault_leaves_no_claim(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    block_on(race(&ledger, Err(LedgerError::Commit("down".into()))));
    assert_eq!(ledger.claims.len(), 0);
}

/// A proposal that finds another's claim with other arguments, not yet answered by the
/// ledger, asks the ledger itself: an id the ledger knows is admitted the ordinary way (a
/// replay of the recorded call, not a conflict with the other proposal).
pub(super) fn an_unanswered_claim_does_not_make_a_replay_a_conflict(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    ledger.admit("r", "c1", "t", "d1|caller", 10).unwrap();
    block_on(async {
        let other = ledger.claim(call("d2|caller"), false).expect("claimed");
        let opened = ledger.open_late(call("d1|caller"), Inline::Never).await;
        assert!(matches!(opened, Opened::Ordinary(_)));
        let settled = ledger.settle(other, Ok(true), Inline::Never).await;
        assert!(matches!(settled, Opened::Ordinary(_)));
    });
    assert_eq!(ledger.claims.len(), 0);
}

/// The same, for an id the ledger does not know: the other claim runs, so this proposal is a
/// conflict with it (noted on the running call).
pub(super) fn an_unanswered_claim_on_a_new_id_is_a_conflict(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    block_on(async {
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
    });
}

/// Another caller's proposal on an id claimed in this process is refused `Foreign` whatever
/// its arguments (never told to wait for the original's result), and who asked is noted on
/// the claim.
pub(super) fn another_callers_claim_is_foreign(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
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
pub(super) fn a_dropped_journal_releases_its_claim(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    let claim = ledger.claim(call("d1|caller"), false).expect("claimed");
    let copy = ledger.claim(call("d1|caller"), false);
    assert_eq!(claiming(copy), Some(Claiming::Running));
    drop(claim);
    assert_eq!(ledger.claims.len(), 0);
    assert!(ledger.claim(call("d1|caller"), false).is_ok());
}

/// A copy told to wait for a running call is answered with the id's outcome only if the
/// ledger admitted the id for its own call. Here the call it waited on was a claim with its
/// arguments, taken after another call had been admitted and finished with the id (a conflict
/// once the ledger answered): the copy is a conflict too, noted on the recorded call, never
/// answered with that call's result.
pub(super) fn a_copy_is_answered_only_with_its_own_calls_outcome(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    ledger.admit("r", "c1", "t", "d1|caller", 10).unwrap();
    ledger.finish("r", "c1", &completed("theirs")).unwrap();
    block_on(async {
        let claim = ledger.claim(call("d2|caller"), false).expect("claimed");
        let copy = ledger.open_call(call("d2|caller"), Inline::Never).await;
        assert!(matches!(copy, Err(Held::InFlight)), "the copy waits");
        let settled = ledger.settle(claim, Ok(true), Inline::Never).await;
        assert!(matches!(settled, Opened::Ordinary(_)));
        let waited = ledger.waited(&call("d2|caller"), Inline::Never).await;
        assert!(
            matches!(waited, Waited::Answered(Held::Reused)),
            "{waited:?}"
        );
        let mallory = ledger.waited(&call("d2|mallory"), Inline::Never).await;
        assert!(
            matches!(mallory, Waited::Answered(Held::Foreign)),
            "{mallory:?}"
        );
        let own = ledger.waited(&call("d1|caller"), Inline::Never).await;
        assert!(
            matches!(own, Waited::Answered(Held::Replay(r)) if *r == completed("theirs")),
            "the recorded call's own copy gets its outcome"
        );
    });
    assert_eq!(ledger.claims.len(), 0);
    assert_eq!(
        stages(&ledger, "r", "c1"),
        pairs(&[
            ("admit", "new"),
            ("record", "completed"),
            ("admit", "conflict"),
            ("admit", "unauthorized"),
        ])
    );
}

/// A copy asking while the id has no outcome is told to wait — while a claim holds it, or
/// once it is admitted — and told the original vanished when its claim was given up before
/// admission (dropped), so that nothing will ever answer it.
pub(super) fn a_copy_waits_while_the_id_has_no_outcome(site: &dyn Site) {
    let ledger = site.open(LedgerOptions::default());
    block_on(async {
        let claim = ledger.claim(call("d1|caller"), false).expect("claimed");
        let copy = ledger.open_call(call("d1|caller"), Inline::Never).await;
        assert!(matches!(copy, Err(Held::InFlight)));
        let waited = ledger.waited(&call("d1|caller"), Inline::Never).await;
        assert!(matches!(waited, Waited::Pending), "{waited:?}");
        drop(claim);
        let waited = ledger.waited(&call("d1|caller"), Inline::Never).await;
        assert!(matches!(waited, Waited::Vanished), "{waited:?}");
        ledger.admit("r", "c1", "t", "d1|caller", 10).unwrap();
        for digest in ["d1|caller", "d2|caller"] {
            let waited = ledger.waited(&call(digest), Inline::Never).await;
            assert!(matches!(waited, Waited::Pending), "{digest}: {waited:?}");
        }
    });
}
