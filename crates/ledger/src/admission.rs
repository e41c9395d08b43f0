//! Stage 1 and stage 9: admission, the start mark, the one terminal outcome, and recovery.
//!
//! A call's life in its `calls` row: `admitted` → (`started`) → `finished`. The outcome is
//! written by the one statement that sets `finished`, and only where the call is not finished
//! yet, so a call has at most one terminal outcome whatever happens. A call is never admitted twice:
//! a retry with the same arguments replays the recorded outcome (or learns that the call is
//! still running); a retry with other arguments is a conflict and leaves the original alone.

use super::events::PendingEvent;
use super::group::{GroupStats, Inline};
use super::outcome::Outcome;
use super::write::{decided, done, Admission, Applied, CallKey, Write};
use super::{Ledger, LedgerError};
use toolhost_contract::ToolResult;

impl Ledger {
    /// Admit `(run_id, call_id)` in one transaction. See [`Admission`].
    ///
    /// `args_digest` is the caller's digest of the canonical arguments (e.g. [`digest_bytes`]
    /// of their JCS form) and `args_size` the size of those bytes; the ledger never sees the
    /// arguments themselves. The decision is appended to the call's events (stage `admit`), in
    /// the same transaction.
    ///
    /// [`digest_bytes`]: super::digest_bytes
    pub fn admit(
        &self,
        run_id: &str,
        call_id: &str,
        tool: &str,
        args_digest: &str,
        args_size: u64,
    ) -> Result<Admission, LedgerError> {
        let key = CallKey {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            args_digest: args_digest.to_owned(),
            args_size,
            component_digest: None,
            definition_digest: None,
        };
        decided(self.writer.write_blocking(Write::Admit(key)))
    }

    /// [`Ledger::admit`] for an async caller: waits for the group commit without blocking
    /// its worker.
    pub async fn admit_async(
        &self,
        key: CallKey,
        inline: Inline,
    ) -> Result<Admission, LedgerError> {
        decided(self.writer.write(Write::Admit(key), inline).await)
    }

    /// Whether `(run_id, call_id)` was admitted. Read-only: a call's journal asks before it
    /// admits the call late (`journal.rs`; [`Ledger::admit_started`] is the same admission).
    pub fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        self.store.is_admitted(run_id, call_id)
    }

    /// [`is_admitted`](Self::is_admitted) for an async caller: a round trip to a PostgreSQL
    /// ledger is awaited, not waited for on the caller's worker (SQLite's is a local read).
    /// With [`Inline::Allowed`], SQLite's is read on the writer's connection if it is idle
    /// (its cache is warm, see [`Backend::is_admitted`](super::Backend::is_admitted)).
    pub async fn is_admitted_async(
        &self,
        run_id: &str,
        call_id: &str,
        inline: Inline,
    ) -> Result<bool, LedgerError> {
        if inline == Inline::Allowed {
            if let Some(answer) = self.writer.try_is_admitted(run_id, call_id) {
                return answer;
            }
        }
        self.store.is_admitted_async(run_id, call_id).await
    }

    /// The admission digest `(run_id, call_id)` was admitted with, if it was admitted. Read-only:
    /// a call's journal asks it of a conflicting id, to tell another caller's call from a reuse.
    pub async fn admitted_digest(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<String>, LedgerError> {
        self.store.admitted_digest(run_id, call_id).await
    }

    /// Admit a call and mark it started in one transaction: the admission, `opening.events`
    /// (the stage decisions made before admission, with their own times) and the start mark
    /// are one commit. For a call whose stages ran before it was admitted, because the ledger
    /// said it was new; if another process admitted the same id meanwhile, nothing is written
    /// but what [`Ledger::admit`] would append, and its decision is returned instead of `New`.
    pub fn admit_started(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
    ) -> Result<Admission, LedgerError> {
        let write = self.late_write(run_id, call_id, opening, None)?;
        decided(self.writer.write_blocking(write))
    }

    /// [`Ledger::admit_started`] for a call that ended before it could start: the admission,
    /// its decisions and its one terminal outcome in one commit.
    pub fn admit_finished(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
        result: &ToolResult,
    ) -> Result<Admission, LedgerError> {
        let write = self.late_write(run_id, call_id, opening, Some(Outcome::of(result)?))?;
        decided(self.writer.write_blocking(write))
    }

    /// The write of a late admission (content kept only if the ledger records content).
    pub(crate) fn late_write(
        &self,
        run_id: &str,
        call_id: &str,
        opening: &Opening<'_>,
        finished: Option<Outcome>,
    ) -> Result<Write, LedgerError> {
        let content = match opening.content {
            Some(args) if self.options.record_content => Some(serde_json::to_string(args)?),
            _ => None,
        };
        Ok(Write::AdmitLate {
            key: CallKey {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
                tool: opening.tool.to_owned(),
                args_digest: opening.args_digest.to_owned(),
                args_size: opening.args_size,
                component_digest: None,
                definition_digest: None,
            },
            at_ms: opening.at_ms,
            events: opening.events.to_vec(),
            content,
            finished,
        })
    }

    /// Commit one write of the call path, waiting for its group without blocking an async
    /// worker (or at once on this thread, if `inline` allows and the ledger is idle). What
    /// `Admission` a write decided is in [`Applied::Admission`].
    pub async fn commit(&self, write: Write, inline: Inline) -> Result<Applied, LedgerError> {
        self.writer.write(write, inline).await
    }

    /// Commits and writes the group writer has made so far.
    pub fn group_stats(&self) -> &GroupStats {
        self.writer.stats()
    }

    /// The recorded terminal result of a call, if it has one. Read-only: a duplicate that got
    /// [`Admission::InFlight`] can poll this for the original's outcome without appending
    /// audit events. `UnknownCall` if the call was never admitted.
    pub fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        self.store.outcome(run_id, call_id)
    }

    /// Mark an admitted call `started`, right before the sandbox runs it. Marking a started
    /// call again is a no-op; a finished call is `AlreadyFinished`, an unknown one `UnknownCall`.
    pub fn mark_started(&self, run_id: &str, call_id: &str) -> Result<(), LedgerError> {
        self.mark_started_with(run_id, call_id, &[])
    }

    /// [`Ledger::mark_started`], committing `events` (stage decisions made so far) in the same
    /// transaction: one commit, and one changed page, for all of them.
    pub fn mark_started_with(
        &self,
        run_id: &str,
        call_id: &str,
        events: &[PendingEvent],
    ) -> Result<(), LedgerError> {
        done(self.writer.write_blocking(Write::MarkStarted {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            events: events.to_vec(),
        }))
    }

    /// Record the one terminal outcome of an admitted call and commit it before returning.
    ///
    /// Stores the summary (status, code, message, output digest and size, usage) and the whole
    /// `result` for replay. A second `finish` for the same call is `AlreadyFinished` and changes
    /// nothing; `result.call_id` must be `call_id` (`ResultMismatch`), since replay returns the
    /// stored result as is. Appends a `record` event.
    pub fn finish(
        &self,
        run_id: &str,
        call_id: &str,
        result: &ToolResult,
    ) -> Result<(), LedgerError> {
        self.finish_with(run_id, call_id, result, &[])
    }

    /// [`Ledger::finish`], committing `events` (stage decisions not yet recorded) in the same
    /// transaction, before the `record` event.
    pub fn finish_with(
        &self,
        run_id: &str,
        call_id: &str,
        result: &ToolResult,
        events: &[PendingEvent],
    ) -> Result<(), LedgerError> {
        done(self.writer.write_blocking(Write::Finish {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            outcome: Outcome::of(result)?,
            events: events.to_vec(),
        }))
    }
}

/// A call admitted after its first stages ran ([`Ledger::admit_started`],
/// [`Ledger::admit_finished`]): what admission would have been told, when it was decided that
/// the call is new, and what the stages decided meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Opening<'a> {
    pub tool: &'a str,
    pub args_digest: &'a str,
    pub args_size: u64,
    /// When the call was found new (unix milliseconds): its admission time.
    pub at_ms: i64,
    /// Stage decisions made before admission, in order.
    pub events: &'a [PendingEvent],
    /// The validated arguments, stored only if the ledger records content.
    pub content: Option<&'a serde_json::Value>,
}
