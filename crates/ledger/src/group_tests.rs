//! Group commit: many writers share commits, a failed commit fails every write of its group
//! and records none of them, one write's own failure stays its own, and a process killed
//! mid-group never has told a caller about a write that is not in the file.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{ToolCall, ToolResult, Usage};

/// A backend that, once armed, holds its next group until [`Gate::open`] (so later writes
/// queue up and commit as one group), and with `fail_queued` rolls back (then fails) the
/// group after the held one.
struct Gated {
    inner: SqliteBackend,
    gate: Arc<Gate>,
    fail_queued: bool,
    released: bool,
    sizes: Arc<Mutex<Vec<usize>>>,
}

#[derive(Default)]
struct Gate {
    armed: Mutex<bool>,
    open: Mutex<bool>,
    cv: Condvar,
    holding: Mutex<bool>,
    held: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Wait (bounded) until the writer holds its first group.
    fn wait_held(&self) {
        let guard = self.holding.lock().unwrap();
        let (guard, timeout) = self
            .held
            .wait_timeout_while(guard, Duration::from_secs(30), |h| !*h)
            .unwrap();
        assert!(
            *guard && !timeout.timed_out(),
            "the writer never took a group"
        );
    }
}

impl Backend for Gated {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        self.sizes.lock().unwrap().push(writes.len());
        let fail = std::mem::take(&mut self.released) && self.fail_queued;
        if std::mem::take(&mut *self.gate.armed.lock().unwrap()) {
            self.released = true;
            *self.gate.holding.lock().unwrap() = true;
            self.gate.held.notify_all();
            let open = self.gate.open.lock().unwrap();
            let _open = self
                .gate
                .cv
                .wait_timeout_while(open, Duration::from_secs(30), |o| !*o)
                .unwrap();
        }
        if fail {
            // Every statement ran; the commit is what fails.
            self.inner.apply_and(writes, false)?;
            return Err(LedgerError::Commit("injected commit failure".into()));
        }
        self.inner.apply(writes)
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    ledger: Arc<Ledger>,
    gate: Arc<Gate>,
    sizes: Arc<Mutex<Vec<usize>>>,
}

fn gated(fail_queued: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let (g, s) = (gate.clone(), sizes.clone());
    let ledger = Ledger::open_with(
        &dir.path().join("ledger.db"),
        LedgerOptions::default(),
        move |inner| {
            Box::new(Gated {
                inner,
                gate: g,
                fail_queued,
                released: false,
                sizes: s,
            })
        },
    )
    .unwrap();
    Setup {
        _dir: dir,
        ledger: Arc::new(ledger),
        gate,
        sizes,
    }
}

fn key(call_id: &str) -> CallKey {
    CallKey {
        run_id: "r".into(),
        call_id: call_id.into(),
        tool: "echo".into(),
        args_digest: digest_bytes(b"{}"),
        args_size: 2,
        ..Default::default()
    }
}

fn finish(call_id: &str) -> Write {
    let call = ToolCall {
        call_id: call_id.into(),
        name: "echo".into(),
        arguments: json!({}),
    };
    let result = ToolResult::completed(&call, json!({"ok": call_id}), Usage::default());
    Write::Finish {
        run_id: "r".into(),
        call_id: call_id.into(),
        outcome: Outcome::of(&result).unwrap(),
        events: vec![],
    }
}

/// Start `n` writes on their own tasks while the writer holds its first group; they all
/// commit together as the second group once the gate opens.
async fn queued(
    s: &Setup,
    n: usize,
    write: impl Fn(usize) -> Write,
) -> Vec<Result<Applied, LedgerError>> {
    *s.gate.armed.lock().unwrap() = true;
    let first = {
        let l = s.ledger.clone();
        tokio::spawn(async move { l.commit(Write::Admit(key("first")), Inline::Allowed).await })
    };
    let gate = s.gate.clone();
    tokio::task::spawn_blocking(move || gate.wait_held())
        .await
        .unwrap();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (l, w) = (s.ledger.clone(), write(i));
            tokio::spawn(async move { l.commit(w, Inline::Never).await })
        })
        .collect();
    // Bounded wait until every write is queued behind the held group.
    for _ in 0..500 {
        if queued_len(s) >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.gate.open();
    first.await.unwrap().unwrap();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Writes waiting in the writer's queue.
fn queued_len(s: &Setup) -> usize {
    s.ledger.writer.queued()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_commit_in_one_group() {
    let s = gated(false);
    for i in 0..64 {
        s.ledger
            .admit("r", &format!("c{i}"), "echo", &digest_bytes(b"{}"), 2)
            .unwrap();
    }
    s.sizes.lock().unwrap().clear();
    let answers = queued(&s, 64, |i| finish(&format!("c{i}"))).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Applied::Done))));
    // The held group, then all 64 together.
    let sizes = s.sizes.lock().unwrap().clone();
    assert_eq!(sizes[sizes.len() - 2..], [1, 64], "{sizes:?}");
    for i in 0..64 {
        let r = s.ledger.outcome("r", &format!("c{i}")).unwrap().unwrap();
        assert_eq!(r.output, Some(json!({"ok": format!("c{i}")})));
    }
}

/// A commit that fails fails every write of its group, and none of them is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_fails_every_write_in_the_group() {
    // The held group is one admission; the queued admissions after it are made to fail.
    let s = gated(true);
    let answers = queued(&s, 16, |i| Write::Admit(key(&format!("n{i}")))).await;
    assert_eq!(answers.len(), 16);
    for a in &answers {
        assert!(
            matches!(a, Err(LedgerError::Commit(m)) if m.contains("injected")),
            "{a:?}"
        );
    }
    for i in 0..16 {
        assert!(!s.ledger.is_admitted("r", &format!("n{i}")).unwrap());
    }
    // The writer goes on: the next group commits.
    let next = s
        .ledger
        .commit(Write::Admit(key("after")), Inline::Allowed)
        .await
        .unwrap();
    assert!(matches!(next, Applied::Admission(Admission::New { .. })));
}

/// One write's own failure rolls back that write alone; the rest of its group commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_write_leaves_its_group_alone() {
    let s = gated(false);
    let answers = queued(&s, 5, |i| match i {
        // Finishing a call that was never admitted.
        2 => finish("never-admitted"),
        _ => Write::Admit(key(&format!("ok{i}"))),
    })
    .await;
    for (i, a) in answers.iter().enumerate() {
        if i == 2 {
            assert!(matches!(a, Err(LedgerError::UnknownCall { .. })), "{a:?}");
        } else {
            assert!(
                matches!(a, Ok(Applied::Admission(Admission::New { .. }))),
                "{a:?}"
            );
            assert!(s.ledger.is_admitted("r", &format!("ok{i}")).unwrap());
        }
    }
    assert!(!s.ledger.is_admitted("r", "never-admitted").unwrap());
}

/// A backend that panics on the first group it gets, then works.
struct PanicsOnce {
    inner: SqliteBackend,
    panicked: bool,
}

impl Backend for PanicsOnce {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        if !std::mem::replace(&mut self.panicked, true) {
            panic!("a backend bug");
        }
        self.inner.apply(writes)
    }
}

/// A backend that panics fails that group's writes and the ledger keeps committing, inline
/// and through the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_backend_fails_its_group_and_the_ledger_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(
        &dir.path().join("ledger.db"),
        LedgerOptions::default(),
        |inner| {
            Box::new(PanicsOnce {
                inner,
                panicked: false,
            })
        },
    )
    .unwrap();
    let first = ledger.commit(Write::Admit(key("a")), Inline::Allowed).await;
    assert!(matches!(first, Err(LedgerError::Commit(_))), "{first:?}");
    assert!(!ledger.is_admitted("r", "a").unwrap());
    for (id, inline) in [("b", Inline::Allowed), ("c", Inline::Never)] {
        let r = ledger.commit(Write::Admit(key(id)), inline).await;
        assert!(
            matches!(r, Ok(Applied::Admission(Admission::New { .. }))),
            "{r:?}"
        );
    }
}

/// A backend that may not commit on a caller's thread (PostgreSQL's drives its own runtime)
/// never does, even for a caller allowed to commit inline on an idle ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_bound_to_the_writer_never_commits_inline() {
    struct WriterOnly {
        inner: SqliteBackend,
        threads: Arc<Mutex<Vec<Option<String>>>>,
    }
    impl Backend for WriterOnly {
        fn apply(
            &mut self,
            writes: &[Write],
        ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
            let name = std::thread::current().name().map(str::to_owned);
            self.threads.lock().unwrap().push(name);
            self.inner.apply(writes)
        }
        fn commits_anywhere(&self) -> bool {
            false
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let t = threads.clone();
    let ledger = Ledger::open_with(
        &dir.path().join("ledger.db"),
        LedgerOptions::default(),
        move |inner| Box::new(WriterOnly { inner, threads: t }),
    )
    .unwrap();
    for i in 0..3 {
        let call = format!("c{i}");
        ledger
            .commit(Write::Admit(key(&call)), Inline::Allowed)
            .await
            .unwrap();
        ledger.commit(finish(&call), Inline::Allowed).await.unwrap();
    }
    assert_eq!(
        ledger
            .group_stats()
            .inline_commits
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let threads = threads.lock().unwrap();
    assert_eq!(threads.len(), 6);
    assert!(
        threads
            .iter()
            .all(|n| n.as_deref() == Some("toolhost-ledger")),
        "{threads:?}"
    );
}
