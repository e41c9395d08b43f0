//! What the operator's console reads of the ledger ([`Runtime::evidence`]): the calls of a run
//! as a timeline, and a finished call's signed receipt. A front door reaches the ledger only
//! through the runtime; these reads are for an operator, never for a caller.

pub use toolhost_ledger::{CallRecord, Envelope, EventRecord, ReceiptError, ReceiptKey};

use super::Runtime;
use toolhost_ledger::LedgerError;

/// The operator's reads of a [`Runtime`]'s ledger. Every method may block: call it off the
/// async workers.
pub struct Evidence<'a> {
    rt: &'a Runtime,
}

impl Runtime {
    /// The ledger's record of runs and calls, for an operator.
    pub fn evidence(&self) -> Evidence<'_> {
        Evidence { rt: self }
    }
}

impl Evidence<'_> {
    /// Every call of run `run_id` in admission order, with its events.
    pub fn run(&self, run_id: &str) -> Result<Vec<CallRecord>, LedgerError> {
        self.rt.ledger.calls(Some(run_id))
    }

    /// The signed receipt of the finished call `call_id` of run `run_id`, issued now.
    pub fn receipt(
        &self,
        run_id: &str,
        call_id: &str,
        key: &ReceiptKey,
    ) -> Result<Envelope, ReceiptError> {
        let now = toolhost_ledger::now_ms();
        self.rt.ledger.receipt(run_id, call_id, key, now)
    }
}
