//! What a copy of a running call learns when it asks again: the call it waits on has no
//! outcome yet, or its answer (the recorded result if the id was admitted for this very call,
//! a refusal if not), or that the call was given up before it was admitted and nothing will
//! ever answer it. The runtime polls [`Ledger::waited`] (`runtime/copies.rs`).

use super::journal::{claim_key, Held, OpenCall};
use super::owner::{asked_by, reused, same_caller};
use super::{Inline, Ledger, LedgerError};

/// What a copy of a running call learns when it asks again ([`Ledger::waited`]).
#[derive(Debug)]
pub enum Waited {
    /// The call it waits on has no outcome yet (or the ledger could not be read now).
    Pending,
    /// Its answer: the recorded result ([`Held::Replay`]), or a refusal (`Reused`, `Foreign`).
    Answered(Held),
    /// Nothing holds the id and the ledger does not know it: the call it waited on was given
    /// up before it was admitted (its future dropped), so nothing of it ran to an outcome and
    /// the copy may be opened again.
    Vanished,
}

impl Ledger {
    /// What a copy told [`Held::InFlight`] learns by asking again (see [`Waited`]).
    ///
    /// The outcome is this copy's answer only if the ledger admitted the id for this very
    /// call. The proposal a copy waited on may not be the one admitted: a claim with the
    /// copy's arguments, taken after another call was admitted with the same id, is itself a
    /// conflict. Then the copy is refused as that claim is: its own id reused (`Reused`, the
    /// conflict noted on the recorded call) or another caller's (`Foreign`, who asked noted).
    pub async fn waited(&self, call: &OpenCall, inline: Inline) -> Waited {
        let key = &call.key;
        // The claims first, then the ledger: a claim whose call is admitted ends only after the
        // admission is committed, so an id that no claim holds and that the ledger then does
        // not know has no call left to answer it.
        let claimed = self.claims.holds(&claim_key(key));
        let result = match self.outcome(&key.run_id, &key.call_id) {
            Ok(Some(result)) => result,
            Err(LedgerError::UnknownCall { .. }) if !claimed => return Waited::Vanished,
            Ok(None) | Err(_) => return Waited::Pending,
        };
        let (held, note) = match self.admitted_digest(&key.run_id, &key.call_id).await {
            Ok(Some(theirs)) if theirs == key.args_digest => {
                return Waited::Answered(Held::Replay(Box::new(result)))
            }
            Ok(Some(theirs)) if same_caller(&theirs, &key.args_digest) => (
                Held::Reused,
                reused(&key.tool, &key.args_digest, key.args_size),
            ),
            Err(_) => return Waited::Pending,
            // Another caller's id, or one gone since: refused without answering anything of it.
            Ok(_) => (
                Held::Foreign,
                asked_by(&call.caller.principal, &call.caller.tenant, &key.tool),
            ),
        };
        self.append_noted(key, vec![note], inline).await;
        Waited::Answered(held)
    }
}
