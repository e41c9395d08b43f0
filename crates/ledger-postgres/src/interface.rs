//! The PostgreSQL store behind the ledger's one interface ([`Store`]). Each method is the
//! store's own method of the same name (`store.rs`, `tokens.rs`); the writer is a
//! [`PgBackend`] with its own connection, owned by this host's lease.

use std::path::Path;

use super::{PgBackend, PgStore};
use toolhost_contract::{Budgets, ToolResult};
use toolhost_ledger_store::chain::Evidence;
use toolhost_ledger_store::limits::Budget;
use toolhost_ledger_store::store::TranscriptEntry;
use toolhost_ledger_store::store::{Pending, Store};
use toolhost_ledger_store::task_record::{NewTask, TaskCaps, TaskCreated, TaskRecord};
use toolhost_ledger_store::verdicts::{Settled, UnknownFilter};
use toolhost_ledger_store::write::Backend;
use toolhost_ledger_store::{CallRecord, LedgerError, TokenSpend};

impl Store for PgStore {
    fn writer(&self) -> Result<Box<dyn Backend>, LedgerError> {
        Ok(Box::new(PgBackend::connect(
            self.config(),
            self.owner().to_owned(),
        )?))
    }

    fn owner(&self) -> &str {
        PgStore::owner(self)
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        PgStore::is_admitted(self, run_id, call_id)
    }

    fn is_admitted_async<'a>(&'a self, run_id: &'a str, call_id: &'a str) -> Pending<'a, bool> {
        Box::pin(PgStore::is_admitted_async(self, run_id, call_id))
    }

    fn admitted_digest<'a>(
        &'a self,
        run_id: &'a str,
        call_id: &'a str,
    ) -> Pending<'a, Option<String>> {
        Box::pin(PgStore::admitted_digest(self, run_id, call_id))
    }

    fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        PgStore::outcome(self, run_id, call_id)
    }

    fn record_content(
        &self,
        run_id: &str,
        call_id: &str,
        json: String,
    ) -> Result<bool, LedgerError> {
        PgStore::record_content(self, run_id, call_id, json)
    }

    fn approval_request(&self, digest: &str) -> Result<Option<(String, String)>, LedgerError> {
        PgStore::approval_request(self, digest)
    }

    fn calls(&self, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
        PgStore::calls(self, run)
    }

    fn call(&self, run_id: &str, call_id: &str) -> Result<Option<CallRecord>, LedgerError> {
        PgStore::call(self, run_id, call_id)
    }

    fn unknown_calls(&self, filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError> {
        PgStore::unknown_calls(self, filter)
    }

    fn reconcile(&self, run_id: &str, call_id: &str, settled: &Settled) -> Result<(), LedgerError> {
        PgStore::reconcile(self, run_id, call_id, settled)
    }

    fn create_task(
        &self,
        task: &NewTask,
        content: Option<&str>,
        caps: &TaskCaps,
        now: i64,
    ) -> Result<TaskCreated, LedgerError> {
        PgStore::create_task(self, task, content, caps, now)
    }

    fn close_task(&self, task_id: &str) -> Result<(), LedgerError> {
        PgStore::close_task(self, task_id)
    }

    fn task(&self, task_id: &str, now: i64) -> Result<Option<TaskRecord>, LedgerError> {
        PgStore::task(self, task_id, now)
    }

    fn tasks_of_run(&self, run_id: &str, now: i64) -> Result<Vec<TaskRecord>, LedgerError> {
        PgStore::tasks_of_run(self, run_id, now)
    }

    fn waiting_tasks(&self, now: i64, limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        PgStore::waiting_tasks(self, now, limit)
    }

    fn cancel_task(&self, task_id: &str, now: i64) -> Result<(), LedgerError> {
        PgStore::cancel_task(self, task_id, now)
    }

    fn retarget_task(
        &self,
        task_id: &str,
        from: &str,
        to: &str,
        now: i64,
    ) -> Result<bool, LedgerError> {
        PgStore::retarget_task(self, task_id, from, to, now)
    }

    fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError> {
        PgStore::cancelled_tasks(self)
    }

    fn prune_tasks(&self, now: i64) -> Result<u64, LedgerError> {
        PgStore::prune_tasks(self, now)
    }

    fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        PgStore::consume_token(self, token_id, expires_at_unix)
    }

    fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError> {
        PgStore::prune_used_tokens(self, before_unix)
    }

    fn transcript(
        &self,
        run_id: &str,
        step: u32,
        kind: &str,
        digest: &str,
        size: u64,
        detail: &str,
    ) -> Result<(), LedgerError> {
        PgStore::transcript(self, run_id, step, kind, digest, size, detail)
    }

    fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        PgStore::transcript_entries(self, run_id)
    }

    fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        PgStore::recover(self)
    }

    fn take_budget(
        &self,
        run: &str,
        tool: &str,
        budgets: &Budgets,
    ) -> Result<Option<Budget>, LedgerError> {
        PgStore::take_budget(
            self,
            run,
            tool,
            budgets.max_calls,
            budgets.max_calls_per_tool,
        )
    }

    fn take_rate(&self, principal: &str, rate: f64, burst: f64) -> Result<bool, LedgerError> {
        PgStore::take_rate(self, principal, rate, burst)
    }

    fn chain_evidence(&self) -> Result<Evidence, LedgerError> {
        PgStore::chain_evidence(self)
    }

    fn chain_of_call(&self, run_id: &str, call_id: &str) -> Result<Evidence, LedgerError> {
        PgStore::chain_of_call(self, run_id, call_id)
    }
}
