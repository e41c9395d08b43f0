//! `toolhost reconcile`: list the calls that ended `outcome_unknown`, and record what one of
//! them did (`crates/ledger/src/reconcile.rs` says what is stored and what a replay then answers).

use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use super::report::{usage_error, usage_message};
use super::{EXIT_NOT_COMPLETED, EXIT_USAGE};
use crate::contract::Code;
use crate::ledger::{LedgerError, Reconciliation, UnknownFilter, Verdict};
use crate::{ReconcileError, Runtime};

#[derive(Subcommand)]
pub enum Action {
    /// Print, as a JSON array, the calls that ended outcome_unknown and have no reconciliation
    /// yet (with --all, reconciled ones too), oldest first.
    List {
        /// Only this run.
        #[arg(long)]
        run: Option<String>,
        /// Only calls of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only calls closed at least this many seconds ago.
        #[arg(long, value_name = "SECS")]
        older_than_secs: Option<u64>,
        /// Reconciled calls too.
        #[arg(long)]
        all: bool,
        /// At most this many calls.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
    },
    /// Record what a call that ended outcome_unknown really did, who says so and why, and print
    /// the result a replay of it answers from now on. A call is reconciled once.
    Record {
        /// The call's run.
        #[arg(long)]
        run: String,
        /// The call's id.
        #[arg(long)]
        call: String,
        /// What the call did.
        verdict: VerdictArg,
        /// With `completed`: the output, JSON, checked against the tool's output schema.
        #[arg(long, required_if_eq("verdict", "completed"))]
        output: Option<String>,
        /// With `failed`: the failure code (e.g. tool_error).
        #[arg(long, required_if_eq("verdict", "failed"))]
        code: Option<String>,
        /// Who records it (kept in the ledger, never shown to a model).
        #[arg(long)]
        by: String,
        /// Why: what was checked (kept in the ledger, never shown to a model).
        #[arg(long)]
        why: String,
    },
}

/// What the call did, as the command line says it.
#[derive(Clone, Copy, ValueEnum)]
pub enum VerdictArg {
    /// It took effect; `--output` is what it returned.
    Completed,
    /// It failed; `--code` says how.
    Failed,
    /// It never took effect.
    ConfirmedNotRun,
}

pub(super) fn reconcile(rt: &Runtime, action: Action) -> ExitCode {
    match action {
        Action::List {
            run,
            tool,
            older_than_secs,
            all,
            limit,
        } => {
            let age_ms = older_than_secs.map(|s| i64::try_from(s.saturating_mul(1000)));
            let closed_before_ms = match age_ms.transpose() {
                Ok(age) => age.map(|a| crate::ledger::now_ms().saturating_sub(a)),
                Err(_) => return usage_message("--older-than-secs is too large"),
            };
            let filter = UnknownFilter {
                run,
                tool,
                closed_before_ms,
                include_reconciled: all,
                limit,
            };
            match rt.ledger().unknown_calls(&filter) {
                Ok(calls) => {
                    out!(
                        "{}",
                        serde_json::to_string_pretty(&calls).expect("records serialize")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e),
            }
        }
        Action::Record {
            run,
            call,
            verdict,
            output,
            code,
            by,
            why,
        } => {
            let verdict = match verdict_of(verdict, output.as_deref(), code.as_deref()) {
                Ok(v) => v,
                Err(message) => return usage_message(message),
            };
            let reconciliation = Reconciliation {
                verdict,
                operator: by,
                why,
            };
            match rt.reconcile(&run, &call, &reconciliation) {
                Ok(result) => {
                    out!(
                        "{}",
                        serde_json::to_string(&result).expect("results serialize")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => refused(&e),
            }
        }
    }
}

/// The verdict the arguments describe, or what is wrong with them.
fn verdict_of(
    verdict: VerdictArg,
    output: Option<&str>,
    code: Option<&str>,
) -> Result<Verdict, String> {
    match (verdict, output, code) {
        (VerdictArg::Completed, Some(output), None) => serde_json::from_str(output)
            .map(Verdict::Completed)
            .map_err(|e| format!("--output is not JSON: {e}")),
        (VerdictArg::Failed, None, Some(code)) => Code::from_wire(code)
            .map(Verdict::Failed)
            .ok_or_else(|| format!("--code {code:?} is not a failure code toolhost knows")),
        (VerdictArg::ConfirmedNotRun, None, None) => Ok(Verdict::ConfirmedNotRun),
        (_, Some(_), _) => Err("--output goes only with `completed`".into()),
        _ => Err("--code goes only with `failed`".into()),
    }
}

/// A refused reconciliation: 1 when the ledger's record forbids it (never admitted, not
/// `outcome_unknown`, already reconciled), 2 when what was given is wrong.
fn refused(e: &ReconcileError) -> ExitCode {
    crate::telemetry::say(tracing::Level::ERROR, crate::contract::error_chain(e));
    match e {
        ReconcileError::Ledger(
            LedgerError::UnknownCall { .. }
            | LedgerError::NotOutcomeUnknown { .. }
            | LedgerError::AlreadyReconciled { .. },
        ) => ExitCode::from(EXIT_NOT_COMPLETED),
        _ => ExitCode::from(EXIT_USAGE),
    }
}
