//! Deadlines driven by hand: with a manual epoch, only our increments can interrupt a guest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolhost::{Code, Config, EpochMode, Status};
use toolhost_sandbox::deadline_ticks;

use crate::support::{guest, temp_config, toml_path};

/// A spinning guest with an hour of fuel and a 60 s deadline is interrupted by the epochs we
/// advance by hand, long before the async timeout could fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_epochs_interrupt_a_spinning_guest() {
    let (_dir, path) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n[component.tools.spin-deadline]\nlimits = {{ fuel = 1_000_000_000_000, deadline_ms = 60_000 }}\n[component.tools.exfiltrate]\nnetwork = {{ allow = [\"127.0.0.1:47002\"] }}\n",
        crate::support::own_data(),
        toml_path(&guest("hostile")),
    ));
    let rt = Arc::new(Config::start_file(&path, EpochMode::Manual).unwrap());

    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let rt = rt.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let ticks = deadline_ticks(Duration::from_secs(60));
            // Bounded: enough increments to pass any deadline set during the loop, twice over.
            for _ in 0..(4 * ticks) {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                rt.sandbox().increment_epoch();
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let r = crate::support::run(&rt, "spin_deadline", json!({})).await;
    done.store(true, Ordering::SeqCst);
    ticker.join().unwrap();
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::DeadlineExceeded), "{r:?}");
    assert!(
        r.usage.wall_ms < 30_000,
        "the async timeout, not the epoch, ended it: {r:?}"
    );
}
