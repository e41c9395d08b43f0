//! Calls per second with the PostgreSQL ledger: one host, then three hosts (three runtimes in
//! this process, each with its own connections and lease) sharing one schema, beside the
//! SQLite figures. Measured only when a server is named (`TOOLHOST_BENCH_POSTGRES_URL`, else
//! `TOOLHOST_TEST_POSTGRES_URL`); each run works in a schema of its own, dropped at the end.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use toolhost::Runtime;

use crate::stats::Figure;

/// Concurrent callers on each host: enough to keep a host's connection busy.
const CALLERS_PER_HOST: usize = 16;

/// The server, if one is named.
pub(crate) fn url() -> Option<String> {
    std::env::var("TOOLHOST_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("TOOLHOST_TEST_POSTGRES_URL"))
        .ok()
}

/// `(figures, 3 hosts' aggregate / 1 host's calls per second)`, or `None` without a server.
pub async fn figures(dir: &Path, calls: usize) -> Option<(Vec<Figure>, f64)> {
    let Some(url) = url() else {
        println!(
            "postgres: not measured (set TOOLHOST_BENCH_POSTGRES_URL or TOOLHOST_TEST_POSTGRES_URL)"
        );
        return None;
    };
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let config = crate::setup::postgres_config(dir, &url, &schema);
    let hosts: Vec<Arc<Runtime>> = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            (0..3).map(|_| Arc::new(crate::runtime(&config))).collect()
        })
        .await
        .expect("the hosts start")
    };
    // Warm-up: compile caches, connections, prepared plans.
    crate::throughput(&hosts[0], 4, 64.min(calls)).await;

    let commits = |hs: &[Arc<Runtime>]| -> u64 {
        hs.iter()
            .map(|h| h.ledger().group_stats().commits.load(Ordering::Relaxed))
            .sum()
    };
    let before = commits(&hosts[..1]);
    let (one, lat1) = crate::throughput(&hosts[0], CALLERS_PER_HOST, calls).await;
    let per_call1 = (commits(&hosts[..1]) - before) as f64 / calls as f64;

    let before = commits(&hosts);
    let started = Instant::now();
    let runs: Vec<_> = hosts
        .iter()
        .map(|h| {
            let h = h.clone();
            tokio::spawn(async move { crate::throughput(&h, CALLERS_PER_HOST, calls).await })
        })
        .collect();
    let mut lat3 = Vec::new();
    for r in runs {
        lat3.extend(r.await.expect("a host's callers").1);
    }
    let three = (3 * calls) as f64 / started.elapsed().as_secs_f64();
    let per_call3 = (commits(&hosts) - before) as f64 / (3 * calls) as f64;
    drop(hosts);
    drop_schema(&url, &schema).await;

    let mut f1 = Figure::of(
        "postgres_throughput_1_host",
        "µs",
        &lat1,
        &format!(
            "{one:.0} calls/s, one host, {CALLERS_PER_HOST} callers, PostgreSQL ledger, \
             {per_call1:.2} commits per call; latency per call"
        ),
    );
    f1.versus = None;
    let mut f3 = Figure::of(
        "postgres_throughput_3_hosts",
        "µs",
        &lat3,
        &format!(
            "{three:.0} calls/s in all, three hosts on one schema, {CALLERS_PER_HOST} callers \
             each, {per_call3:.2} commits per call; latency per call"
        ),
    );
    f3.versus = None;
    let ratio = Figure::of(
        "postgres_3_hosts_vs_1",
        "x",
        &[three / one],
        &format!("calls/s: 1 host → {one:.0}, 3 hosts → {three:.0} (aggregate)"),
    );
    Some((vec![f1, f3, ratio], three / one))
}

pub(crate) async fn drop_schema(url: &str, schema: &str) {
    let config = toolhost_ledger::PgConfig {
        url: url.to_owned(),
        password_env: None,
        schema: schema.to_owned(),
        ca_file: None,
    };
    if let Ok(client) = config.connect().await {
        let _ = client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await;
    }
}
