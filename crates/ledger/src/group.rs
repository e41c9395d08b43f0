//! Group commit: callers hand their writes to the ledger and wait for the commit; whatever
//! arrived while the previous commit ran is committed together, in one transaction, then each
//! caller is answered.
//!
//! Who commits: a caller with nothing else to do meanwhile ([`Inline::Allowed`]: the runtime
//! passes it while no more calls are in flight than it has async workers) that finds the
//! ledger idle (no commit
//! running, nothing queued) commits its write at once — a thread hop to a writer and back
//! costs more than the commit on these machines (`docs/benchmarks-history.md`), and an idle ledger has
//! nobody else to wait for it. Every other write is queued, and the writer thread commits the
//! queue as one group as soon as the running commit ends, and again until the queue is empty.
//! So with more calls in flight than workers every commit is on the writer thread, in groups,
//! and no async worker is held by a commit while another call waits for it.
//!
//! No caller learns that its write is done before the transaction that holds it is committed,
//! so "recorded before returned" and "admitted before executed" keep their meaning. A group
//! whose transaction fails fails every write in it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::write::{Applied, Backend, Write};
use super::LedgerError;

/// Most writes committed in one group (a bound on one transaction's size and latency).
pub const MAX_GROUP: usize = 256;

type Answer = Result<Applied, LedgerError>;

/// Where a queued write's answer goes.
enum Reply {
    Async(tokio::sync::oneshot::Sender<Answer>),
    Blocking(mpsc::SyncSender<Answer>),
}

impl Reply {
    fn send(self, answer: Answer) {
        // A caller that stopped waiting (a dropped future) loses nothing: its write is
        // committed or failed either way.
        match self {
            Reply::Async(tx) => {
                let _ = tx.send(answer);
            }
            Reply::Blocking(tx) => {
                let _ = tx.send(answer);
            }
        }
    }
}

struct Job {
    write: Write,
    reply: Reply,
}

/// Whether a caller may commit its write itself on an idle ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inline {
    /// Nothing else needs this thread (no more calls in flight than workers): commit at once
    /// if the ledger is idle, which saves two thread hops.
    Allowed,
    /// Other work shares this thread (an async worker with other calls in flight): always
    /// hand the write to the writer thread.
    Never,
}

/// Commits and writes so far (for `just bench`: commits per call), and how many commits a
/// caller made itself on an idle ledger.
#[derive(Debug, Default)]
pub struct GroupStats {
    pub commits: AtomicU64,
    pub writes: AtomicU64,
    pub inline_commits: AtomicU64,
}

/// What the writer and the callers share.
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: a write was queued, a commit ended, or the ledger is closing.
    wake: Condvar,
    backend: Mutex<Box<dyn Backend>>,
    /// The backend may commit on a caller's thread ([`Backend::commits_anywhere`]).
    inline_ok: bool,
    stats: GroupStats,
}

#[derive(Default)]
struct State {
    queue: Vec<Job>,
    /// A commit is running (a caller's own, or the writer's).
    busy: bool,
    closing: bool,
}

/// The group committer: the shared state and the writer thread.
pub(crate) struct GroupWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl GroupWriter {
    /// Start the writer over `backend`.
    pub(crate) fn start(backend: Box<dyn Backend>) -> Result<GroupWriter, LedgerError> {
        let inline_ok = backend.commits_anywhere();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            backend: Mutex::new(backend),
            inline_ok,
            stats: GroupStats::default(),
        });
        let writer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("toolhost-ledger".into())
            .spawn(move || run(&writer))?;
        Ok(GroupWriter {
            shared,
            thread: Some(thread),
        })
    }

    /// Commit `write` and return what it did: with `Inline::Allowed` at once on this thread if
    /// the ledger is idle, else with the next group (awaited without blocking the worker).
    pub(crate) async fn write(&self, write: Write, inline: Inline) -> Answer {
        if inline == Inline::Allowed {
            if let Some(answer) = self.try_inline(&write) {
                return answer;
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.enqueue(Job {
            write,
            reply: Reply::Async(tx),
        })?;
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// [`GroupWriter::write`] for a caller that is not async: blocks its thread until the
    /// write is committed.
    pub(crate) fn write_blocking(&self, write: Write) -> Answer {
        if let Some(answer) = self.try_inline(&write) {
            return answer;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.enqueue(Job {
            write,
            reply: Reply::Blocking(tx),
        })?;
        rx.recv().unwrap_or_else(|_| Err(stopped()))
    }

    pub(crate) fn stats(&self) -> &GroupStats {
        &self.shared.stats
    }

    /// Writes waiting for the writer to take them.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.shared.state().queue.len()
    }

    /// Commit `write` on this thread if nothing else is committing or waiting (`None`
    /// otherwise: queue it).
    fn try_inline(&self, write: &Write) -> Option<Answer> {
        self.when_idle(|shared| {
            let answer = shared
                .apply(std::slice::from_ref(write))
                .pop()
                .unwrap_or_else(|| Err(LedgerError::Commit(MISCOUNTED.into())));
            shared.stats.inline_commits.fetch_add(1, Ordering::Relaxed);
            answer
        })
    }

    /// [`Backend::is_admitted`] on this thread, if nothing is committing or waiting (`None`
    /// otherwise, or if the backend has no answer: ask the store).
    pub(crate) fn try_is_admitted(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Option<Result<bool, LedgerError>> {
        self.when_idle(|shared| {
            let mut backend = shared.backend.lock().unwrap_or_else(|e| e.into_inner());
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                backend.is_admitted(run_id, call_id)
            }))
            .unwrap_or_else(|_| None)
        })
        .flatten()
    }

    /// Run `f` on this thread with the backend to itself, if the backend may be used from
    /// any thread and nothing is committing or waiting (`None` otherwise); afterwards the
    /// writer is woken if writes were queued meanwhile.
    fn when_idle<T>(&self, f: impl FnOnce(&Shared) -> T) -> Option<T> {
        let shared = &self.shared;
        if !shared.inline_ok {
            return None;
        }
        {
            let mut state = shared.state();
            if state.busy || !state.queue.is_empty() || state.closing {
                return None;
            }
            state.busy = true;
        }
        let done = f(shared);
        let mut state = shared.state();
        state.busy = false;
        if !state.queue.is_empty() {
            shared.wake.notify_one();
        }
        Some(done)
    }

    fn enqueue(&self, job: Job) -> Result<(), LedgerError> {
        let mut state = self.shared.state();
        if state.closing {
            return Err(stopped());
        }
        state.queue.push(job);
        if !state.busy {
            self.shared.wake.notify_one();
        }
        Ok(())
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a queue and two flags, consistent between statements: a panic while
        // it was held leaves nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply one group on the backend, count it, and return one answer per write: each
    /// write's own, or — if the group failed as a whole — that failure for every write. A
    /// backend that panics fails the group (and leaves the committer usable) instead of
    /// unwinding through the caller or the writer with the `busy` flag set.
    fn apply(&self, writes: &[Write]) -> Vec<Answer> {
        let mut backend = self.backend.lock().unwrap_or_else(|e| e.into_inner());
        let started = toolhost_telemetry::metrics_enabled().then(std::time::Instant::now);
        let applied =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backend.apply(writes)))
                .unwrap_or_else(|_| Err(LedgerError::Commit("the ledger backend failed".into())));
        if let Some(started) = started {
            toolhost_telemetry::metrics().commit(started.elapsed().as_secs_f64(), writes.len());
        }
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.stats
            .writes
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        let failed = |why: String| {
            writes
                .iter()
                .map(|_| Err(LedgerError::Commit(why.clone())))
                .collect()
        };
        match applied {
            Ok(answers) if answers.len() == writes.len() => answers,
            Ok(_) => failed(MISCOUNTED.into()),
            // A group failure already said "commit failed": keep its own words.
            Err(LedgerError::Commit(why)) => failed(why),
            Err(e) => failed(e.to_string()),
        }
    }
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        // The writer commits what is queued, then ends.
        self.shared.state().closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> LedgerError {
    LedgerError::Commit("the ledger's writer has stopped".into())
}

/// Why every write of a group fails when the backend answered it with the wrong count.
const MISCOUNTED: &str = "the backend answered a group with the wrong number of results";

/// The writer: whenever no commit runs and writes are queued, take them (up to
/// [`MAX_GROUP`]) as one group, apply it, answer each.
fn run(shared: &Shared) {
    let mut writes: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    loop {
        let group: Vec<Job> = {
            let mut state = shared.state();
            while state.busy || state.queue.is_empty() {
                if state.closing && state.queue.is_empty() {
                    return;
                }
                state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.busy = true;
            let n = state.queue.len().min(MAX_GROUP);
            state.queue.drain(..n).collect()
        };
        let replies: Vec<Reply> = group
            .into_iter()
            .map(|job| {
                writes.push(job.write);
                job.reply
            })
            .collect();
        let answers = shared.apply(&writes);
        writes.clear();
        shared.state().busy = false;
        for (reply, answer) in replies.into_iter().zip(answers) {
            reply.send(answer);
        }
    }
}
