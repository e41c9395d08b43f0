//! Credentials an operator already has: `[oci.registries]` in the config, else the `auths` of
//! the Docker credential file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`).
//! Credential helpers (`credsStore`, `credHelpers`) are not run: the host runs no program the
//! operator did not name.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::config::OciConfig;
use super::error::OciError;
use super::session::Credentials;

/// The largest credential file read.
const MAX_DOCKER_CONFIG_BYTES: u64 = 1024 * 1024;

/// The credentials for `registry`, if the operator gave any.
pub(crate) fn credentials(
    config: &OciConfig,
    base_dir: &Path,
    registry: &str,
) -> Result<Option<Credentials>, OciError> {
    let fail = |message: String| OciError::Credentials {
        registry: registry.to_string(),
        message,
    };
    let r = config.registry(registry);
    if let Some(user) = r.username {
        let password = match (&r.password_env, &r.password_file) {
            (Some(var), _) => std::env::var(var)
                .map_err(|_| fail(format!("the environment variable {var} is not set")))?,
            (None, Some(file)) => std::fs::read_to_string(base_dir.join(file))
                .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?
                .trim_end()
                .to_string(),
            (None, None) => return Err(fail("a user name without a password".into())),
        };
        return Ok(Some(Credentials { user, password }));
    }
    if config.docker_credentials == Some(false) {
        return Ok(None);
    }
    let Some(file) = docker_config_file() else {
        return Ok(None);
    };
    match std::fs::metadata(&file) {
        Err(_) => return Ok(None),
        Ok(m) if m.len() > MAX_DOCKER_CONFIG_BYTES => {
            return Err(fail(format!("{} is larger than 1 MiB", file.display())))
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(&file)
        .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    from_docker_config(&text, registry).map_err(|m| fail(format!("{}: {m}", file.display())))
}

fn docker_config_file() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
}

/// The `auths` entry for `registry` (keys may be written as URLs: `https://host/v1/`).
fn from_docker_config(text: &str, registry: &str) -> Result<Option<Credentials>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(auths) = v.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let host_of = |k: &str| {
        let k = k.split_once("://").map_or(k, |(_, rest)| rest);
        k.split('/').next().unwrap_or("").to_string()
    };
    let Some(entry) = auths
        .iter()
        .find(|(k, _)| host_of(k) == registry)
        .map(|(_, e)| e)
    else {
        return Ok(None);
    };
    let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) else {
        return Ok(None);
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .map_err(|_| format!("the `auth` of {registry} is not base64"))?;
    let raw =
        String::from_utf8(raw).map_err(|_| format!("the `auth` of {registry} is not text"))?;
    let (user, password) = raw
        .split_once(':')
        .ok_or_else(|| format!("the `auth` of {registry} is not `user:password`"))?;
    Ok(Some(Credentials {
        user: user.to_string(),
        password: password.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `auths` entry keyed by host or by URL gives its user and password; other hosts none.
    #[test]
    fn docker_auths_are_read_by_registry_host() {
        let text = r#"{"auths":{"https://ghcr.io/v1/":{"auth":"dXNlcjpwYTpzcw=="},"other.io":{}}}"#;
        let c = from_docker_config(text, "ghcr.io").unwrap().unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("user", "pa:ss"));
        assert!(from_docker_config(text, "other.io").unwrap().is_none());
        assert!(from_docker_config(text, "quay.io").unwrap().is_none());
        assert!(from_docker_config("{", "ghcr.io")
            .unwrap_err()
            .contains("not JSON"));
    }
}
