//! The instance pool is sized from the config: a concurrency limit the pool cannot hold is
//! refused, and a call past the pool is the host's limit (`HostBusy`, which a call's result
//! reports as `rate_limited`), never a guest crash.

use serde_json::json;
use toolhost::{Code, Status};
use toolhost_sandbox::{Fault, MAX_CONCURRENT_INSTANCES};

use crate::support::{guest, hostile_component, run, runtime, temp_config, toml_path};

fn config(max_concurrent: u32) -> String {
    format!(
        "[run]\nmax_concurrent_calls = {max_concurrent}\n\n[[component]]\npath = {}\n\n{}",
        toml_path(&guest("template")),
        hostile_component("[component.tools.sleep-forever]\nlimits = { deadline_ms = 1_000 }\n"),
    )
}

/// `run.max_concurrent_calls` above what one host can hold is refused at load, saying the bound.
#[test]
fn a_concurrency_limit_beyond_the_pool_is_refused() {
    let (_dir, path) = temp_config(&config(MAX_CONCURRENT_INSTANCES + 1));
    let err = match toolhost::Config::start_file(&path, toolhost::EpochMode::Manual) {
        Ok(_) => panic!("the config was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("run.max_concurrent_calls"), "{err}");
    assert!(err.contains(&MAX_CONCURRENT_INSTANCES.to_string()), "{err}");
}

/// With a pool of two, a third execution at once (past the concurrency guard) fails as
/// `HostBusy` while two guests sleep, and the host serves a normal call afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_pool_is_host_busy_not_a_guest_trap() {
    let (_dir, path) = temp_config(&config(2));
    let rt = runtime(&path);
    let registry = rt.registry();
    let tool = registry.get("sleep_forever").unwrap();
    let (a, b, c) = tokio::join!(
        rt.execute(tool, &[]),
        rt.execute(tool, &[]),
        rt.execute(tool, &[])
    );
    let mut faults: Vec<Fault> = [a, b, c]
        .into_iter()
        .map(|e| e.outcome.expect_err("sleep_forever never returns"))
        .collect();
    faults.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(
        faults,
        [
            Fault::DeadlineExceeded,
            Fault::DeadlineExceeded,
            Fault::HostBusy
        ]
    );
    let r = run(&rt, "greet", json!({"name": "after"})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_ne!(r.code, Some(Code::GuestTrap));
}
