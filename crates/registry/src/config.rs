//! The `[[component]]` section of `toolhost.toml`: which components, which capabilities, which
//! limits (the whole file is `toolhost::config::Config`).
//!
//! Parsing is strict (`deny_unknown_fields`), names and addresses are validated newtypes whose
//! errors say how to fix the value, and every default is the safe one: no filesystem, no network,
//! no name lookup.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use toolhost_contract::ConfigProblem;
pub use toolhost_contract::{ApprovalMode, Risk, TaskMode};
use toolhost_sandbox::{HostPort, LimitsOverride};

/// One component and the tools it exports.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentConfig {
    /// Path to the `.wasm` component, relative to the config file (this or `oci`).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The component in an OCI registry: `registry/repository@sha256:…`, or `…:TAG` pinned by
    /// the lock (this or `path`).
    #[serde(default)]
    pub oci: Option<toolhost_oci::Reference>,
    /// Default risk of this component's tools.
    #[serde(default)]
    pub risk: Option<Risk>,
    /// Limits for this component's tools, over the file-wide defaults.
    #[serde(default)]
    pub limits: LimitsOverride,
    /// Filesystem grants for this component's tools (none by default).
    #[serde(default)]
    pub fs: Vec<FsGrant>,
    /// Network grant for this component's tools (none by default).
    #[serde(default)]
    pub network: Option<NetworkGrant>,
    /// Credentials the tools use without ever holding them (none by default).
    #[serde(default)]
    pub secrets: Vec<SecretConfig>,
    /// Per exported function (by its WIT name): the model-facing name and overrides.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, ToolConfig>,
    /// Keys of `[trust.keys]`, by name, one of which must have signed this component (none:
    /// as `[trust] require` says).
    #[serde(default)]
    pub signed_by: Vec<String>,
}

impl ComponentConfig {
    /// The component as a lock names it: its `path` as the config writes it, or `oci:` and its
    /// reference.
    pub fn source(&self) -> String {
        match (&self.oci, &self.path) {
            (Some(r), _) => format!("oci:{r}"),
            (None, Some(p)) => p.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// The component as messages name it: its file (resolved against `base_dir`), or `oci:`
    /// and its reference.
    pub fn label(&self, base_dir: &Path) -> PathBuf {
        match &self.path {
            Some(p) if self.oci.is_none() => base_dir.join(p),
            _ => PathBuf::from(self.source()),
        }
    }

    /// The problem of a component that names both a file and a reference, or neither.
    pub fn source_problem(&self, i: usize) -> Option<ConfigProblem> {
        let message = match (&self.path, &self.oci) {
            (Some(_), Some(_)) => "names both `path` and `oci`; keep one",
            (None, None) => "names no component; add `path = \"tool.wasm\"` or `oci = \"registry/repository@sha256:…\"`",
            _ => return None,
        };
        Some(ConfigProblem::new(format!("component[{i}]"), message))
    }

    /// The component at `path` with every default: nothing granted, the file-wide limits.
    pub fn at(path: PathBuf) -> ComponentConfig {
        ComponentConfig {
            path: Some(path),
            oci: None,
            risk: None,
            limits: LimitsOverride::default(),
            fs: Vec::new(),
            network: None,
            secrets: Vec::new(),
            tools: Default::default(),
            signed_by: Vec::new(),
        }
    }
}

/// Overrides for one exported function.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// The name the model sees (default: the WIT name with `-` turned into `_`).
    #[serde(default)]
    pub name: Option<ToolName>,
    #[serde(default)]
    pub risk: Option<Risk>,
    #[serde(default)]
    pub limits: LimitsOverride,
    /// Replaces the component's filesystem grants for this tool.
    #[serde(default)]
    pub fs: Option<Vec<FsGrant>>,
    /// Replaces the component's network grant for this tool.
    #[serde(default)]
    pub network: Option<NetworkGrant>,
    /// Whether a human must approve each call (default: only for `destructive` tools).
    #[serde(default)]
    pub approval: ApprovalMode,
    /// Whether calls run as MCP tasks (`never`, `optional`, `required`; default `never`).
    #[serde(default)]
    pub task: TaskMode,
    /// Who may approve its calls (`client` or `operator`; default: `[policy.approval]
    /// approvers`, itself `client` by default).
    #[serde(default)]
    pub approvers: Option<toolhost_contract::Approvers>,
    /// Operator refinements of the derived schemas; they can only narrow them.
    #[serde(default)]
    pub refine: Refinement,
}

/// JSON Schema (Draft 2020-12) fragments that narrow a tool's derived schemas, written as TOML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refinement {
    /// Narrows the input schema, e.g. `{ properties = { path = { pattern = "^[a-z]+$" } } }`.
    #[serde(default)]
    pub input: Option<serde_json::Value>,
    /// Narrows the output schema.
    #[serde(default)]
    pub output: Option<serde_json::Value>,
}

/// A directory on the host made visible to the guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrant {
    /// Host directory, relative to the config file.
    pub host: PathBuf,
    /// Absolute path the guest sees, e.g. `/workspace`.
    pub guest: GuestPath,
    /// `ro` (default) or `rw`.
    #[serde(default)]
    pub mode: FsMode,
}

/// Whether a preopened directory may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum FsMode {
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Outgoing network access: raw TCP and `wasi:http` alike, only to these `host:port` entries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkGrant {
    /// `host:port` entries the tool may reach (IPv6 as `[::1]:80`).
    #[serde(default)]
    pub allow: Vec<HostPort>,
    /// Whether the guest may resolve names itself (`wasi:sockets/ip-name-lookup`). Default false.
    #[serde(default)]
    pub dns: bool,
}

/// A credential bound to hosts: the guest finds a placeholder in the environment variable
/// `name`; the host sends the value, read from the host's environment variable `env` or from
/// `file`, only in the headers of `wasi:http` requests to `hosts`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// The environment variable the guest finds the placeholder in, e.g. `GITHUB_TOKEN`.
    pub name: SecretName,
    /// The host's environment variable that holds the value.
    #[serde(default)]
    pub env: Option<String>,
    /// A file that holds the value (relative to the config file; one trailing newline ignored).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The `host:port` entries the value is sent to; each must be in a network grant of the
    /// component.
    pub hosts: Vec<HostPort>,
}

/// A secret's name as the guest sees it: an environment variable name of 1–64 characters,
/// `A-Z`, `0-9` and `_`, not starting with a digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct SecretName(String);

impl TryFrom<String> for SecretName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = (1..=64).contains(&s.len())
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if ok {
            Ok(SecretName(s))
        } else {
            Err(format!(
                "secret name {s:?} must be an environment variable name of 1 to 64 characters \
                 (A-Z, 0-9 and '_', not starting with a digit), like \"GITHUB_TOKEN\""
            ))
        }
    }
}

impl SecretName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A model-facing tool name: 1–64 of `A-Z a-z 0-9 _ -`, valid for MCP and OpenAI alike.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolName(String);

/// The longest tool name OpenAI-style function calling accepts.
pub const MAX_TOOL_NAME_LEN: usize = 64;

impl TryFrom<String> for ToolName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.is_empty() || s.len() > MAX_TOOL_NAME_LEN {
            return Err(format!(
                "tool name {s:?} must be 1 to {MAX_TOOL_NAME_LEN} characters long"
            ));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(format!(
                "tool name {s:?} contains {c:?}; use only letters, digits, '_' and '-'"
            ));
        }
        Ok(ToolName(s))
    }
}

impl From<ToolName> for String {
    fn from(n: ToolName) -> String {
        n.0
    }
}

impl ToolName {
    /// The default model-facing name of an exported function: kebab-case turned to snake_case.
    pub fn from_export(export: &str) -> Result<Self, String> {
        ToolName::try_from(export.replace('-', "_"))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An absolute guest path without `.`/`..` components, e.g. `/workspace`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct GuestPath(String);

impl TryFrom<String> for GuestPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = s.starts_with('/')
            && s.len() > 1
            && !s.ends_with('/')
            && s[1..]
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if ok {
            Ok(GuestPath(s))
        } else {
            Err(format!(
                "guest path {s:?} must be absolute, like \"/workspace\", without '.', '..', \
                 empty parts or a trailing '/'"
            ))
        }
    }
}

impl GuestPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
