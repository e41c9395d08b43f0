//! The call journal: what the ledger keeps of one call between its commits.
//!
//! [`Ledger::open_call`] admits a call — or, for most calls, claims its id in this process and
//! admits it with its first commit (late admission, below) — and returns the call's
//! [`Journal`]. The runtime passes the journal through the stages; each stage's decision is
//! noted on it ([`Journal::note`]), and the journal commits them with the call's state
//! changes: the start mark ([`Journal::start`]) and the one terminal outcome
//! ([`Journal::finish`]). The runtime decides; the journal records. What another process or
//! a duplicate did to the id comes back as [`Held`], for the runtime to answer.
//!
//! # Late admission
//!
//! A call the ledger has never seen (a read, not a commit), and that no approval is involved
//! in, runs its first stages before it is admitted; the admission is committed with the start
//! mark, or with the outcome of a call that ends before it starts — one commit per call fewer
//! (see `docs/benchmarks-history.md`), with the same record in the ledger. Exactly once still
//! holds: a claim (`claims.rs`) stops a duplicate in this process — the claim is taken before
//! the ledger is asked whether the id is known, and the question (a round trip to a PostgreSQL
//! ledger) is awaited outside the claims' lock — and the admission itself, in one
//! transaction, finds an id another process admitted meanwhile; then this call does not run
//! and records nothing of its own.
//!
//! A claim cannot be left behind: dropping a journal (its call finished, or its future was
//! dropped) releases the claim it holds. Nor by a call the ledger already knows: its claim is
//! released at once, and a conflict a duplicate noted on it meanwhile is appended to the known
//! call. What duplicates noted on a claim is committed with the call, in time order.
//!
//! # Owed outcomes
//!
//! An admitted call whose outcome the ledger cannot take (a database outage) is owed
//! (`owed.rs`): [`Journal::finish`] keeps it, and the next finish that commits pays it.

use std::mem;

use super::claims::{Asker, ClaimKey, Claiming};
use super::codec::now_ms;
use super::events::PendingEvent;
use super::group::Inline;
use super::outcome::Outcome;
use super::owner::{asked_by, same_caller};
use super::write::{Admission, Applied, CallKey, Write};
use super::{Ledger, LedgerError};
use toolhost_contract::{Caller, Stage, ToolResult};

/// A call the runtime asks the ledger to open.
#[derive(Debug, Clone, Default)]
pub struct OpenCall {
    /// Its id and admission digest (which binds the caller, `owner.rs`).
    pub key: CallKey,
    /// Who asks (the trusted caller), named in the audit note when the id is another caller's.
    pub caller: Caller,
    /// Whether the call may be admitted with its first commit: the runtime says no for a call
    /// that may ask a human, so that a duplicate cannot ask a second time.
    pub late: bool,
}

/// Why a call does not run, or ends with another call's answer: the id is held, or the
/// ledger failed.
#[derive(Debug)]
pub enum Held {
    /// The same call ended before: its recorded result, returned as is.
    Replay(Box<ToolResult>),
    /// The same call is running (in this process, or another): wait for its outcome.
    InFlight,
    /// The caller's own id, used for another call (`duplicate_call_id`).
    Reused,
    /// Another caller's id (refused as authorization refuses; who asked is noted on it).
    Foreign,
    /// The ledger could not be read or written: nothing of this call is recorded.
    Fault(LedgerError),
}

/// Why [`Journal::finish`] did not record the call's outcome.
#[derive(Debug)]
pub enum Unfinished {
    /// Another process admitted this id first: nothing of this call is recorded.
    Lost(Held),
    /// The ledger did not take the outcome. If the call was admitted, its outcome is owed.
    Unrecorded(LedgerError),
}

/// One call between its commits (see the module docs).
#[must_use = "a journal records nothing until it is finished"]
pub struct Journal<'l> {
    ledger: &'l Ledger,
    call: OpenCall,
    /// Stage decisions not committed yet, in order.
    events: Vec<PendingEvent>,
    /// Set while the call is not admitted: it is admitted with its next commit.
    late: Option<Late>,
    /// The claim on its id this journal holds (`claims.rs`), if any.
    claim: Option<ClaimKey>,
    /// When a call whose start is not committed (a `read`) started executing.
    started_at_ms: Option<i64>,
    /// Another process owns this id: nothing of this call is recorded.
    settled: bool,
}

/// A call found new and claimed, to be admitted with its next commit.
#[derive(Debug)]
struct Late {
    /// When it was claimed (unix milliseconds): its admission time.
    at_ms: i64,
    /// The validated arguments' JSON, when the ledger records content.
    content: Option<String>,
}

impl Ledger {
    /// Open a call: admit it (or claim it, to admit it late), or say why it must not run.
    pub async fn open_call(&self, call: OpenCall, inline: Inline) -> Result<Journal<'_>, Held> {
        let call = if call.late {
            match self.open_late(call, inline).await {
                Opened::Journal(journal) => return Ok(journal),
                Opened::Held(held) => return Err(held),
                Opened::Ordinary(call) => call,
            }
        } else {
            call
        };
        match self.admit_async(call.key.clone(), inline).await {
            Ok(Admission::New { .. }) => Ok(Journal::new(self, call, None)),
            Ok(other) => Err(self.held(&call, other, inline).await),
            Err(e) => Err(Held::Fault(e)),
        }
    }

    /// Claim the call's id and ask the ledger whether it knows it.
    pub(super) async fn open_late(&self, call: OpenCall, inline: Inline) -> Opened<'_> {
        let journal = match self.claim(call, false) {
            Ok(journal) => journal,
            Err(refused) => {
                let (call, claiming) = *refused;
                if claiming != Claiming::Unsettled {
                    return Opened::Held(claiming_held(claiming));
                }
                // Another proposal with other arguments holds a claim the ledger has not
                // answered yet: the ledger decides. If it knows the id (a call recorded
                // earlier), this one is admitted the ordinary way (a replay, or a conflict
                // with the recorded call); if not, the other claim will run, and this one is
                // a conflict with it.
                let (run, id) = (&call.key.run_id, &call.key.call_id);
                match self.is_admitted_async(run, id, inline).await {
                    Ok(true) => return Opened::Ordinary(call),
                    Ok(false) => match self.claim(call, true) {
                        Ok(journal) => journal,
                        Err(refused) => return Opened::Held(claiming_held(refused.1)),
                    },
                    Err(e) => return Opened::Held(Held::Fault(e)),
                }
            }
        };
        // Claimed before the ledger is asked, and not under the claims' lock while it is: a
        // duplicate arriving meanwhile waits for this call.
        let key = &journal.call.key;
        let known = self
            .is_admitted_async(&key.run_id, &key.call_id, inline)
            .await;
        self.settle(journal, known, inline).await
    }

    /// Claim the call's id in this process: its journal (dropping it releases the claim), or
    /// who holds the id. Unless `unsettled_is_conflict`, another proposal's claim the ledger
    /// has not answered yet is [`Claiming::Unsettled`].
    pub(super) fn claim(
        &self,
        call: OpenCall,
        unsettled_is_conflict: bool,
    ) -> Result<Journal<'_>, Box<(OpenCall, Claiming)>> {
        let key = claim_key(&call.key);
        match self
            .claims
            .claim(&asker(&call, &key), unsettled_is_conflict)
        {
            Claiming::Claimed => Ok(Journal::new(self, call, Some(key))),
            other => Err(Box::new((call, other))),
        }
    }

    /// What a claimed call becomes once the ledger said whether it knows the id.
    pub(super) async fn settle<'l>(
        &'l self,
        mut journal: Journal<'l>,
        known: Result<bool, LedgerError>,
        inline: Inline,
    ) -> Opened<'l> {
        match known {
            Ok(false) => {
                if let Some(key) = &journal.claim {
                    self.claims.found_new(key);
                }
                Opened::Journal(journal)
            }
            Ok(true) => {
                // Known to the ledger: admitted the ordinary way, which commits nothing of
                // this claim's. What a duplicate noted meanwhile (a conflict) is appended to
                // the known call now — kept in the claim, it would never be committed nor
                // freed, and a client repeating the race would grow the host's memory.
                let noted = journal.release_claim();
                let call = mem::take(&mut journal.call);
                self.append_noted(&call.key, noted, inline).await;
                Opened::Ordinary(call)
            }
            Err(e) => {
                // Nothing can be recorded while the ledger fails: the noted decisions go with
                // the claim (the duplicate that noted them has had its answer).
                journal.release_claim();
                Opened::Held(Held::Fault(e))
            }
        }
    }

    /// What an admission that is not `New` means for `call`.
    async fn held(&self, call: &OpenCall, admission: Admission, inline: Inline) -> Held {
        match admission {
            Admission::Replay(recorded) => Held::Replay(recorded),
            Admission::InFlight => Held::InFlight,
            Admission::New { .. } => Held::Reused,
            Admission::Conflict => self.conflict(call, inline).await,
        }
    }

    /// An id the ledger holds with another digest: the caller's own id reused, or another
    /// caller's (noting who asked on it). A rare path: the recorded digest is read again.
    async fn conflict(&self, call: &OpenCall, inline: Inline) -> Held {
        let key = &call.key;
        match self.admitted_digest(&key.run_id, &key.call_id).await {
            Ok(Some(theirs)) if same_caller(&theirs, &key.args_digest) => Held::Reused,
            Ok(Some(_)) => {
                let note = asked_by(&call.caller.principal, &call.caller.tenant, &key.tool);
                self.append_noted(key, vec![note], inline).await;
                Held::Foreign
            }
            // Gone or unreadable: refuse without answering anything of the id.
            Ok(None) | Err(_) => Held::Foreign,
        }
    }

    /// Append decisions a duplicate noted on a claim, after the claim ended, to the call the
    /// ledger knows (one commit each: a rare path).
    pub(super) async fn append_noted(
        &self,
        key: &CallKey,
        noted: Vec<PendingEvent>,
        inline: Inline,
    ) {
        for event in noted {
            let write = Write::Event {
                run_id: key.run_id.clone(),
                call_id: key.call_id.clone(),
                event,
            };
            // The audit note of a refused duplicate; the call's own record does not hang on it.
            let _ = self.commit(write, inline).await;
        }
    }
}

impl<'l> Journal<'l> {
    /// A journal for `call`; with `claimed`, it holds that claim and admits the call late.
    fn new(ledger: &'l Ledger, call: OpenCall, claimed: Option<ClaimKey>) -> Journal<'l> {
        let late = claimed.as_ref().map(|_| Late {
            at_ms: now_ms(),
            content: None,
        });
        Journal {
            ledger,
            claim: claimed,
            call,
            events: Vec::new(),
            late,
            started_at_ms: None,
            settled: false,
        }
    }

    /// Note a stage's decision, for the call's next commit.
    pub fn note(&mut self, stage: Stage, decision: &str, detail: &str) {
        self.events
            .push(PendingEvent::now(stage.as_str(), decision, detail));
    }

    /// The arguments passed validation: keep them if the ledger records content — now, or
    /// with the admission of a call admitted late.
    pub fn keep_content(&mut self, arguments: &serde_json::Value) {
        if !self.ledger.options.record_content {
            return;
        }
        match &mut self.late {
            Some(late) => late.content = serde_json::to_string(arguments).ok(),
            None => {
                let key = &self.call.key;
                let _ = self
                    .ledger
                    .record_content(&key.run_id, &key.call_id, arguments);
            }
        }
    }

    /// A call that runs without a committed start (a `read`): note when it started, for its
    /// outcome's commit.
    pub fn running(&mut self) {
        self.started_at_ms = Some(now_ms());
    }

    /// Mark the call started, committing its decisions so far — and its admission, if it is
    /// admitted late. `Err` says why the call must not run: another process admitted the same
    /// id first, or the ledger failed; then nothing more of this call is recorded.
    pub async fn start(&mut self, inline: Inline) -> Result<(), Held> {
        let Some(late) = &self.late else {
            let write = Write::MarkStarted {
                run_id: self.call.key.run_id.clone(),
                call_id: self.call.key.call_id.clone(),
                events: mem::take(&mut self.events),
            };
            let _ = self.ledger.commit(write, inline).await;
            return Ok(());
        };
        let (at_ms, content) = (late.at_ms, late.content.clone());
        let write = self.late_write(at_ms, content, None);
        match self.ledger.commit(write, inline).await {
            Ok(Applied::Admission(Admission::New { .. }) | Applied::Done) => {
                // Admitted: the claim ends, and what a duplicate noted meanwhile goes with the
                // call's next commit.
                self.late = None;
                self.events = self.release_claim();
                Ok(())
            }
            Ok(Applied::Admission(other)) => {
                self.give_up();
                Err(self.ledger.held(&self.call, other, inline).await)
            }
            Err(e) => {
                self.give_up();
                Err(Held::Fault(e))
            }
        }
    }

    /// Commit the call's one terminal outcome, `result` (with its admission, if it is admitted
    /// late), then pay what the ledger owes. A call given up at its start records nothing.
    pub async fn finish(mut self, result: &ToolResult, inline: Inline) -> Result<(), Unfinished> {
        let recorded = if self.settled {
            Ok(())
        } else {
            self.commit_outcome(result, inline).await
        };
        if recorded.is_ok() && self.ledger.owes() {
            self.ledger.pay_owed(inline).await;
        }
        recorded
    }

    async fn commit_outcome(
        &mut self,
        result: &ToolResult,
        inline: Inline,
    ) -> Result<(), Unfinished> {
        let outcome = Outcome::of(result)
            .map_err(Unfinished::Unrecorded)?
            .started_at(self.started_at_ms);
        let Some(late) = self.late.take() else {
            let write = Write::Finish {
                run_id: self.call.key.run_id.clone(),
                call_id: self.call.key.call_id.clone(),
                outcome,
                events: mem::take(&mut self.events),
            };
            return match self.ledger.commit(write, inline).await {
                Ok(_) => Ok(()),
                Err(error) => {
                    self.ledger.owe(&self.call.key.run_id, result);
                    Err(Unfinished::Unrecorded(error))
                }
            };
        };
        let write = self.late_write(late.at_ms, late.content, Some(outcome));
        let admitted = self.ledger.commit(write, inline).await;
        // The claim ends here; a decision a duplicate added meanwhile is recorded after.
        let noted = self.release_claim();
        self.ledger
            .append_noted(&self.call.key, noted, inline)
            .await;
        match admitted.map_err(Unfinished::Unrecorded)? {
            Applied::Admission(Admission::New { .. }) | Applied::Done => Ok(()),
            Applied::Admission(other) => Err(Unfinished::Lost(
                self.ledger.held(&self.call, other, inline).await,
            )),
        }
    }

    /// The write that admits a late call with its decisions so far — its own and those
    /// duplicates noted on its claim, in time order — and marks it started or finished.
    fn late_write(
        &mut self,
        at_ms: i64,
        content: Option<String>,
        finished: Option<Outcome>,
    ) -> Write {
        let noted = match &self.claim {
            Some(key) => self.ledger.claims.take_noted(key),
            None => Vec::new(),
        };
        let mut events = mem::take(&mut self.events);
        if !noted.is_empty() {
            events.extend(noted);
            // Stable: decisions made in the same millisecond keep their order.
            events.sort_by_key(|e| e.at_ms);
        }
        Write::AdmitLate {
            key: self.call.key.clone(),
            at_ms,
            events,
            content,
            finished,
        }
    }

    /// Another process owns the id (or the ledger failed at the start): release the claim
    /// and record nothing more.
    fn give_up(&mut self) {
        self.late = None;
        self.events.clear();
        self.release_claim();
        self.settled = true;
    }

    /// End this journal's claim, if it holds one, returning what was noted on it.
    fn release_claim(&mut self) -> Vec<PendingEvent> {
        match self.claim.take() {
            Some(key) => self.ledger.claims.release(&key),
            None => Vec::new(),
        }
    }
}

impl Drop for Journal<'_> {
    fn drop(&mut self) {
        self.release_claim();
    }
}

/// What [`Ledger::open_late`] found.
pub(super) enum Opened<'l> {
    /// Claimed and new: run the stages, admit with the next commit.
    Journal(Journal<'l>),
    /// The id is held (or the ledger failed).
    Held(Held),
    /// Admit the call the ordinary way.
    Ordinary(OpenCall),
}

pub(super) fn claim_key(key: &CallKey) -> ClaimKey {
    (key.run_id.clone(), key.call_id.clone())
}

fn asker<'a>(call: &'a OpenCall, key: &'a ClaimKey) -> Asker<'a> {
    Asker {
        key,
        digest: &call.key.args_digest,
        size: call.key.args_size,
        tool: &call.key.tool,
        principal: &call.caller.principal,
        tenant: &call.caller.tenant,
    }
}

/// What a claim that is not `Claimed` means.
fn claiming_held(claiming: Claiming) -> Held {
    match claiming {
        Claiming::Running => Held::InFlight,
        Claiming::Foreign => Held::Foreign,
        // `Unsettled` is only answered when the ledger has not been asked: as a conflict here.
        Claiming::Reused | Claiming::Unsettled | Claiming::Claimed => Held::Reused,
    }
}
