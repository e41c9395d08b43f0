//! Compiled components cached on disk, keyed by the component's SHA-256 and the engine's
//! compatibility hash, so a restart deserializes (well under a millisecond) instead of
//! compiling (hundreds of milliseconds).
//!
//! The cache lives in the host's own data directory. Deserializing runs native code the host
//! compiled earlier; whoever can write that directory can run code as the host, exactly as
//! whoever can replace the host binary can. Keep it owned by the operator.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use crate::Sha256Digest;
use wasmtime::component::Component;
use wasmtime::Engine;

/// How a component was obtained, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Cached,
}

/// The cache file name for these component bytes under this engine.
pub fn cache_key(engine: &Engine, bytes: &[u8]) -> String {
    key_of(engine, &Sha256Digest::of(bytes))
}

/// [`cache_key`] of bytes whose digest is known.
fn key_of(engine: &Engine, digest: &Sha256Digest) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{}-{:016x}", digest.hex(), h.finish())
}

/// Compile `bytes`, or load the compiled form from `dir` when present. A cache that cannot be
/// read or written is not an error: the component is compiled and the failure ignored.
pub fn load_component(
    engine: &Engine,
    bytes: &[u8],
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, Origin)> {
    let (component, unsaved) = load_unsaved(engine, bytes, &Sha256Digest::of(bytes), dir)?;
    let origin = match unsaved {
        Some(u) => {
            u.save();
            Origin::Compiled
        }
        None => Origin::Cached,
    };
    Ok((component, origin))
}

/// A compiled component the cache does not hold yet.
pub struct Unsaved {
    component: Component,
    dir: PathBuf,
    path: PathBuf,
}

impl Unsaved {
    /// Write it to the cache (creating the directory); a failure is ignored.
    pub fn save(self) {
        let _ = store(&self.component, &self.dir, &self.path);
    }
}

/// [`load_component`] without writing: a component compiled here comes back with what
/// [`Unsaved::save`] will store, so nothing is written before the caller decides to.
/// `digest` is the bytes' own ([`Sha256Digest::of`]), computed once by the caller.
pub fn load_unsaved(
    engine: &Engine,
    bytes: &[u8],
    digest: &Sha256Digest,
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, Option<Unsaved>)> {
    let path = dir.map(|d| d.join(format!("{}.cwasm", key_of(engine, digest))));
    if let Some(p) = &path {
        if p.is_file() {
            if let Ok(c) = deserialize(engine, p) {
                return Ok((c, None));
            }
        }
    }
    let component = Component::new(engine, bytes)?;
    let unsaved = match (path, dir) {
        (Some(path), Some(dir)) => Some(Unsaved {
            component: component.clone(),
            dir: dir.to_path_buf(),
            path,
        }),
        _ => None,
    };
    Ok((component, unsaved))
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the file was written by `store` below, from `Component::serialize` of an engine
    // with the same compatibility hash (part of the file name); wasmtime checks the header
    // again. The directory is the host's own data directory (see the module docs).
    unsafe { Component::deserialize_file(engine, path) }
}

fn store(component: &Component, dir: &Path, path: &PathBuf) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let bytes = component
        .serialize()
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    // Write then rename, so a concurrent reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
