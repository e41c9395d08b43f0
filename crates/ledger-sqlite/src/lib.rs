//! toolhost's embedded ledger backend: the ledger in one SQLite file (`ledger.sqlite` in the
//! data directory), for one host. The facade (`toolhost-ledger`) holds it as the
//! [`Store`] and [`Backend`] of `toolhost-ledger-store`; this crate is the only one of the
//! workspace's libraries that names `rusqlite`.
//!
//! # Layout
//! - [`SqliteStore`] (this file): the store's connection behind a mutex, the file's lease, the
//!   checkpointer, and budgets and rates in memory (one host per file); [`open`] makes the store and the writer's own connection.
//! - `backend.rs`: [`SqliteBackend`], the call path's writes, a group per `BEGIN IMMEDIATE`
//!   transaction with a savepoint per write.
//! - `reads.rs`, `writes.rs`, `recovery.rs`, `reconcile.rs`, `tasks.rs`: the store's statements; `rows.rs`: the statements
//!   the writer and the store share.
//! - `chain.rs`: the SQL functions the hash chain's triggers call, and the chain's reads.
//! - `schema.rs`: the connection settings and the versioned migrations; `checkpoint.rs`: the
//!   thread that keeps the write-ahead log short; `lease.rs`: which processes hold the file.
//!
//! The backend's own tests (its schema, build, watermark, file growth) run through the facade,
//! in `toolhost-ledger`'s `sqlite_tests.rs`; the contract every backend keeps is its
//! `contract_tests.rs`.

mod backend;
#[cfg(test)]
mod backend_tests;
pub mod chain;
mod checkpoint;
mod lease;
mod reads;
mod reconcile;
mod recovery;
mod rows;
pub mod schema;
#[cfg(test)]
mod schema_tests;
mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod writes;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

pub use backend::SqliteBackend;

use toolhost_ledger_store::chain::Evidence;
use toolhost_ledger_store::limits::{Budget, MemoryLimits};
use toolhost_ledger_store::store::{ready, Pending, Store, TranscriptEntry};
use toolhost_ledger_store::task_record::{NewTask, TaskCaps, TaskCreated, TaskRecord};
use toolhost_ledger_store::verdicts::{Settled, UnknownFilter};
use toolhost_ledger_store::write::Backend;
use toolhost_ledger_store::{CallRecord, LedgerError, LedgerOptions, TokenSpend};
// The store crate's parts, by the names this crate's files use for them.
use toolhost_contract::{Budgets, ToolResult};
use toolhost_ledger_store::{codec, events, outcome, store, task_record, verdicts, write};

/// The SQLite store: reads, and the writes outside the call path, on a connection of its own.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    lease: lease::Lease,
    /// The writer's connection until [`Store::writer`] hands it to the group writer.
    writer: Mutex<Option<SqliteBackend>>,
    /// Budgets and rates: one host per file, so in this host's memory.
    limits: MemoryLimits,
    /// Checkpoints the log when the call path's commits have grown it.
    _checkpointer: checkpoint::Checkpointer,
}

/// Open (or create) the ledger file at `path`, creating its parent directories, and bring its
/// schema up to date; the writer's connection is opened too, and taken by [`Store::writer`].
pub fn open(path: &Path, options: &LedgerOptions) -> Result<SqliteStore, LedgerError> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    let mut conn = Connection::open(path).db()?;
    // Every statement the ledger runs stays prepared (the default cache holds 16).
    conn.set_prepared_statement_cache_capacity(64);
    schema::configure(&conn, options)?;
    schema::migrate(&mut conn)?;
    let lease = lease::Lease::take(path)?;
    let mut writer_conn = Connection::open(path).db()?;
    writer_conn.set_prepared_statement_cache_capacity(64);
    schema::configure(&writer_conn, options)?;
    let checkpointer = checkpoint::Checkpointer::start(path, options, &mut writer_conn)?;
    let backend = SqliteBackend::new(writer_conn, lease.owner().to_owned());
    Ok(SqliteStore {
        conn: Mutex::new(conn),
        path: path.to_path_buf(),
        lease,
        writer: Mutex::new(Some(backend)),
        limits: MemoryLimits::default(),
        _checkpointer: checkpointer,
    })
}

/// A SQLite error as the ledger's `Database` error.
fn database(e: rusqlite::Error) -> LedgerError {
    LedgerError::Database {
        backend: "database",
        message: e.to_string(),
        source: Box::new(e),
    }
}

/// A driver result as the ledger's: `.db()?` where a statement's error leaves the backend.
trait Db<T> {
    fn db(self) -> Result<T, LedgerError>;
}

impl<T> Db<T> for Result<T, rusqlite::Error> {
    fn db(self) -> Result<T, LedgerError> {
        self.map_err(database)
    }
}

/// A SQLite error, except that a foreign-key violation (a row for a call that was never
/// admitted) becomes `UnknownCall`.
fn for_call(e: rusqlite::Error, run_id: &str, call_id: &str) -> LedgerError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY =>
        {
            LedgerError::unknown(run_id, call_id)
        }
        _ => database(e),
    }
}

impl SqliteStore {
    /// The store's connection. A panic while it was held leaves no transaction open (an
    /// unfinished `rusqlite::Transaction` rolls back when dropped), so a poisoned lock is safe
    /// to reuse.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The writer's backend itself, for a test that wraps it.
    pub fn take_backend(&self) -> Result<SqliteBackend, LedgerError> {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .ok_or_else(|| LedgerError::Commit("the writer's connection was taken".into()))
    }
}

impl Store for SqliteStore {
    fn writer(&self) -> Result<Box<dyn Backend>, LedgerError> {
        Ok(Box::new(self.take_backend()?))
    }

    fn owner(&self) -> &str {
        self.lease.owner()
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        Ok(rows::call_state(&self.conn(), run_id, call_id)?.is_some())
    }

    fn is_admitted_async<'a>(&'a self, run_id: &'a str, call_id: &'a str) -> Pending<'a, bool> {
        // A local read: answered on the caller's thread.
        ready(self.is_admitted(run_id, call_id))
    }

    fn admitted_digest<'a>(
        &'a self,
        run_id: &'a str,
        call_id: &'a str,
    ) -> Pending<'a, Option<String>> {
        ready(reads::admitted_digest(&self.conn(), run_id, call_id))
    }

    fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        reads::outcome(&self.conn(), run_id, call_id)
    }

    fn record_content(
        &self,
        run_id: &str,
        call_id: &str,
        json: String,
    ) -> Result<bool, LedgerError> {
        writes::record_content(&self.conn(), run_id, call_id, &json)
    }

    fn approval_request(&self, digest: &str) -> Result<Option<(String, String)>, LedgerError> {
        reads::approval_request(&self.conn(), digest)
    }

    fn calls(&self, run: Option<&str>) -> Result<Vec<CallRecord>, LedgerError> {
        reads::calls(&self.conn(), run)
    }

    fn call(&self, run_id: &str, call_id: &str) -> Result<Option<CallRecord>, LedgerError> {
        reads::call(&self.conn(), run_id, call_id)
    }

    fn unknown_calls(&self, filter: &UnknownFilter) -> Result<Vec<CallRecord>, LedgerError> {
        reads::unknown_calls(&self.conn(), filter)
    }

    fn reconcile(&self, run_id: &str, call_id: &str, settled: &Settled) -> Result<(), LedgerError> {
        reconcile::reconcile(&mut self.conn(), run_id, call_id, settled)
    }

    fn create_task(
        &self,
        task: &NewTask,
        content: Option<&str>,
        caps: &TaskCaps,
        now: i64,
    ) -> Result<TaskCreated, LedgerError> {
        tasks::create(
            &mut self.conn(),
            (task, content),
            caps,
            self.lease.owner(),
            now,
        )
    }

    fn close_task(&self, task_id: &str) -> Result<(), LedgerError> {
        tasks::close(&self.conn(), task_id)
    }

    fn task(&self, task_id: &str, now: i64) -> Result<Option<TaskRecord>, LedgerError> {
        tasks::read(&self.conn(), &self.lease, task_id, now)
    }

    fn tasks_of_run(&self, run_id: &str, now: i64) -> Result<Vec<TaskRecord>, LedgerError> {
        tasks::of_run(&self.conn(), &self.lease, run_id, now)
    }

    fn waiting_tasks(&self, now: i64, limit: u32) -> Result<Vec<TaskRecord>, LedgerError> {
        tasks::waiting(&self.conn(), &self.lease, now, limit)
    }

    fn cancel_task(&self, task_id: &str, now: i64) -> Result<(), LedgerError> {
        tasks::cancel(&self.conn(), task_id, now)
    }

    fn retarget_task(
        &self,
        task_id: &str,
        from: &str,
        to: &str,
        now: i64,
    ) -> Result<bool, LedgerError> {
        tasks::retarget(&self.conn(), task_id, (from, to), self.lease.owner(), now)
    }

    fn cancelled_tasks(&self) -> Result<Vec<String>, LedgerError> {
        tasks::cancelled(&self.conn(), self.lease.owner())
    }

    fn prune_tasks(&self, now: i64) -> Result<u64, LedgerError> {
        tasks::prune(&self.conn(), now)
    }

    fn consume_token(
        &self,
        token_id: &str,
        expires_at_unix: i64,
    ) -> Result<TokenSpend, LedgerError> {
        writes::consume_token(&mut self.conn(), token_id, expires_at_unix)
    }

    fn prune_used_tokens(&self, before_unix: i64) -> Result<u64, LedgerError> {
        writes::prune_used_tokens(&self.conn(), before_unix)
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
        writes::transcript(&self.conn(), run_id, step, kind, digest, size, detail)
    }

    fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        writes::transcript_entries(&self.conn(), run_id)
    }

    fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        recovery::recover(&mut self.conn(), &self.lease)
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
        chain::evidence(&self.conn())
    }

    fn chain_of_call(&self, run_id: &str, call_id: &str) -> Result<Evidence, LedgerError> {
        chain::evidence_of_call(&self.conn(), run_id, call_id)
    }
}
