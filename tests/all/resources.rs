//! The host's own resources stay bounded: a hostile call costs the host about its ceilings, and
//! the table ceiling holds for a guest that grows a table without end.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::json;
use toolhost::{Code, Status};

use crate::support::{adversarial_config, repo, run, runtime, temp_config, toml_path};

/// Run the real binary and return its exit code, stdout, and peak resident set (bytes).
#[allow(unsafe_code)]
fn call_with_peak_rss(tool: &str) -> (i32, String, u64) {
    let cfg = adversarial_config();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "--config", cfg.to_str().unwrap(), tool, "{}"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain FFI with valid pointers; `child` is not waited on by std afterwards.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, out, usage.ru_maxrss as u64 * 1024)
}

/// Memory-hungry fixtures cost the host no more than a trivial call plus the memory ceiling
/// (32 MiB) plus twice the output ceiling, with 16 MiB of slack for the lifted result.
#[test]
fn hostile_calls_keep_host_memory_bounded() {
    let (code, _, baseline) = call_with_peak_rss("greet_baseline_unknown");
    assert_eq!(code, 1);
    let bound = baseline + (32 << 20) + 2 * 65_536 + (16 << 20);
    for tool in ["balloon", "huge_result", "flood_stdout", "log_spam"] {
        let (_, out, peak) = call_with_peak_rss(tool);
        assert!(out.contains("\"status\""), "{tool}: {out}");
        assert!(
            peak <= bound,
            "{tool}: peak RSS {} MiB over the bound {} MiB (baseline {} MiB)",
            peak >> 20,
            bound >> 20,
            baseline >> 20
        );
    }
}

/// A guest that grows its table without end is stopped at the table ceiling, as
/// memory_exceeded, and the host serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_growth_hits_the_ceiling() {
    let component = wat::parse_str(
        r#"(component
            (core module $m
                (table $t 1 funcref)
                (func (export "grow") (result i32)
                    (loop $again
                        (br_if $again
                            (i32.ne (table.grow $t (ref.null func) (i32.const 1000)) (i32.const -1))))
                    unreachable))
            (core instance $i (instantiate $m))
            (func (export "grow-table") (result u32) (canon lift (core func $i "grow"))))"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("tables.wasm");
    std::fs::write(&wasm, component).unwrap();
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[limits]\ntable_elements = 10_000\n[[component]]\npath = {}\n[[component]]\npath = {}\n",
        toml_path(&repo().join(".toolhost")),
        toml_path(&wasm),
        toml_path(&crate::support::guest("template")),
    ));
    let rt = runtime(&cfg);
    let r = run(&rt, "grow_table", json!({})).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::MemoryExceeded), "{r:?}");
    let r = run(&rt, "greet", json!({"name": "t"})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
}
