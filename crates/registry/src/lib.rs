//! The registry: components → [`Tool`]s with derived schemas, limits and grants.
//!
//! Loading a component (`load.rs`) checks its signature when `[trust]` asks for one
//! (`trust.rs`; `signature.rs` for files, `cosign.rs` for `oci =` components), compiles it (or loads it from the on-disk cache), refuses any
//! import the operator did not grant, derives each exported function's model-facing definition
//! from its WIT types and embedded docs, and resolves its imports once (`InstancePre`) for fast
//! calls. This file holds the types and [`Registry::load`]; the `[[component]]` section is
//! `config.rs`, grants `grants.rs`, WIT → JSON Schema `schema.rs`, JSON ↔ WIT values
//! `convert/`, schema validation `validate/`; `lock.rs` is `toolhost.lock` (what a registry
//! loaded, as digests), `digest.rs` the `sha256:…` form they share.
//!
//! A crate of its own above the sandbox: it uses the contract and the sandbox only, and the
//! runtime reads a loaded [`Tool`] through its accessors.

pub mod cache;
pub mod config;
pub mod convert;
pub mod cosign;
pub mod docs;
pub mod embed;
mod exact_type;
pub mod grants;
mod imports;
mod load;
pub mod lock;
mod needs;
pub mod schema;
mod secrets;
pub mod signature;
pub mod trust;
pub mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use wasmtime::component::types::Type;
use wasmtime::component::{ComponentExportIndex, InstancePre};

use config::{ComponentConfig, Risk, ToolName};
use toolhost_sandbox::{CallState, Grant, Limits, Sandbox, SandboxError};

pub use cache::Origin;
pub use toolhost_contract::Sha256Digest;

/// Why a config or component could not be loaded. Messages name the file, key or import that is
/// wrong and say how to fix it; they are for operators and tool authors, never for models.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read component {path}: {source}")]
    ComponentRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid WebAssembly component")]
    Compile {
        path: PathBuf,
        #[source]
        source: toolhost_sandbox::BoxError,
    },
    #[error("{path} imports `{import}`, which is not granted: {hint}")]
    ImportNotGranted {
        path: PathBuf,
        import: String,
        hint: &'static str,
    },
    #[error(
        "{path}: the config names export `{export}`, but the component exports only: {available}"
    )]
    UnknownExport {
        path: PathBuf,
        export: String,
        available: String,
    },
    #[error("{path}: function `{export}`: {source}")]
    Unsupported {
        path: PathBuf,
        export: String,
        source: schema::UnsupportedType,
    },
    #[error("{path}: function `{export}`: {message}; set `name` for it under [component.tools.{export}]")]
    BadToolName {
        path: PathBuf,
        export: String,
        message: String,
    },
    #[error(
        "tool name `{name}` is used twice ({first} and {second}); give one of them another `name`"
    )]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
    #[error("{path}: filesystem grant `{key}` ({guest}): host directory {host}: {problem}")]
    Grant {
        path: PathBuf,
        key: String,
        guest: String,
        host: PathBuf,
        problem: String,
    },
    #[error(
        "grant `{writable}` ({writable_dir}) is writable and contains grant `{other}` \
         ({other_dir}): a tool with the first could rename or replace what the second reaches; \
         grant directories that do not overlap"
    )]
    GrantOverlap {
        writable: String,
        writable_dir: PathBuf,
        other: String,
        other_dir: PathBuf,
    },
    #[error(
        "grant `{key}` ({dir}) overlaps the host's {what} ({file}); a guest must never reach \
         the host's own files: grant a directory outside the data directory and the compile \
         cache that holds neither the config file nor the approval key"
    )]
    GrantOverHostFile {
        key: String,
        dir: PathBuf,
        what: &'static str,
        file: PathBuf,
    },
    #[error("{path}: `{key}`: secret {name}: {problem}")]
    Secret {
        path: PathBuf,
        key: String,
        name: String,
        problem: String,
    },
    #[error("{path}: function `{export}`: the {which} schema refinement is not usable: {message}")]
    Refinement {
        path: PathBuf,
        export: String,
        which: &'static str,
        message: String,
    },
    #[error("{path} exports no functions, so it provides no tools")]
    NoTools { path: PathBuf },
    #[error("{path} needs {need} {what} when it starts, more than {whom} may have ({limit}); raise `limits = {{ {key} = {need} }}` (in its `[[component]]`, or `[limits]`)")]
    LimitTooLow {
        path: PathBuf,
        /// "its tools", or "its tool `export`" for a tool with limits of its own.
        whom: String,
        what: &'static str,
        key: &'static str,
        need: u64,
        limit: u64,
    },
    #[error("{path} exports no function its embedded WIT declares (it exports {exports}); embed the WIT of the world it was built from")]
    Undeclared { path: PathBuf, exports: String },
    /// `[trust]` requires a signature the component does not have; nothing was compiled.
    #[error("{path} is refused: {refusal}")]
    Untrusted {
        path: PathBuf,
        refusal: signature::Refusal,
    },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// One tool: a function exported by a component, with everything a call needs.
pub struct Tool {
    pub name: ToolName,
    /// The WIT function name.
    pub export: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub risk: Risk,
    /// Where `risk` came from: the tool's setting, its component's, or its grants.
    pub risk_from: toolhost_contract::RiskSource,
    pub approval: toolhost_contract::ApprovalMode,
    /// Who may approve its calls, if the tool says (else the policy's default).
    pub approvers: Option<toolhost_contract::Approvers>,
    /// Whether its calls run as MCP tasks.
    pub task: toolhost_contract::TaskMode,
    pub limits: Limits,
    pub grant: Grant,
    /// The SHA-256 of its component's bytes.
    pub component_digest: Sha256Digest,
    /// The digest of [`Tool::definition`] ([`lock::definition_digest`]): what the model saw.
    pub definition_digest: Sha256Digest,
    pub(crate) input_validator: validate::Validator,
    pub(crate) output_validator: validate::Validator,
    pub(crate) params: Vec<(String, Type)>,
    pub(crate) result: Option<Type>,
    pub(crate) func: ComponentExportIndex,
    pub(crate) pre: Arc<InstancePre<CallState>>,
}

/// The model-facing definition of a tool (what `toolhost tools` prints).
#[derive(Debug, Clone, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    #[serde(rename = "outputSchema")]
    pub output_schema: Value,
    pub risk: Risk,
}

/// What the runtime's stages read of a loaded tool; the fields stay private so that only a load
/// makes them, each derived from the same component.
impl Tool {
    /// Checks a call's arguments against `input_schema`.
    pub fn input_validator(&self) -> &validate::Validator {
        &self.input_validator
    }

    /// Checks a result against `output_schema`.
    pub fn output_validator(&self) -> &validate::Validator {
        &self.output_validator
    }

    /// The WIT function's parameters, by name, in order.
    pub fn params(&self) -> &[(String, Type)] {
        &self.params
    }

    /// The WIT function's result type (`None` for a function without one).
    pub fn result(&self) -> Option<&Type> {
        self.result.as_ref()
    }

    /// The export to call.
    pub fn func(&self) -> &ComponentExportIndex {
        &self.func
    }

    /// The component with its imports resolved once, ready to instantiate.
    pub fn pre(&self) -> &Arc<InstancePre<CallState>> {
        &self.pre
    }

    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.to_string(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            risk: self.risk,
        }
    }
}

/// All loaded tools by model-facing name.
#[derive(Default)]
pub struct Registry {
    /// Shared, so that a call holds its tool for as long as it runs.
    tools: BTreeMap<String, std::sync::Arc<Tool>>,
    /// How each component was obtained (compiled or from the cache), in load order.
    pub origins: Vec<(PathBuf, Origin)>,
    /// Non-fatal findings for the operator (e.g. a component without embedded docs).
    pub warnings: Vec<String>,
    /// Per component, in load order: the `[trust.keys]` name of the key whose signature was
    /// verified, or `None` when it need not be signed.
    pub signers: Vec<Option<String>>,
    /// Components compiled here that the cache does not hold yet ([`Registry::save_cache`]).
    unsaved: Vec<cache::Unsaved>,
    /// What each component is, in load order ([`Registry::lock`]).
    pins: Vec<lock::ComponentPin>,
}

/// What loading needs of a config, and nothing else of it.
#[derive(Debug, Clone, Copy)]
pub struct LoadSpec<'a> {
    /// The `[[component]]` entries.
    pub components: &'a [ComponentConfig],
    /// Where relative paths resolve (the config file's directory).
    pub base_dir: &'a Path,
    /// The file-wide default limits.
    pub defaults: Limits,
    /// The compile cache (none: compile every time, write nothing).
    pub cache_dir: Option<&'a Path>,
    /// The host's own files (what, where: symlinks resolved) that no grant may reach.
    pub host_files: &'a [(&'static str, PathBuf)],
    /// The keys components must be signed by, checked before anything is compiled.
    pub trust: &'a trust::Trust,
    /// The `oci =` components, pulled and checked against their digests, by
    /// [`ComponentConfig::source`].
    pub pulled: &'a BTreeMap<String, toolhost_oci::Pulled>,
}

impl Registry {
    /// Load every component of `spec` into `sandbox`.
    pub fn load(spec: &LoadSpec<'_>, sandbox: &Sandbox) -> Result<Registry, RegistryError> {
        let grants = grants::resolve_all(spec)?;
        let mut reg = Registry::default();
        for (c, g) in spec.components.iter().zip(grants) {
            reg.load_component(spec, c, g, sandbox)?;
        }
        Ok(reg)
    }

    /// Write what was compiled to the compile cache. Loading writes nothing, so that a config
    /// refused after its components were read leaves no file behind.
    pub fn save_cache(&mut self) {
        for u in self.unsaved.drain(..) {
            u.save();
        }
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name).map(|t| &**t)
    }

    /// The tool `name`, shared: what a call holds while it runs.
    pub fn shared(&self, name: &str) -> Option<std::sync::Arc<Tool>> {
        self.tools.get(name).cloned()
    }

    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values().map(|t| &**t)
    }

    /// What was loaded, as `toolhost.lock` pins it.
    pub fn lock(&self) -> lock::Lock {
        lock::Lock {
            version: lock::LOCK_VERSION,
            components: self.pins.clone(),
        }
    }
}
