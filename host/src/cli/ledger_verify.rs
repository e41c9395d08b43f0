//! `toolhost ledger verify`: walk every hash chain of the ledger and match every recorded row
//! against it (`crates/ledger-store/src/chain.rs`); print what was checked and every finding
//! as JSON, and exit 1 when anything was found.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::report::usage_error;
use super::EXIT_NOT_COMPLETED;
use crate::Runtime;

#[derive(Subcommand)]
pub enum Action {
    /// Check that nothing recorded was altered, inserted or deleted since it was written:
    /// every chain link's hash and order, every call's events and outcome, every
    /// reconciliation, transcript entry, spent token and task. Print a JSON report; exit 0 when
    /// the ledger is intact, 1 naming the first findings (by run, call and position).
    Verify,
}

/// Run `action` against the runtime's ledger.
pub fn run(rt: &Runtime, action: Action) -> ExitCode {
    match action {
        Action::Verify => verify(rt),
    }
}

fn verify(rt: &Runtime) -> ExitCode {
    let report = match rt.ledger().verify() {
        Ok(report) => report,
        Err(e) => return usage_error(&e),
    };
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            let mut v = serde_json::to_value(f).expect("a finding serializes");
            v["message"] = json!(f.to_string());
            v
        })
        .collect();
    out!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "intact": report.intact(),
            "chains": report.chains,
            "links": report.links,
            "rows": report.rows,
            "findings": findings,
            "more_findings": report.more,
        }))
        .expect("a report serializes")
    );
    if report.intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_COMPLETED)
    }
}
