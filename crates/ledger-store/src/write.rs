//! The ledger's backend interface: the writes a call makes, as owned data, and the one
//! operation a backend provides for them — apply a group of writes in one transaction.
//!
//! Every write of the call path (admission, the start mark, stage decisions, the outcome) is a
//! [`Write`]. The group writer (`group.rs`) hands whatever writes arrived while the previous
//! commit ran to [`Backend::apply`] together; a backend applies each in order, keeps each
//! write's own failure to that write (as if it had run in a transaction of its own), and commits
//! once. SQLite (`sqlite/backend.rs`) is the embedded backend; a server database implements the same
//! trait with one round trip per group.

use super::events::{event_lines, pending_lines, PendingEvent};
use super::outcome::Outcome;
use super::LedgerError;
use toolhost_contract::{Decision, Stage, ToolResult};

/// What admission decided for a `(run_id, call_id)`.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// A new call: run it. `seq` is its admission order across the ledger (from 1, increasing;
    /// PostgreSQL's sequence may skip values).
    New { seq: i64 },
    /// The same call (same tool, same argument digest) already ended: return this recorded
    /// result exactly, and do not run it again. Boxed: a result is large, and admissions are
    /// mostly `New`.
    Replay(Box<ToolResult>),
    /// The same call was admitted and has no outcome yet: it is running (or a host stopped
    /// while running it and `recover` has not closed it yet). Do not run it again.
    InFlight,
    /// The id was reused with another tool or other arguments. The caller answers this
    /// proposal with `failed`/`duplicate_call_id` **without calling `finish`**: the id's record
    /// belongs to the original call, which is left unchanged. The ledger has already appended
    /// an `admit`/`conflict` event to the original call.
    Conflict,
}

/// What a call is admitted under: its id and the caller's digest of `{tool, arguments}`.
#[derive(Debug, Clone, Default)]
pub struct CallKey {
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub args_digest: String,
    pub args_size: u64,
    /// The SHA-256 of the bytes of the component the tool came from (`sha256:…`), when the
    /// call names a loaded tool.
    pub component_digest: Option<String>,
    /// The digest of the tool's definition as the model saw it (`sha256:…`), likewise.
    pub definition_digest: Option<String>,
}

/// One write of the call path.
#[derive(Debug, Clone)]
pub enum Write {
    /// Admit a call before its stages run ([`Applied::Admission`]).
    Admit(CallKey),
    /// Admit a call whose first stages already ran, with their decisions, and in the same
    /// write mark it started (`finished: None`) or give it its outcome. If the id was admitted
    /// meanwhile, only the admission decision is appended and that decision is returned.
    AdmitLate {
        key: CallKey,
        /// When the call was found new (unix milliseconds): its admission time.
        at_ms: i64,
        events: Vec<PendingEvent>,
        /// The arguments' JSON, when the ledger records content.
        content: Option<String>,
        finished: Option<Outcome>,
    },
    /// Mark an admitted call started, with the decisions made since its admission.
    MarkStarted {
        run_id: String,
        call_id: String,
        events: Vec<PendingEvent>,
    },
    /// The one terminal outcome of an admitted call, after `events`.
    Finish {
        run_id: String,
        call_id: String,
        outcome: Outcome,
        events: Vec<PendingEvent>,
    },
    /// One stage decision appended to an admitted call.
    Event {
        run_id: String,
        call_id: String,
        event: PendingEvent,
    },
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The decision of an admission ([`Write::Admit`], [`Write::AdmitLate`]).
    Admission(Admission),
    /// The write is committed.
    Done,
}

/// Where the ledger's writes go.
pub trait Backend: Send + 'static {
    /// Apply `writes` in order in one transaction and commit it. `Ok` holds one result per
    /// write: a write that failed (`AlreadyFinished`, `UnknownCall`, ...) changed nothing, and
    /// the others are committed. `Err` means the transaction as a whole failed: nothing of the
    /// group is committed, and every write in it fails.
    fn apply(&mut self, writes: &[Write])
        -> Result<Vec<Result<Applied, LedgerError>>, LedgerError>;

    /// Whether [`Backend::apply`] may run on any thread, an async worker's included (a caller
    /// that finds the ledger idle commits inline, `group.rs`). `false` keeps every commit on
    /// the writer's own thread: a backend that drives its own async runtime cannot block on
    /// it from inside another.
    fn commits_anywhere(&self) -> bool {
        true
    }

    /// Whether `(run_id, call_id)` was ever admitted, answered on the writer's own connection
    /// while it is idle (`None`: ask the store). SQLite's writer connection has the pages
    /// the question reads in its cache — its own commits do not invalidate them, where every
    /// commit makes the store's connection read them again.
    fn is_admitted(&mut self, _run_id: &str, _call_id: &str) -> Option<Result<bool, LedgerError>> {
        None
    }
}

/// The admission decision a write answered with.
pub fn decided(answer: Result<Applied, LedgerError>) -> Result<Admission, LedgerError> {
    match answer? {
        Applied::Admission(a) => Ok(a),
        Applied::Done => Err(LedgerError::Commit(
            "an admission was answered without a decision".into(),
        )),
    }
}

/// A write that decides nothing.
pub fn done(answer: Result<Applied, LedgerError>) -> Result<(), LedgerError> {
    answer.map(|_| ())
}

/// `outcome` must be the outcome of `call_id`: replay returns it as stored.
pub fn check_result_id(run_id: &str, call_id: &str, outcome: &Outcome) -> Result<(), LedgerError> {
    if outcome.call_id == call_id {
        return Ok(());
    }
    Err(LedgerError::ResultMismatch {
        run_id: run_id.to_owned(),
        call_id: call_id.to_owned(),
        result_call_id: outcome.call_id.clone(),
    })
}

/// The event lines a `Finish` write appends: `events`, then the outcome's `record` event at
/// `now` (after checking the outcome is this call's).
pub fn finish_lines(
    run_id: &str,
    call_id: &str,
    outcome: &Outcome,
    events: &[PendingEvent],
    now: i64,
) -> Result<String, LedgerError> {
    check_result_id(run_id, call_id, outcome)?;
    let mut lines = pending_lines(events)?;
    lines.push_str(&outcome.record_line(now)?);
    Ok(lines)
}

/// The event lines of a new call: its `admit` event, then `events`.
pub fn admission_lines(
    key: &CallKey,
    at_ms: i64,
    events: &[PendingEvent],
) -> Result<String, LedgerError> {
    let detail = format!(
        "arguments sha256 {}, {} bytes",
        key.args_digest, key.args_size
    );
    let mut lines = event_lines([(
        at_ms,
        Stage::Admit.as_str(),
        Decision::New.as_str(),
        detail.as_str(),
    )])?;
    lines.push_str(&pending_lines(events)?);
    Ok(lines)
}
