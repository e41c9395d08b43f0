//! Standing bounds: figures this tree holds against a floor measured in the same run. The
//! smoke pass (`cargo test`, a debug build) lists them with its targets and fails when one is
//! passed; they are set for a debug build, so `just bench` (release) does not list them. Each
//! bound was set from the issue-50 measurements (`docs/benchmarks.md`). A figure measured in
//! turn with its floor (the pipeline and the null-ledger pipeline with raw wasmtime, each front
//! door with its floor server) holds still where two phases measured one after the other do
//! not, so those bounds fail a call path a third slower (HTTP's, three quarters: a loaded
//! machine moves it more, `docs/benchmarks.md`). The wake-up bounds are counts, which a busy
//! machine does not move: they fail a thread hop added to a call. The CPU ratios are of two
//! phases, which move with the machine's load, so they are set above the worst seen and fail
//! only a call path that grows several times over.

use crate::stats::Figure;

/// How a figure is held against its floor.
enum Limit {
    /// `figure / floor` at most this.
    Ratio(f64),
    /// `figure − floor` at most this (for counts, where a ratio hides an added hop).
    Excess(f64),
}

/// (figure, floor, limit).
const BOUNDS: &[(&str, &str, Limit)] = &[
    (
        "pipeline_interleaved",
        "floor_interleaved",
        Limit::Ratio(5.0),
    ),
    (
        "pipeline_no_ledger_interleaved",
        "floor_interleaved_no_ledger",
        Limit::Ratio(3.2),
    ),
    (
        "mcp_stdio_interleaved",
        "mcp_stdio_floor_interleaved",
        Limit::Ratio(4.0),
    ),
    (
        "mcp_http_interleaved",
        "mcp_http_floor_interleaved",
        Limit::Ratio(3.5),
    ),
    (
        "mcp_stdio_cpu_per_call",
        "mcp_stdio_floor_cpu_per_call",
        Limit::Ratio(10.0),
    ),
    (
        "mcp_http_cpu_per_call",
        "mcp_http_floor_cpu_per_call",
        Limit::Ratio(6.0),
    ),
    (
        "mcp_stdio_wakeups_per_call",
        "mcp_stdio_floor_wakeups_per_call",
        Limit::Excess(1.5),
    ),
    (
        "mcp_http_wakeups_per_call",
        "mcp_http_floor_wakeups_per_call",
        Limit::Excess(1.5),
    ),
];

/// Each standing bound as a target: (what, met, measured).
pub fn check(figures: &[Figure]) -> Vec<(String, bool, String)> {
    let median = |name: &str| {
        figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.median)
            .unwrap_or_else(|| panic!("standing bound on {name}, which was not measured"))
    };
    BOUNDS
        .iter()
        .map(|(figure, floor, limit)| {
            let (value, of) = (median(figure), median(floor));
            match limit {
                Limit::Ratio(max) => (
                    format!("standing: {figure} ≤ {max} × {floor}"),
                    value / of <= *max,
                    format!("{:.2}× ({value:.1} / {of:.1})", value / of),
                ),
                Limit::Excess(max) => (
                    format!("standing: {figure} ≤ {floor} + {max}"),
                    value - of <= *max,
                    format!("+{:.2} ({value:.2} against {of:.2})", value - of),
                ),
            }
        })
        .collect()
}
