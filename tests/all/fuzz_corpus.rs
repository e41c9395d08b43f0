//! The fuzz corpora as regression tests, on stable and without cargo-fuzz: every committed input
//! of every fuzz target (the hand-made seeds in `fuzz/corpus/<target>/`, and the crash inputs
//! kept in `fuzz/regressions/<target>/`) goes through the same check function its libFuzzer
//! target runs, included here from `fuzz/src/`. `just fuzz` runs the targets themselves; see
//! `docs/fuzzing.md`.

use std::path::{Path, PathBuf};

use crate::support::repo;

#[path = "../../fuzz/src/lib.rs"]
mod checks;

/// A target's check: one raw input, panicking when an invariant breaks.
type Check = fn(&[u8]);

/// Each target's check, by target name.
const CHECKS: &[(&str, Check)] = &[
    ("convert", checks::convert::check),
    ("arguments", checks::arguments::check),
    ("sse", checks::sse::check),
    ("approval", checks::approval::check),
    ("config", checks::config::check),
    ("mcp_frame", checks::mcp_frame::check),
];

/// Fewest seed inputs a target's corpus may have.
const MIN_SEEDS: usize = 3;

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Run every committed input of `target` through its check; fail naming each input that fails.
fn run(target: &str) {
    let check = CHECKS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, c)| *c)
        .expect("a known target");
    let fuzz = repo().join("fuzz");
    let seeds = files(&fuzz.join("corpus").join(target));
    assert!(
        seeds.len() >= MIN_SEEDS,
        "fuzz/corpus/{target} has {} inputs; it needs at least {MIN_SEEDS}",
        seeds.len()
    );
    let regressions = files(&fuzz.join("regressions").join(target));
    let mut failed = Vec::new();
    for path in seeds.iter().chain(&regressions) {
        let data = std::fs::read(path).expect("a readable input");
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: these inputs fail: {failed:#?}"
    );
}

/// Every `convert` seed and regression passes: JSON ↔ component values round-trip, match the
/// derived schema, and the size bound holds.
#[test]
fn convert_corpus() {
    run("convert");
}

/// Every `arguments` seed and regression passes the pipeline's argument-check invariants.
#[test]
fn arguments_corpus() {
    run("arguments");
}

/// Every `sse` seed and regression reads the same however it is cut, into a bounded turn.
#[test]
fn sse_corpus() {
    run("sse");
}

/// Every `approval` seed and regression: only the key's own token for the call verifies.
#[test]
fn approval_corpus() {
    run("approval");
}

/// Every `config` seed and regression: parsing is formatting-independent and within the caps.
#[test]
fn config_corpus() {
    run("config");
}

/// Every `mcp_frame` seed and regression: each bad frame gets one JSON-RPC error line, no
/// notification is answered, and repeated keys are marked only where they are.
#[test]
fn mcp_frame_corpus() {
    run("mcp_frame");
}

/// Every fuzz target (`[[bin]]` of fuzz/Cargo.toml) has a check here, an entry file, a seed
/// corpus and a `<target>_corpus` test in this file; and nothing here is not a target.
#[test]
fn every_fuzz_target_has_a_corpus_test() {
    let fuzz = repo().join("fuzz");
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap()).unwrap();
    let mut bins: Vec<&str> = manifest["bin"]
        .as_array()
        .expect("[[bin]] entries")
        .iter()
        .map(|b| b["name"].as_str().expect("a name"))
        .collect();
    bins.sort_unstable();
    let mut known: Vec<&str> = CHECKS.iter().map(|(n, _)| *n).collect();
    known.sort_unstable();
    let mut listed = checks::TARGETS.to_vec();
    listed.sort_unstable();
    assert_eq!(
        bins, known,
        "fuzz/Cargo.toml targets vs the checks run here"
    );
    assert_eq!(
        listed, known,
        "fuzz/src/lib.rs TARGETS vs the checks run here"
    );
    let source = include_str!("fuzz_corpus.rs");
    for t in bins {
        assert!(fuzz.join(format!("fuzz_targets/{t}.rs")).is_file(), "{t}");
        assert!(!files(&fuzz.join("corpus").join(t)).is_empty(), "{t}");
        assert!(
            source.contains(&format!("fn {t}_corpus()")),
            "no test runs the {t} corpus"
        );
    }
}
