//! `toolhost push`: publish a component to an OCI registry in the Wasm artifact layout, with
//! the `[oci]` settings (credentials, plain HTTP to a loopback registry) of a config.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::report::{usage_error, usage_message};
use super::EXIT_NOT_COMPLETED;
use crate::oci::{OciClient, OciConfig, Reference};

/// Push `component` to `reference` (`registry/repository:tag`) and print the reference by
/// digest that a config pins. The config is optional: without one, the
/// registry gets HTTPS and the Docker credential file's credentials.
pub(super) fn push(config: &Path, component: &Path, reference: &str) -> ExitCode {
    let client = match client(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r: Reference = match reference.parse() {
        Ok(r) => r,
        Err(e) => return usage_message(format!("reference {e}")),
    };
    if r.digest.is_some() {
        return usage_message(format!(
            "{r} names a digest; push to a tag (`…:1.0`), and the digest is printed"
        ));
    }
    let bytes = match std::fs::read(component) {
        Ok(b) => b,
        Err(e) => return usage_message(format!("cannot read {}: {e}", component.display())),
    };
    match client.push_blocking(&bytes, &r) {
        Ok(digest) => {
            out!(
                "{}",
                json!({
                    "pushed": r.to_string(),
                    "digest": digest.as_str(),
                    "reference": r.at(&digest).to_string(),
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            crate::telemetry::say(tracing::Level::ERROR, crate::contract::error_chain(&e));
            ExitCode::from(EXIT_NOT_COMPLETED)
        }
    }
}

/// A client with the `[oci]` settings of the config at `config`, or the defaults when there is
/// no such file (HTTPS, the Docker credential file's credentials).
pub(super) fn client(config: &Path) -> Result<OciClient, ExitCode> {
    if !config.exists() {
        return Ok(OciClient::new(&OciConfig::default(), Path::new(".")));
    }
    match crate::Config::load(config) {
        Ok(c) => Ok(OciClient::new(&c.oci, &c.base_dir)),
        Err(e) => Err(usage_error(&e)),
    }
}

/// `reference`, which must name a digest (what is signed or verified is never a tag).
pub(super) fn by_digest(reference: &str) -> Result<Reference, ExitCode> {
    let r: Reference = reference
        .parse()
        .map_err(|e| usage_message(format!("reference {e}")))?;
    if r.digest.is_none() {
        return Err(usage_message(format!(
            "{r} names a tag, which can move; name the digest (`…@sha256:…`, as `toolhost push` \
             printed it)"
        )));
    }
    Ok(r)
}
