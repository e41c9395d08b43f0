//! What a server process spends on the calls it answers: CPU time, the times its threads went
//! to sleep waiting (each needs a wake-up: the hand-offs), how many of its threads ran, and its
//! resident memory. Read from `/proc/PID/task/*/schedstat` (nanoseconds on the CPU, per
//! thread), `/proc/PID/task/*/status` (voluntary context switches: a thread that was preempted
//! by a busy machine is not counted) and `/proc/PID/statm`; on a system without them every
//! figure is NaN.

use std::collections::HashMap;

use crate::stats::Figure;

/// One reading of a process: per thread (its id), nanoseconds on the CPU and voluntary context
/// switches; and the resident set.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    threads: HashMap<u32, (u64, u64)>,
    rss_mib: f64,
    /// The anonymous part of the resident set (heap, stacks, guest memory): what the process
    /// holds of its own, apart from its code and other file pages the page cache shares.
    anon_mib: f64,
}

/// Read process `pid` now.
pub fn sample(pid: Option<u32>) -> Sample {
    let Some(pid) = pid else {
        return Sample {
            rss_mib: f64::NAN,
            anon_mib: f64::NAN,
            ..Sample::default()
        };
    };
    let mut threads = HashMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let ns = stat
                .split_whitespace()
                .next()
                .and_then(|f| f.parse::<u64>().ok());
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            let sleeps = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok());
            if let (Some(ns), Some(sleeps)) = (ns, sleeps) {
                threads.insert(tid, (ns, sleeps));
            }
        }
    }
    Sample {
        threads,
        rss_mib: rss_mib(pid),
        anon_mib: anon_mib(pid),
    }
}

fn anon_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// The resident set of `/proc/{process}` (a pid, or `self`), in MiB.
pub fn rss_mib(process: impl std::fmt::Display) -> f64 {
    let statm = std::fs::read_to_string(format!("/proc/{process}/statm")).unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    pages * 4096.0 / (1024.0 * 1024.0)
}

/// What a server spent between two samples, over `calls` calls.
#[derive(Debug, Clone, Copy)]
pub struct PerCall {
    /// CPU microseconds per call, all threads.
    pub cpu_us: f64,
    /// Voluntary context switches per call, all threads: how often a thread went to sleep
    /// waiting, to be woken again.
    pub sleeps: f64,
    /// Threads that ran at all between the samples.
    pub threads: usize,
}

/// What the process spent from `before` to `after` on `calls` calls (a thread that began
/// meanwhile counts from zero).
pub fn per_call(before: &Sample, after: &Sample, calls: usize) -> PerCall {
    if after.threads.is_empty() {
        return PerCall {
            cpu_us: f64::NAN,
            sleeps: f64::NAN,
            threads: 0,
        };
    }
    let (mut ns, mut sleeps, mut threads) = (0u64, 0u64, 0usize);
    for (tid, (a_ns, a_sleeps)) in &after.threads {
        let (b_ns, b_sleeps) = before.threads.get(tid).copied().unwrap_or((0, 0));
        if *a_ns > b_ns {
            threads += 1;
        }
        ns += a_ns.saturating_sub(b_ns);
        sleeps += a_sleeps.saturating_sub(b_sleeps);
    }
    PerCall {
        cpu_us: ns as f64 / 1e3 / calls as f64,
        sleeps: sleeps as f64 / calls as f64,
        threads,
    }
}

/// A server's sequential calls, read as what they cost it: the idle resident set (after its
/// handshake, before any call) and [`PerCall`].
#[derive(Debug, Clone, Copy)]
pub struct ServerCost {
    pub idle_rss_mib: f64,
    pub idle_anon_mib: f64,
    pub per_call: PerCall,
}

/// The cost of `calls` sequential calls made between `before` and `after`, with the resident
/// set of `idle`. Where `/proc` can be read, at least one thread must have run.
pub fn cost(idle: &Sample, before: &Sample, after: &Sample, calls: usize) -> ServerCost {
    let per_call = per_call(before, after, calls);
    assert!(
        after.threads.is_empty() || per_call.threads >= 1,
        "the server answered {calls} calls, and none of its threads ran: {before:?} → {after:?}"
    );
    ServerCost {
        idle_rss_mib: idle.rss_mib,
        idle_anon_mib: idle.anon_mib,
        per_call,
    }
}

impl ServerCost {
    /// Four figures named `{prefix}_cpu_per_call`, `{prefix}_wakeups_per_call`,
    /// `{prefix}_idle_rss` and `{prefix}_idle_anon`, each read against `floor`'s when one is
    /// given.
    pub fn figures(&self, prefix: &str, floor: Option<&[Figure]>) -> Vec<Figure> {
        let p = self.per_call;
        let figures = [
            Figure::of(
                &format!("{prefix}_cpu_per_call"),
                "µs",
                &[p.cpu_us],
                "the server's CPU time per sequential call, all its threads",
            ),
            Figure::of(
                &format!("{prefix}_wakeups_per_call"),
                "n",
                &[p.sleeps],
                &format!(
                    "times one of the server's threads went to sleep waiting (to be woken again), per sequential call; {} threads ran",
                    p.threads
                ),
            ),
            Figure::of(
                &format!("{prefix}_idle_rss"),
                "MiB",
                &[self.idle_rss_mib],
                "the server's resident set after its handshake, before any call",
            ),
            Figure::of(
                &format!("{prefix}_idle_anon"),
                "MiB",
                &[self.idle_anon_mib],
                "of it anonymous memory (heap, stacks): the rest is code and other file pages the page cache shares",
            ),
        ];
        match floor {
            Some(floor) => figures
                .into_iter()
                .zip(floor)
                .map(|(f, of)| f.against(of))
                .collect(),
            None => figures.into_iter().collect(),
        }
    }
}
