//! What the front doors write to the ledger or ask of it besides calls ([`Runtime::transcribe`],
//! [`Runtime::ledger_reads`]): an agent run's transcript, and whether the ledger answers.

use toolhost_contract::canonical::digest_bytes;
use toolhost_ledger::LedgerError;

use super::Runtime;

/// The run and call id `/readyz` reads: never admitted, so the read is answered "unknown call".
const READY_PROBE: &str = "toolhost-readyz-probe";

/// Where a transcript entry goes: the run, the step, and what happened ("model_request",
/// "model_attempt", "tool_result", "run_stopped", …).
pub type TranscriptAt<'a> = (&'a str, u32, &'a str);

impl Runtime {
    /// Append one entry to an agent run's transcript: what was sent or received, recorded as
    /// its digest and size only.
    pub fn transcribe(&self, at: TranscriptAt<'_>, bytes: &[u8]) -> Result<(), LedgerError> {
        self.transcribe_digest(at, &digest_bytes(bytes), bytes.len() as u64)
    }

    /// [`transcribe`](Self::transcribe) for bytes whose digest was already taken (a provider's
    /// response, digested as it streamed in).
    pub fn transcribe_digest(
        &self,
        (run_id, step, kind): TranscriptAt<'_>,
        digest: &str,
        size: u64,
    ) -> Result<(), LedgerError> {
        self.ledger.transcript(run_id, step, kind, digest, size, "")
    }

    /// A transcript entry that is only operator text (cut by the ledger).
    pub fn transcribe_note(&self, at: TranscriptAt<'_>, detail: &str) -> Result<(), LedgerError> {
        let (run_id, step, kind) = at;
        self.ledger.transcript(run_id, step, kind, "", 0, detail)
    }

    /// Whether the ledger answers a read now: what `/readyz` asks.
    pub fn ledger_reads(&self) -> Result<(), LedgerError> {
        match self.ledger.outcome(READY_PROBE, READY_PROBE) {
            Ok(_) | Err(LedgerError::UnknownCall { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
