//! Copies of a running call (the same run and call id) wait for the original's outcome, but
//! only so many at once: copies of a long call cannot keep the host polling its ledger; and a
//! copy whose original was given up before it was recorded runs the call itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{Code, Config, EpochMode, Runtime, Status, ToolCall, ToolResult};
use toolhost_runtime::MAX_WAITING_DUPLICATES;

use crate::support::{guest, temp_config, toml_path};

/// Run `call` in `ctx` on its own task.
fn spawn_call(
    rt: &Arc<Runtime>,
    ctx: &toolhost::RunContext,
    call: &ToolCall,
) -> tokio::task::JoinHandle<ToolResult> {
    let (rt, ctx, call) = (rt.clone(), ctx.clone(), call.clone());
    tokio::spawn(async move { rt.run_call(&ctx, &call, None).await })
}

/// Bounded wait until `done` holds (every 10 ms, at most `secs`).
async fn until(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

/// A host under a manual epoch whose `spin_deadline` spins until the epoch passes its 20 s
/// deadline (the wall-clock backstop is far beyond any test's own steps).
fn spinning_host() -> (tempfile::TempDir, Arc<Runtime>) {
    let (dir, path) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n\
         [component.tools.spin-deadline]\nlimits = {{ fuel = 1_000_000_000_000, deadline_ms = 20_000 }}\n\
         [component.tools.exfiltrate]\nnetwork = {{ allow = [\"127.0.0.1:47002\"] }}\n",
        crate::support::own_data(),
        toml_path(&guest("hostile")),
    ));
    (
        dir,
        Arc::new(Config::start_file(&path, EpochMode::Manual).unwrap()),
    )
}

/// Advance the manual epoch until `done` holds (bounded: 30 s), pausing this thread between
/// ticks rather than awaiting a timer: a guest that spins between ticks on the worker that
/// drives the runtime's timers would hold an awaited timer back until its fuel ran out.
fn drive_epochs(rt: &Runtime, mut done: impl FnMut() -> bool) {
    let stop = Instant::now() + Duration::from_secs(30);
    while !done() && Instant::now() < stop {
        for _ in 0..50 {
            rt.sandbox().increment_epoch();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// With a guest spinning under a manual epoch (it ends when we advance the epoch past its
/// 20 s deadline; the wall-clock backstop is far beyond the test's own steps), the
/// first `MAX_WAITING_DUPLICATES` copies wait, and every copy past them is answered at once
/// `duplicate_call_id` while the original still runs; once the original ends, each waiting
/// copy answers its recorded result, nothing ran twice, and the host serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_copies_of_a_running_call_are_capped() {
    let (_dir, rt) = spinning_host();
    let ctx = rt.context("p", "t");
    let call = ToolCall {
        call_id: "slow".into(),
        name: "spin_deadline".into(),
        arguments: json!({}),
    };
    let original = spawn_call(&rt, &ctx, &call);
    assert!(until(30, || rt.executions() == 1).await, "never started");

    let extra = 4;
    let copies: Vec<_> = (0..MAX_WAITING_DUPLICATES + extra)
        .map(|_| spawn_call(&rt, &ctx, &call))
        .collect();
    let finished = || copies.iter().filter(|c| c.is_finished()).count();
    until(30, || finished() >= extra).await;
    // Give a wrongly answered waiting copy time to show itself.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        finished(),
        extra,
        "copies past the cap answer at once, the rest wait"
    );
    assert!(!original.is_finished());

    // End the original: advance the epoch (bounded) until it has stopped.
    drive_epochs(&rt, || original.is_finished());
    let original = original.await.unwrap();
    assert_eq!(original.code, Some(Code::DeadlineExceeded), "{original:?}");

    let mut refused = 0;
    let mut replayed = 0;
    for copy in copies {
        let r = copy.await.unwrap();
        if r.replayed {
            crate::support::assert_replay(&r, &original);
            replayed += 1;
        } else {
            assert_eq!(r.code, Some(Code::DuplicateCallId), "{r:?}");
            assert_eq!(r.message, "a call with this id is still running");
            refused += 1;
        }
    }
    assert_eq!((refused, replayed), (extra, MAX_WAITING_DUPLICATES));
    assert_eq!(rt.executions(), 1, "a copy ran");

    // The host serves on, and the cap is free again: a new copy of the finished call replays.
    let again = spawn_call(&rt, &ctx, &call).await.unwrap();
    crate::support::assert_replay(&again, &original);
    let other = ToolCall {
        call_id: "next".into(),
        ..call
    };
    let next = spawn_call(&rt, &ctx, &other);
    drive_epochs(&rt, || next.is_finished());
    let next = next.await.unwrap();
    assert_eq!(next.status, Status::Failed);
    assert_eq!(next.code, Some(Code::DeadlineExceeded), "{next:?}");
    assert_eq!(rt.executions(), 2);
}

/// A copy of a read call whose original is given up while it runs (its future dropped, as
/// when its client goes away; a read is admitted with its outcome, so nothing of it was
/// recorded) does not wait out the original's deadline for an answer that will never come:
/// it runs the call itself, once, and its outcome is the id's one record, replayed after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_given_up_call_runs_it() {
    let (_dir, rt) = spinning_host();
    let ctx = rt.context("p", "t");
    let call = ToolCall {
        call_id: "given-up".into(),
        name: "spin_deadline".into(),
        arguments: json!({}),
    };
    let original = spawn_call(&rt, &ctx, &call);
    assert!(until(30, || rt.executions() == 1).await, "never started");
    let copy = spawn_call(&rt, &ctx, &call);
    // Give a wrongly answered copy time to show itself.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !copy.is_finished(),
        "the copy waits while the original runs"
    );

    // Give the original up: the guest sees the abort at its next epoch tick (a few of its
    // 2,000), long before its deadline.
    original.abort();
    drive_epochs(&rt, || original.is_finished());
    assert!(original.await.unwrap_err().is_cancelled());

    // The copy finds the id given up and runs the call itself; the epoch is advanced until it
    // ends. Told to wait instead, it would answer "still running" after the original's 20 s
    // deadline and 2 s grace, having run nothing.
    drive_epochs(&rt, || copy.is_finished());
    let ran = copy.await.unwrap();
    assert_eq!(ran.code, Some(Code::DeadlineExceeded), "{ran:?}");
    let calls = rt.ledger().calls(Some(&ctx.run_id)).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].code, Some(Code::DeadlineExceeded));
    let again = spawn_call(&rt, &ctx, &call).await.unwrap();
    crate::support::assert_replay(&again, &ran);
    assert_eq!(rt.executions(), 2);
}
