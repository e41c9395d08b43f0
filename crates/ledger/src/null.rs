//! The null ledger: it records nothing. Every admission is a new call, nothing replays, no
//! listing has rows. It exists to measure what the real ledger costs a call (`just bench`,
//! `pipeline_no_ledger`); no frontend opens it. It fails closed where recording is the point:
//! it spends no approval token. Budgets and rates are kept in memory, as for one SQLite host.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use super::chain::Evidence;
use super::events::CallRecord;
use super::limits::{Budget, MemoryLimits};
use super::store::{ready, Pending, Store, TokenSpend, TranscriptEntry};
use super::task_record::{NewTask, TaskCaps, TaskCreated, TaskRecord};
use super::verdicts::{Settled, UnknownFilter};
use super::write::{Admission, Applied, Backend, Write};
use super::LedgerError;
use toolhost_contract::{Budgets, ToolResult};

/// A store that keeps nothing but budgets and rates.
#[derive(Default)]
pub(super) struct NullStore {
    limits: MemoryLimits,
}

/// A writer that commits nothing: each admission is new, in order.
#[derive(Default)]
struct NullBackend {
    seq: AtomicI64,
}

impl Backend for NullBackend {
    fn apply(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<Applied, LedgerError>>, LedgerError> {
        Ok(writes
            .iter()
            .map(|w| match w {
                Write::Admit(_) | Write::AdmitLate { .. } => {
                    let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
                    Ok(Applied::Admission(Admission::New { seq }))
                }
                Write::MarkStarted { .. } | Write::Finish { .. } | Write::Event { .. } => {
                    Ok(Applied::Done)
                }
            })
            .collect())
    }
}

impl Store for NullStore {
    fn writer(&self) -> Result<Box<dyn Backend>, LedgerError> {
        Ok(Box::new(NullBackend::default()))
    }

    fn owner(&self) -> &str {
        "null"
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn is_admitted(&self, _run_id: &str, _call_id: &str) -> Result<bool, LedgerError> {
        Ok(false)
    }

    fn is_admitted_async<'a>(&'a self, _run_id: &'a str, _call_id: &'a str) -> Pending<'a, bool> {
        ready(Ok(false))
    }

    fn admitted_digest<'a>(
        &'a self,
        _run_id: &'a str,
        _call_id: &'a str,
    ) -> Pending<'a, Option<String>> {
        ready(Ok(None))
    }

    fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        Err(LedgerError::unknown(run_id, call_id))
    }

    fn record_content(
        &self,
        _run_id: &str,
        _call_id: &str,
        _json: String,
    ) -> Result<bool, LedgerError> {
        Ok(false)
    }

    fn approval_request(&self, _digest: &str) -> Result<Option<(String, String)>, LedgerError> {
        Ok(None)
    }

    fn calls(&self, _run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
        Ok(Vec::new())
    }

    fn call(&self, _run_id: &str, _call_id: &str) -> Result<Option<CallRecord>, LedgerError> {
        Ok(None)
    }

    fn unknown_calls(&self, _filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError> {
        Ok(Vec::new())
    }

    fn reconcile(&self, run_id: &str, call_id: &str, _: &Settled) -> Result<(), LedgerError> {
        Err(LedgerError::unknown(run_id, call_id))
    }

    fn create_task(
        &self,
        _: &NewTask,
        _: Option<&str>,
        _: &TaskCaps,
        _: i64,
    ) -> Result<TaskCreated, LedgerError> {
        Ok(TaskCreated::Created)
    }

    fn close_task(&self, _task_id: &str) -> Result<(), LedgerError> {
        Ok(())
    }

    fn task(&self, _task_id: &str, _now: i64) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(None)
    }

    fn tasks_of_run(&self, _run_id: &str, _now: i64) -> Result<Vec<TaskRecord>, LedgerError> {
        Ok(Vec::new())
    }

    fn waiting_tasks(&self, _now: i64, _limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        Ok(Vec::new())
    }

    fn cancel_task(&self, _task_id: &str, _now: i64) -> Result<(), LedgerError> {
        Ok(())
    }

    fn retarget_task(&self, _: &str, _: &str, _: &str, _: i64) -> Result<bool, LedgerError> {
        Ok(false)
    }

    fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError> {
        Ok(Vec::new())
    }

    fn prune_tasks(&self, _now: i64) -> Result<u64, LedgerError> {
        Ok(0)
    }

    fn consume_token(
        &self,
        _token_id: &str,
        _expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        Err(LedgerError::Unsupported(
            "the null ledger remembers no token, so it spends none".into(),
        ))
    }

    fn prune_used_tokens(&self, _before_unix: i64) -> Result<u64, LedgerError> {
        Ok(0)
    }

    fn transcript(
        &self,
        _run_id: &str,
        _step: u32,
        _kind: &str,
        _digest: &str,
        _size: u64,
        _detail: &str,
    ) -> Result<(), LedgerError> {
        Ok(())
    }

    fn transcript_entries(&self, _run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        Ok(Vec::new())
    }

    fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        Ok(Vec::new())
    }

    fn take_budget(
        &self,
        run: &str,
        tool: &str,
        budgets: &Budgets,
    ) -> Result<Option<Budget>, LedgerError> {
        Ok(self.limits.take_budget(run, tool, budgets))
    }

    fn take_rate(&self, principal: &str, rate: f64, burst: f64) -> Result<bool, LedgerError> {
        Ok(self
            .limits
            .take_rate(principal, rate, burst, std::time::Instant::now()))
    }

    fn chain_evidence(&self) -> Result<Evidence, LedgerError> {
        Err(LedgerError::Unsupported(
            "this host keeps no ledger, so there is no chain to verify".into(),
        ))
    }

    fn chain_of_call(&self, _run_id: &str, _call_id: &str) -> Result<Evidence, LedgerError> {
        Err(LedgerError::Unsupported(
            "this host keeps no ledger, so there is no chain to verify".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Ledger, LedgerOptions};
    use super::*;

    /// The null ledger admits every call as new, keeps nothing, spends no token, and still
    /// holds budgets.
    #[test]
    fn the_null_ledger_records_nothing_and_fails_closed_on_tokens() {
        let l = Ledger::null(LedgerOptions::default()).unwrap();
        let admit = || l.admit("r", "c", "echo", "d", 1).unwrap();
        assert_eq!(admit(), Admission::New { seq: 1 });
        assert_eq!(admit(), Admission::New { seq: 2 });
        l.mark_started("r", "c").unwrap();
        assert!(!l.is_admitted("r", "c").unwrap());
        assert!(l.calls(None).unwrap().is_empty());
        assert!(matches!(
            l.outcome("r", "c"),
            Err(LedgerError::UnknownCall { .. })
        ));
        assert!(matches!(
            l.consume_token("t", i64::MAX),
            Err(LedgerError::Unsupported(_))
        ));
        let one = Budgets {
            max_calls: Some(1),
            max_calls_per_tool: None,
        };
        assert_eq!(l.take_budget("r", "echo", &one).unwrap(), None);
        assert_eq!(l.take_budget("r", "echo", &one).unwrap(), Some(Budget::Run));
    }
}
