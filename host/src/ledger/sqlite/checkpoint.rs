//! WAL checkpoints off the call path. SQLite's own automatic checkpoint runs inside the commit
//! that pushes the log past its threshold: that caller copies a thousand pages into the
//! database file and waits for two fsyncs before its result can be returned (14% of the
//! writer's time in a sequential profile, `docs/benchmarks-history.md`). Here the writer's connection
//! only notices the log's size after each commit (SQLite's WAL hook, which also turns the
//! automatic checkpoint off on that connection) and wakes a checkpointer thread with a
//! connection of its own, which runs a `PASSIVE` checkpoint — it never blocks a writer or a
//! reader. Once a checkpoint has copied the whole log, the next commit starts the log again
//! from its beginning, so the log stays near [`CHECKPOINT_PAGES`], as with SQLite's default.
//! Durability is unchanged: a commit is in the log either way, and the checkpoint only copies.

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::super::{LedgerError, LedgerOptions};
use super::schema;

/// Log pages after which a checkpoint is asked for: SQLite's own default
/// (`wal_autocheckpoint`), about 4 MiB of log.
pub(crate) const CHECKPOINT_PAGES: i32 = 1000;

#[derive(Default)]
struct State {
    /// The log passed [`CHECKPOINT_PAGES`] since the last checkpoint began.
    wanted: bool,
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Checkpoints run so far.
    done: AtomicU64,
    /// The log's length in pages after the last commit on the hooked connection.
    log_pages: AtomicI32,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The checkpointer thread of one SQLite ledger; stopped (and joined) when dropped.
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Start a checkpointer for the ledger file `path`, and hook `writer` (the connection the
    /// call path commits on) to it: from now on that connection never checkpoints itself.
    pub(crate) fn start(
        path: &Path,
        options: &LedgerOptions,
        writer: &mut Connection,
    ) -> Result<Checkpointer, LedgerError> {
        let conn = Connection::open(path)?;
        schema::configure(&conn, options)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: AtomicU64::new(0),
            log_pages: AtomicI32::new(0),
        });
        let hook = shared.clone();
        // The log's length when a checkpoint was last asked for: asked again only after
        // another quarter of the threshold (a checkpoint that runs while commits go on
        // leaves the last frames uncopied, and asking after every commit kept the thread
        // checkpointing, and fsyncing, without pause).
        let mut asked_at = 0;
        writer.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: i32| {
            hook.log_pages.store(pages, Ordering::Relaxed);
            if pages < asked_at {
                asked_at = 0;
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
        }))?;
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("toolhost-checkpoint".into())
            .spawn(move || run(&worker, &conn))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Checkpoints run so far.
    #[cfg(test)]
    pub(crate) fn done(&self) -> u64 {
        self.shared.done.load(Ordering::Relaxed)
    }

    /// The log's length in pages after the hooked connection's last commit.
    #[cfg(test)]
    pub(crate) fn log_pages(&self) -> i32 {
        self.shared.log_pages.load(Ordering::Relaxed)
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
        }
        // A checkpoint that cannot finish now (a reader still needs old pages, another
        // connection checkpointing) is asked for again by a later commit; an error leaves the
        // log to grow until one succeeds, which loses nothing.
        let _ = conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The hooked connection never checkpoints itself: its log grows past
    /// [`CHECKPOINT_PAGES`] until the checkpointer thread has copied it, after which a commit
    /// starts the log again from the beginning. Without the thread the log never comes back.
    #[test]
    fn the_checkpointer_thread_keeps_the_log_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let options = LedgerOptions::default();
        let mut writer = Connection::open(&path).unwrap();
        schema::configure(&writer, &options).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let checkpointer = Checkpointer::start(&path, &options, &mut writer).unwrap();
        // About one page per commit: past the threshold.
        for _ in 0..CHECKPOINT_PAGES + 50 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(3000))", [])
                .unwrap();
        }
        // The log may already have been copied and started again while the loop ran, and
        // then grown again below the threshold: small commits go on until a checkpoint has
        // run and a commit has started the log again (a log that grew back past the threshold
        // asks the thread again). Bounded: without the thread the log never comes back.
        let until = Instant::now() + Duration::from_secs(30);
        while (checkpointer.log_pages() >= 10 || checkpointer.done() == 0) && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
            writer.execute("INSERT INTO t VALUES (1)", []).unwrap();
        }
        assert!(checkpointer.done() >= 1);
        assert!(
            checkpointer.log_pages() < 10,
            "the log did not start again: {} pages",
            checkpointer.log_pages()
        );
        let rows: i64 = writer
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert!(rows > i64::from(CHECKPOINT_PAGES));
        drop(checkpointer);
    }
}
