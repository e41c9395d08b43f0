//! Changing the tools of a running host (`toolhost serve` on `SIGHUP`): the config file and its
//! lock are read again, the new set is pulled, verified and compiled into the running engine
//! first, and swapped in only when all of it passed. Calls already running finish on the tools
//! they started with; a config that fails changes nothing.
//!
//! What a reload changes: the components, their tools and grants, `[trust]`, `[oci]`, the lock,
//! and the rules of `[policy]` (its default and `[[policy.rule]]`), swapped in with the tools
//! at once. The other sections (`[run]`, `[ledger]`, `[serve]`, `[policy.approval]`, …) are
//! read at start only; a reload that needs an engine larger than the one running (a higher
//! memory or table ceiling) is refused, since the engine is sized once.

use super::build::{load_tools, store_pulled, StartError, Tags};
use super::{engine_settings, Config};
use crate::policy::Policy;
use crate::registry::lock::Lock;
use crate::Runtime;

/// What a reload did: the tools before and after, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Tools under the same name whose definition or component changed.
    pub replaced: Vec<String>,
    pub tools: usize,
}

/// Why a reload was refused (the running tools are unchanged).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(
        "the new config needs {what} {needed}, above the {running} the running engine was sized \
         for; restart the host to raise it"
    )]
    EngineTooSmall {
        what: &'static str,
        needed: u64,
        running: u64,
    },
}

/// Load `config`'s tools into `rt`'s engine, checked as a start checks them (lock, pulls,
/// signatures, names), compile its rules, then serve both.
pub fn reload(config: &Config, rt: &Runtime) -> Result<Reloaded, ReloadError> {
    let running = rt.sandbox().settings();
    let needed = engine_settings(config);
    for (what, needed, running) in [
        (
            "a memory ceiling of",
            needed.max_memory_bytes,
            running.max_memory_bytes,
        ),
        (
            "a table ceiling of",
            needed.max_table_elements,
            running.max_table_elements,
        ),
    ] {
        if needed > running {
            return Err(ReloadError::EngineTooSmall {
                what,
                needed,
                running,
            });
        }
    }
    let path = config.lock_path();
    let lock = match &path {
        Some(p) => Lock::read(p).map_err(StartError::from)?,
        None => None,
    };
    let (mut registry, pulled) = load_tools(config, rt.sandbox(), Tags::Pinned(lock.as_ref()))?;
    if let (Some(path), Some(lock)) = (&path, &lock) {
        lock.check(path, &registry.lock())
            .map_err(StartError::from)?;
    }
    let policy = match &config.policy {
        Some(p) => Policy::from_config(p, &config.base_dir).map_err(StartError::from)?,
        None => Policy::allow_all(),
    };
    store_pulled(config, &pulled)?;
    registry.save_cache();
    let before = rt.registry();
    let mut done = Reloaded {
        added: Vec::new(),
        removed: Vec::new(),
        replaced: Vec::new(),
        tools: registry.tools().count(),
    };
    for t in registry.tools() {
        match before.get(t.name.as_str()) {
            None => done.added.push(t.name.to_string()),
            Some(b)
                if b.definition_digest != t.definition_digest
                    || b.component_digest != t.component_digest =>
            {
                done.replaced.push(t.name.to_string())
            }
            Some(_) => {}
        }
    }
    for t in before.tools() {
        if registry.get(t.name.as_str()).is_none() {
            done.removed.push(t.name.to_string());
        }
    }
    rt.replace_served(registry, policy);
    Ok(done)
}
