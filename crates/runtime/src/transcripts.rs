//! An agent run's transcript in the ledger ([`Runtime::transcripts`]): what was sent to the
//! model and received from it, each entry as its digest and size, or a note for the operator.

use toolhost_contract::canonical::digest_bytes;
use toolhost_ledger::LedgerError;

use super::Runtime;

/// Where a transcript entry goes: the run, the step, and what happened ("model_request",
/// "model_attempt", "tool_result", "run_stopped", …).
pub type TranscriptAt<'a> = (&'a str, u32, &'a str);

/// The transcripts of agent runs, as the agent loop writes them.
pub struct Transcripts<'a> {
    rt: &'a Runtime,
}

impl Runtime {
    /// Agent runs' transcripts.
    pub fn transcripts(&self) -> Transcripts<'_> {
        Transcripts { rt: self }
    }
}

impl Transcripts<'_> {
    /// Append one entry: what was sent or received, recorded as its digest and size only.
    pub fn entry(&self, at: TranscriptAt<'_>, bytes: &[u8]) -> Result<(), LedgerError> {
        self.entry_digested(at, &digest_bytes(bytes), bytes.len() as u64)
    }

    /// [`entry`](Self::entry) for bytes whose digest was already taken (a provider's response,
    /// digested as it streamed in).
    pub fn entry_digested(
        &self,
        (run_id, step, kind): TranscriptAt<'_>,
        digest: &str,
        size: u64,
    ) -> Result<(), LedgerError> {
        self.rt
            .ledger
            .transcript(run_id, step, kind, digest, size, "")
    }

    /// An entry that is only operator text (cut by the ledger).
    pub fn note(
        &self,
        (run_id, step, kind): TranscriptAt<'_>,
        detail: &str,
    ) -> Result<(), LedgerError> {
        self.rt.ledger.transcript(run_id, step, kind, "", 0, detail)
    }
}
