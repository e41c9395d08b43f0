//! A checked config → a running [`Runtime`], in an order that keeps a bad config from leaving
//! anything behind:
//!
//! 1. every section on its own ([`Config::load`] already did it);
//! 2. the lock beside the config is read; `oci =` components are pulled (from the data
//!    directory's store when they are there, else from their registry, at the digest the
//!    config or the lock names) into memory, each checked against its digest;
//! 3. the grants (opened read-only) and the components (read, their signatures checked when
//!    `[trust]` asks, compiled in memory or taken from the compile cache, which is only read),
//!    then the lock (what loaded must be what it pins), then every name the config gives a
//!    tool;
//! 4. only then the side effects, all in the data directory: pulled components are stored,
//!    the compile cache is written, the ledger opened (and recovered), the approval key read
//!    or created.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Config, ConfigError};
use crate::oci::{OciClient, OciError, Pulled, Wanted};
use crate::policy::Policy;
use crate::registry::grants::real_path;
use crate::registry::lock::{Lock, LockError};
use crate::registry::trust::Trust;
use crate::registry::{LoadSpec, Registry, RegistryError};
use crate::runtime::{Diagnostics, Runtime, RuntimeParts};
use crate::sandbox::{EngineSettings, EpochMode, Sandbox};

/// Why a runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A component, a grant or a tool of the config cannot be loaded.
    #[error("invalid config {file}: {source}")]
    Registry {
        file: String,
        #[source]
        source: Box<RegistryError>,
    },
    #[error("cannot open the ledger: {0}")]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error("the approval key: {0}")]
    Policy(#[from] crate::policy::PolicyError),
    /// The lock file cannot be read, or what the config loads is not what it pins.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A key `[trust]` names cannot be read.
    #[error("[trust]: {0}")]
    Trust(#[from] crate::registry::signature::SignatureError),
    /// An `oci =` component cannot be fetched, or is not what its digest says.
    #[error("component oci:{reference}: {source}")]
    Pull {
        reference: String,
        #[source]
        source: OciError,
    },
}

/// Engine settings large enough for every limit the config can give a tool.
pub fn engine_settings(config: &Config) -> EngineSettings {
    let base = config.default_limits();
    let mut all = vec![base];
    for c in &config.components {
        let cl = base.with(&c.limits);
        all.push(cl);
        all.extend(c.tools.values().map(|t| cl.with(&t.limits)));
    }
    EngineSettings {
        max_memory_bytes: all.iter().map(|l| l.memory_bytes).max().unwrap_or(0),
        max_table_elements: all.iter().map(|l| l.table_elements).max().unwrap_or(0),
        max_instances: config.run.concurrent_calls(),
    }
}

impl Config {
    /// The host's own files, where they really are (symlinks resolved), whether or not they
    /// exist yet: no grant may reach them.
    pub fn host_files(&self) -> Vec<(&'static str, PathBuf)> {
        let data = self.data_dir();
        let key = crate::policy::approval_key_path(self.policy.as_ref(), &self.base_dir, &data);
        // The cache holds compiled machine code the host loads without re-checking it: a
        // guest that could write there could run code as the host.
        let mut files = vec![
            ("data directory", real_path(&data)),
            ("compile cache", real_path(&self.cache_dir())),
            ("approval key", real_path(&key)),
        ];
        if let Some(file) = &self.file {
            files.push(("config file", real_path(file)));
        }
        files
    }

    /// Load a config file and start the host it describes ([`Config::start`]).
    pub fn start_file(path: &std::path::Path, epochs: EpochMode) -> Result<Runtime, StartError> {
        Config::load(path)?.start(epochs)
    }

    /// Start the host this config describes: engine sized for its limits, every component
    /// loaded, the ledger opened (and calls a previous process left unfinished closed as
    /// `outcome_unknown`).
    pub fn start(&self, epochs: EpochMode) -> Result<Runtime, StartError> {
        let Checked {
            sandbox,
            mut registry,
            policy,
            lock: _,
            pulled,
        } = check(self, epochs)?;
        let data = self.data_dir();
        // Side effects from here on.
        store_pulled(self, &pulled)?;
        registry.save_cache();
        let ledger = self.ledger.open(&data, &self.base_dir)?;
        ledger.recover()?;
        let (approval_key, approval_ttl) =
            crate::policy::load_approval_key(self.policy.as_ref(), &self.base_dir, &data)?;
        Ok(Runtime::new(RuntimeParts {
            sandbox,
            registry,
            diagnostics: Diagnostics::new(Some(data.join("diagnostics.log"))),
            ledger,
            policy,
            approval_key,
            approval_ttl,
            approvers: self
                .policy
                .as_ref()
                .map(|p| p.approval.approvers)
                .unwrap_or_default(),
            run: self.run,
        }))
    }
}

/// Keep what was pulled in the config's store (a side effect: after every check passed).
pub(super) fn store_pulled(
    config: &Config,
    pulled: &BTreeMap<String, Pulled>,
) -> Result<(), StartError> {
    let store = config.oci_store();
    for p in pulled.values() {
        p.save(&store).map_err(|source| StartError::Pull {
            reference: p.reference.to_string(),
            source,
        })?;
    }
    Ok(())
}

/// A config checked through its components, with nothing written yet.
pub struct Checked {
    pub sandbox: Sandbox,
    /// The tools, compiled (or read from the cache) but not saved to it.
    pub registry: Registry,
    pub policy: Policy,
    /// Whether a lock pinned what was loaded.
    pub lock: LockStatus,
    /// The `oci =` components, by source, not yet in the store.
    pub pulled: BTreeMap<String, Pulled>,
}

/// What the lock beside a config said about what it loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStatus {
    /// Not a config file (`--component FILE`): nothing to lock.
    NoFile,
    /// No lock file at this path: nothing is pinned.
    Absent(PathBuf),
    /// The lock at this path pins exactly what was loaded.
    Pinned(PathBuf),
    /// Not compared (`toolhost lock` reads the lock itself).
    Unchecked,
}

/// Steps 1 to 3 above: everything but the side effects (`toolhost check-config` stops here).
/// What the config loads must be what its lock pins, when it has one; a tag is pulled at the
/// manifest the lock pins for it.
pub fn check(config: &Config, epochs: EpochMode) -> Result<Checked, StartError> {
    let path = config.lock_path();
    let lock = match &path {
        Some(p) => Lock::read(p)?,
        None => None,
    };
    let mut checked = load(config, epochs, Tags::Pinned(lock.as_ref()))?;
    checked.lock = match (path, lock) {
        (None, _) => LockStatus::NoFile,
        (Some(path), None) => LockStatus::Absent(path),
        (Some(path), Some(lock)) => {
            lock.check(&path, &checked.registry.lock())?;
            LockStatus::Pinned(path)
        }
    };
    Ok(checked)
}

/// [`check`] without comparing the lock, each tag pulled where it points now: what
/// `toolhost lock` writes one from.
pub fn check_unlocked(config: &Config, epochs: EpochMode) -> Result<Checked, StartError> {
    load(config, epochs, Tags::Resolve)
}

/// Where an `oci =` component named by a tag alone is pulled from.
pub(super) enum Tags<'a> {
    /// The manifest the lock pins for it; without one it is refused.
    Pinned(Option<&'a Lock>),
    /// Wherever the tag points now (`toolhost lock`).
    Resolve,
}

/// Every `oci =` component, by source: from the store, else from its registry.
fn pull(
    config: &Config,
    trust: &Trust,
    tags: &Tags<'_>,
) -> Result<BTreeMap<String, Pulled>, StartError> {
    let mut sources = Vec::new();
    let mut wanted = Vec::new();
    for c in &config.components {
        let (Some(reference), source) = (&c.oci, c.source()) else {
            continue;
        };
        if let Some(i) = sources.iter().position(|s| s == &source) {
            let w: &mut Wanted = &mut wanted[i];
            w.signatures |= trust.wants_signature(c);
            continue;
        }
        let pinned = match tags {
            Tags::Pinned(Some(lock)) => lock.manifest_of(&source).cloned(),
            _ => None,
        };
        sources.push(source);
        wanted.push(Wanted {
            reference: reference.clone(),
            pinned,
            signatures: trust.wants_signature(c),
        });
    }
    let client = OciClient::new(&config.oci, &config.base_dir);
    let store = config.oci_store();
    let pulled = client
        .pull_all_blocking(&wanted, matches!(tags, Tags::Resolve), Some(&store))
        .map_err(|(i, source)| StartError::Pull {
            reference: wanted[i].reference.to_string(),
            source,
        })?;
    Ok(sources.into_iter().zip(pulled).collect())
}

fn load(config: &Config, epochs: EpochMode, tags: Tags<'_>) -> Result<Checked, StartError> {
    let sandbox =
        Sandbox::new(engine_settings(config), epochs).map_err(|e| StartError::Registry {
            file: config.file_name(),
            source: Box::new(RegistryError::from(e)),
        })?;
    let (registry, pulled) = load_tools(config, &sandbox, tags)?;
    let policy = match &config.policy {
        // Checked with the rest of the file; compiled again here.
        Some(p) => Policy::from_config(p, &config.base_dir)?,
        None => Policy::allow_all(),
    };
    Ok(Checked {
        sandbox,
        registry,
        policy,
        lock: LockStatus::Unchecked,
        pulled,
    })
}

/// The config's tools, loaded into `sandbox`: pulled, signatures checked, compiled, and every
/// tool name the config gives checked against them.
pub(super) fn load_tools(
    config: &Config,
    sandbox: &Sandbox,
    tags: Tags<'_>,
) -> Result<(Registry, BTreeMap<String, Pulled>), StartError> {
    let trust = config.trust.load(&config.base_dir)?;
    let pulled = pull(config, &trust, &tags)?;
    let cache = config.cache_dir();
    let host_files = config.host_files();
    let registry = Registry::load(
        &LoadSpec {
            components: &config.components,
            base_dir: &config.base_dir,
            defaults: config.default_limits(),
            cache_dir: Some(&cache),
            host_files: &host_files,
            trust: &trust,
            pulled: &pulled,
        },
        sandbox,
    )
    .map_err(|source| StartError::Registry {
        file: config.file_name(),
        source: Box::new(source),
    })?;
    let names: Vec<&str> = registry.tools().map(|t| t.name.as_str()).collect();
    let problems = config.tool_name_problems(&names);
    if !problems.is_empty() {
        return Err(ConfigError::Invalid {
            file: config.file_name(),
            problems,
        }
        .into());
    }
    Ok((registry, pulled))
}
