//! `toolhost.lock`: what the host runs, pinned. For each component, the SHA-256 of its bytes;
//! for each of its tools, the digest of the definition a model sees (name, description, input
//! and output schema, risk) and of each part, so that a refusal can say which part changed.
//!
//! A loaded [`Registry`](super::Registry) describes itself as a [`Lock`]; the host compares the
//! lock file with it before anything runs ([`Lock::check`]), and `toolhost lock` writes it.
//! A tool's definition digest is the SHA-256 of the definition's canonical JSON (RFC 8785):
//! `{"description":…,"inputSchema":…,"name":…,"outputSchema":…,"risk":…}`, exactly what
//! `toolhost tools` prints for it. Each part's digest is the SHA-256 of that part's canonical
//! JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolhost_contract::canonical::canonical_json;
use toolhost_contract::{Listed, Risk};

use super::ToolDefinition;
use toolhost_contract::Sha256Digest;

/// The lock file format this host reads and writes.
pub const LOCK_VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    /// In the config's order.
    #[serde(default, rename = "component")]
    pub components: Vec<ComponentPin>,
}

/// One component: where the config takes it from, its bytes' digest, its tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentPin {
    /// The component as the config names it (its `path`, as written, or `oci:` and its
    /// reference).
    pub source: String,
    /// For an `oci =` component, its manifest's digest: what a tag is pulled at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Sha256Digest>,
    pub sha256: Sha256Digest,
    /// By model-facing name.
    #[serde(default, rename = "tool")]
    pub tools: BTreeMap<String, ToolPin>,
}

/// One tool's definition, as digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPin {
    /// The digest of the whole definition (what ledger rows and approvals carry).
    pub definition: Sha256Digest,
    pub description: Sha256Digest,
    pub input_schema: Sha256Digest,
    pub output_schema: Sha256Digest,
    pub risk: Risk,
}

impl ToolPin {
    /// The pin of a definition.
    pub fn of(d: &ToolDefinition) -> ToolPin {
        let digest = |v: &serde_json::Value| Sha256Digest::of(&canonical_json(v));
        ToolPin {
            definition: definition_digest(d),
            description: digest(&serde_json::Value::String(d.description.clone())),
            input_schema: digest(&d.input_schema),
            output_schema: digest(&d.output_schema),
            risk: d.risk,
        }
    }

    /// The parts of `self` that differ in `now`, by name.
    fn changes(&self, now: &ToolPin) -> Vec<&'static str> {
        let parts = [
            ("description", self.description == now.description),
            ("input schema", self.input_schema == now.input_schema),
            ("output schema", self.output_schema == now.output_schema),
            ("risk", self.risk == now.risk),
        ];
        let mut changed: Vec<_> = parts.iter().filter(|p| !p.1).map(|p| p.0).collect();
        if changed.is_empty() && self.definition != now.definition {
            changed.push("definition");
        }
        changed
    }
}

/// The digest of a tool's definition: SHA-256 of its canonical JSON.
pub fn definition_digest(d: &ToolDefinition) -> Sha256Digest {
    let value = serde_json::to_value(d).expect("a definition is JSON");
    Sha256Digest::of(&canonical_json(&value))
}

/// One way the config's components differ from the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockProblem {
    /// The config loads a component the lock does not list.
    Unlocked { source: String },
    /// The lock lists a component the config no longer loads.
    Missing { source: String },
    /// The component's bytes are not the locked ones.
    Bytes {
        source: String,
        locked: Sha256Digest,
        found: Sha256Digest,
    },
    /// The same component under another manifest (an `oci =` tag that moved to a re-push).
    Manifest {
        source: String,
        locked: Option<Sha256Digest>,
        found: Option<Sha256Digest>,
    },
    /// The component provides a tool the lock does not list.
    ToolAdded { source: String, tool: String },
    /// The lock lists a tool the component no longer provides.
    ToolRemoved { source: String, tool: String },
    /// A tool's definition changed; `parts` names what ("description", "input schema", …).
    ToolChanged {
        source: String,
        tool: String,
        parts: Vec<&'static str>,
    },
}

impl fmt::Display for LockProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockProblem::Unlocked { source } => {
                write!(f, "component {source}: not in the lock")
            }
            LockProblem::Missing { source } => {
                write!(
                    f,
                    "component {source}: in the lock, but the config does not load it"
                )
            }
            LockProblem::Bytes {
                source,
                locked,
                found,
            } => write!(
                f,
                "component {source}: its bytes changed (locked sha256:{}…, now sha256:{}…)",
                locked.short(),
                found.short()
            ),
            LockProblem::Manifest {
                source,
                locked,
                found,
            } => {
                let short = |d: &Option<Sha256Digest>| match d {
                    Some(d) => format!("sha256:{}…", d.short()),
                    None => "none".to_string(),
                };
                write!(
                    f,
                    "component {source}: its manifest changed (locked {}, now {})",
                    short(locked),
                    short(found)
                )
            }
            LockProblem::ToolAdded { source, tool } => {
                write!(f, "component {source}: tool `{tool}` added")
            }
            LockProblem::ToolRemoved { source, tool } => {
                write!(f, "component {source}: tool `{tool}` removed")
            }
            LockProblem::ToolChanged {
                source,
                tool,
                parts,
            } => write!(
                f,
                "component {source}: tool `{tool}`: {} changed",
                parts.join(", ")
            ),
        }
    }
}

/// Why a lock file cannot be read, written or accepted. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a toolhost lock: {message}; write it again with `toolhost lock --update`", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{} is a version {found} lock; this toolhost reads version {LOCK_VERSION}: write it again with `toolhost lock --update`", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// What the config loads differs from the lock.
    #[error("{} does not match what the config loads (accept a change of yours with `toolhost lock --update`): {}", path.display(), Listed { items: problems, noun: "differences" })]
    Mismatch {
        path: PathBuf,
        problems: Vec<LockProblem>,
    },
}

/// What `toolhost lock` writes above the pins.
const HEADER: &str = "\
# toolhost.lock: the components and tool definitions this config runs, pinned by digest.
# Written by `toolhost lock`; `serve`, `call` and `agent` refuse anything that differs.
# Do not edit: accept a change with `toolhost lock --update`.
";

impl Lock {
    /// Read the lock at `path`; `None` when there is no file.
    pub fn read(path: &Path) -> Result<Option<Lock>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(LockError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Lock::parse(&text, path).map(Some)
    }

    /// Parse lock text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Lock, LockError> {
        #[derive(Deserialize)]
        struct Version {
            version: Option<u32>,
        }
        let parse = |message: String| LockError::Parse {
            path: path.to_path_buf(),
            message,
        };
        // The version first, so that a newer format is named as such and not as a parse error.
        let v: Version = toml::from_str(text).map_err(|e| parse(e.message().to_string()))?;
        match v.version {
            Some(LOCK_VERSION) => {}
            Some(found) => {
                return Err(LockError::Version {
                    path: path.to_path_buf(),
                    found,
                })
            }
            None => return Err(parse("it has no `version`".into())),
        }
        toml::from_str(text).map_err(|e| parse(e.to_string()))
    }

    /// The lock as its file holds it.
    pub fn to_text(&self) -> String {
        let body = toml::to_string(self).expect("a lock is TOML");
        format!("{HEADER}\n{body}")
    }

    /// Write the lock to `path`, whole or not at all (a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> Result<(), LockError> {
        let write = |source| LockError::Write {
            path: path.to_path_buf(),
            source,
        };
        let tmp = path.with_extension(format!("lock.tmp{}", std::process::id()));
        std::fs::write(&tmp, self.to_text()).map_err(write)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write(e)
        })
    }

    /// The manifest digest this lock pins for the component named `source`.
    pub fn manifest_of(&self, source: &str) -> Option<&Sha256Digest> {
        self.components
            .iter()
            .find(|c| c.source == source)
            .and_then(|c| c.manifest.as_ref())
    }

    /// Accept `now` (what the config loads) when it is what this lock pins; otherwise every
    /// difference, in the config's order.
    pub fn check(&self, path: &Path, now: &Lock) -> Result<(), LockError> {
        let problems = self.differences(now);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(LockError::Mismatch {
                path: path.to_path_buf(),
                problems,
            })
        }
    }

    /// How `now` differs from this lock. Components pair by source; a source the config names
    /// twice pairs in order.
    pub fn differences(&self, now: &Lock) -> Vec<LockProblem> {
        let mut locked: Vec<Option<&ComponentPin>> = self.components.iter().map(Some).collect();
        let mut problems = Vec::new();
        for found in &now.components {
            let source = &found.source;
            let pair = locked
                .iter_mut()
                .find(|p| p.is_some_and(|p| &p.source == source))
                .and_then(Option::take);
            let Some(pin) = pair else {
                problems.push(LockProblem::Unlocked {
                    source: source.clone(),
                });
                continue;
            };
            if pin.manifest != found.manifest && pin.sha256 == found.sha256 {
                problems.push(LockProblem::Manifest {
                    source: source.clone(),
                    locked: pin.manifest.clone(),
                    found: found.manifest.clone(),
                });
            }
            if pin.sha256 != found.sha256 {
                problems.push(LockProblem::Bytes {
                    source: source.clone(),
                    locked: pin.sha256.clone(),
                    found: found.sha256.clone(),
                });
            }
            for (tool, now_pin) in &found.tools {
                match pin.tools.get(tool) {
                    None => problems.push(LockProblem::ToolAdded {
                        source: source.clone(),
                        tool: tool.clone(),
                    }),
                    Some(p) if p != now_pin => problems.push(LockProblem::ToolChanged {
                        source: source.clone(),
                        tool: tool.clone(),
                        parts: p.changes(now_pin),
                    }),
                    Some(_) => {}
                }
            }
            for tool in pin.tools.keys().filter(|t| !found.tools.contains_key(*t)) {
                problems.push(LockProblem::ToolRemoved {
                    source: source.clone(),
                    tool: tool.clone(),
                });
            }
        }
        for pin in locked.into_iter().flatten() {
            problems.push(LockProblem::Missing {
                source: pin.source.clone(),
            });
        }
        problems
    }
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
