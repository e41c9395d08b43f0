//! What a guest's handles cost the host is bounded per call: descriptors, directory listings,
//! unsent HTTP bodies and pollables (the `hoard` fixture) end `host_resources_exceeded` past
//! their budget, other callers are served while a call holds what it may, and the serving
//! process's descriptors and peak memory stay within the budgets.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{Code, Runtime, Status, ToolCall};
use toolhost_sandbox::{
    Fault, HostBudgetError, CALL_FIXED_FDS, LISTING_ENTRY_BYTES, MAX_HOST_HANDLES_PER_CALL,
    MAX_LISTING_BYTES_PER_CALL,
};
use wasmtime::component::Val;

use crate::mcp::Raw;
use crate::support::{guest, hostile_component, own_data, peak_rss, runtime, toml_path};

const MIB: u64 = 1 << 20;

/// Entries of the big directory, each with a name of [`NAME_BYTES`]: one listing of it costs
/// about 4.9 MB, so a second one passes the listing budget.
const BIG_DIR_ENTRIES: usize = 30_000;
const NAME_BYTES: usize = 100;

/// A config granting `hoard` the directory `hoard` read-only (`file.txt` and, with `big`, the
/// many entries) and `greet` the same directory (so every greet call needs a descriptor for
/// its preopen), with a deadline that lets hoarders hold for seconds.
fn hoard_config(big: bool) -> (tempfile::TempDir, PathBuf) {
    hoard_config_with(big, 8)
}

/// [`hoard_config`] with `slots` calls at once.
fn hoard_config_with(big: bool, slots: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let hoard = dir.path().join("hoard");
    std::fs::create_dir(&hoard).unwrap();
    std::fs::write(hoard.join("file.txt"), "hoarded\n").unwrap();
    if big {
        for i in 0..BIG_DIR_ENTRIES {
            std::fs::write(hoard.join(format!("{i:0width$}", width = NAME_BYTES)), b"").unwrap();
        }
    }
    let grant = format!(
        "fs = [{{ host = {}, guest = \"/hoard\", mode = \"ro\" }}]",
        toml_path(&hoard)
    );
    let text = format!(
        "data_dir = {data}\n\n[limits]\nfuel = 100_000_000_000\ndeadline_ms = 30_000\n\
         memory_bytes = 33_554_432\noutput_bytes = 65_536\n\n[run]\nmax_concurrent_calls = {slots}\n\n\
         [[component]]\npath = {template}\n[component.tools.greet]\n{grant}\n\n{hostile}\
         [component.tools.hoard]\n{grant}\n",
        data = own_data(),
        template = toml_path(&guest("template")),
        hostile = hostile_component(""),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn hoard_params(kind: &str, count: u32, hold_ms: u32) -> [Val; 3] {
    [
        Val::Enum(kind.to_string()),
        Val::U32(count),
        Val::U32(hold_ms),
    ]
}

async fn greet(rt: &Runtime, id: &str) {
    let call = ToolCall {
        call_id: id.to_string(),
        name: "greet".into(),
        arguments: json!({"name": "after"}),
    };
    let r = rt.call(&call).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
}

/// Each kind of host resource taken without end stops at its budget with its own fault, the
/// pipeline reports `host_resources_exceeded`, and the host serves on: descriptors, unsent
/// bodies and pollables at the handle budget, listings of a big directory at the listing
/// budget (long before the handle budget).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn hoarding_past_a_budget_is_host_resources_exceeded() {
    let (_dir, config) = hoard_config(true);
    let rt = runtime(&config);
    let registry = rt.registry();
    let tool = registry.get("hoard").unwrap();
    let handles = rt.sandbox().descriptors().handles_per_call;
    assert_eq!(
        handles, MAX_HOST_HANDLES_PER_CALL,
        "this machine's descriptor limit"
    );
    for (kind, over) in [
        ("descriptors", HostBudgetError::Handles(handles)),
        ("bodies", HostBudgetError::Handles(handles)),
        ("pollables", HostBudgetError::Handles(handles)),
        (
            "listings",
            HostBudgetError::Listings(MAX_LISTING_BYTES_PER_CALL),
        ),
    ] {
        let exec = rt.execute(tool, &hoard_params(kind, 1_000_000, 0)).await;
        assert_eq!(
            exec.outcome,
            Err(Fault::HostResourcesExceeded(over)),
            "{kind}"
        );
    }
    let call = ToolCall {
        call_id: "hoard-all".into(),
        name: "hoard".into(),
        arguments: json!({"kind": "descriptors", "count": 1_000_000, "hold-ms": 0}),
    };
    let r = rt.call(&call).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::HostResourcesExceeded), "{r:?}");
    greet(&rt, "after-hoards").await;
}

/// Within its budgets a call keeps what it took: as many descriptors as its handle budget
/// leaves after the preopen, and one listing of the big directory but not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn within_the_budgets_a_call_keeps_what_it_took() {
    let (_dir, config) = hoard_config(true);
    let rt = runtime(&config);
    let registry = rt.registry();
    let tool = registry.get("hoard").unwrap();
    let exec = rt.execute(tool, &hoard_params("descriptors", 200, 0)).await;
    assert_eq!(exec.outcome.unwrap(), vec![Val::U64(200)]);
    let exec = rt.execute(tool, &hoard_params("listings", 1, 0)).await;
    assert_eq!(exec.outcome.unwrap(), vec![Val::U64(1)]);
    let one = BIG_DIR_ENTRIES as u64 * (LISTING_ENTRY_BYTES + NAME_BYTES as u64);
    assert!(one < MAX_LISTING_BYTES_PER_CALL && 2 * one > MAX_LISTING_BYTES_PER_CALL);
}

/// Open descriptors of a live process.
fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64
}

fn tools_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

fn hoard(id: u64, kind: &str, count: u32, hold_ms: u32) -> Value {
    tools_call(
        id,
        "hoard",
        json!({"kind": kind, "count": count, "hold-ms": hold_ms}),
    )
}

fn assert_host_resources_exceeded(r: &Value) {
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert_eq!(
        r["result"]["_meta"]["toolhost/failure"]["code"],
        json!("host_resources_exceeded"),
        "{r}"
    );
}

/// The answer to `id`, from what arrived early (`seen`) or the next messages.
fn answer(raw: &mut Raw, id: u64, seen: &mut Vec<Value>) -> Value {
    match seen.iter().position(|m| m["id"] == json!(id)) {
        Some(i) => seen.remove(i),
        None => raw.response(&json!(id), seen),
    }
}

/// Wait (bounded) until `pid` holds at least `fds` descriptors.
fn wait_for_fds(pid: u32, fds: u64) {
    let until = Instant::now() + Duration::from_secs(30);
    while open_fds(pid) < fds {
        assert!(
            Instant::now() < until,
            "the hoarders never took {fds} descriptors"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The serving process: two calls each hold 200 descriptors, one a listing of the big
/// directory and one 60 unsent bodies; while they hold, a call that needs a descriptor for its
/// preopen completes, and the process holds at most the calls' budgets in descriptors. Then
/// four calls that hoard without end, at once, all end `host_resources_exceeded`, the peak
/// memory grows by less than 64 MiB per call, and the host serves on.
#[test]
fn hoarders_leave_the_host_serving_and_bounded() {
    let (_dir, config) = hoard_config(true);
    let mut raw = Raw::start(&config);
    raw.initialize("2025-11-25");
    let pid = raw.child.id();
    let mut seen = Vec::new();
    raw.send(tools_call(1, "greet", json!({"name": "warm"})));
    let warm = answer(&mut raw, 1, &mut seen);
    assert_eq!(warm["result"]["isError"], json!(false), "{warm}");
    let fds_before = open_fds(pid);
    let rss_before = peak_rss(pid);

    raw.send(hoard(2, "descriptors", 200, 6_000));
    raw.send(hoard(3, "descriptors", 200, 6_000));
    raw.send(hoard(4, "listings", 1, 6_000));
    raw.send(hoard(5, "bodies", 60, 6_000));
    wait_for_fds(pid, fds_before + 400);
    raw.send(tools_call(6, "greet", json!({"name": "meanwhile"})));
    let meanwhile = answer(&mut raw, 6, &mut seen);
    assert_eq!(meanwhile["result"]["isError"], json!(false), "{meanwhile}");
    let held = open_fds(pid) - fds_before;
    assert!(
        seen.iter().all(|m| m.get("id").is_none()),
        "a hoarder ended before the greet: {seen:?}"
    );
    assert!(
        held <= 4 * (200 + CALL_FIXED_FDS),
        "four calls hold {held} descriptors"
    );
    for (id, taken) in [(2, 200), (3, 200), (4, 1), (5, 60)] {
        let r = answer(&mut raw, id, &mut seen);
        assert_eq!(
            r["result"]["structuredContent"]["result"],
            json!(taken),
            "{r}"
        );
    }

    // Hoarders without end, each told to hold what it took: the budget ends them at once, so
    // they never hold the host's descriptors while the greet sent with them needs one.
    for (id, kind) in [
        (7, "descriptors"),
        (8, "listings"),
        (9, "bodies"),
        (10, "pollables"),
    ] {
        raw.send(hoard(id, kind, 1_000_000, 10_000));
    }
    raw.send(tools_call(
        12,
        "greet",
        json!({"name": "with the hoarders"}),
    ));
    let with = answer(&mut raw, 12, &mut seen);
    assert_eq!(with["result"]["isError"], json!(false), "{with}");
    for id in 7..=10 {
        assert_host_resources_exceeded(&answer(&mut raw, id, &mut seen));
    }
    let rss_after = peak_rss(pid);
    eprintln!(
        "hoarders: {held} descriptors held by four calls; peak RSS {} MiB before, {} MiB after",
        rss_before / MIB,
        rss_after / MIB
    );
    assert!(
        rss_after <= rss_before + 4 * 64 * MIB,
        "four hoarding calls took {} MiB of host memory",
        (rss_after - rss_before) / MIB
    );
    raw.send(tools_call(11, "greet", json!({"name": "after"})));
    let after = answer(&mut raw, 11, &mut seen);
    assert_eq!(after["result"]["isError"], json!(false), "{after}");
}

/// With the descriptor limit at 4,096 and 16 calls at once, each call's handle budget is its
/// share of what the host's reserve leaves (176, not 256): 15 calls holding all they may leave
/// a call that needs a descriptor served, and calls that try to hold 248 each end
/// `host_resources_exceeded` instead of taking the host's reserve.
#[test]
fn a_full_pool_of_calls_leaves_the_hosts_reserve() {
    const NOFILE: u32 = 4_096;
    const SLOTS: u32 = 16;
    // (4,096 − the reserve of 1,024) / 16 slots, less 16 for each call's preopens.
    const SHARE: u32 = 176;
    let (_dir, config) = hoard_config_with(false, SLOTS);
    let mut raw = Raw::start_limited(&config, Some(NOFILE));
    raw.initialize("2025-11-25");
    let pid = raw.child.id();
    let mut seen = Vec::new();
    raw.send(tools_call(1, "greet", json!({"name": "warm"})));
    assert_eq!(
        answer(&mut raw, 1, &mut seen)["result"]["isError"],
        json!(false)
    );
    let fds_before = open_fds(pid);

    // What the budget allows, less the entries the guest's runtime takes for itself.
    let allowed = SHARE - 8;
    let hoarders = 1..SLOTS as u64;
    for id in hoarders.clone() {
        raw.send(hoard(100 + id, "descriptors", allowed, 6_000));
    }
    wait_for_fds(pid, fds_before + (SLOTS as u64 - 1) * u64::from(allowed));
    raw.send(tools_call(2, "greet", json!({"name": "meanwhile"})));
    let meanwhile = answer(&mut raw, 2, &mut seen);
    assert_eq!(meanwhile["result"]["isError"], json!(false), "{meanwhile}");
    for id in hoarders.clone() {
        let r = answer(&mut raw, 100 + id, &mut seen);
        assert_eq!(
            r["result"]["structuredContent"]["result"],
            json!(allowed),
            "{r}"
        );
    }

    let greedy = MAX_HOST_HANDLES_PER_CALL as u32 - 8;
    for id in hoarders.clone() {
        raw.send(hoard(200 + id, "descriptors", greedy, 6_000));
    }
    for id in hoarders {
        assert_host_resources_exceeded(&answer(&mut raw, 200 + id, &mut seen));
    }
    raw.send(tools_call(3, "greet", json!({"name": "after"})));
    assert_eq!(
        answer(&mut raw, 3, &mut seen)["result"]["isError"],
        json!(false)
    );
}
