//! Group commit: one writer thread owns the backend; callers hand it their writes and wait for
//! the commit; the writer commits whatever arrived while its previous commit ran in one
//! transaction, then answers each caller.
//!
//! No caller learns that its write is done before the group that holds it is committed, so
//! "recorded before returned" and "admitted before executed" keep their meaning. A group whose
//! transaction fails fails every write in it. The writer runs on a thread of its own, so a
//! commit never blocks an async worker; a caller on an async worker awaits its answer.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use super::write::{Applied, Backend, Write};
use super::LedgerError;

/// Most writes committed in one group (a bound on one transaction's size and latency).
pub const MAX_GROUP: usize = 256;

type Answer = Result<Applied, LedgerError>;

/// Where a write's answer goes.
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

/// Commits and writes so far (for `just bench`: writes per commit).
#[derive(Debug, Default)]
pub struct GroupStats {
    pub commits: AtomicU64,
    pub writes: AtomicU64,
}

/// The writer thread and the queue to it.
pub(crate) struct GroupWriter {
    queue: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<GroupStats>,
    /// Writes handed over and not yet taken into a group.
    waiting: Arc<AtomicUsize>,
}

impl GroupWriter {
    /// Start the writer over `backend`.
    pub(crate) fn start(backend: Box<dyn Backend>) -> Result<GroupWriter, LedgerError> {
        let (queue, jobs) = mpsc::channel::<Job>();
        let stats = Arc::new(GroupStats::default());
        let waiting = Arc::new(AtomicUsize::new(0));
        let (counted, taken) = (stats.clone(), waiting.clone());
        let thread = std::thread::Builder::new()
            .name("toolhost-ledger".into())
            .spawn(move || run(backend, jobs, &counted, &taken))?;
        Ok(GroupWriter {
            queue: Some(queue),
            thread: Some(thread),
            stats,
            waiting,
        })
    }

    /// Commit `write` (with whatever else is waiting) and return what it did.
    pub(crate) async fn write(&self, write: Write) -> Answer {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Job {
            write,
            reply: Reply::Async(tx),
        })?;
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// [`GroupWriter::write`] for a caller that is not async: blocks its thread until the
    /// group is committed.
    pub(crate) fn write_blocking(&self, write: Write) -> Answer {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(Job {
            write,
            reply: Reply::Blocking(tx),
        })?;
        rx.recv().unwrap_or_else(|_| Err(stopped()))
    }

    pub(crate) fn stats(&self) -> &GroupStats {
        &self.stats
    }

    /// Writes waiting for the writer to take them.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    fn submit(&self, job: Job) -> Result<(), LedgerError> {
        let queue = self.queue.as_ref().ok_or_else(stopped)?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        queue.send(job).map_err(|_| {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            stopped()
        })
    }
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has committed what it holds.
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> LedgerError {
    LedgerError::Commit("the ledger's writer has stopped".into())
}

/// The writer: take the first waiting job, then everything else already queued (up to
/// [`MAX_GROUP`]), apply them as one group, answer each.
fn run(
    mut backend: Box<dyn Backend>,
    jobs: mpsc::Receiver<Job>,
    stats: &GroupStats,
    waiting: &AtomicUsize,
) {
    let mut group: Vec<Job> = Vec::with_capacity(MAX_GROUP);
    let mut writes: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while let Ok(first) = jobs.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        waiting.fetch_sub(group.len(), Ordering::Relaxed);
        let replies: Vec<Reply> = group
            .drain(..)
            .map(|job| {
                writes.push(job.write);
                job.reply
            })
            .collect();
        let applied = backend.apply(&writes);
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats
            .writes
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        writes.clear();
        match applied {
            Ok(answers) if answers.len() == replies.len() => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    reply.send(answer);
                }
            }
            Ok(_) => {
                for reply in replies {
                    reply.send(Err(LedgerError::Commit(
                        "the backend answered a group with the wrong number of results".into(),
                    )));
                }
            }
            Err(e) => {
                let why = e.to_string();
                for reply in replies {
                    reply.send(Err(LedgerError::Commit(why.clone())));
                }
            }
        }
    }
}
