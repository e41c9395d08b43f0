//! What one tool may touch, and the WASI context built from exactly that.
//!
//! Deny by default: no preopens, no sockets, no name lookup, no environment (only each
//! secret's placeholder, under the secret's name), no arguments, stdin closed, stdout and stderr captured in bounded in-memory pipes (never the host's own).
//! Granted directories are handles opened once at load ([`HostDir`]), never paths.

use std::sync::Arc;

use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::allowlist::Allowlist;
use super::host_dir::HostDir;
use super::secrets::{CallSecrets, Secrets};
use super::SandboxError;
use toolhost_contract::Caller;

/// A host directory visible to the guest.
#[derive(Debug, Clone)]
pub struct DirGrant {
    /// Which host directory: one for every call, or one per caller beneath a fixed root.
    pub source: DirSource,
    /// Absolute path the guest sees.
    pub guest: String,
    /// Whether the guest may write under it.
    pub writable: bool,
}

/// Where a granted directory comes from.
#[derive(Debug, Clone)]
pub enum DirSource {
    /// The same directory for every call, opened at load.
    Fixed(Arc<HostDir>),
    /// A directory per caller: `root` (opened at load) then `parts`, each opened (and created
    /// when missing) beneath the previous at call time — so a principal's calls cannot even
    /// name another principal's directory.
    PerCaller {
        root: Arc<HostDir>,
        parts: Vec<PathPart>,
    },
}

/// One component of a per-caller grant path below its fixed root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPart {
    Literal(String),
    Principal,
    Tenant,
}

/// One call as the sandbox sees it: the trusted caller it runs for (per-caller grants, the
/// guest's `host.context()`) and the ids it is correlated by.
#[derive(Debug, Clone, Copy)]
pub struct CallIds<'a> {
    pub caller: &'a Caller,
    pub run_id: &'a str,
    pub call_id: &'a str,
}

impl DirSource {
    /// The fixed directory every call's directory is at or beneath.
    pub fn root(&self) -> &HostDir {
        match self {
            DirSource::Fixed(d) | DirSource::PerCaller { root: d, .. } => d,
        }
    }

    /// The fixed directory, shared.
    pub fn root_arc(&self) -> Arc<HostDir> {
        match self {
            DirSource::Fixed(d) | DirSource::PerCaller { root: d, .. } => d.clone(),
        }
    }

    /// The directory for `caller`: the fixed one, or the caller's own opened beneath the root.
    fn for_caller(&self, caller: &Caller) -> Result<Option<HostDir>, SandboxError> {
        let DirSource::PerCaller { root, parts } = self else {
            return Ok(None);
        };
        let mut dir: Option<HostDir> = None;
        for part in parts {
            let name = match part {
                PathPart::Literal(s) => s.as_str(),
                PathPart::Principal => caller.principal.as_str(),
                PathPart::Tenant => caller.tenant.as_str(),
            };
            let next = dir.as_ref().unwrap_or(root.as_ref()).child(name);
            dir = Some(next.map_err(|e| SandboxError::CallerDir(e.to_string()))?);
        }
        Ok(dir)
    }
}

/// The capabilities of one tool. `Grant::default()` grants nothing.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    /// Preopened directories.
    pub dirs: Vec<DirGrant>,
    /// Where raw TCP and `wasi:http` may connect.
    pub network: Allowlist,
    /// Whether `wasi:sockets/ip-name-lookup` works.
    pub dns: bool,
    /// Credentials the tool uses by placeholder (each with a host in `network`).
    pub secrets: Secrets,
}

impl Grant {
    /// Whether this grant needs `wasi:http` linked.
    pub fn has_network(&self) -> bool {
        !self.network.is_empty()
    }
}

/// The guest's captured stdout and stderr.
pub struct Captured {
    pub stdout: MemoryOutputPipe,
    pub stderr: MemoryOutputPipe,
}

impl Captured {
    /// Bytes captured over both streams.
    pub fn len(&self) -> u64 {
        (self.stdout.contents().len() + self.stderr.contents().len()) as u64
    }
}

/// Build the WASI context of one call from its grant. Each pipe holds one byte more than the
/// output ceiling, so that reaching past the ceiling is observable.
pub fn build_wasi(
    grant: &Grant,
    call: CallIds<'_>,
    secrets: &CallSecrets,
    output_bytes: u64,
) -> Result<(WasiCtx, Captured), SandboxError> {
    let cap = usize::try_from(output_bytes).unwrap_or(usize::MAX - 1) + 1;
    let captured = Captured {
        stdout: MemoryOutputPipe::new(cap),
        stderr: MemoryOutputPipe::new(cap),
    };
    let mut b = WasiCtxBuilder::new();
    b.stdout(captured.stdout.clone())
        .stderr(captured.stderr.clone())
        .allow_ip_name_lookup(grant.dns)
        .allow_udp(false)
        .allow_tcp(grant.has_network())
        .socket_addr_check(grant.network.socket_check());
    for (name, placeholder) in secrets.env() {
        b.env(name, placeholder);
    }
    for d in &grant.dirs {
        let perms = if d.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        // The handle, not a path: `/proc/self/fd/N` names the directory opened at load (or
        // just now, beneath it, for this caller); it is dropped once the preopen holds its own.
        let own = d.source.for_caller(call.caller)?;
        let dir = own.as_ref().unwrap_or(d.source.root());
        b.preopened_dir(dir.proc_path(), &d.guest, perms)
            .map_err(|e| SandboxError::Preopen {
                guest: d.guest.clone(),
                detail: format!("{e:#}"),
            })?;
    }
    Ok((b.build(), captured))
}
