//! The claims of this process on call ids it found new and runs before admitting them (late
//! admission, `journal.rs`).
//!
//! A claim stops a duplicate in this process while its call is not admitted yet: the same
//! call waits for the original's outcome, the same id with other arguments is a conflict, and
//! another caller's proposal is refused; the last two are noted on the claim and committed
//! with the call. A claim holds only what duplicates need and note: the call's own decisions
//! live in its journal, so a stage decision takes no lock.

use std::collections::HashMap;
use std::sync::Mutex;

use super::events::PendingEvent;
use super::owner::{asked_by, reused, same_caller};

/// The key of a claim: run id and call id.
pub(super) type ClaimKey = (String, String);

/// One claim on an id.
#[derive(Debug)]
struct Claim {
    /// The admission digest of the call that holds it.
    digest: String,
    /// The ledger said it does not know the id: this claim runs.
    found_new: bool,
    /// Decisions duplicates made on this id while the claim held it, in order.
    noted: Vec<PendingEvent>,
}

/// What a proposal found when it tried to claim an id.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Claiming {
    /// Claimed: the proposal runs, admitted with its first commit.
    Claimed,
    /// The same call holds the id: wait for its outcome.
    Running,
    /// The caller's own id, held by a call with other arguments (noted on it).
    Reused,
    /// Another caller's id (who asked is noted on it).
    Foreign,
    /// A proposal with other arguments holds the id and the ledger has not said yet whether it
    /// knows the id: the ledger decides.
    Unsettled,
}

/// A proposal, as a claim sees it.
pub(super) struct Asker<'a> {
    pub key: &'a ClaimKey,
    pub digest: &'a str,
    pub size: u64,
    pub tool: &'a str,
    pub principal: &'a str,
    pub tenant: &'a str,
}

/// The claims of this process, behind one lock that no commit and no read is awaited under.
#[derive(Debug, Default)]
pub(super) struct Claims {
    map: Mutex<HashMap<ClaimKey, Claim>>,
}

impl Claims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClaimKey, Claim>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claim `asker.key`, or say who holds it. Unless `unsettled_is_conflict`, another
    /// proposal with other arguments whose claim the ledger has not answered yet is
    /// [`Claiming::Unsettled`]; with it, a conflict.
    pub(super) fn claim(&self, asker: &Asker<'_>, unsettled_is_conflict: bool) -> Claiming {
        let mut map = self.lock();
        let Some(claim) = map.get_mut(asker.key) else {
            map.insert(
                asker.key.clone(),
                Claim {
                    digest: asker.digest.to_owned(),
                    found_new: false,
                    noted: Vec::new(),
                },
            );
            return Claiming::Claimed;
        };
        if !same_caller(&claim.digest, asker.digest) {
            // Another caller's call: refused whatever its arguments.
            claim
                .noted
                .push(asked_by(asker.principal, asker.tenant, asker.tool));
            return Claiming::Foreign;
        }
        if claim.digest == asker.digest {
            return Claiming::Running;
        }
        if !claim.found_new && !unsettled_is_conflict {
            return Claiming::Unsettled;
        }
        claim
            .noted
            .push(reused(asker.tool, asker.digest, asker.size));
        Claiming::Reused
    }

    /// The ledger said it does not know `key`: the claim on it runs.
    pub(super) fn found_new(&self, key: &ClaimKey) {
        if let Some(claim) = self.lock().get_mut(key) {
            claim.found_new = true;
        }
    }

    /// The decisions noted on `key`'s claim so far; the claim stays.
    pub(super) fn take_noted(&self, key: &ClaimKey) -> Vec<PendingEvent> {
        self.lock()
            .get_mut(key)
            .map(|claim| std::mem::take(&mut claim.noted))
            .unwrap_or_default()
    }

    /// End `key`'s claim, returning what was noted on it since the last take.
    pub(super) fn release(&self, key: &ClaimKey) -> Vec<PendingEvent> {
        self.lock()
            .remove(key)
            .map(|claim| claim.noted)
            .unwrap_or_default()
    }

    /// Whether a claim holds `key` now.
    pub(super) fn holds(&self, key: &ClaimKey) -> bool {
        self.lock().contains_key(key)
    }

    /// Claims held now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
