//! Host memory through the host interface and the result: what a guest sends is bounded at the
//! boundary, so a call holds at most its memory ceiling plus a constant — measured from /proc.

use serde_json::{json, Value};
use toolhost::{Code, Status};
use toolhost_sandbox::{
    Report, MAX_HOSTCALL_BYTES, MAX_REPORTS_PER_CALL, MAX_REPORT_MESSAGE_BYTES,
};

use crate::mcp::Raw;
use crate::support::{
    adversarial_config, guest, hostile_component, peak_rss, run, runtime, temp_config, toml_path,
};

const MIB: u64 = 1 << 20;
/// The adversarial config's memory ceiling.
const CEILING: u64 = 32 * MIB;
/// What the issue allows a call on top of its ceiling.
const SLACK: u64 = 64 * MIB;

fn tools_call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": {}}})
}

fn greet(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "greet", "arguments": {"name": "after"}}})
}

fn structured(r: &Value) -> &Value {
    &r["result"]["structuredContent"]
}

/// A guest that passes maximal messages to `log` and `progress` (each as large as its memory
/// allows, 300 times) completes, and the serving process's peak RSS grows by at most the memory
/// ceiling + 64 MiB per call — for one call, then for two at once — and it serves on.
#[test]
fn flooding_the_host_interface_keeps_host_rss_bounded() {
    let mut raw = Raw::start(&adversarial_config());
    raw.initialize("2025-11-25");
    let pid = raw.child.id();
    raw.send(greet(2));
    let warm = raw.response(&json!(2), &mut Vec::new());
    assert_eq!(warm["result"]["isError"], json!(false), "{warm}");
    let baseline = peak_rss(pid);

    raw.send(tools_call(3, "flood_host"));
    let one = raw.response(&json!(3), &mut Vec::new());
    assert_eq!(structured(&one)["result"], json!(16 * MIB), "{one}");
    let after_one = peak_rss(pid);
    assert!(
        after_one <= baseline + CEILING + SLACK,
        "one flood call took {} MiB of host memory",
        (after_one - baseline) / MIB
    );

    raw.send(tools_call(4, "flood_host"));
    raw.send(tools_call(5, "flood_host"));
    // The two answers may come in either order: what arrives early waits in `seen`.
    let mut seen = Vec::new();
    for id in [json!(4), json!(5)] {
        let r = match seen.iter().position(|m: &Value| m["id"] == id) {
            Some(i) => seen.remove(i),
            None => raw.response(&id, &mut seen),
        };
        assert_eq!(structured(&r)["result"], json!(16 * MIB), "{r}");
    }
    let after_two = peak_rss(pid);
    eprintln!(
        "peak RSS: baseline {} MiB, after one flood call {} MiB, after two at once {} MiB",
        baseline / MIB,
        after_one / MIB,
        after_two / MIB
    );
    assert!(
        after_two <= baseline + 2 * (CEILING + SLACK),
        "two concurrent flood calls took {} MiB of host memory",
        (after_two - baseline) / MIB
    );
    raw.send(greet(6));
    let r = raw.response(&json!(6), &mut Vec::new());
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
}

/// What the host keeps of a flood is the first reports, each a fresh copy of at most 1 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn flood_host_reports_are_fresh_bounded_copies() {
    let rt = runtime(&adversarial_config());
    let registry = rt.registry();
    let tool = registry.get("flood_host").unwrap();
    let exec = rt.execute(tool, &[]).await;
    assert!(exec.outcome.is_ok(), "{:?}", exec.outcome);
    assert_eq!(exec.reports.kept.len(), MAX_REPORTS_PER_CALL);
    assert_eq!(exec.reports.dropped, 300 - MAX_REPORTS_PER_CALL as u64);
    for k in &exec.reports.kept {
        let (Report::Log { message, .. } | Report::Progress { message, .. }) = k;
        assert_eq!(message.len(), MAX_REPORT_MESSAGE_BYTES);
        assert!(message.capacity() <= MAX_REPORT_MESSAGE_BYTES);
    }
}

/// A message larger than the host's transfer bound (a 64 MiB message from a guest with a
/// 128 MiB ceiling) stops the call as `output_too_large` before the host allocates it, and the
/// host serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_beyond_the_transfer_bound_is_output_too_large() {
    let (_dir, config) = temp_config(&format!(
        "[limits]\nmemory_bytes = {}\ndeadline_ms = 30_000\n\n{}\n[[component]]\npath = {}\n",
        128 * MIB,
        hostile_component(""),
        toml_path(&guest("template")),
    ));
    let rt = runtime(&config);
    const { assert!(64 * MIB > MAX_HOSTCALL_BYTES) };
    let r = run(&rt, "flood_host", json!({})).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::OutputTooLarge), "{r:?}");
    let r = run(&rt, "greet", json!({"name": "after"})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
}
