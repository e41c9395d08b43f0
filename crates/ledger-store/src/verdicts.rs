//! What a reconciliation is made of (`reconcile.rs` records it): an operator's verdict, who and
//! why, the filter of the listing of lost calls, and the stored form a backend writes.

use serde_json::Value;

use super::outcome::{Outcome, Stored};
use toolhost_contract::Code;

/// Longest `operator` or `why` of a reconciliation, in bytes: operator text for the audit
/// trail, not a document.
pub const MAX_RECONCILE_TEXT_BYTES: usize = 1024;

/// Most calls one listing of [`Ledger::unknown_calls`] returns.
pub const MAX_LISTED_UNKNOWN: u32 = 10_000;

/// What an operator found a call did.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It took effect and returned `output` (which must pass the tool's output schema).
    Completed(Value),
    /// It failed with this code.
    Failed(Code),
    /// It never took effect; a new call may try again.
    ConfirmedNotRun,
}

/// An operator's record of one call: what happened, who says so and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciliation {
    pub verdict: Verdict,
    pub operator: String,
    pub why: String,
}

/// Which `outcome_unknown` calls [`Ledger::unknown_calls`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownFilter {
    pub run: Option<String>,
    pub tool: Option<String>,
    /// Only calls closed at or before this time (unix milliseconds).
    pub closed_before_ms: Option<i64>,
    /// Also calls that were reconciled already.
    pub include_reconciled: bool,
    /// At most this many (capped at [`MAX_LISTED_UNKNOWN`]), oldest first.
    pub limit: u32,
}

/// A reconciliation as a backend stores it: its result's columns and the event it appends.
pub struct Settled {
    outcome: Outcome,
    pub operator: String,
    pub why: String,
    pub at_ms: i64,
    /// The `reconcile` event's line.
    pub event: String,
}

impl Settled {
    /// `outcome` as `reconciliation` recorded it at `at_ms`, with its `reconcile` event.
    pub fn new(
        outcome: Outcome,
        reconciliation: &Reconciliation,
        at_ms: i64,
        event: String,
    ) -> Settled {
        Settled {
            outcome,
            operator: reconciliation.operator.clone(),
            why: reconciliation.why.clone(),
            at_ms,
            event,
        }
    }

    /// The result's stored columns.
    pub fn stored(&self) -> Stored<'_> {
        self.outcome.stored()
    }
}
