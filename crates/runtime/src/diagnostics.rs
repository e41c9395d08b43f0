//! The operator's diagnostic log: trap detail and guest stderr, under an id the model-facing
//! result carries. Never shown to a model.
//!
//! A file of its own, not a `tracing` layer: it holds guest output and host detail that an
//! operator reads on the host and that must not travel to wherever logs are shipped; the log
//! and the result carry only its id. Each line is a JSON object with `at_ms` (Unix time), the
//! `diagnostic_id`, the call's `run_id`, `tool` and `call_id`, `detail` and `stderr`.
//!
//! A call never writes the file: it queues the line for the log's own thread
//! ([`MAX_QUEUED_ENTRIES`]; when the queue is full the entry is dropped and counted, and the
//! call's result still carries the id). The thread rotates the file at
//! [`MAX_DIAGNOSTICS_LOG_BYTES`] (to `diagnostics.log.1`, replacing the one before), so the log
//! takes at most twice that on disk whatever the guests do.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::clip;

/// Bytes of guest stderr kept per diagnostic entry.
pub const MAX_DIAGNOSTIC_STDERR: usize = 4096;
/// Bytes of trap detail kept per diagnostic entry.
pub const MAX_DIAGNOSTIC_DETAIL: usize = 16 * 1024;
/// Entries waiting for the writer thread; one entry is at most about 21 KiB, so the queue holds
/// at most about 5 MiB of host memory while the disk is slow.
pub const MAX_QUEUED_ENTRIES: usize = 256;
/// Size at which the log is rotated: with the one rotated file, 64 MiB of disk at most.
pub const MAX_DIAGNOSTICS_LOG_BYTES: u64 = 32 * 1024 * 1024;

/// One entry of the log: what a failed call leaves for the operator.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub run_id: &'a str,
    pub tool: &'a str,
    pub call_id: &'a str,
    pub detail: &'a str,
    pub stderr: &'a [u8],
}

enum Message {
    Line(String),
    /// Answered once every line before it is written.
    Flush(SyncSender<()>),
}

/// Appends JSON lines to `<data_dir>/diagnostics.log` on its own thread (or keeps nothing when
/// no path is set).
pub struct Diagnostics {
    writer: Option<Writer>,
    counter: AtomicU64,
    dropped: AtomicU64,
}

struct Writer {
    /// Taken (closing the channel) when the log is dropped.
    queue: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl Diagnostics {
    /// A log writing to `path` with its own thread, or none. Without a thread to start (the
    /// process cannot spawn one), nothing is written and each entry counts as dropped.
    pub fn new(path: Option<PathBuf>) -> Self {
        Self::with_limit(path, MAX_DIAGNOSTICS_LOG_BYTES)
    }

    fn with_limit(path: Option<PathBuf>, limit: u64) -> Self {
        let writer = path.and_then(|path| {
            let (queue, lines) = sync_channel(MAX_QUEUED_ENTRIES);
            let thread = std::thread::Builder::new()
                .name("toolhost-diagnostics".into())
                .spawn(move || write_lines(&path, limit, &lines))
                .ok()?;
            Some(Writer {
                queue: Some(queue),
                thread: Some(thread),
            })
        });
        Diagnostics {
            writer,
            counter: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Record detail for one call; returns the id to put in the result.
    pub fn record(&self, entry: Entry<'_>) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut h = Sha256::new();
        h.update(now.as_nanos().to_le_bytes());
        h.update(n.to_le_bytes());
        h.update(std::process::id().to_le_bytes());
        let id = format!("diag-{}", &hex::encode(h.finalize())[..16]);
        if self.writer.is_some() {
            let line = json!({
                "at_ms": u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
                "diagnostic_id": id,
                "run_id": entry.run_id,
                "tool": entry.tool,
                "call_id": entry.call_id,
                "detail": clip(entry.detail, MAX_DIAGNOSTIC_DETAIL),
                "stderr": clip(&String::from_utf8_lossy(entry.stderr), MAX_DIAGNOSTIC_STDERR),
            });
            if !self.send(Message::Line(line.to_string())) {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    tracing::warn!(
                        dropped,
                        "the diagnostic log is behind; entries are dropped (their ids stay in results)"
                    );
                }
            }
        }
        id
    }

    /// Entries dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Wait until every entry recorded before is written (tests, and readers in the process).
    pub fn flush(&self) {
        let (done, wait) = sync_channel(1);
        if self.send_blocking(Message::Flush(done)) {
            let _ = wait.recv();
        }
    }

    fn queue(&self) -> Option<&SyncSender<Message>> {
        self.writer.as_ref()?.queue.as_ref()
    }

    fn send(&self, message: Message) -> bool {
        self.queue().is_some_and(|q| q.try_send(message).is_ok())
    }

    fn send_blocking(&self, message: Message) -> bool {
        self.queue().is_some_and(|q| q.send(message).is_ok())
    }
}

impl Drop for Diagnostics {
    /// Write what is queued before the process goes on (or exits).
    fn drop(&mut self) {
        if let Some(w) = &mut self.writer {
            w.queue.take();
            if let Some(thread) = w.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// The writer thread: append each line, rotating the file before a line would take it past
/// `limit`. A file that cannot be opened or written loses the line; the next one tries again.
fn write_lines(path: &Path, limit: u64, lines: &Receiver<Message>) {
    let mut file: Option<(std::fs::File, u64)> = None;
    while let Ok(message) = lines.recv() {
        let line = match message {
            Message::Line(line) => line,
            Message::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        let size = line.len() as u64 + 1;
        if file.is_none() {
            file = open(path);
        }
        if file
            .as_ref()
            .is_some_and(|(_, written)| *written > 0 && written + size > limit)
        {
            drop(file.take());
            let _ = std::fs::rename(path, rotated(path));
            file = open(path);
        }
        if let Some((f, written)) = &mut file {
            if writeln!(f, "{line}").is_ok() {
                *written += size;
            } else {
                file = None;
            }
        }
    }
}

fn open(path: &Path) -> Option<(std::fs::File, u64)> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok()?;
    let written = f.metadata().map(|m| m.len()).unwrap_or(0);
    Some((f, written))
}

/// Where the previous log goes: `diagnostics.log.1`.
fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".1");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(detail: &str) -> Entry<'_> {
        Entry {
            run_id: "run-1",
            tool: "t",
            call_id: "c",
            detail,
            stderr: b"err",
        }
    }

    /// Entries are written, in order, with their run id, and `flush` waits for them.
    #[test]
    fn entries_carry_the_run_and_are_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("diagnostics.log");
        let log = Diagnostics::new(Some(path.clone()));
        let ids: Vec<String> = (0..10)
            .map(|i| log.record(entry(&format!("d{i}"))))
            .collect();
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 10);
        for (i, (line, id)) in lines.iter().zip(&ids).enumerate() {
            assert_eq!(line["diagnostic_id"], id.as_str());
            assert_eq!(line["run_id"], "run-1");
            assert_eq!(line["detail"], format!("d{i}"));
            assert!(line["at_ms"].as_u64().unwrap() > 0);
        }
        assert_eq!(log.dropped(), 0);
    }

    /// The file never grows past the limit: it is rotated to `.1` (replacing the one before),
    /// so two files of at most the limit hold the newest entries; a file already at the limit
    /// when the host starts is rotated too.
    #[test]
    fn the_log_is_rotated_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("diagnostics.log");
        let limit = 4096;
        let log = Diagnostics::with_limit(Some(path.clone()), limit);
        let detail = "x".repeat(300);
        let mut last = String::new();
        for _ in 0..100 {
            last = log.record(entry(&detail));
        }
        log.flush();
        drop(log);
        let current = std::fs::metadata(&path).unwrap().len();
        let previous = std::fs::metadata(rotated(&path)).unwrap().len();
        assert!(
            current <= limit && previous <= limit,
            "{current} {previous}"
        );
        assert!(previous > limit / 2, "{previous}");
        assert!(std::fs::read_to_string(&path).unwrap().contains(&last));

        std::fs::write(&path, "y".repeat(limit as usize)).unwrap();
        let log = Diagnostics::with_limit(Some(path.clone()), limit);
        let id = log.record(entry("after"));
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('{') && text.contains(&id), "{text}");
        assert_eq!(
            std::fs::read_to_string(rotated(&path)).unwrap().len(),
            limit as usize
        );
    }

    /// A writer that cannot keep up (here: blocked opening a FIFO nobody reads) fills the queue;
    /// later entries are dropped and counted instead of waiting or growing host memory, and
    /// once the writer moves on, everything queued is written.
    #[test]
    fn a_stuck_writer_drops_entries_past_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("diagnostics.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let log = Diagnostics::new(Some(path.clone()));
        let total = MAX_QUEUED_ENTRIES as u64 + 100;
        for _ in 0..total {
            log.record(entry("d"));
        }
        // The writer holds at most one entry while it waits to open the file.
        let dropped = log.dropped();
        assert!((99..=100).contains(&dropped), "{dropped}");
        let reader = std::thread::spawn(move || std::fs::read_to_string(path).unwrap());
        drop(log);
        let written = reader.join().unwrap().lines().count() as u64;
        assert_eq!(written + dropped, total);
    }

    /// Dropping the log writes what is queued first.
    #[test]
    fn dropping_the_log_writes_what_is_queued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("diagnostics.log");
        let log = Diagnostics::new(Some(path.clone()));
        for _ in 0..50 {
            log.record(entry("d"));
        }
        let dropped = log.dropped();
        drop(log);
        let lines = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
        assert_eq!(lines + dropped, 50);
        assert_eq!(dropped, 0, "50 entries fit the queue");
    }
}
