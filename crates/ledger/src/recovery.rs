//! Recovery: calls a previous process left open are closed as `outcome_unknown`, never re-run.

use super::{Ledger, LedgerError};

impl Ledger {
    /// Close every call a previous process left `admitted` or `started` as `outcome_unknown`
    /// (no code, [`OUTCOME_UNKNOWN_MESSAGE`]), with a `recover` event each, and return their
    /// `(run_id, call_id)` in admission order. Such a call is never run again: admitting it
    /// again replays the `outcome_unknown` result.
    ///
    /// Call it at startup, before serving, and only when no other live process writes to this
    /// ledger file: it cannot tell a call that a dead host left open from one that another
    /// host is running right now.
    ///
    /// It reads only the calls admitted since the last recovery left its watermark (the first
    /// call it had to leave open, or the end of the ledger), so a long ledger starts as fast
    /// as a short one.
    pub fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        self.store.recover()
    }
}
