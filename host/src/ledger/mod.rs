//! The durable ledger: admission, replay, terminal outcomes and the audit trail, in SQLite.
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
//! The runtime admits most calls *late*: when [`Ledger::is_admitted`] says an id is new, the
//! first stages run, and [`Ledger::admit_started`] (or [`Ledger::admit_finished`], for a call
//! that ended before it started) commits the admission, the decisions and the start mark (or
//! the outcome) at once. If another process admitted the id meanwhile, these return that
//! admission's decision and write nothing of the call's own.
//!
//! Every stage in between appends its decision with [`Ledger::event`], or hands its decisions
//! to the next state change (`*_with`, [`PendingEvent`]). At startup,
//! [`Ledger::recover`] closes the calls a previous process left running as `outcome_unknown`:
//! they are never run again, and a retry replays that outcome.
//!
//! # What is stored
//!
//! By default the ledger records **digests and sizes**, never argument content: the audit rows
//! (calls, events, transcript) carry the caller's argument digest, sizes, stages, decisions and
//! operator text. Argument content is stored only when [`LedgerOptions::record_content`] is on
//! (see [`Ledger::record_content`]).
//!
//! One exception is deliberate: **replay storage**. To answer a retried call without running it
//! again, the ledger keeps the terminal [`ToolResult`](crate::contract::ToolResult) exactly as it was returned — output
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
//! their own thread. Reads and the rare other writes use a second connection behind a mutex.
//! The writer's [`Backend`] is the interface a server database plugs into. Several processes
//! may open the same file: admission uses `BEGIN IMMEDIATE`, so exactly one of them admits a
//! new call.

mod admission;
mod audit;
mod checkpoint;
mod codec;
mod config;
mod error;
mod group;
mod lease;
mod outcome;
pub mod postgres;
mod recovery;
mod schema;
mod sqlite;
mod tokens;
pub use tokens::TokenSpend;
mod transcript;
mod write;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use sha2::{Digest, Sha256};

pub use admission::{Admission, Opening, OUTCOME_UNKNOWN_MESSAGE};
pub use audit::{CallRecord, CallState, EventRecord, PendingEvent, MAX_APPENDED_EVENTS_CHARS};
pub use config::{LedgerConfig, Synchronous};
pub use error::LedgerError;
pub use group::{GroupStats, Inline, MAX_GROUP};
pub use outcome::Outcome;
pub use sqlite::SqliteBackend;
pub use transcript::{TranscriptEntry, MAX_TRANSCRIPT_DETAIL};
pub use write::{Applied, Backend, CallKey, Write};

/// How long a statement waits for another connection's write lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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

/// The durable ledger: one SQLite file, or a PostgreSQL database shared by several hosts. See
/// the module docs.
pub struct Ledger {
    /// Reads, and the writes outside the call path (recovery, tokens, transcripts, content).
    store: Store,
    /// The call path's writes, committed in groups on the writer's own connection.
    writer: group::GroupWriter,
    options: LedgerOptions,
}

/// Where the reads and the rare writes go.
pub(crate) enum Store {
    Sqlite {
        conn: Mutex<Connection>,
        path: PathBuf,
        lease: lease::Lease,
        /// Checkpoints the log when the call path's commits have grown it.
        _checkpointer: checkpoint::Checkpointer,
    },
    Postgres(postgres::PgStore),
}

/// The store a method works on: SQLite's connection, held, or the PostgreSQL store.
enum Conn<'a> {
    Sqlite(MutexGuard<'a, Connection>),
    Postgres(&'a postgres::PgStore),
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Ledger");
        match &self.store {
            Store::Sqlite { path, .. } => d.field("path", path),
            Store::Postgres(pg) => d.field("postgres_owner", &pg.owner()),
        };
        d.field("options", &self.options).finish_non_exhaustive()
    }
}

impl Ledger {
    /// Open (or create) the ledger at `path`, creating its parent directories, and bring its
    /// schema up to date.
    pub fn open(path: &Path, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        Ledger::open_with(path, options, |sqlite| Box::new(sqlite))
    }

    /// [`Ledger::open`], with the call path's writes going to the backend `wrap` makes of the
    /// SQLite one (tests use it to make commits fail).
    pub fn open_with(
        path: &Path,
        options: LedgerOptions,
        wrap: impl FnOnce(SqliteBackend) -> Box<dyn Backend>,
    ) -> Result<Ledger, LedgerError> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        let mut conn = Connection::open(path)?;
        // Every statement the ledger runs stays prepared (the default cache holds 16).
        conn.set_prepared_statement_cache_capacity(64);
        schema::configure(&conn, &options)?;
        schema::migrate(&mut conn)?;
        let lease = lease::Lease::take(path)?;
        let mut writer_conn = Connection::open(path)?;
        writer_conn.set_prepared_statement_cache_capacity(64);
        schema::configure(&writer_conn, &options)?;
        let checkpointer = checkpoint::Checkpointer::start(path, &options, &mut writer_conn)?;
        let backend = SqliteBackend::new(writer_conn, lease.owner().to_owned());
        let writer = group::GroupWriter::start(wrap(backend))?;
        Ok(Ledger {
            store: Store::Sqlite {
                conn: Mutex::new(conn),
                path: path.to_path_buf(),
                lease,
                _checkpointer: checkpointer,
            },
            writer,
            options,
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
        let store = postgres::PgStore::start(config, owner.clone(), lease)?;
        let backend = postgres::PgBackend::connect(config, owner)?;
        let writer = group::GroupWriter::start(Box::new(backend))?;
        Ok(Ledger {
            store: Store::Postgres(store),
            writer,
            options,
        })
    }

    /// The options this ledger was opened with.
    pub fn options(&self) -> LedgerOptions {
        self.options
    }

    /// The database file (`None` for a PostgreSQL ledger).
    pub fn path(&self) -> Option<&Path> {
        match &self.store {
            Store::Sqlite { path, .. } => Some(path),
            Store::Postgres(_) => None,
        }
    }

    /// Run budgets and rate limits kept in the ledger, shared by every host on it: `Some` for
    /// PostgreSQL. A SQLite ledger has one host, which keeps them in its memory.
    pub fn shared_limits(&self) -> Option<&postgres::PgStore> {
        match &self.store {
            Store::Postgres(pg) => Some(pg),
            Store::Sqlite { .. } => None,
        }
    }

    /// The store. A panic while SQLite's connection was held leaves no transaction open (an
    /// unfinished `rusqlite::Transaction` rolls back when dropped), so a poisoned lock is safe
    /// to reuse.
    fn conn(&self) -> Conn<'_> {
        match &self.store {
            Store::Sqlite { conn, .. } => {
                Conn::Sqlite(conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
            }
            Store::Postgres(pg) => Conn::Postgres(pg),
        }
    }
}

/// The lowercase hex SHA-256 of `bytes`. Callers hash the canonical bytes they chose (e.g. the
/// JCS form of validated arguments); the ledger stays agnostic of the canonical form.
pub fn digest_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
