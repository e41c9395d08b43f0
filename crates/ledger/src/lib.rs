//! The durable ledger: admission, replay, terminal outcomes and the audit trail, in SQLite or
//! PostgreSQL.
//!
//! The ledger is the first and the last stage of the pipeline (see `docs/architecture.md`):
//!
//! 1. **admit** — [`Ledger::admit`] decides, in one `BEGIN IMMEDIATE` transaction, whether a
//!    `(run_id, call_id)` is [`Admission::New`] (run it), [`Admission::Replay`] (return the
//!    recorded result, do not run it again), [`Admission::InFlight`] (the same call is running
//!    now) or [`Admission::Conflict`] (the id was reused for other arguments).
//! 2. [`Ledger::mark_started`] right before the sandbox runs the call.
//! 3. **record** — [`Ledger::finish`] writes the one terminal outcome and commits before it
//!    returns, so a result is never shown to a model before it is durable.
//!
//! The runtime opens each call with [`Ledger::open_call`], which admits it — or, for most calls,
//! claims its id in this process and admits it *late*, with its first commit — and returns the
//! call's [`Journal`]: every stage notes its decision on it, and the journal commits them with
//! the start mark and the one outcome (`journal.rs`). If another process admitted the id
//! meanwhile, the journal records nothing of the call's own and says what holds the id
//! ([`Held`]). [`Ledger::admit_started`] and [`Ledger::admit_finished`] are the same late
//! admission as one synchronous call. At startup, [`Ledger::recover`] closes the calls a
//! previous process left running as `outcome_unknown`: they are never run again, and a retry
//! replays that outcome — until an operator reconciles it ([`Ledger::reconcile`],
//! `reconcile.rs`): then it replays what the operator recorded, marked as reconciled.
//!
//! # What is stored
//!
//! By default the ledger records **digests and sizes**, never argument content: the audit rows
//! (calls, events, transcript) carry the caller's argument digest, sizes, stages, decisions and
//! operator text. Argument content is stored only when [`LedgerOptions::record_content`] is on
//! (see [`Ledger::record_content`]).
//!
//! One exception is deliberate: **replay storage**. To answer a retried call without running it
//! again, the ledger keeps the terminal [`ToolResult`](toolhost_contract::ToolResult) exactly as it was returned — output
//! included. That is the result the model has already seen, not the arguments it proposed; but
//! if a tool echoes its input into its output, that echo is in the ledger file too. Treat the
//! ledger file with the same care as the conversation it serves.
//!
//! # Durability
//!
//! The database runs in WAL mode with foreign keys on and a busy timeout. With the default
//! `synchronous=NORMAL` a committed outcome survives a crash of the host process; a power loss
//! or an OS crash may lose the last few commits. [`LedgerOptions::synchronous_full`] syncs the
//! WAL on every commit and survives those too, at the cost measured in `bench.rs`.
//!
//! # The SQLite build
//!
//! The bundled SQLite is compiled without loadable extensions, full-text search, R-trees,
//! dbstat, soundex and column metadata (`LIBSQLITE3_FLAGS` in the repository's
//! `.cargo/config.toml`, which applies to builds inside this repository), and at `-O2`. A unit
//! test fails if those flags are lost.
//!
//! # Concurrency
//!
//! [`Ledger`] is `Send + Sync`. The call path's writes ([`Write`]) go to one writer thread
//! that owns its own connection and commits whatever arrived while its previous commit ran in
//! one transaction (group commit, `group.rs`); async callers await that commit
//! ([`Ledger::commit`]) without blocking a worker, and the synchronous methods wait for it on
//! their own thread. Reads and the rare other writes use a second connection. Several processes
//! may open the same file: admission uses `BEGIN IMMEDIATE`, so exactly one of them admits a
//! new call.
//!
//! # Layout
//!
//! The facade (`Ledger`, this folder's top files) decides nothing about storage and names no
//! driver; each backend is a folder behind two interfaces:
//! - `store.rs`: `Store`, everything stored and read besides the call path's writes (reads,
//!   content, tokens, transcripts, recovery, budgets and rates), and the writer's connection;
//! - `write.rs`: [`Backend`], the call path's writes applied as a group in one transaction;
//! - `sqlite/` (one file, one host: budgets and rates in memory, `limits.rs`) and `postgres/`
//!   (one database, many hosts: budgets, rates and leases in the database); `null.rs`, which
//!   records nothing, for benchmarks.
//!
//! `tasks.rs` keeps tasks: durable handles on calls that any host answers for
//! (`task_record.rs` has their values).
//!
//! `reconcile.rs` is the facade's operator side: what an operator records for a call that
//! ended `outcome_unknown`, beside the original (`verdicts.rs` has its values).
//!
//! `audit.rs` checks the hash chain the backends keep over every write (`chain.rs` of the store
//! crate); `receipt.rs` signs one call's record as a receipt with the host's key
//! (`receipt_key.rs`: the key and the envelope, checked offline with the public key).
//!
//! Over the facade, the call's own state: `journal.rs` (a call between its commits),
//! `claims.rs` (this process's claims on ids admitted late), `waiting.rs` (what a copy of a
//! running call learns), `owner.rs` (which caller an id is bound to) and `owed.rs` (outcomes
//! an outage kept out).

mod admission;
mod audit;
mod claims;
mod config;
mod group;
mod journal;
mod null;
mod owed;
mod owner;
mod receipt;
mod receipt_key;
mod reconcile;
mod recovery;
mod tasks;
mod tokens;
mod transcript;
mod waiting;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod pg_host_tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod sqlite_tests;
#[cfg(test)]
mod task_tests;

// The lower crates' parts, by the names this crate's files use for them: the stored values
// and the two interfaces (`toolhost-ledger-store`), and the two backends.
use toolhost_ledger_postgres as postgres;
use toolhost_ledger_sqlite as sqlite;
use toolhost_ledger_store::{
    chain, codec, error, events, limits, outcome, store, task_record, verdicts, write,
};

use std::path::Path;
use std::time::Duration;

pub use admission::Opening;
pub use chain::{Finding, Report};
pub use codec::now_ms;
pub use config::{LedgerConfig, Synchronous};
pub use error::LedgerError;
pub use events::ReconciliationRecord;
pub use events::{CallRecord, CallState, EventRecord, PendingEvent, MAX_APPENDED_EVENTS_CHARS};
pub use group::{GroupStats, Inline, MAX_GROUP};
pub use journal::{Held, Journal, OpenCall, Unfinished};
pub use limits::{Budget, MemoryLimits, MAX_TRACKED_PRINCIPALS, MAX_TRACKED_RUNS};
pub use outcome::{Outcome, OUTCOME_UNKNOWN_MESSAGE};
pub use owed::{MAX_OWED_BYTES, MAX_OWED_OUTCOMES};
pub use owner::{bind_caller, caller_tag, same_caller};
pub use postgres::PgConfig;
pub use receipt::{read_statement, PREDICATE_TYPE, STATEMENT_TYPE};
pub use receipt_key::{Envelope, PublicReceiptKey, ReceiptError, ReceiptKey, MAX_RECEIPT_BYTES};
#[cfg(test)]
use sqlite::SqliteBackend;
pub use store::{LedgerOptions, TokenSpend, TranscriptEntry};
pub use task_record::{NewTask, TaskCall, TaskCaps, TaskCreated, TaskRecord, MAX_TASK_TTL_MS};
pub use transcript::MAX_TRANSCRIPT_DETAIL;
pub use verdicts::{
    Reconciliation, UnknownFilter, Verdict, MAX_LISTED_UNKNOWN, MAX_RECONCILE_TEXT_BYTES,
};
pub use waiting::Waited;
pub use write::{Admission, Applied, Backend, CallKey, Write};

use store::Store;

/// The durable ledger: one SQLite file, or a PostgreSQL database shared by several hosts. See
/// the module docs.
pub struct Ledger {
    /// Reads, the writes outside the call path (recovery, tokens, transcripts, content), and
    /// budgets and rates: the backend, behind the ledger's one interface.
    store: Box<dyn Store>,
    /// The call path's writes, committed in groups on the writer's own connection.
    writer: group::GroupWriter,
    options: LedgerOptions,
    /// Outcomes the ledger could not take when their calls ended (`owed.rs`).
    owed: owed::OwedOutcomes,
    /// This process's claims on ids of calls not admitted yet (`claims.rs`).
    claims: claims::Claims,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.store.path())
            .field("owner", &self.store.owner())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Open (or create) the ledger at `path`, creating its parent directories, and bring its
    /// schema up to date.
    pub fn open(path: &Path, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        Ledger::over(Box::new(sqlite::open(path, &options)?), options)
    }

    /// [`Ledger::open`], with the call path's writes going to the backend `wrap` makes of the
    /// SQLite one (tests use it to make commits fail).
    #[cfg(test)]
    pub(crate) fn open_with(
        path: &Path,
        options: LedgerOptions,
        wrap: impl FnOnce(SqliteBackend) -> Box<dyn Backend>,
    ) -> Result<Ledger, LedgerError> {
        let store = sqlite::open(path, &options)?;
        let writer = group::GroupWriter::start(wrap(store.take_backend()?))?;
        Ok(Ledger {
            store: Box::new(store),
            writer,
            options,
            owed: Default::default(),
            claims: Default::default(),
        })
    }

    /// Open the PostgreSQL ledger `config` names (migrating its schema under a lock) and take
    /// this host's lease, renewed every third of `lease`; when it lapses, other hosts close
    /// this host's open calls as `outcome_unknown`.
    pub fn open_postgres(
        config: &postgres::PgConfig,
        lease: Duration,
        options: LedgerOptions,
    ) -> Result<Ledger, LedgerError> {
        let owner = uuid::Uuid::new_v4().simple().to_string();
        let store = postgres::PgStore::start(config, owner, lease)?;
        Ledger::over(Box::new(store), options)
    }

    /// **Benchmarks only.** A ledger that records nothing (`null.rs`): every admission is
    /// new, nothing replays, no token is spent. It measures what the real ledger costs a call.
    #[doc(hidden)]
    pub fn null(options: LedgerOptions) -> Result<Ledger, LedgerError> {
        Ledger::over(Box::new(null::NullStore::default()), options)
    }

    /// The ledger over `store`, its writer started on the store's writer connection.
    fn over(store: Box<dyn Store>, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        let writer = group::GroupWriter::start(store.writer()?)?;
        Ok(Ledger {
            store,
            writer,
            options,
            owed: Default::default(),
            claims: Default::default(),
        })
    }

    /// The options this ledger was opened with.
    pub fn options(&self) -> LedgerOptions {
        self.options
    }

    /// The database file (`None` for a PostgreSQL ledger).
    pub fn path(&self) -> Option<&Path> {
        self.store.path()
    }

    /// Count one call of `tool` in `run` against `budgets`, for every host of this ledger (in
    /// the database when it is shared, else in this host's memory): `None` when counted, else
    /// the budget it would break (nothing counted).
    pub fn take_budget(
        &self,
        run: &str,
        tool: &str,
        budgets: &toolhost_contract::Budgets,
    ) -> Result<Option<Budget>, LedgerError> {
        self.store.take_budget(run, tool, budgets)
    }

    /// Take one call from `principal`'s token bucket (`rate` per second, at most `burst`), for
    /// every host of this ledger: `false` when it is empty.
    pub fn take_rate(&self, principal: &str, rate: f64, burst: f64) -> Result<bool, LedgerError> {
        self.store.take_rate(principal, rate, burst)
    }
}
