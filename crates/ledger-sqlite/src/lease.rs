//! Host leases: which process owns an open call.
//!
//! Each open ledger takes a lease — an exclusively locked file `<ledger>-owners/<id>.lock` held
//! for as long as the ledger is open. The operating system releases the lock when the process
//! ends, however it ends (`kill -9` included). Recovery closes an open call only when its
//! owner's lease can be locked (or is gone): a call another live host is running is never
//! closed under it.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::LedgerError;

/// The lease this ledger holds.
#[derive(Debug)]
pub struct Lease {
    owner: String,
    dir: PathBuf,
    _file: File,
}

impl Lease {
    /// Create and lock this process's lease next to the ledger file.
    pub fn take(ledger: &Path) -> Result<Lease, LedgerError> {
        let mut dir = ledger.as_os_str().to_owned();
        dir.push("-owners");
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        let owner = uuid::Uuid::new_v4().simple().to_string();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(format!("{owner}.lock")))?;
        file.lock()?;
        Ok(Lease {
            owner,
            dir,
            _file: file,
        })
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether the host that owns `owner` still runs (holds its lock). Ours is alive.
    pub fn is_alive(&self, owner: &str) -> bool {
        if owner == self.owner {
            return true;
        }
        if owner.is_empty() || !owner.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
        let Ok(file) = File::open(self.dir.join(format!("{owner}.lock"))) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => false,
            Err(TryLockError::WouldBlock) => true,
            // Cannot tell: assume alive, so a running call is never closed under its host.
            Err(TryLockError::Error(_)) => true,
        }
    }

    /// Remove a dead owner's lease file (best effort).
    pub fn forget(&self, owner: &str) {
        if owner != self.owner && owner.chars().all(|c| c.is_ascii_hexdigit()) {
            let _ = std::fs::remove_file(self.dir.join(format!("{owner}.lock")));
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(format!("{}.lock", self.owner)));
    }
}
