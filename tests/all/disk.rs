//! A tool that fills the disk its writable grant shares with the data directory leaves the
//! reserve: the call is stopped `host_resources_exceeded`, no writable call starts below the
//! reserve, the ledger (on the same file system) keeps recording, and other calls are served.
//! On a 64 MiB tmpfs mounted for the test (the test runs as root, as CI does here).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use toolhost::{Code, EpochMode, Runtime, Status, ToolCall};
use toolhost_sandbox::{Fault, HostBudgetError};
use wasmtime::component::Val;

use crate::support::{guest, hostile_component, shared_cache, toml_path};

const MIB: u64 = 1 << 20;
const RESERVE: u64 = 16 * MIB;
/// A write budget far past the tmpfs, so the reserve is what stops the filling call.
const WRITES: u64 = 4096 * MIB;

/// A tmpfs of `size_mib` mounted at a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size_mib: u64) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn free(&self) -> u64 {
        let st = rustix::fs::statvfs(self.path()).unwrap();
        st.f_bavail * st.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A runtime in `dir` with the hostile `hoard` over a writable grant there, under these
/// `[limits]` lines.
fn runtime_in(dir: &Path, limits: &str) -> (PathBuf, Runtime) {
    let hoard = dir.join("hoard");
    std::fs::create_dir(&hoard).unwrap();
    let config = dir.join("toolhost.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data}\n\n[limits]\ndeadline_ms = 30_000\n{limits}\n\
             [[component]]\npath = {template}\n\n{hostile}[component.tools.hoard]\n\
             fs = [{{ host = {hoard}, guest = \"/hoard\", mode = \"rw\" }}]\n",
            data = toml_path(&dir.join("data")),
            template = toml_path(&guest("template")),
            hostile = hostile_component(""),
            hoard = toml_path(&hoard),
        ),
    )
    .unwrap();
    let mut loaded = toolhost::Config::load(&config).expect("config loads");
    loaded.cache_dir = Some(shared_cache());
    let rt = loaded.start(EpochMode::Ticker).expect("runtime");
    (hoard, rt)
}

fn runtime_on(fs: &Tmpfs) -> (PathBuf, Runtime) {
    let limits = format!("disk_reserve_bytes = {RESERVE}\nwrite_bytes = {WRITES}\n");
    runtime_in(fs.path(), &limits)
}

fn fill(count: u32) -> [Val; 3] {
    [Val::Enum("disk".into()), Val::U32(count), Val::U32(0)]
}

/// Filling the shared disk stops at the reserve; below it no writable call starts; the
/// ledger on the same disk records the calls that still run; freeing space lets writes run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filling_the_disk_leaves_the_reserve() {
    let fs = Tmpfs::mount(64);
    let (hoard, rt) = runtime_on(&fs);
    let registry = rt.registry();
    let tool = registry.get("hoard").unwrap();
    let full = Err(Fault::HostResourcesExceeded(HostBudgetError::Disk(RESERVE)));

    let exec = rt.execute(tool, &fill(1_000)).await;
    assert_eq!(exec.outcome, full, "a call writing 1 GiB into 64 MiB");
    let left = fs.free();
    assert!(left >= RESERVE / 2, "only {} MiB left", left / MIB);
    assert!(left < RESERVE, "{} MiB left", left / MIB);

    let exec = rt.execute(tool, &fill(1)).await;
    assert_eq!(
        exec.outcome, full,
        "no writable call starts below the reserve"
    );

    let ctx = rt.context("alice", "acme");
    let call = |id: &str, name: &str, arguments| ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments,
    };
    let r = rt
        .run_call(&ctx, &call("g", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    let args = json!({"kind": "disk", "count": 1, "hold-ms": 0});
    let r = rt.run_call(&ctx, &call("h", "hoard", args), None).await;
    assert_eq!(r.code, Some(Code::HostResourcesExceeded), "{r:?}");
    let recorded = rt.ledger().calls(Some(&ctx.run_id)).unwrap();
    assert_eq!(
        recorded.len(),
        2,
        "the ledger on the full disk still records"
    );

    std::fs::remove_file(hoard.join("fill.bin")).unwrap();
    // A write the stopped call had in flight on wasmtime-wasi's blocking pool holds the file
    // (and its space) until it finishes: wait for the space, bounded.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while fs.free() < RESERVE + 2 * MIB {
        assert!(
            std::time::Instant::now() < until,
            "the space never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let exec = rt.execute(tool, &fill(2)).await;
    assert_eq!(exec.outcome.unwrap(), vec![Val::U64(2)]);
}

/// Bytes of the files in `dir` (their sizes, sparse or not) and how many entries it has.
fn footprint(dir: &Path) -> (u64, usize) {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let bytes = entries.iter().map(|e| e.metadata().unwrap().len()).sum();
    (bytes, entries.len())
}

/// Every way a guest writes into its grant is charged to the call's write budget: appends
/// through std, a file's output stream, `descriptor.write`, `set-size` growth and created
/// entries. Each writer asking for 100 MiB (or 10,000 entries) is stopped
/// `host_resources_exceeded` having written no more than its 8 MiB, the next call has a
/// budget of its own, and the host serves other calls afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_writes_are_bounded_by_its_budget() {
    const BUDGET: u64 = 8 * MIB;
    let dir = tempfile::tempdir().unwrap();
    let (hoard, rt) = runtime_in(dir.path(), &format!("write_bytes = {BUDGET}\n"));
    let registry = rt.registry();
    let tool = registry.get("hoard").unwrap();
    let spent = Err(Fault::HostResourcesExceeded(HostBudgetError::Writes(
        BUDGET,
    )));
    let take = |kind: &str, count: u32| [Val::Enum(kind.into()), Val::U32(count), Val::U32(0)];
    for kind in ["disk", "disk-stream", "disk-direct", "disk-sparse"] {
        let exec = rt.execute(tool, &take(kind, 100)).await;
        assert_eq!(exec.outcome, spent, "{kind}");
        let (bytes, _) = footprint(&hoard);
        assert!(bytes <= BUDGET, "{kind}: {} MiB on disk", bytes / MIB);
        assert!(bytes >= BUDGET / 2, "{kind}: {} MiB on disk", bytes / MIB);
        for e in std::fs::read_dir(&hoard).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    }
    let exec = rt.execute(tool, &take("entries", 10_000)).await;
    assert_eq!(exec.outcome, spent, "entries");
    let (_, entries) = footprint(&hoard);
    let most = (BUDGET / toolhost_sandbox::ENTRY_BYTES) as usize;
    assert!(entries <= most && entries > most / 2, "{entries} entries");

    // The next call has its own budget: 2 MiB fits.
    let exec = rt.execute(tool, &take("disk-direct", 2)).await;
    assert_eq!(exec.outcome.unwrap(), vec![Val::U64(2)]);

    let ctx = rt.context("alice", "acme");
    let call = |id: &str, name: &str, arguments| ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments,
    };
    let args = json!({"kind": "disk-stream", "count": 100, "hold-ms": 0});
    let r = rt.run_call(&ctx, &call("w", "hoard", args), None).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::HostResourcesExceeded), "{r:?}");
    let r = rt
        .run_call(&ctx, &call("g", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
}
