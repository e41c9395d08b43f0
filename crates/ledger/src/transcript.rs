//! An agent run's transcript: per model step, what was sent and received (digest and size,
//! never content), each attempt, each tool result, and why the run stopped (`detail`: operator
//! text). `toolhost ledger --run RUN` shows it beside the run's calls.

use super::error::check_key;
use super::store::TranscriptEntry;
use super::{Ledger, LedgerError};
use toolhost_contract::bounds::clip;

/// Bytes of a transcript entry's `detail` kept.
pub const MAX_TRANSCRIPT_DETAIL: usize = 1024;

impl Ledger {
    /// Append one entry of an agent run's transcript (`kind` e.g. "model_request",
    /// "model_attempt", "run_stopped"): a digest and size of what was sent or received, and
    /// operator text in `detail` (cut at [`MAX_TRANSCRIPT_DETAIL`]).
    pub fn transcript(
        &self,
        run_id: &str,
        step: u32,
        kind: &str,
        digest: &str,
        size: u64,
        detail: &str,
    ) -> Result<(), LedgerError> {
        check_key(run_id, "", "")?;
        let detail = clip(detail, MAX_TRANSCRIPT_DETAIL);
        self.store
            .transcript(run_id, step, kind, digest, size, detail)
    }

    /// The transcript of a run, by step and then append order.
    pub fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        self.store.transcript_entries(run_id)
    }
}
