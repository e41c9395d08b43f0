//! toolhost's server ledger backend: the ledger in PostgreSQL, shared by every host that points
//! at it (`[ledger] url`; `docs/ledger-postgres.md`). This crate is the only one of the
//! workspace's libraries that names `tokio_postgres`. Every cross-call guarantee is decided in the
//! database: admission by the calls' unique key (`INSERT … ON CONFLICT DO NOTHING` waits for
//! a concurrent admission of the same key to commit or roll back), run budgets and rates by
//! shared counters, single-use tokens by their key, and a dead host's open calls by leases.
//!
//! # Layout
//! - [`PgConfig`]: where the database is; the password comes from an environment variable the
//!   config names, never from the config itself; TLS when the url says `sslmode=require`
//!   (`tls.rs`: the server's certificate verified, never trusted blindly).
//! - `schema.rs`: versioned migrations, applied under an advisory lock so hosts starting
//!   together migrate once (`pin_schema.rs`: the digests of the code a call named; `started_schema.rs`: late
//!   admissions inserted started).
//! - `backend.rs`: [`PgBackend`], the call path's writes behind the same
//!   [`Backend`](toolhost_ledger_store::Backend) interface as SQLite: a group in one round trip
//!   (`toolhost_apply`: one transaction, a subtransaction per write); `calls.rs`: closing a
//!   call outside the group writer (recovery).
//! - `chain.rs`: the hash chain: schema version 11 (a chain per connection of a host, its
//!   links appended by triggers) and the reads `toolhost ledger verify` checks.
//! - `store.rs`: [`PgStore`], everything else (reads, tokens, transcripts) on a runtime of its
//!   own, callable from any thread; `listing.rs`: the call listing and reconciliation; `tasks.rs`: tasks (`task_schema.rs`: their tables and functions); `interface.rs`: it as the ledger's [`Store`](toolhost_ledger_store::Store); `lease.rs`: leases and recovery; `limits.rs`: budgets and
//!   rate buckets.

mod backend;
mod calls;
mod chain;
mod interface;
mod lease;
mod limits;
mod listing;
mod pin_schema;
mod schema;
mod started_schema;
mod store;
mod task_schema;
mod tasks;
mod tls;
mod tokens;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use backend::PgBackend;
pub use schema::migrate;
pub use schema::SCHEMA_VERSION;
pub use store::PgStore;

use tokio_postgres::{Client, NoTls};

use toolhost_ledger_store::LedgerError;

/// Where the PostgreSQL ledger is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// `postgres://user@host:port/database` (or the key-value form). A password written here
    /// is refused: it would sit in a config file.
    pub url: String,
    /// The environment variable that holds the password, if the server wants one.
    pub password_env: Option<String>,
    /// The schema the ledger's tables live in (`toolhost` by default); tests use one each.
    pub schema: String,
    /// A PEM file of CA certificates to trust for the server's certificate, besides Mozilla's
    /// roots and the system's (with `sslmode=require`).
    pub ca_file: Option<std::path::PathBuf>,
}

impl PgConfig {
    /// The connection settings: the URL, the password from its variable, and a bound on how
    /// long connecting may take.
    fn settings(&self) -> Result<tokio_postgres::Config, LedgerError> {
        let mut config: tokio_postgres::Config = self
            .url
            .parse()
            .map_err(|e| LedgerError::Unsupported(format!("ledger url: {e}")))?;
        if config.get_password().is_some() {
            return Err(LedgerError::Unsupported(
                "the ledger url carries a password; put it in an environment variable and name \
                 that variable in `[ledger] password_env`"
                    .into(),
            ));
        }
        if let Some(var) = &self.password_env {
            let password = std::env::var(var).map_err(|_| {
                LedgerError::Unsupported(format!(
                    "`[ledger] password_env` names {var}, which is not set"
                ))
            })?;
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("toolhost");
        Ok(config)
    }

    /// Check the settings without connecting: the url parses and carries no password, the
    /// password variable (if named) is set, the schema is a plain name.
    pub fn check(&self) -> Result<(), LedgerError> {
        check_schema_name(&self.schema)?;
        let settings = self.settings()?;
        tls::connector(&settings, self.ca_file.as_deref()).map(|_| ())
    }

    /// One connection, its driver spawned on the current tokio runtime, with the ledger's
    /// schema first on its search path ([`migrate`] creates it).
    pub async fn connect(&self) -> Result<Client, LedgerError> {
        check_schema_name(&self.schema)?;
        let settings = self.settings()?;
        // The driver ends when the client is dropped or the server goes away; every pending
        // query then fails with the connection's error, which is what callers see.
        let client = match tls::connector(&settings, self.ca_file.as_deref())? {
            None => {
                let (client, connection) = settings.connect(NoTls).await.db()?;
                tokio::spawn(connection);
                client
            }
            Some(tls) => {
                let (client, connection) = settings.connect(tls).await.db()?;
                tokio::spawn(connection);
                client
            }
        };
        client
            .batch_execute(&format!("SET search_path TO {}", self.schema))
            .await
            .db()?;
        Ok(client)
    }

    /// [`PgConfig::connect`], with the connection's writes appended to `chain`
    /// (`chain.rs`).
    pub async fn connect_as(&self, chain: &str) -> Result<Client, LedgerError> {
        let client = self.connect().await?;
        client
            .execute("SELECT set_config('toolhost.host', $1, false)", &[&chain])
            .await
            .db()?;
        Ok(client)
    }
}

/// A driver error as the ledger's `Database` error, with the server's innermost cause.
fn database(e: tokio_postgres::Error) -> LedgerError {
    LedgerError::Database {
        backend: "server",
        message: format!("{e}{}", cause(&e)),
        source: Box::new(e),
    }
}

/// A driver result as the ledger's: `.db()?` where a statement's error leaves the backend.
trait Db<T> {
    fn db(self) -> Result<T, LedgerError>;
}

impl<T> Db<T> for Result<T, tokio_postgres::Error> {
    fn db(self) -> Result<T, LedgerError> {
        self.map_err(database)
    }
}

/// `": <innermost cause>"` of a driver error, when it has one.
fn cause(e: &tokio_postgres::Error) -> String {
    let mut last: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut deepest = None;
    while let Some(c) = last {
        deepest = Some(c);
        last = c.source();
    }
    deepest.map_or(String::new(), |c| format!(": {c}"))
}

/// How long connecting to the server may take before the ledger reports it unreachable.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A schema name is spliced into SQL (`SET search_path` takes no parameters): lowercase
/// letters, digits and `_`, starting with a letter, at most 63 bytes (PostgreSQL's limit).
fn check_schema_name(name: &str) -> Result<(), LedgerError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(LedgerError::Unsupported(format!(
            "ledger schema {name:?}: use lowercase letters, digits and _, starting with a letter \
             (at most 63)"
        )))
    }
}
