//! The config file, `toolhost.toml`: the top layer. It reads the file once and composes each
//! section's own type, each defined by the module that uses it:
//!
//! | section | type | module |
//! |---|---|---|
//! | `[limits]` | `LimitsOverride` | `sandbox` |
//! | `[run]` | `RunLimitsConfig` | `runtime::guards` |
//! | `[ledger]` | `LedgerConfig` | `ledger` |
//! | `[policy]` | `PolicyConfig` | `policy` |
//! | `[serve]` | `ServeConfig` | `serve` |
//! | `[agent]` | `AgentConfig` | `agent` |
//! | `[trust]` | `TrustConfig` | `registry::trust` |
//! | `[oci]` | `OciConfig` | `oci` |
//! | `[[component]]` | `ComponentConfig` | `registry::config` |
//!
//! Nothing below this module imports it. A file is checked whole before anything starts: the
//! TOML and its types by serde, then every section's own rules, each problem reported with its
//! key path and all of them at once ([`ConfigError::Invalid`]); what needs the tools' names
//! (policy rules, `agent.terminal_tool`) is checked as soon as the components are read, before
//! the data directory is touched (`build.rs`).

mod build;
mod effective;
mod reload;
mod single;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agent::AgentConfig;
use crate::contract::{ConfigProblem, Listed};
use crate::ledger::LedgerConfig;
use crate::policy::PolicyConfig;
use crate::registry::config::ComponentConfig;
use crate::runtime::guards::RunLimitsConfig;
use crate::sandbox::{Limits, LimitsOverride};
use crate::serve::ServeConfig;

pub use build::{check, check_unlocked, engine_settings, Checked, LockStatus, StartError};
pub use reload::{reload, ReloadError, Reloaded};

/// The default data directory, relative to the config file.
pub const DEFAULT_DATA_DIR: &str = ".toolhost";

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the host keeps its own state (compile cache, ledger, approval key, diagnostics),
    /// relative to the config file. Default `.toolhost`.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// Where compiled components are cached, relative to the config file. Default: `cache` in
    /// the data directory. Hosts (or tests) with separate data directories can share one.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Limits every tool gets unless it overrides them.
    #[serde(default)]
    pub limits: LimitsOverride,
    /// Limits across the calls of a run and of a host.
    #[serde(default)]
    pub run: RunLimitsConfig,
    /// How the ledger stores what happened.
    #[serde(default)]
    pub ledger: LedgerConfig,
    /// Who may call what. Without this section every principal may call every tool.
    #[serde(default)]
    pub policy: Option<PolicyConfig>,
    /// How `toolhost serve` identifies MCP callers.
    #[serde(default)]
    pub serve: ServeConfig,
    /// Bounds of `toolhost agent` runs.
    #[serde(default)]
    pub agent: AgentConfig,
    /// Where spans are exported (OTLP); read again before logging starts (`telemetry_of`).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// The keys components must be signed by.
    #[serde(default)]
    pub trust: crate::registry::trust::TrustConfig,
    /// How `oci =` components are fetched: caps, time, credentials per registry.
    #[serde(default)]
    pub oci: crate::oci::OciConfig,
    /// The components to load.
    #[serde(default, rename = "component")]
    pub components: Vec<ComponentConfig>,
    /// The directory relative paths are resolved against (the config file's directory).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file this config was read from (no grant may reach it).
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// What errors call this config when it is not a file (`--component FILE`).
    #[serde(skip)]
    label: Option<String>,
}

/// Why a config file cannot be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or a key or value of the wrong kind (serde stops at the first).
    #[error("invalid config {file}: {message}")]
    Parse { file: String, message: String },
    /// Every problem the section checks found, each at its key.
    #[error("invalid config {file}: {}", Listed { items: problems, noun: "problems" })]
    Invalid {
        file: String,
        problems: Vec<ConfigProblem>,
    },
}

impl ConfigError {
    /// The problems found, when the file parsed.
    pub fn problems(&self) -> &[ConfigProblem] {
        match self {
            ConfigError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

impl Config {
    /// Read, parse and check a config file; relative paths in it resolve against its directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Config::parse_file(&text, base, Some(path))
    }

    /// Parse and check config text; `base_dir` is where relative paths resolve.
    pub fn parse(text: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        Config::parse_file(text, base_dir, None)
    }

    fn parse_file(text: &str, base_dir: &Path, file: Option<&Path>) -> Result<Config, ConfigError> {
        let name = file.map_or_else(|| "(text)".to_string(), |f| f.display().to_string());
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: name.clone(),
            message: e.to_string(),
        })?;
        config.base_dir = base_dir.to_path_buf();
        config.file = file.map(Path::to_path_buf);
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                file: name,
                problems,
            })
        }
    }

    /// Every problem of every section, section by section (`data_dir`, `[limits]`, `[run]`,
    /// `[policy]`, `[serve]`, `[agent]`, then each `[[component]]`); what needs the tools' names
    /// is checked by [`Config::tool_name_problems`].
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut p = Vec::new();
        let dirs = [
            ("data_dir", &self.data_dir, format!("{DEFAULT_DATA_DIR:?}")),
            (
                "cache_dir",
                &self.cache_dir,
                "`cache` in the data directory".into(),
            ),
        ];
        for (key, dir, default) in dirs {
            if dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
                p.push(ConfigProblem::new(
                    key,
                    format!("is empty; leave it out for {default}, or name a directory"),
                ));
            }
        }
        self.limits.validate("limits", &mut p);
        self.run.validate(&mut p);
        self.ledger.validate(&self.base_dir, &mut p);
        if let Some(policy) = &self.policy {
            crate::policy::validate(policy, &mut p);
        }
        self.serve.validate(&mut p);
        self.caller_directory_problems(&mut p);
        self.agent.validate(&mut p);
        if let Err(message) = self.telemetry.check() {
            p.push(ConfigProblem::new("telemetry.otlp_endpoint", message));
        }
        self.trust.validate(&self.components, &mut p);
        self.oci.validate(&mut p);
        for (i, c) in self.components.iter().enumerate() {
            p.extend(c.source_problem(i));
            c.limits.validate(&format!("component[{i}].limits"), &mut p);
            for (export, t) in &c.tools {
                t.limits
                    .validate(&format!("component[{i}].tools.{export}.limits"), &mut p);
            }
        }
        p
    }

    /// With a `{principal}` or `{tenant}` grant, every identity the config names must be usable
    /// as one directory name, or its calls would fail only when they run.
    fn caller_directory_problems(&self, p: &mut Vec<ConfigProblem>) {
        let uses = |part: &str| {
            self.components.iter().any(|c| {
                c.fs.iter()
                    .chain(c.tools.values().flat_map(|t| t.fs.iter().flatten()))
                    .any(|g| g.host.components().any(|x| x.as_os_str() == part))
            })
        };
        let (principal, tenant) = (uses("{principal}"), uses("{tenant}"));
        let mut named = vec![
            (
                "serve.principal".to_string(),
                &self.serve.principal,
                principal,
            ),
            ("serve.tenant".to_string(), &self.serve.tenant, tenant),
        ];
        for (i, t) in self.serve.tokens.iter().enumerate() {
            named.push((
                format!("serve.token[{i}].principal"),
                &t.principal,
                principal,
            ));
            named.push((format!("serve.token[{i}].tenant"), &t.tenant, tenant));
        }
        for (key, name, needed) in named {
            if needed && crate::sandbox::check_caller_name(name).is_err() {
                p.push(ConfigProblem::new(
                    key,
                    format!(
                        "{name:?} cannot name the directory a `{{principal}}`/`{{tenant}}` grant \
                         opens for it; use 1 to 128 of A-Z a-z 0-9 . _ - @ +, not starting \
                         with `.`"
                    ),
                ));
            }
        }
    }

    /// What in the config names a tool that is not among `tools`: a policy rule's exact tool
    /// name (or a glob that matches none), and `agent.terminal_tool`. A config without any tool
    /// (used only to read the ledger, say) has no rule to check.
    pub fn tool_name_problems(&self, tools: &[&str]) -> Vec<ConfigProblem> {
        let known = || {
            let mut t = tools.to_vec();
            t.sort_unstable();
            t.join(", ")
        };
        let mut p = Vec::new();
        let rules = self.policy.iter().flat_map(|c| c.rules.iter());
        for (i, rule) in rules.enumerate().filter(|_| !tools.is_empty()) {
            for (j, pattern) in rule.tools.iter().enumerate() {
                if !crate::policy::glob_matches_any(pattern, tools) {
                    p.push(ConfigProblem::new(
                        format!("policy.rule[{i}].tools[{j}]"),
                        format!(
                            "{pattern:?} matches no configured tool; the tools are: {}",
                            known()
                        ),
                    ));
                }
            }
        }
        if let Some(t) = &self.agent.terminal_tool {
            if !tools.contains(&t.as_str()) {
                p.push(ConfigProblem::new(
                    "agent.terminal_tool",
                    format!("{t:?} is not a configured tool; the tools are: {}", known()),
                ));
            }
        }
        p
    }

    /// The file's name as errors show it.
    pub fn file_name(&self) -> String {
        match (&self.file, &self.label) {
            (Some(f), _) => f.display().to_string(),
            (None, Some(label)) => label.clone(),
            (None, None) => "(text)".to_string(),
        }
    }

    /// The lock beside the config file (`toolhost.toml` → `toolhost.lock`); none without a
    /// file (`--component FILE`). A config file that is itself named `*.lock` gets `*.lock.lock`.
    pub fn lock_path(&self) -> Option<PathBuf> {
        let file = self.file.as_ref()?;
        Some(match file.extension() {
            Some(e) if e == "lock" => {
                let mut name = file.as_os_str().to_owned();
                name.push(".lock");
                PathBuf::from(name)
            }
            _ => file.with_extension("lock"),
        })
    }

    /// The data directory, resolved.
    pub fn data_dir(&self) -> PathBuf {
        self.base_dir.join(
            self.data_dir
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_DATA_DIR)),
        )
    }

    /// Where components pulled from registries are kept, by digest: `oci` in the data
    /// directory.
    pub fn oci_store(&self) -> crate::oci::Store {
        crate::oci::Store::new(self.data_dir().join("oci"))
    }

    /// The compile cache directory, resolved.
    pub fn cache_dir(&self) -> PathBuf {
        match &self.cache_dir {
            Some(dir) => self.base_dir.join(dir),
            None => self.data_dir().join("cache"),
        }
    }

    /// The file-wide default limits.
    pub fn default_limits(&self) -> Limits {
        Limits::default().with(&self.limits)
    }
}
