//! The Python and JavaScript example tools (`guest-tools/polyglot`, built by
//! `just build-polyglot`) beside the Rust figures: the first compile (`toolhost check` with an
//! empty cache), the first call after it, a process start with the cache warm, a call inside
//! `toolhost serve`, and the linear memory one instance holds.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::process::Command;

use crate::procs::{binary, output_of, round_trips};
use crate::stats::Figure;

/// The languages of the example, each `guest-tools/target/polyglot/LANG.wasm`.
const LANGS: &[&str] = &["python", "js"];

/// A target: (what, met, the figures behind it).
pub type Target = (String, bool, String);

/// The figures and targets of both languages. `compiles` first compiles, `starts` warm starts
/// and `calls` serve calls per language.
pub async fn figures(
    dir: &Path,
    compiles: usize,
    starts: usize,
    calls: usize,
) -> (Vec<Figure>, Vec<Target>) {
    let mut figures = Vec::new();
    let mut targets = Vec::new();
    for lang in LANGS {
        let built = crate::setup::repo().join(format!("guest-tools/target/polyglot/{lang}.wasm"));
        assert!(
            built.is_file(),
            "{} is missing: run `just build-polyglot` (`just bench` does)",
            built.display()
        );
        let home = dir.join(format!("polyglot-{lang}"));
        std::fs::create_dir_all(&home).expect("a directory for the copy");
        let wasm = home.join(format!("{lang}.wasm"));
        std::fs::copy(&built, &wasm).expect("the component copies");

        let mut compile = Vec::with_capacity(compiles);
        for _ in 0..compiles {
            let _ = std::fs::remove_dir_all(home.join(".toolhost"));
            let t = Instant::now();
            toolhost(&["check", "--component"], &wasm, &[]);
            compile.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (first, _) = timed_call(&wasm);
        let mut start = Vec::with_capacity(starts);
        let mut memory = Vec::with_capacity(starts);
        for _ in 0..starts {
            let (ms, usage) = timed_call(&wasm);
            start.push(ms);
            memory.push(usage["memory_peak_bytes"].as_f64().unwrap_or(f64::NAN) / 1048576.0);
        }
        let mut server = Command::new(binary());
        server.args(["serve", "--component"]).arg(&wasm);
        let (serve, _, _) = round_trips(server, calls, 0, &position).await;
        let serve: Vec<f64> = serve.iter().map(|us| us / 1e3).collect();

        let compile = Figure::of(
            &format!("{lang}_first_compile"),
            "ms",
            &compile,
            "toolhost check, compile cache empty: process start, compile, cache written",
        );
        let first = Figure::of(
            &format!("{lang}_first_call_after_check"),
            "ms",
            &[first],
            "toolhost call --component, process start to result, right after check",
        );
        let start = Figure::of(
            &format!("{lang}_start_warm_cache"),
            "ms",
            &start,
            "the same, again and again",
        );
        let serve = Figure::of(
            &format!("{lang}_serve_call"),
            "ms",
            &serve,
            "tools/call position through toolhost serve --component (stdio), one at a time",
        );
        let memory = Figure::of(
            &format!("{lang}_memory_per_instance"),
            "MiB",
            &memory,
            "linear memory one call's instance holds (memory_peak_bytes)",
        );
        targets.push((
            format!("{lang}: a call in serve ≤ 3 ms"),
            serve.median <= 3.0,
            format!("{:.2} ms", serve.median),
        ));
        targets.push((
            format!("{lang}: a start with a warm cache ≤ 100 ms"),
            start.median <= 100.0,
            format!("{:.1} ms", start.median),
        ));
        targets.push((
            format!("{lang}: no call after check pays a compile"),
            first.median <= 100.0 && first.median * 10.0 < compile.median,
            format!(
                "first call {:.1} ms, compile {:.0} ms",
                first.median, compile.median
            ),
        ));
        figures.extend([compile, first, start, serve, memory]);
    }
    (figures, targets)
}

/// The serve figure's call: cheap, so that it measures the instance, not the work.
fn position(_: usize) -> (&'static str, Value) {
    ("position", json!({"text": "a b c d", "word": "c"}))
}

/// One `toolhost call --component` process: its milliseconds and the result's `usage`.
fn timed_call(wasm: &Path) -> (f64, Value) {
    let t = Instant::now();
    let out = toolhost(
        &["call", "--component"],
        wasm,
        &["position", r#"{"text":"a b c d","word":"c"}"#],
    );
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let result: Value = serde_json::from_slice(&out).expect("a JSON result");
    assert_eq!(result["status"], "completed", "{result}");
    (ms, result["usage"].clone())
}

/// Run this build's binary with `before`, the component, then `after`: its stdout.
fn toolhost(before: &[&str], wasm: &Path, after: &[&str]) -> Vec<u8> {
    let args: Vec<&OsStr> = before
        .iter()
        .map(OsStr::new)
        .chain([wasm.as_os_str()])
        .chain(after.iter().map(OsStr::new))
        .collect();
    output_of(&binary(), &args)
}
