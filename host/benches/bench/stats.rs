//! Figures, their statistics, and the report (`report.json` and `report.md`).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

/// One measured figure: a median with its p99 over `runs` samples, and (when it has one) the
/// floor it is read against, measured in the same run.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: String,
    pub unit: &'static str,
    pub median: f64,
    pub p99: f64,
    pub runs: usize,
    /// The figure this one is divided by, and the ratio.
    pub versus: Option<(String, f64)>,
    pub note: String,
}

/// Median and p99 of samples (nearest rank).
pub fn summarize(samples: &[f64]) -> (f64, f64) {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = |q: f64| {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i]
    };
    (rank(0.5), rank(0.99))
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Figure {
    pub fn of(name: &str, unit: &'static str, samples: &[f64], note: &str) -> Figure {
        let (median, p99) = summarize(samples);
        Figure {
            name: name.to_string(),
            unit,
            median,
            p99,
            runs: samples.len(),
            versus: None,
            note: note.to_string(),
        }
    }

    /// Latencies (µs) measured in turn with their floor's, one call of each alternately, as
    /// `(floor's, figure's)` samples: the floor's figure `(name, note)`, and the figure
    /// `(name, note)` read against it.
    pub fn in_turn(
        (floor_name, floor_note): (&str, &str),
        (name, note): (&str, &str),
        (floor_samples, samples): (Vec<f64>, Vec<f64>),
    ) -> (Figure, Figure) {
        let floor = Figure::of(floor_name, "µs", &floor_samples, floor_note);
        let note = format!("{note}: read against the floor of the same turns");
        let figure = Figure::of(name, "µs", &samples, &note).against(&floor);
        (floor, figure)
    }

    /// Read this figure against `floor`: the ratio of medians.
    pub fn against(mut self, floor: &Figure) -> Figure {
        self.versus = Some((floor.name.clone(), self.median / floor.median));
        self
    }

    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "unit": self.unit,
            "median": round(self.median),
            "p99": round(self.p99),
            "runs": self.runs,
            "versus": self.versus.as_ref().map(|(n, r)| json!({"figure": n, "ratio": round(*r)})),
            "note": self.note,
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Write `report.json` and `report.md` into `dir`.
pub fn write_report(
    dir: &Path,
    mode: &str,
    figures: &[Figure],
    targets: &[(String, bool, String)],
) {
    std::fs::create_dir_all(dir).expect("the report directory can be created");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let machine = json!({
        "cores": cores,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "note": "figures from a shared or virtual machine are noisy (±40% run to run seen here); compare ratios measured in the same run, not absolute numbers across runs",
    });
    let report = json!({
        "mode": mode,
        "machine": machine,
        "figures": figures.iter().map(Figure::json).collect::<Vec<_>>(),
        "targets": targets.iter().map(|(t, ok, why)| json!({"target": t, "met": ok, "measured": why})).collect::<Vec<_>>(),
    });
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&report).expect("the report serializes"),
    )
    .expect("report.json is written");

    let mut md = String::new();
    md.push_str(&format!(
        "# toolhost benchmark report ({mode})\n\nMachine: {cores} cores, {} {}. Figures from a shared or virtual machine are noisy \
         (±40% run to run seen here): read each figure against its floor measured in the same run.\n\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    md.push_str("| figure | median | p99 | unit | runs | versus | ratio | note |\n|---|---:|---:|---|---:|---|---:|---|\n");
    for f in figures {
        let (versus, ratio) = match &f.versus {
            Some((n, r)) => (n.clone(), format!("{r:.2}")),
            None => ("".into(), "".into()),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            f.name,
            fmt(f.median),
            fmt(f.p99),
            f.unit,
            f.runs,
            versus,
            ratio,
            f.note
        ));
    }
    md.push_str("\n## Targets\n\n| target | met | measured |\n|---|---|---|\n");
    for (t, ok, why) in targets {
        md.push_str(&format!(
            "| {t} | {} | {why} |\n",
            if *ok { "yes" } else { "no" }
        ));
    }
    std::fs::write(dir.join("report.md"), md).expect("report.md is written");
}

fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}
