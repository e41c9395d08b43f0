//! Disk space a call's writable grants must leave: a call with a writable grant does not start
//! when one of their file systems has less than its `disk_reserve_bytes` free, and is stopped
//! (`host_resources_exceeded`) at the next epoch tick after it writes past it. So a tool that
//! fills the disk its grant shares with the data directory leaves the ledger, the logs and the
//! other callers their reserve.

use std::sync::Arc;

use super::grant::Grant;
use super::host_dir::HostDir;

/// The file systems a call's writable grants live on, and the space they must keep free.
#[derive(Clone)]
pub struct DiskWatch {
    roots: Arc<Vec<Arc<HostDir>>>,
    reserve: u64,
}

impl DiskWatch {
    /// The watch for `grant`, or `None` when it writes nowhere (or the reserve is 0).
    pub fn of(grant: &Grant, reserve: u64) -> Option<DiskWatch> {
        let roots: Vec<Arc<HostDir>> = grant
            .dirs
            .iter()
            .filter(|d| d.writable)
            .map(|d| d.source.root_arc())
            .collect();
        (!roots.is_empty() && reserve > 0).then(|| DiskWatch {
            roots: Arc::new(roots),
            reserve,
        })
    }

    /// Whether a file system of the grant has less than the reserve free (or cannot say).
    pub fn below_reserve(&self) -> bool {
        self.roots
            .iter()
            .any(|d| d.free_bytes().map_or(true, |free| free < self.reserve))
    }

    /// The reserve, bytes.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }
}
