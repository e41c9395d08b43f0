//! The audit trail's values: stage decisions as stored, and a call as the listing behind
//! `toolhost ledger [--run RUN]` shows it (an agent run's transcript is `transcript.rs`).
//!
//! `admit`, `finish` and `recover` append their own events (stages `admit`, `record`,
//! `recover`); the runtime notes one per stage in between on the call's journal (`resolve`,
//! `validate`, `authorize`, `approve`, `limit`, `execute`, `check`), which commits them. An
//! event's `detail` is operator text — the rule that matched, a digest, a size — and never
//! argument content.
//!
//! Events live in their call's row (the `events` column, one JSON object per line), so that
//! recording them costs no page of its own (see `schema.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::codec::now_ms;
use super::codec::{from_sql_u64, parse_code, parse_name};
use super::LedgerError;
use toolhost_contract::Stage;
use toolhost_contract::{Code, Status, Usage};

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Admitted, not yet handed to the sandbox (or stopped by an earlier stage).
    Admitted,
    /// Handed to the sandbox.
    Started,
    /// Has its one terminal outcome.
    Finished,
}

/// One stage decision about a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub stage: String,
    pub decision: String,
    pub detail: String,
}

/// One call as the ledger knows it: admission, outcome summary and events in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Admission order across the ledger.
    pub seq: i64,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub state: CallState,
    /// `None` until the call has its terminal outcome.
    pub status: Option<Status>,
    pub code: Option<Code>,
    pub message: Option<String>,
    pub diagnostic_id: Option<String>,
    pub args_digest: String,
    pub args_size: u64,
    /// Which code the call named: its component's bytes and its tool's definition
    /// (`sha256:…` each); `None` for a call of a tool that was not loaded.
    pub component_digest: Option<String>,
    pub definition_digest: Option<String>,
    pub output_digest: Option<String>,
    pub output_size: Option<u64>,
    pub usage: Option<Usage>,
    pub admitted_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// The arguments, only if they were recorded with content recording on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    pub events: Vec<EventRecord>,
    /// What an operator recorded for a call that ended `outcome_unknown`, if anyone did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciliation: Option<ReconciliationRecord>,
}

/// A reconciliation as the call listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconciliationRecord {
    pub status: Status,
    pub code: Option<Code>,
    pub output_digest: Option<String>,
    pub output_size: Option<u64>,
    pub operator: String,
    pub why: String,
    /// Unix milliseconds.
    pub at_ms: i64,
}

/// A stage decision not yet committed: it goes into the call's next state change
/// ([`Ledger::mark_started_with`], [`Ledger::finish_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    pub at_ms: i64,
    pub stage: String,
    pub decision: String,
    pub detail: String,
}

impl PendingEvent {
    /// A decision made now.
    pub fn now(stage: &str, decision: &str, detail: &str) -> PendingEvent {
        PendingEvent {
            at_ms: now_ms(),
            stage: stage.to_string(),
            decision: decision.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// The stage and decision of the event that asks a human for approval; its detail is the
/// approval digest, which `toolhost approve` looks up ([`Ledger::approval_request`]).
const APPROVAL_REQUIRED: (&str, &str) = (Stage::Approve.as_str(), Code::ApprovalRequired.as_str());

/// Events as stored in a call's `events` column: one JSON object per line, in order.
pub fn event_lines<'a>(
    events: impl IntoIterator<Item = (i64, &'a str, &'a str, &'a str)>,
) -> Result<String, LedgerError> {
    /// An [`EventRecord`] by reference: the same fields, in the same order.
    #[derive(Serialize)]
    struct Line<'a> {
        at_ms: i64,
        stage: &'a str,
        decision: &'a str,
        detail: &'a str,
    }
    let mut lines = String::new();
    for (at_ms, stage, decision, detail) in events {
        let line = Line {
            at_ms,
            stage,
            decision,
            detail,
        };
        // Compact JSON escapes every newline inside strings: one event, one line.
        lines.push_str(&serde_json::to_string(&line)?);
        lines.push('\n');
    }
    Ok(lines)
}

/// The lines of [`event_lines`] for decisions made earlier.
pub fn pending_lines(events: &[PendingEvent]) -> Result<String, LedgerError> {
    event_lines(events.iter().map(|e| {
        (
            e.at_ms,
            e.stage.as_str(),
            e.decision.as_str(),
            e.detail.as_str(),
        )
    }))
}

/// A call's stored events back, in order.
pub fn parse_events(lines: &str) -> Result<Vec<EventRecord>, LedgerError> {
    lines
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| LedgerError::Corrupt(format!("stored event does not decode: {e}")))
        })
        .collect()
}

/// Characters of events a call's row keeps from appends outside its own state changes
/// (repeated admissions — replays, conflicts — and [`Ledger::event`]). A model can send the
/// same call id without end, and each append rewrites the row, so without a cap the ledger's
/// work would grow with the square of the repeats. The call's own decisions, start and
/// outcome are always recorded; past the cap one `not_recorded` event says that later
/// repeats were left out.
pub const MAX_APPENDED_EVENTS_CHARS: i64 = 64 * 1024;

/// The decision of the event that marks a call's events as capped.
pub const CAPPED: &str = "not_recorded";

/// The detail of that event.
pub const CAPPED_DETAIL: &str =
    "this call's audit trail is full; later repeats of it are not recorded";

/// The approval digests among `events`: the details of those that asked a human for approval.
pub fn approval_digests(events: &[PendingEvent]) -> impl Iterator<Item = &str> {
    events
        .iter()
        .filter(|e| (e.stage.as_str(), e.decision.as_str()) == APPROVAL_REQUIRED)
        .map(|e| e.detail.as_str())
}

/// The columns of the call listing, for [`CALL_JOINS`] (the same in both backends; [`RawCall`]
/// takes them in this order).
pub const CALL_COLUMNS: &str =
    "c.seq, c.run_id, c.call_id, c.tool, c.state, c.args_digest, c.args_size,
     c.admitted_at_ms, c.started_at_ms,
     c.status, c.code, c.message, c.diagnostic_id, c.output_digest, c.output_size,
     c.fuel_consumed, c.wall_ms, c.memory_peak_bytes, c.output_bytes,
     c.finished_at_ms, cc.arguments_json, c.events,
     r.status, r.code, r.output_digest, r.output_size, r.operator, r.why, r.at_ms,
     c.component_digest, c.definition_digest";

/// The tables [`CALL_COLUMNS`] are read from.
pub const CALL_JOINS: &str = "calls c
     LEFT JOIN call_content cc ON cc.run_id = c.run_id AND cc.call_id = c.call_id
     LEFT JOIN reconciliations r ON r.run_id = c.run_id AND r.call_id = c.call_id";

/// The reconciliation columns of [`CALL_COLUMNS`] as stored, whichever backend read them.
pub struct RawReconciliation {
    pub status: Option<String>,
    pub code: Option<String>,
    pub output_digest: Option<String>,
    pub output_size: Option<i64>,
    pub operator: Option<String>,
    pub why: Option<String>,
    pub at_ms: Option<i64>,
}

impl RawReconciliation {
    /// The record, if the call has one (its columns are all NULL otherwise).
    fn into_record(self) -> Result<Option<ReconciliationRecord>, LedgerError> {
        let (Some(status), Some(operator), Some(why), Some(at_ms)) =
            (self.status, self.operator, self.why, self.at_ms)
        else {
            return Ok(None);
        };
        Ok(Some(ReconciliationRecord {
            status: parse_name("reconciled status", &status)?,
            code: parse_code(self.code.as_deref())?,
            output_digest: self.output_digest,
            output_size: self
                .output_size
                .map(|n| from_sql_u64("reconciled output size", n))
                .transpose()?,
            operator,
            why,
            at_ms,
        }))
    }
}

/// One row of the call listing ([`CALL_COLUMNS`]) as stored, whichever backend read it.
pub struct RawCall {
    pub seq: i64,
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub state: String,
    pub args_digest: String,
    pub args_size: i64,
    pub admitted_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub status: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub diagnostic_id: Option<String>,
    pub output_digest: Option<String>,
    pub output_size: Option<i64>,
    /// Fuel, wall milliseconds, peak memory, output bytes.
    pub usage: [Option<i64>; 4],
    pub finished_at_ms: Option<i64>,
    pub arguments: Option<String>,
    pub events: String,
    pub reconciliation: RawReconciliation,
    pub component_digest: Option<String>,
    pub definition_digest: Option<String>,
}

impl RawCall {
    /// The record, every stored name and number checked.
    pub fn into_record(self) -> Result<CallRecord, LedgerError> {
        let usage = match self.status {
            Some(_) => {
                let [fuel, wall, memory, output] = self.usage;
                let n = |what: &str, v: Option<i64>| from_sql_u64(what, v.unwrap_or_default());
                Some(Usage {
                    fuel_consumed: n("fuel", fuel)?,
                    wall_ms: n("wall_ms", wall)?,
                    memory_peak_bytes: n("memory peak", memory)?,
                    output_bytes: n("output bytes", output)?,
                })
            }
            None => None,
        };
        Ok(CallRecord {
            seq: self.seq,
            run_id: self.run_id,
            call_id: self.call_id,
            tool: self.tool,
            state: parse_name("call state", &self.state)?,
            status: self
                .status
                .as_deref()
                .map(|s| parse_name("status", s))
                .transpose()?,
            code: parse_code(self.code.as_deref())?,
            message: self.message,
            diagnostic_id: self.diagnostic_id,
            args_digest: self.args_digest,
            args_size: from_sql_u64("args size", self.args_size)?,
            component_digest: self.component_digest,
            definition_digest: self.definition_digest,
            output_digest: self.output_digest,
            output_size: self
                .output_size
                .map(|n| from_sql_u64("output size", n))
                .transpose()?,
            usage,
            admitted_at_ms: self.admitted_at_ms,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            arguments: self
                .arguments
                .map(|a| {
                    serde_json::from_str(&a)
                        .map_err(|e| LedgerError::Corrupt(format!("stored arguments: {e}")))
                })
                .transpose()?,
            events: parse_events(&self.events)?,
            reconciliation: self.reconciliation.into_record()?,
        })
    }
}
