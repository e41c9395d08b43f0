//! WAL checkpoints off the call path. SQLite's own automatic checkpoint runs inside the commit
//! that pushes the log past its threshold: that caller copies a thousand pages into the
//! database file and waits for two fsyncs before its result can be returned (14% of the
//! writer's time in a sequential profile, `docs/benchmarks-history.md`). Here the writer's connection
//! only notices the log's size after each commit (SQLite's WAL hook, which also turns the
//! automatic checkpoint off on that connection) and wakes a checkpointer thread with a
//! connection of its own, which runs a `PASSIVE` checkpoint — it never blocks a writer or a
//! reader. Once a checkpoint has copied the whole log, the next commit starts the log again
//! from its beginning, so the log stays near [`CHECKPOINT_PAGES`], as with SQLite's default.
//!
//! A checkpoint that runs beside commits copies only the frames that were in the log when it
//! began; if commits never pause for as long as a checkpoint takes (a slow disk's fsync under
//! steady load), no checkpoint ever finds the whole log copied and the log would grow without
//! end. So once the log reaches [`MAX_LOG_PAGES`], the writer checkpoints in its own commit, as
//! SQLite's default does: no commit can land during that checkpoint, so it copies the whole
//! log (unless a reader still needs old pages) and the next commit starts the log again.
//! Durability is unchanged: a commit is in the log either way, and the checkpoint only copies.

use crate::Db;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::schema;
use super::{LedgerError, LedgerOptions};

/// Log pages after which a checkpoint is asked for: SQLite's own default
/// (`wal_autocheckpoint`), about 4 MiB of log.
pub const CHECKPOINT_PAGES: i32 = 1000;

/// Log pages at which the writer checkpoints in its own commit, because the thread's
/// checkpoints have not caught up with the commits (see the module docs): about 16 MiB of
/// log, the most the log holds whatever the load, unless a reader pins old pages. Four times
/// the threshold leaves the thread three chances first.
pub const MAX_LOG_PAGES: i32 = 4 * CHECKPOINT_PAGES;

#[derive(Default)]
struct State {
    /// The log passed [`CHECKPOINT_PAGES`] since the last checkpoint began.
    wanted: bool,
    /// The thread is checkpointing.
    busy: bool,
    closing: bool,
    /// Tests stop the thread's checkpoints, as a thread that cannot keep up.
    #[cfg(test)]
    paused: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Checkpoints the thread ran so far.
    done: AtomicU64,
    /// Checkpoints the writer ran in its own commit, at [`MAX_LOG_PAGES`].
    forced: AtomicU64,
    /// The log's length in pages after the last commit on the hooked connection.
    log_pages: AtomicI32,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The checkpointer thread of one SQLite ledger; stopped (and joined) when dropped.
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Start a checkpointer for the ledger file `path`, and hook `writer` (the connection the
    /// call path commits on) to it: from now on that connection never checkpoints itself.
    pub fn start(
        path: &Path,
        options: &LedgerOptions,
        writer: &mut Connection,
    ) -> Result<Checkpointer, LedgerError> {
        let conn = Connection::open(path).db()?;
        schema::configure(&conn, options)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: AtomicU64::new(0),
            forced: AtomicU64::new(0),
            log_pages: AtomicI32::new(0),
        });
        let hook = shared.clone();
        // The log's length when a checkpoint was last asked for: asked again only after
        // another quarter of the threshold (a checkpoint that runs while commits go on
        // leaves the last frames uncopied, and asking after every commit kept the thread
        // checkpointing, and fsyncing, without pause).
        let mut asked_at = 0;
        // The log's length when the writer last checkpointed itself: again only after another
        // quarter of the threshold, so a reader that pins old pages does not make every
        // commit checkpoint.
        let mut forced_at = 0;
        let mut last = 0;
        writer
            .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
                hook.log_pages.store(pages, Ordering::Relaxed);
                if pages < last {
                    // The log started again.
                    asked_at = 0;
                    forced_at = 0;
                }
                last = pages;
                if pages >= MAX_LOG_PAGES && pages - forced_at >= CHECKPOINT_PAGES / 4 {
                    forced_at = pages;
                    // As SQLite's own automatic checkpoint does, inside this commit; a failure
                    // (the thread checkpointing at the same moment) is retried a quarter later.
                    let _ = wal.checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE);
                    hook.forced.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                if pages >= CHECKPOINT_PAGES && pages - asked_at >= CHECKPOINT_PAGES / 4 {
                    asked_at = pages;
                    let mut state = hook.state();
                    if !state.wanted {
                        state.wanted = true;
                        hook.wake.notify_one();
                    }
                }
                Ok(())
            }))
            .db()?;
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("toolhost-checkpoint".into())
            .spawn(move || run(&worker, &conn))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Checkpoints the thread ran so far.
    #[cfg(test)]
    pub fn done(&self) -> u64 {
        self.shared.done.load(Ordering::Relaxed)
    }

    /// Checkpoints the writer ran in its own commit so far.
    #[cfg(test)]
    pub fn forced(&self) -> u64 {
        self.shared.forced.load(Ordering::Relaxed)
    }

    /// The log's length in pages after the hooked connection's last commit.
    #[cfg(test)]
    pub fn log_pages(&self) -> i32 {
        self.shared.log_pages.load(Ordering::Relaxed)
    }

    /// Wait until the thread has no checkpoint asked for or running (at most `limit`).
    #[cfg(test)]
    fn wait_idle(&self, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        let mut state = self.shared.state();
        while state.wanted || state.busy {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Stop (or resume) the thread's checkpoints: it takes requests and does nothing.
    #[cfg(test)]
    fn pause(&self, paused: bool) {
        self.shared.state().paused = paused;
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.state().closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, conn: &Connection) {
    loop {
        {
            let mut state = shared.state();
            while !state.wanted {
                if state.closing {
                    return;
                }
                state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.wanted = false;
            state.busy = true;
            #[cfg(test)]
            if state.paused {
                state.busy = false;
                shared.wake.notify_all();
                continue;
            }
        }
        // A checkpoint that cannot finish now (a reader still needs old pages, another
        // connection checkpointing) is asked for again by a later commit; an error leaves the
        // log to grow until one succeeds or the writer checkpoints itself, which loses nothing.
        let _ = conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
        shared.done.fetch_add(1, Ordering::Relaxed);
        shared.state().busy = false;
        // Wakes a test waiting for the thread to be idle (the thread itself waits only while
        // nothing is wanted, so a spurious wake costs it one check).
        shared.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ledger(dir: &Path) -> (Connection, Checkpointer) {
        let path = dir.join("ledger.sqlite");
        let options = LedgerOptions::default();
        let mut writer = Connection::open(&path).unwrap();
        schema::configure(&writer, &options).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let checkpointer = Checkpointer::start(&path, &options, &mut writer).unwrap();
        (writer, checkpointer)
    }

    /// One commit of a row that fills most of a page (one or two pages of log).
    fn commit_a_page(writer: &Connection) {
        writer
            .execute("INSERT INTO t VALUES (zeroblob(3000))", [])
            .unwrap();
    }

    /// The hooked connection does not checkpoint itself below [`MAX_LOG_PAGES`]: its log grows
    /// past [`CHECKPOINT_PAGES`] until the checkpointer thread has copied it, after which a
    /// commit starts the log again from the beginning. Each commit here waits for a
    /// checkpoint it asked for to end, so the thread's checkpoint finds the whole log; without
    /// the thread the log never comes back.
    #[test]
    fn the_checkpointer_thread_keeps_the_log_short() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, checkpointer) = ledger(dir.path());
        let mut restarted = false;
        let mut commits = 0;
        for _ in 0..2 * CHECKPOINT_PAGES {
            commit_a_page(&writer);
            commits += 1;
            assert!(checkpointer.wait_idle(Duration::from_secs(30)));
            if checkpointer.done() >= 1 && checkpointer.log_pages() < 10 {
                restarted = true;
                break;
            }
            assert!(checkpointer.log_pages() <= CHECKPOINT_PAGES + 10);
        }
        assert!(
            restarted,
            "the log did not start again: {} pages",
            checkpointer.log_pages()
        );
        assert_eq!(
            checkpointer.forced(),
            0,
            "the writer never checkpointed itself"
        );
        let rows: i64 = writer
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, commits, "every commit kept");
    }

    /// A thread that never keeps up (here: paused) leaves the log at most [`MAX_LOG_PAGES`]
    /// long: the writer then checkpoints in its own commit and the next commit starts the log
    /// again. Without that bound the log grows by a page per commit for as long as they come.
    #[test]
    fn a_checkpointer_that_cannot_keep_up_does_not_let_the_log_grow() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, checkpointer) = ledger(dir.path());
        checkpointer.pause(true);
        let mut longest = 0;
        let mut restarted = false;
        for _ in 0..MAX_LOG_PAGES + CHECKPOINT_PAGES {
            commit_a_page(&writer);
            let pages = checkpointer.log_pages();
            longest = longest.max(pages);
            if longest >= MAX_LOG_PAGES && pages < 10 {
                restarted = true;
                break;
            }
        }
        assert!(restarted, "the log did not start again: {longest} pages");
        assert!(longest <= MAX_LOG_PAGES + 10, "{longest} pages");
        assert!(checkpointer.forced() >= 1);
        // The thread was asked and copied nothing: the writer's checkpoint alone kept the bound.
        assert!(checkpointer.wait_idle(Duration::from_secs(30)));
        assert_eq!(checkpointer.done(), 0);
    }
}
