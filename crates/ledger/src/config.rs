//! The `[ledger]` section: where the ledger lives and how it stores what happened.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::postgres::PgConfig;
use super::{Ledger, LedgerError};

/// How long a host's lease on a PostgreSQL ledger lasts without renewal, by default: after a
/// host stops (or loses the database) this long, other hosts close its open calls.
pub const DEFAULT_LEASE_SECS: u64 = 10;

/// The shortest and longest lease accepted. Shorter would let a slow renewal (a busy database)
/// end a live host's calls; longer would leave a dead host's calls open for minutes.
pub const LEASE_SECS_RANGE: std::ops::RangeInclusive<u64> = 3..=300;

/// The `[ledger]` section.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// `normal` (default: WAL, durable across process crashes) or `full` (also across power
    /// loss). SQLite only: a PostgreSQL server keeps its own durability settings.
    #[serde(default)]
    pub synchronous: Synchronous,
    /// Record argument content in the audit trail (default false: digests and sizes only).
    #[serde(default)]
    pub record_content: bool,
    /// `postgres://user@host:port/database`: the ledger is in PostgreSQL, shared by every host
    /// pointed at it (default: the SQLite file `ledger.sqlite` in the data directory). Never
    /// put a password here (refused): name its environment variable in `password_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The environment variable that holds the PostgreSQL password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// The PostgreSQL schema of the ledger's tables (default `toolhost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Seconds a host's lease lasts without renewal (default [`DEFAULT_LEASE_SECS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_secs: Option<u64>,
    /// A PEM file of CA certificates the database server's certificate may chain to (with
    /// `sslmode=require` in the url), relative to the config file; Mozilla's roots and the
    /// system's are trusted as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
}

/// SQLite durability level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    #[default]
    Normal,
    Full,
}

impl LedgerConfig {
    /// The ledger's open options these settings give.
    pub fn options(&self) -> super::LedgerOptions {
        super::LedgerOptions {
            synchronous_full: self.synchronous == Synchronous::Full,
            record_content: self.record_content,
        }
    }

    /// The PostgreSQL settings and lease, when `url` is set (`ca_file` taken relative to
    /// `base`, the config file's directory); every key that only means something for one
    /// backend is refused for the other.
    pub fn postgres(&self, base: &Path) -> Result<Option<(PgConfig, Duration)>, LedgerError> {
        let Some(url) = &self.url else {
            for (key, set) in [
                ("password_env", self.password_env.is_some()),
                ("schema", self.schema.is_some()),
                ("lease_secs", self.lease_secs.is_some()),
                ("ca_file", self.ca_file.is_some()),
            ] {
                if set {
                    return Err(LedgerError::Unsupported(format!(
                        "`[ledger] {key}` applies to a PostgreSQL ledger; set `[ledger] url` \
                         or remove it"
                    )));
                }
            }
            return Ok(None);
        };
        if self.synchronous == Synchronous::Full {
            return Err(LedgerError::Unsupported(
                "`[ledger] synchronous` applies to the SQLite ledger; a PostgreSQL server keeps \
                 its own durability settings (synchronous_commit)"
                    .into(),
            ));
        }
        let secs = self.lease_secs.unwrap_or(DEFAULT_LEASE_SECS);
        if !LEASE_SECS_RANGE.contains(&secs) {
            return Err(LedgerError::Unsupported(format!(
                "`[ledger] lease_secs = {secs}`: use {} to {}",
                LEASE_SECS_RANGE.start(),
                LEASE_SECS_RANGE.end()
            )));
        }
        let config = PgConfig {
            url: url.clone(),
            password_env: self.password_env.clone(),
            schema: self.schema.clone().unwrap_or_else(|| "toolhost".into()),
            ca_file: self.ca_file.as_ref().map(|f| base.join(f)),
        };
        Ok(Some((config, Duration::from_secs(secs))))
    }

    /// Every problem with these settings that can be seen without connecting (`check-config`
    /// and startup report them with the others).
    pub fn validate(&self, base: &Path, problems: &mut Vec<toolhost_contract::ConfigProblem>) {
        let checked = self
            .postgres(base)
            .and_then(|pg| pg.map_or(Ok(()), |(pg, _)| pg.check()));
        if let Err(e) = checked {
            let message = match e {
                LedgerError::Unsupported(m) => m,
                other => other.to_string(),
            };
            problems.push(toolhost_contract::ConfigProblem::new("ledger", message));
        }
    }

    /// Open the ledger these settings name: PostgreSQL when `url` is set, else the SQLite file
    /// `ledger.sqlite` in `data`.
    pub fn open(&self, data: &Path, base: &Path) -> Result<Ledger, LedgerError> {
        match self.postgres(base)? {
            Some((pg, lease)) => Ledger::open_postgres(&pg, lease, self.options()),
            None => Ledger::open(&data.join("ledger.sqlite"), self.options()),
        }
    }
}
