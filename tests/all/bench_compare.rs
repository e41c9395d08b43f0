//! `just bench-compare`'s table: each figure's ratio is the median of its per-pair ratios.

use std::process::Command;

use crate::support::repo;

/// Three pairs of saved reports give, per figure present on both sides, the median of
/// this/other over the pairs, the pairs above 1 and the range; a figure without a median and a
/// pair with one side missing are left out.
#[test]
fn bench_compare_reports_the_median_of_per_pair_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let report = |figures: &[(&str, f64)]| {
        let figures: Vec<_> = figures
            .iter()
            .map(|(name, median)| serde_json::json!({"name": name, "median": median}))
            .collect();
        serde_json::json!({ "figures": figures }).to_string()
    };
    // Per-pair pipeline ratios 95/101, 100/102, 105/103: median 100/102 = 0.980.
    for (i, (this, other)) in [(95.0, 101.0), (100.0, 102.0), (105.0, 103.0)]
        .into_iter()
        .enumerate()
    {
        let pair = i + 1;
        std::fs::write(
            dir.path().join(format!("this-{pair}.json")),
            report(&[("pipeline", this), ("floor", 20.0)]),
        )
        .unwrap();
        std::fs::write(
            dir.path().join(format!("other-{pair}.json")),
            report(&[("pipeline", other), ("floor", 20.0), ("only_other", 1.0)]),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("this-4.json"),
        report(&[("pipeline", 1000.0)]),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(repo().join("host/benches/compare.py"))
        .arg("summarize")
        .arg(dir.path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("3 pairs;"), "{table}");
    assert!(
        table.contains("| pipeline | 0.980 | 1/3 | 0.94–1.02 | 102 |"),
        "{table}"
    );
    assert!(
        table.contains("| floor | 1.000 | 0/3 | 1.00–1.00 | 20 |"),
        "{table}"
    );
    assert!(!table.contains("only_other"), "{table}");
}
