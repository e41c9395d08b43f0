//! What both exporters of the host's metrics share (`metrics.rs` for `/metrics`,
//! `metrics_otlp.rs` for OTLP): how a call ended, and the histograms' bounds.

/// The `tool` label of a call whose name no tool has.
pub const UNKNOWN_TOOL: &str = "(unknown)";

/// Exponential histogram bounds: `count` bounds from `start`, each `factor` times the last.
#[derive(Debug, Clone, Copy)]
pub(super) struct Buckets {
    start: f64,
    factor: f64,
    count: u16,
}

impl Buckets {
    /// The bounds, lowest first.
    pub(super) fn bounds(self) -> Vec<f64> {
        std::iter::successors(Some(self.start), |b| Some(b * self.factor))
            .take(usize::from(self.count))
            .collect()
    }
}

/// Seconds from 50 µs to about 13 s (a call that ends in admission to one at a long deadline).
pub(super) const SECONDS: Buckets = Buckets {
    start: 0.000_05,
    factor: 4.0,
    count: 10,
};

/// Bytes from 64 KiB to 4 GiB (a guest's linear memory).
pub(super) const MEMORY: Buckets = Buckets {
    start: 65_536.0,
    factor: 4.0,
    count: 9,
};

/// Writes per group commit, 1 to 256.
pub(super) const GROUP: Buckets = Buckets {
    start: 1.0,
    factor: 2.0,
    count: 9,
};

/// How one call ended, for [`Metrics::call_ended`].
#[derive(Debug, Clone, Copy)]
pub struct CallEnd<'a> {
    /// The tool's name when the registry has it; `None` counts as [`UNKNOWN_TOOL`].
    pub tool: Option<&'a str>,
    pub status: &'static str,
    /// The failure code's wire name, `""` for none.
    pub code: &'static str,
    pub seconds: f64,
    pub fuel: u64,
    pub memory_peak_bytes: u64,
    pub output_bytes: u64,
}
