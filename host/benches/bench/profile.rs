//! `TOOLHOST_BENCH_PROFILE=…`: one workload alone, long enough for `perf record`, and the
//! experiments behind the report's figures (no report).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::idle::idle;
use crate::stats::{micros, Figure};
use crate::usage::ServerCost;
use crate::{
    call, http, pipeline_samples, postgres, procs, runtime, sample_result, setup, sqlite_floor,
    throughput,
};

/// `TOOLHOST_BENCH_PROFILE=pipeline|pipeline_no_ledger|pipeline_write|realistic|throughput_64|postgres|chain|telemetry_on|…`: run only that
/// workload, long enough for `perf record` (no report).
pub fn profile(what: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let risk = if what == "pipeline_write" {
        "write"
    } else {
        "read"
    };
    let config = setup::config_with(dir.path(), false, risk);
    rt.block_on(async {
        let runtime = Arc::new(runtime(&config));
        let t = Instant::now();
        match what {
            "realistic" => {
                let items = json!({"items": setup::items(10_000)});
                pipeline_samples(&runtime, "echo_items", &items, 5000, "e").await;
            }
            "throughput_64" => {
                throughput(&runtime, 64, 40_000).await;
            }
            "throughput_2" => {
                throughput(&runtime, 2, 40_000).await;
            }
            "throughput_1" => {
                throughput(&runtime, 1, 40_000).await;
            }
            "postgres" => {
                for f in postgres::figures(dir.path(), 4000)
                    .await
                    .map(|p| p.0)
                    .unwrap_or_default()
                {
                    println!("{}: {}", f.name, f.note);
                }
            }
            "mcp_stdio" => {
                let (seq, _, cost) = procs::mcp_stdio(&config, 10_000, 16).await;
                println!("mcp_stdio_sequential median {:.0} µs", seq.median);
                print_cost("mcp_stdio", &cost);
            }
            "mcp_http" => {
                let (f, cost) = http::mcp_http_sequential(&config, 10_000).await;
                println!("mcp_http_sequential median {:.0} µs", f.median);
                print_cost("mcp_http", &cost);
            }
            "mcp_floors" => {
                let (stdio, stdio_cost) = procs::mcp_stdio_floor(10_000).await;
                let (http, http_cost) = http::mcp_http_floor(10_000).await;
                println!(
                    "mcp_stdio_floor median {:.0} µs, mcp_http_floor median {:.0} µs",
                    stdio.median, http.median
                );
                print_cost("mcp_stdio_floor", &stdio_cost);
                print_cost("mcp_http_floor", &http_cost);
            }
            "pipeline_idle" => {
                // The same calls with the thread idle between them, as a server's is: a
                // busy gap (the core stays awake) against a sleeping one.
                let ctx = runtime.context("bench", "default");
                let registry = runtime.registry();
                let tool = registry.get("add").expect("add");
                let params = runtime
                    .benchmark_params(tool, &json!({"a": 1, "b": 2}))
                    .unwrap();
                for (pass, (gap, spin)) in [
                    (0u64, false),
                    (300, true),
                    (300, false),
                    (0, false),
                    (300, true),
                    (300, false),
                ]
                .into_iter()
                .enumerate()
                {
                    let (mut v, mut f) = (Vec::new(), Vec::new());
                    for i in 0..3000 {
                        let c = call(format!("g{pass}-{i}"), "add", json!({"a": 1, "b": 2}));
                        let t = Instant::now();
                        runtime.run_call(&ctx, &c, None).await;
                        v.push(micros(t.elapsed()));
                        idle(gap, spin);
                        let t = Instant::now();
                        runtime.call_floor(tool, &params).await.unwrap();
                        f.push(micros(t.elapsed()));
                        idle(gap, spin);
                    }
                    let (p, fl) = (Figure::of("", "µs", &v, ""), Figure::of("", "µs", &f, ""));
                    println!(
                        "gap {gap} µs {}: pipeline median {:.1} µs, floor median {:.1} µs",
                        if spin { "busy" } else { "asleep" },
                        p.median,
                        fl.median
                    );
                }
            }
            "chain" => {
                let r = sample_result(&runtime).await;
                let figures =
                    tokio::task::block_in_place(|| crate::chain::figures(dir.path(), 6000, &r));
                for f in figures {
                    println!(
                        "{}: median {:.1} µs, p99 {:.1} µs; {}",
                        f.name, f.median, f.p99, f.note
                    );
                }
            }
            "sqlite_floor" => {
                let r = sample_result(&runtime).await;
                for write in [false, true] {
                    let path = dir.path().join(format!("floor-{write}.sqlite"));
                    let f = Figure::of(
                        "",
                        "µs",
                        &sqlite_floor::samples(&path, write, 30_000, &r),
                        "",
                    );
                    println!("sqlite_floor (write: {write}) median {:.1} µs", f.median);
                }
            }
            "pipeline_no_ledger" => {
                let unrecorded = crate::runtime(&config)
                    .unrecorded_for_benchmarks()
                    .expect("the null ledger starts");
                let args = json!({"a": 40, "b": 2});
                pipeline_samples(&unrecorded, "add", &args, 30_000, "u").await;
            }
            "telemetry_off" | "telemetry_on" => {
                let args = json!({"a": 40, "b": 2});
                let v = pipeline_samples(&runtime, "add", &args, 30_000, "p").await;
                let f = Figure::of("", "µs", &v, "");
                println!(
                    "pipeline with {what}: median {:.1} µs, p99 {:.1} µs",
                    f.median, f.p99
                );
            }
            _ => {
                pipeline_samples(&runtime, "add", &json!({"a": 40, "b": 2}), 30_000, "p").await;
            }
        }
        let stats = runtime.ledger().group_stats();
        println!(
            "{what}: {:.2} s; commits {}, of them inline {}, writes {}",
            t.elapsed().as_secs_f64(),
            stats.commits.load(Ordering::Relaxed),
            stats.inline_commits.load(Ordering::Relaxed),
            stats.writes.load(Ordering::Relaxed)
        );
    });
}

/// One line per figure of what a server's sequential calls cost it.
fn print_cost(prefix: &str, cost: &ServerCost) {
    for f in cost.figures(prefix, None) {
        println!("{}: {:.2} {} ({})", f.name, f.median, f.unit, f.note);
    }
}
