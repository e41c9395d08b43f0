//! A by-hand measurement of the ledger's per-call cost, not a timed assertion. Run with
//! `cargo test -p toolhost --lib ledger::bench -- --ignored --nocapture` (add `--release` for
//! optimized SQLite). `LEDGER_BENCH_DIR` picks the directory (the disk matters for FULL).

use std::time::Instant;

use serde_json::json;

use super::*;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{ToolCall, ToolResult, Usage};

const CALLS: usize = 1000;

/// Microseconds per call for `CALLS` cycles of admit + start + `events` stage events + finish.
fn per_call_us(options: LedgerOptions, events: usize) -> f64 {
    let base = std::env::var_os("LEDGER_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let ledger = Ledger::open(&dir.path().join("bench.db"), options).unwrap();
    let digest = digest_bytes(b"{\"text\":\"hello\"}");
    let start = Instant::now();
    for i in 0..CALLS {
        let call = ToolCall {
            call_id: format!("call-{i}"),
            name: "echo".into(),
            arguments: json!({"text": "hello"}),
        };
        let admission = ledger
            .admit("bench", &call.call_id, "echo", &digest, 16)
            .unwrap();
        assert!(matches!(admission, Admission::New { .. }));
        for _ in 0..events {
            ledger
                .event("bench", &call.call_id, "authorize", "allow", "rule default")
                .unwrap();
        }
        ledger.mark_started("bench", &call.call_id).unwrap();
        let result = ToolResult::completed(&call, json!({"echo": "hello"}), Usage::default());
        ledger.finish("bench", &call.call_id, &result).unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / CALLS as f64
}

/// Prints the per-call ledger cost with synchronous NORMAL and FULL (run by hand).
#[test]
#[ignore = "a measurement to run by hand, not a test"]
fn bench_admit_start_finish() {
    for events in [0, 7] {
        for full in [false, true] {
            let options = LedgerOptions {
                synchronous_full: full,
                record_content: false,
            };
            let us = per_call_us(options, events);
            let mode = if full { "FULL" } else { "NORMAL" };
            println!(
                "ledger: {CALLS} x (admit + start + {events} events + finish), WAL {mode:<6}: \
                 {us:8.1} us/call"
            );
        }
    }
}
