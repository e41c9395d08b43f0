//! A component's secrets from the config: each value read once at load, from the host's
//! environment or a file (never from the config itself), checked, and bound to the grants of
//! the tools that may reach its hosts.
//!
//! Refused at load, naming the secret and where its value comes from (never the value):
//! - a secret without exactly one of `env` and `file`, or without hosts;
//! - a value that is missing, unreadable, too short or too long, or not visible ASCII;
//! - two secrets of one component with one name, or more than
//!   [`MAX_SECRETS_PER_COMPONENT`];
//! - a host of a secret that no network grant of the component allows: the value could never
//!   be sent anywhere, so the config says something it does not do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost_sandbox::{
    Allowlist, Grant, Secret, SecretValue, MAX_SECRETS_PER_COMPONENT, MAX_SECRET_BYTES,
};

use super::config::{ComponentConfig, SecretConfig};
use super::RegistryError;

/// Read and check every secret of `c` (the component at index `index`).
pub fn resolve(
    base_dir: &Path,
    c: &ComponentConfig,
    index: usize,
) -> Result<Vec<Arc<Secret>>, RegistryError> {
    let refuse = |name: &str, problem: String| RegistryError::Secret {
        path: c.label(base_dir),
        key: format!("component[{index}].secrets"),
        name: name.to_string(),
        problem,
    };
    if c.secrets.len() > MAX_SECRETS_PER_COMPONENT {
        return Err(refuse(
            c.secrets[MAX_SECRETS_PER_COMPONENT].name.as_str(),
            format!("a component may have at most {MAX_SECRETS_PER_COMPONENT} secrets"),
        ));
    }
    let mut out: Vec<Arc<Secret>> = Vec::new();
    for s in &c.secrets {
        let name = s.name.as_str();
        if out.iter().any(|o| o.name == name) {
            return Err(refuse(
                name,
                "another secret of this component has this name; give each its own".into(),
            ));
        }
        if s.hosts.is_empty() {
            return Err(refuse(
                name,
                "names no hosts; add the `host:port` entries its value is for".into(),
            ));
        }
        let value = read_value(base_dir, s).map_err(|p| refuse(name, p))?;
        out.push(Arc::new(Secret {
            name: name.to_string(),
            value,
            hosts: Allowlist::new(s.hosts.clone()),
        }));
    }
    Ok(out)
}

/// The value of `s`, from its environment variable or file.
fn read_value(base_dir: &Path, s: &SecretConfig) -> Result<SecretValue, String> {
    let (text, source) = match (&s.env, &s.file) {
        (Some(var), None) => {
            let text = std::env::var(var).map_err(|e| match e {
                std::env::VarError::NotPresent => {
                    format!("environment variable {var} is not set; set it to the secret's value")
                }
                std::env::VarError::NotUnicode(_) => {
                    format!("environment variable {var} is not valid text")
                }
            })?;
            (text, format!("environment variable {var}"))
        }
        (None, Some(file)) => {
            let path = base_dir.join(file);
            (read_file(&path)?, format!("file {}", path.display()))
        }
        _ => {
            return Err(
                "needs exactly one of `env` (a variable of the host's environment) and `file`"
                    .into(),
            )
        }
    };
    SecretValue::new(text).map_err(|e| format!("the value in {source} {e}"))
}

/// A value file's text without one trailing newline; refused when larger than a value may be.
fn read_file(path: &PathBuf) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot open file {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES as u64 + 3)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read file {}: {e}", path.display()))?;
    if let Some(rest) = text.strip_suffix('\n') {
        let rest = rest.strip_suffix('\r').unwrap_or(rest);
        text.truncate(rest.len());
    }
    Ok(text)
}

/// The secrets `grant` may use: those with a host its network allows.
pub fn bind(grant: &mut Grant, secrets: &[Arc<Secret>]) {
    grant.secrets = toolhost_sandbox::Secrets::new(
        secrets
            .iter()
            .filter(|s| s.hosts.entries().iter().any(|h| grant.network.allows(h)))
            .cloned()
            .collect(),
    );
}

/// Every host of every secret must be allowed by one of `grants` (the component's and its
/// tools'): otherwise the value could never be sent there.
pub fn check_reachable(
    base_dir: &Path,
    c: &ComponentConfig,
    index: usize,
    secrets: &[Arc<Secret>],
    grants: &[&Grant],
) -> Result<(), RegistryError> {
    for s in secrets {
        for host in s.hosts.entries().iter() {
            if !grants.iter().any(|g| g.network.allows(host)) {
                return Err(RegistryError::Secret {
                    path: c.label(base_dir),
                    key: format!("component[{index}].secrets"),
                    name: s.name.clone(),
                    problem: format!(
                        "bound to {host}, which no network grant of this component allows; \
                         add \"{host}\" to the component's `network.allow`"
                    ),
                });
            }
        }
    }
    Ok(())
}
