//! The stages of one call, one file each, in the order `../pipeline.rs` runs them:
//! admit → resolve → validate → authorize → approve → limit → execute → check → record.
//!
//! Every stage after admission reads the per-call value [`Call`]: the trusted context, the
//! proposal, what was prepared once (the tool as the caller sees it, the canonical call), and
//! the journal its decision is noted on. A stage that ends the call notes why and returns the
//! ending ([`super::endings::Ended`]); the pipeline records it.

pub(super) mod admit;
pub(super) mod approve;
pub(super) mod authorize;
pub(super) mod check;
pub(super) mod execute;
pub(super) mod limit;
pub(super) mod record;
pub(super) mod resolve;
pub(super) mod validate;

use toolhost_contract::{RunContext, ToolCall};
use toolhost_ledger::Journal;
use toolhost_telemetry::Laps;

use super::Prepared;

/// One admitted call on its way through the stages.
pub(super) struct Call<'a> {
    /// Who calls, in which run, under which bounds (trusted: never from the arguments).
    pub ctx: &'a RunContext,
    /// The proposal.
    pub call: &'a ToolCall,
    /// Its tool and canonical form, worked out once.
    pub prepared: &'a Prepared,
    /// Where each stage notes its decision; committed with the outcome.
    pub journal: Journal<'a>,
    /// The time each stage took (the `--timings` breakdown).
    pub laps: Laps,
    /// What a human minted for exactly this call, if anything.
    pub token: Option<&'a str>,
}
