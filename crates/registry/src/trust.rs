//! The `[trust]` section: which keys a component must be signed by (`signature.rs` says what a
//! signature is), and the check a load makes before it compiles anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::config::ComponentConfig;
use super::signature::{self, PublicKey, Refusal, SignatureError};
use toolhost_contract::ConfigProblem;
use toolhost_contract::Sha256Digest;

/// `[trust]`: the keys components may be signed by, and whether every component must be.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    /// Public keys by name: ECDSA P-256 PEM files (`cosign.pub`, or `toolhost keygen`'s
    /// `NAME.pub`), relative to the config file.
    #[serde(default)]
    pub keys: BTreeMap<String, PathBuf>,
    /// `signed`: every component must be signed by one of `keys`. Default `optional`: only a
    /// component with `signed_by` must be.
    #[serde(default)]
    pub require: Require,
}

/// Whether every component must be signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Require {
    #[default]
    Optional,
    Signed,
}

impl TrustConfig {
    /// Every problem of the section and of the components' `signed_by`, each at its key.
    pub fn validate(&self, components: &[ComponentConfig], p: &mut Vec<ConfigProblem>) {
        if self.require == Require::Signed && self.keys.is_empty() {
            p.push(ConfigProblem::new(
                "trust.require",
                "is \"signed\" but [trust] names no key; add `keys = { NAME = \"NAME.pub\" }`",
            ));
        }
        for (name, path) in &self.keys {
            if path.as_os_str().is_empty() {
                p.push(ConfigProblem::new(
                    format!("trust.keys.{name}"),
                    "is empty; name a public key file (PEM)",
                ));
            }
        }
        for (i, c) in components.iter().enumerate() {
            for (j, name) in c.signed_by.iter().enumerate() {
                if !self.keys.contains_key(name) {
                    let known: Vec<&str> = self.keys.keys().map(String::as_str).collect();
                    p.push(ConfigProblem::new(
                        format!("component[{i}].signed_by[{j}]"),
                        format!(
                            "{name:?} is not a key of [trust.keys] (they are: {})",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
            }
        }
    }

    /// The keys, read (relative paths against `base_dir`).
    pub fn load(&self, base_dir: &Path) -> Result<Trust, SignatureError> {
        let keys = self
            .keys
            .iter()
            .map(|(name, path)| PublicKey::read(name, &base_dir.join(path)))
            .collect::<Result<_, _>>()?;
        Ok(Trust {
            keys,
            require: self.require,
        })
    }
}

/// `[trust]` with its keys read: what a load checks each component against.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    keys: Vec<PublicKey>,
    require: Require,
}

impl Trust {
    /// Check a component's bytes, by their digest, before they are compiled: `Ok(Some(key))`
    /// when signed by a key it must be signed by, `Ok(None)` when it need not be signed.
    pub fn check(
        &self,
        c: &ComponentConfig,
        evidence: Evidence<'_>,
    ) -> Result<Option<String>, Refusal> {
        let Some(allowed) = self.allowed(c) else {
            return Ok(None);
        };
        match evidence {
            Evidence::File { path, digest } => signature::verify(path, digest, &allowed).map(Some),
            Evidence::Registry {
                manifest,
                signatures,
            } => super::cosign::verify(manifest, signatures, &allowed).map(Some),
        }
    }

    /// The keys one of which must have signed `c`, when one must.
    fn allowed(&self, c: &ComponentConfig) -> Option<Vec<PublicKey>> {
        if !c.signed_by.is_empty() {
            Some(
                self.keys
                    .iter()
                    .filter(|k| c.signed_by.contains(&k.name))
                    .cloned()
                    .collect(),
            )
        } else if self.require == Require::Signed {
            Some(self.keys.clone())
        } else {
            None
        }
    }

    /// Whether `c` must be signed (so that its registry signatures are fetched).
    pub fn wants_signature(&self, c: &ComponentConfig) -> bool {
        self.allowed(c).is_some()
    }
}

/// What vouches for a component's bytes.
pub enum Evidence<'a> {
    /// A file: its signature beside it (`FILE.sig`), over its digest.
    File {
        path: &'a Path,
        digest: &'a Sha256Digest,
    },
    /// An `oci =` component: the cosign signatures its registry holds for the manifest it was
    /// pulled at.
    Registry {
        manifest: &'a Sha256Digest,
        signatures: &'a [toolhost_oci::cosign::CosignSignature],
    },
}
