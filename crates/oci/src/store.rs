//! The content-addressed store under the data directory: manifests and components by their
//! SHA-256, so that a restart (or an offline start) needs no registry.
//!
//! A file is named by its digest and checked against it each time it is read: a file that no
//! longer matches is read as absent, and fetched again.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use toolhost_contract::Sha256Digest;

use super::cosign::{self, CosignSignature};
use super::error::OciError;

/// `DIR/sha256/<hex>` for each object.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store at `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// Where the store is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, d: &Sha256Digest) -> PathBuf {
        self.dir.join("sha256").join(d.hex())
    }

    /// The object `d`, when it is here, no larger than `cap`, and still has digest `d`.
    pub fn get(&self, d: &Sha256Digest, cap: u64) -> Option<Vec<u8>> {
        let path = self.path(d);
        let len = std::fs::symlink_metadata(&path).ok()?.len();
        if len > cap {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        (Sha256Digest::of(&bytes) == *d).then_some(bytes)
    }

    /// Keep `bytes` as `d` (written to a temporary file, then renamed into place).
    pub fn put(&self, d: &Sha256Digest, bytes: &[u8]) -> Result<(), OciError> {
        write_whole(&self.path(d), bytes, d)
    }
}

/// Write `bytes` at `path` whole or not at all: a temporary file beside it, renamed into place.
fn write_whole(path: &Path, bytes: &[u8], d: &Sha256Digest) -> Result<(), OciError> {
    let err = |source| OciError::Store {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().expect("a file under the store");
    std::fs::create_dir_all(dir).map_err(err)?;
    let tmp = tmp_name(dir, d);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

impl Store {
    fn signatures_path(&self, manifest: &Sha256Digest) -> PathBuf {
        self.dir
            .join("signatures")
            .join(format!("{}.json", manifest.hex()))
    }

    /// The cosign signatures last fetched for `manifest` (verified again at each load), if any
    /// were fetched.
    pub fn signatures(&self, manifest: &Sha256Digest) -> Option<Vec<CosignSignature>> {
        let path = self.signatures_path(manifest);
        let len = std::fs::symlink_metadata(&path).ok()?.len();
        if len > MAX_SIGNATURES_FILE_BYTES {
            return None;
        }
        serde_json::from_slice(&std::fs::read(&path).ok()?).ok()
    }

    /// Keep the signatures fetched for `manifest`.
    pub fn put_signatures(
        &self,
        manifest: &Sha256Digest,
        signatures: &[CosignSignature],
    ) -> Result<(), OciError> {
        let path = self.signatures_path(manifest);
        let bytes = serde_json::to_vec(signatures).expect("signatures are JSON");
        write_whole(&path, &bytes, manifest)
    }
}

/// The largest signatures file read back: [`cosign::MAX_SIGNATURES`] payloads of at most
/// [`cosign::MAX_PAYLOAD_BYTES`], as JSON arrays of numbers (about four bytes per byte).
const MAX_SIGNATURES_FILE_BYTES: u64 =
    (cosign::MAX_SIGNATURES as u64) * (cosign::MAX_PAYLOAD_BYTES + 2048) * 4;

fn tmp_name(dir: &Path, d: &Sha256Digest) -> PathBuf {
    dir.join(format!(".{}.{}.tmp", d.hex(), std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What was put is got back; a file edited afterwards, or over the cap, is absent.
    #[test]
    fn objects_are_read_back_only_while_they_match_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let d = Sha256Digest::of(b"component");
        assert_eq!(store.get(&d, 100), None);
        store.put(&d, b"component").unwrap();
        assert_eq!(store.get(&d, 100).as_deref(), Some(&b"component"[..]));
        assert_eq!(store.get(&d, 3), None);
        std::fs::write(dir.path().join("sha256").join(d.hex()), b"compromised").unwrap();
        assert_eq!(store.get(&d, 100), None);
    }
}
