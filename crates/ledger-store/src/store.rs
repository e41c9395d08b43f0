//! [`Store`]: everything the ledger stores and reads outside the call path's group writes, as
//! one interface with one implementation per backend (`sqlite/`, `postgres/`).
//!
//! The facade ([`Ledger`](super::Ledger)) holds a `Box<dyn Store>` and never names a driver;
//! each backend also opens the call path's writer ([`Backend`]), so one value per backend
//! carries the whole ledger.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use super::chain::Evidence;
use super::events::CallRecord;
use super::limits::Budget;
use super::task_record::{NewTask, TaskCaps, TaskCreated, TaskRecord};
use super::verdicts::{Settled, UnknownFilter};
use super::write::Backend;
use super::LedgerError;
use toolhost_contract::{Budgets, ToolResult};

/// How a ledger is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerOptions {
    /// `synchronous=FULL`: fsync the WAL on every commit (survives power loss). The default,
    /// `NORMAL`, survives a crash of the process but may lose the last commits on power loss.
    pub synchronous_full: bool,
    /// Store argument content ([`Ledger::record_content`]). Off by default: only digests and
    /// sizes are recorded.
    pub record_content: bool,
}

/// What spending a token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSpend {
    /// Spent now, for the first time.
    Spent,
    /// Spent before (by this or any process on this ledger).
    AlreadySpent,
    /// Past its expiry by the ledger's clock (PostgreSQL): not spent.
    Expired,
}

/// One model step of an agent run, by digest and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub run_id: String,
    pub step: u32,
    pub kind: String,
    pub digest: String,
    pub size: u64,
    pub at_ms: i64,
    /// What else the entry says (an attempt's outcome, why the run stopped); operator text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A backend's answer that an async caller awaits.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, LedgerError>> + Send + 'a>>;

/// The answer of a backend that has it at once, as a [`Pending`].
pub fn ready<'a, T: Send + 'a>(answer: Result<T, LedgerError>) -> Pending<'a, T> {
    Box::pin(std::future::ready(answer))
}

/// Everything a backend stores and reads besides the call path's writes. Every method is
/// callable from any thread; the `_async` ones do not block an async worker on a round trip.
pub trait Store: Send + Sync {
    /// The call path's writer: its own connection, which the group writer owns.
    fn writer(&self) -> Result<Box<dyn Backend>, LedgerError>;

    /// The lease owner id of this host: the `owner` of the calls it admits.
    fn owner(&self) -> &str;

    /// The database file (`None` for a server).
    fn path(&self) -> Option<&Path>;

    /// Whether `(run_id, call_id)` was ever admitted.
    fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError>;

    /// [`Store::is_admitted`] for an async caller.
    fn is_admitted_async<'a>(&'a self, run_id: &'a str, call_id: &'a str) -> Pending<'a, bool>;

    /// The admission digest of `(run_id, call_id)`, if it was admitted.
    fn admitted_digest<'a>(
        &'a self,
        run_id: &'a str,
        call_id: &'a str,
    ) -> Pending<'a, Option<String>>;

    /// The recorded terminal result of a call (`UnknownCall` if never admitted).
    fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError>;

    /// Store an admitted call's arguments (JSON) unless some are stored: whether they were.
    fn record_content(
        &self,
        run_id: &str,
        call_id: &str,
        json: String,
    ) -> Result<bool, LedgerError>;

    /// The first call that asked a human to approve `digest`.
    fn approval_request(&self, digest: &str) -> Result<Option<(String, String)>, LedgerError>;

    /// Every call (of one run, or of all) in admission order, with its events.
    fn calls(&self, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError>;

    /// One call as the listing shows it, if it was admitted.
    fn call(&self, run_id: &str, call_id: &str) -> Result<Option<CallRecord>, LedgerError>;

    /// The calls that ended `outcome_unknown` that `filter` selects, oldest first.
    fn unknown_calls(&self, filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError>;

    /// Store `settled` as the one reconciliation of a call that ended `outcome_unknown`, with
    /// its `reconcile` event, in one transaction: `AlreadyReconciled` (nothing written) if it
    /// has one, `NotOutcomeUnknown` if it did not end so, `UnknownCall` if never admitted.
    fn reconcile(&self, run_id: &str, call_id: &str, settled: &Settled) -> Result<(), LedgerError>;

    /// Record `task` (its row keeping `content` as its arguments), run by this host, created
    /// at `now` (unix milliseconds), unless a task with its id exists or its caller's open
    /// tasks not expired by `now` would pass `caps`; checked and recorded atomically for every
    /// host of the ledger.
    fn create_task(
        &self,
        task: &NewTask,
        content: Option<&str>,
        caps: &TaskCaps,
        now: i64,
    ) -> Result<TaskCreated, LedgerError>;

    /// Close `task_id`: it stops counting against its caller's caps and its row forgets the
    /// arguments.
    fn close_task(&self, task_id: &str) -> Result<(), LedgerError>;

    /// The task `task_id` with its call's state, unless it is missing or expired by `now`.
    fn task(&self, task_id: &str, now: i64) -> Result<Option<TaskRecord>, LedgerError>;

    /// The tasks of run `run_id` not expired by `now`, oldest first.
    fn tasks_of_run(&self, run_id: &str, now: i64) -> Result<Vec<TaskRecord>, LedgerError>;

    /// At most `limit` open tasks, not cancelled nor expired by `now`, that keep their
    /// arguments and whose call has finished (a call that waits for approval), oldest first.
    fn waiting_tasks(&self, now: i64, limit: u32) -> Result<Vec<TaskRecord>, LedgerError>;

    /// Mark `task_id` cancelled at `now` unless it is marked already.
    fn cancel_task(&self, task_id: &str, now: i64) -> Result<(), LedgerError>;

    /// Point `task_id` from call `from` to call `to`, run by this host, at `now`: whether it
    /// was still on `from`.
    fn retarget_task(
        &self,
        task_id: &str,
        from: &str,
        to: &str,
        now: i64,
    ) -> Result<bool, LedgerError>;

    /// This host's tasks marked cancelled whose calls have no outcome yet.
    fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError>;

    /// Delete the tasks expired by `now`: how many.
    fn prune_tasks(&self, now: i64) -> Result<u64, LedgerError>;

    /// Spend a single-use token (see `tokens.rs`).
    fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError>;

    /// Forget spent tokens that expired before `before_unix`: how many.
    fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError>;

    /// Append one transcript entry, at the backend's now (`detail` already cut to its bound).
    fn transcript(
        &self,
        run_id: &str,
        step: u32,
        kind: &str,
        digest: &str,
        size: u64,
        detail: &str,
    ) -> Result<(), LedgerError>;

    /// A run's transcript, by step and then append order.
    fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError>;

    /// Close the calls dead hosts left open as `outcome_unknown`: their ids, in admission order.
    fn recover(&self) -> Result<Vec<(String, String)>, LedgerError>;

    /// Count one call of `tool` in `run` against `budgets`, for every host of this ledger:
    /// `None` when counted, else the budget it would break (nothing counted).
    fn take_budget(
        &self,
        run: &str,
        tool: &str,
        budgets: &Budgets,
    ) -> Result<Option<Budget>, LedgerError>;

    /// Take one call from `principal`'s token bucket (`rate` per second, at most `burst`), for
    /// every host of this ledger: `false` when it is empty.
    fn take_rate(&self, principal: &str, rate: f64, burst: f64) -> Result<bool, LedgerError>;

    /// Every chain link, chain head and chained row, for [`chain::verify`](crate::chain::verify).
    fn chain_evidence(&self) -> Result<Evidence, LedgerError>;

    /// The links and chained rows of one call (its row and its reconciliation), for a
    /// receipt; no heads.
    fn chain_of_call(&self, run_id: &str, call_id: &str) -> Result<Evidence, LedgerError>;
}
