//! The audit trail: stage decisions, optional argument content, approval requests and the
//! call listing (`events.rs` has the values and how they are stored), and the check of the
//! hash chain over all of it.

use serde_json::Value;

use super::chain;
use super::events::{CallRecord, PendingEvent};
use super::write::{done, Write};
use super::{Ledger, LedgerError};

impl Ledger {
    /// Append one stage decision to an admitted call's audit trail (`UnknownCall` otherwise).
    /// `detail` is operator text — never argument content unless content recording is on.
    pub fn event(
        &self,
        run_id: &str,
        call_id: &str,
        stage: &str,
        decision: &str,
        detail: &str,
    ) -> Result<(), LedgerError> {
        done(self.writer.write_blocking(Write::Event {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            event: PendingEvent::now(stage, decision, detail),
        }))
    }

    /// Store an admitted call's arguments, only if the ledger was opened with
    /// [`record_content`](super::LedgerOptions::record_content); otherwise do nothing. Returns
    /// whether they were stored. The first recording of a call's arguments is kept.
    pub fn record_content(
        &self,
        run_id: &str,
        call_id: &str,
        arguments: &Value,
    ) -> Result<bool, LedgerError> {
        if !self.options.record_content {
            return Ok(false);
        }
        let json = serde_json::to_string(arguments)?;
        self.store.record_content(run_id, call_id, json)
    }

    /// The first call that asked a human to approve `digest` (its `approve` stage decided
    /// `approval_required` with that digest), as `(run_id, call_id)`.
    pub fn approval_request(&self, digest: &str) -> Result<Option<(String, String)>, LedgerError> {
        self.store.approval_request(digest)
    }

    /// Every call (of one run, or of all), in admission order, each with its events in order.
    pub fn calls(&self, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
        self.store.calls(run)
    }

    /// Walk every chain of the ledger and match every chained row against it
    /// (`toolhost ledger verify`). Reads only what is committed: writes still in the group
    /// writer's queue are not there yet.
    pub fn verify(&self) -> Result<chain::Report, LedgerError> {
        Ok(chain::verify(&self.store.chain_evidence()?))
    }
}
