//! What one tool may touch, and the WASI context built from exactly that.
//!
//! Deny by default: no preopens, no sockets, no name lookup, no environment, no arguments,
//! stdin closed, stdout and stderr captured in bounded in-memory pipes (never the host's own).

use std::path::PathBuf;

use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::network::Allowlist;
use super::SandboxError;

/// A host directory visible to the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirGrant {
    /// Canonical host path, resolved once at load.
    pub host: PathBuf,
    /// Absolute path the guest sees.
    pub guest: String,
    /// Whether the guest may write under it.
    pub writable: bool,
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
pub fn build_wasi(grant: &Grant, output_bytes: u64) -> Result<(WasiCtx, Captured), SandboxError> {
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
    for d in &grant.dirs {
        let perms = if d.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        b.preopened_dir(&d.host, &d.guest, perms)
            .map_err(|e| SandboxError::Preopen {
                guest: d.guest.clone(),
                detail: format!("{e:#}"),
            })?;
    }
    Ok((b.build(), captured))
}
