//! The `[oci]` section: how components are fetched from registries, and what a registry may
//! send before it is cut off.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toolhost_contract::ConfigProblem;

use super::reference::is_loopback_host;

/// The default cap on a manifest. A Wasm artifact's manifest is under 1 KiB; the OCI image spec
/// asks registries to accept 4 MiB, which no component's manifest needs.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 256 * 1024;
/// The default cap on a component's bytes. Interpreted-language components are tens of MiB
/// (a Python one is ~40 MiB); the host holds the whole blob in memory to check its digest
/// before it writes it.
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 256 * 1024 * 1024;
/// The default time one component's fetch may take, from the first request to the last byte.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// How a refusal names the manifest cap.
pub(crate) const MANIFEST_CAP: &str = "`[oci] max_manifest_bytes`";
/// How a refusal names the component cap.
pub(crate) const BLOB_CAP: &str = "`[oci] max_blob_bytes`";
/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;

/// `[oci]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OciConfig {
    /// The largest manifest read, in bytes. Default 256 KiB.
    #[serde(default)]
    pub max_manifest_bytes: Option<u64>,
    /// The largest component read, in bytes. Default 256 MiB.
    #[serde(default)]
    pub max_blob_bytes: Option<u64>,
    /// Seconds one component's fetch may take. Default 120.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Whether credentials are read from the Docker credential file (`$DOCKER_CONFIG/config.json`,
    /// else `~/.docker/config.json`; its `auths` only). Default true.
    #[serde(default)]
    pub docker_credentials: Option<bool>,
    /// Per registry host (`host[:port]`, as references write it).
    #[serde(default)]
    pub registries: BTreeMap<String, RegistryConfig>,
}

/// `[oci.registries."host:port"]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Plain HTTP instead of HTTPS. Only for a registry on this machine. Default false.
    #[serde(default)]
    pub insecure: bool,
    /// The user name sent to the registry (with `password_env` or `password_file`).
    #[serde(default)]
    pub username: Option<String>,
    /// The host's environment variable that holds the password or token.
    #[serde(default)]
    pub password_env: Option<String>,
    /// A file that holds the password or token, relative to the config file.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Other hosts a download may be redirected to (a registry's blob storage, e.g.
    /// `pkg-containers.githubusercontent.com`). Default none: a redirect off the registry's own
    /// host is refused.
    #[serde(default)]
    pub redirect_hosts: Vec<String>,
}

impl OciConfig {
    pub fn max_manifest_bytes(&self) -> u64 {
        self.max_manifest_bytes
            .unwrap_or(DEFAULT_MAX_MANIFEST_BYTES)
    }

    pub fn max_blob_bytes(&self) -> u64 {
        self.max_blob_bytes.unwrap_or(DEFAULT_MAX_BLOB_BYTES)
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS))
    }

    /// The settings of `registry` (defaults when the section does not name it).
    pub fn registry(&self, registry: &str) -> RegistryConfig {
        self.registries.get(registry).cloned().unwrap_or_default()
    }

    /// Every problem of the section, each at its key.
    pub fn validate(&self, p: &mut Vec<ConfigProblem>) {
        for (key, v) in [
            ("max_manifest_bytes", self.max_manifest_bytes),
            ("max_blob_bytes", self.max_blob_bytes),
            ("timeout_secs", self.timeout_secs),
        ] {
            if v == Some(0) {
                p.push(ConfigProblem::new(
                    format!("oci.{key}"),
                    "must be at least 1",
                ));
            }
        }
        for (host, r) in &self.registries {
            let at = |k: &str| format!("oci.registries.{host:?}.{k}");
            if r.insecure && !is_loopback_host(host) {
                p.push(ConfigProblem::new(
                    at("insecure"),
                    "plain HTTP is allowed only to a registry on this machine (localhost, \
                     127.0.0.1, [::1]); serve this registry over HTTPS",
                ));
            }
            match (&r.username, &r.password_env, &r.password_file) {
                (Some(_), Some(_), Some(_)) => p.push(ConfigProblem::new(
                    at("password_env"),
                    "and password_file are both set; keep one",
                )),
                (Some(_), None, None) => p.push(ConfigProblem::new(
                    at("username"),
                    "has no password; add `password_env = \"VAR\"` or `password_file = \"FILE\"`",
                )),
                (None, Some(_), _) | (None, _, Some(_)) => p.push(ConfigProblem::new(
                    at("username"),
                    "is missing: a password is set without a user name",
                )),
                _ => {}
            }
        }
    }
}
