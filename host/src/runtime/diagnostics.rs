//! The operator's diagnostic log: trap detail and guest stderr, under an id the model-facing
//! result carries. Never shown to a model.
//!
//! A file of its own, not a `tracing` layer: it holds guest output and host detail that an
//! operator reads on the host and that must not travel to wherever logs are shipped; the log
//! and the result carry only its id. Each line is a JSON object with `at_ms` (Unix time).

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::clip;

/// Bytes of guest stderr kept per diagnostic entry.
pub const MAX_DIAGNOSTIC_STDERR: usize = 4096;
/// Bytes of trap detail kept per diagnostic entry.
pub const MAX_DIAGNOSTIC_DETAIL: usize = 16 * 1024;

/// Appends JSON lines to `<data_dir>/diagnostics.log` (or keeps nothing when no path is set).
pub struct Diagnostics {
    path: Option<PathBuf>,
    counter: AtomicU64,
    lock: Mutex<()>,
}

impl Diagnostics {
    pub fn new(path: Option<PathBuf>) -> Self {
        Diagnostics {
            path,
            counter: AtomicU64::new(0),
            lock: Mutex::new(()),
        }
    }

    /// Record detail for one call; returns the id to put in the result.
    pub fn record(&self, tool: &str, call_id: &str, detail: &str, stderr: &[u8]) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut h = Sha256::new();
        h.update(now.as_nanos().to_le_bytes());
        h.update(n.to_le_bytes());
        h.update(std::process::id().to_le_bytes());
        let id = format!("diag-{}", &hex::encode(h.finalize())[..16]);
        if let Some(path) = &self.path {
            let line = json!({
                "at_ms": u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
                "diagnostic_id": id,
                "tool": tool,
                "call_id": call_id,
                "detail": clip(detail, MAX_DIAGNOSTIC_DETAIL),
                "stderr": clip(&String::from_utf8_lossy(stderr), MAX_DIAGNOSTIC_STDERR),
            });
            let _guard = self.lock.lock();
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{line}");
            }
        }
        id
    }
}
