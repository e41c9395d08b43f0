//! stdout, shared by every response and by the reader's error answers, written without a task
//! of its own.
//!
//! A line is appended whole to one pending buffer and written from there, in order, by whoever
//! polls next: the `send` that queued it (first at once, on the thread that produced it), a
//! later `send`, or the transport's `receive`, which rmcp polls for as long as the session
//! lives. Bytes only ever leave the buffer in order, so lines never interleave, and a future
//! dropped half way leaves its line in the buffer for the next poller instead of cutting it.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;

/// The output half of the stdio transport (cheap to clone: one shared buffer and writer).
pub(super) struct Output<W> {
    shared: Arc<Mutex<Pending<W>>>,
}

impl<W> Clone for Output<W> {
    fn clone(&self) -> Self {
        Output {
            shared: self.shared.clone(),
        }
    }
}

/// Where the bytes stand.
struct Pending<W> {
    write: W,
    /// Queued bytes; `buf[start..]` is not written yet.
    buf: Vec<u8>,
    start: usize,
    /// Bytes queued, written and flushed since the session began (monotonic offsets).
    queued: u64,
    written: u64,
    flushed: u64,
    /// The first write or flush error; every later poll reports it.
    failed: Option<io::ErrorKind>,
    /// Pollers waiting for their bytes; woken whenever bytes move (the writer keeps only the
    /// last poller's waker).
    waiters: Vec<Waker>,
}

impl<W: AsyncWrite + Unpin> Output<W> {
    pub(super) fn new(write: W) -> Output<W> {
        Output {
            shared: Arc::new(Mutex::new(Pending {
                write,
                buf: Vec::new(),
                start: 0,
                queued: 0,
                written: 0,
                flushed: 0,
                failed: None,
                waiters: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending<W>> {
        // Nothing panics while the lock is held but the writer itself; its state stays usable.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue one whole line and write as much as the pipe takes now, without waiting. Returns
    /// the offset the line ends at, for [`Output::poll_done`].
    pub(super) fn push(&self, line: &[u8]) -> u64 {
        let mut p = self.lock();
        let end = p.queue(line);
        // No waker of ours yet: whoever polls next registers one (a `send`'s future is polled
        // at once; `receive` is always being polled).
        let _ = p.drive(&mut Context::from_waker(Waker::noop()));
        end
    }

    /// Ready once every byte up to `end` is written and flushed, or with the writer's error.
    pub(super) fn poll_done(&self, end: u64, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut p = self.lock();
        p.drive(cx)?;
        if p.flushed >= end {
            return Poll::Ready(Ok(()));
        }
        p.wait(cx);
        Poll::Pending
    }

    /// Write what is pending; `Ok(n)` with the bytes still unwritten (the caller waits when it
    /// cares), or the writer's error.
    pub(super) fn poll_drive(&self, cx: &mut Context<'_>) -> io::Result<usize> {
        let mut p = self.lock();
        p.drive(cx)?;
        let left = p.buf.len() - p.start;
        if left > 0 || p.flushed < p.queued {
            p.wait(cx);
        }
        Ok(left)
    }
}

impl<W: AsyncWrite + Unpin> Pending<W> {
    fn queue(&mut self, line: &[u8]) -> u64 {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(line);
        self.queued += line.len() as u64;
        self.queued
    }

    fn wait(&mut self, cx: &mut Context<'_>) {
        if !self.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            self.waiters.push(cx.waker().clone());
        }
    }

    /// Write and flush as far as the writer goes without waiting; wake the waiters when bytes
    /// moved or the writer failed.
    fn drive(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if let Some(kind) = self.failed {
            return Err(kind.into());
        }
        let before = self.flushed;
        let result = self.write_out(cx);
        if let Err(e) = &result {
            self.failed = Some(e.kind());
        }
        if result.is_err() || self.flushed != before {
            for w in self.waiters.drain(..) {
                w.wake();
            }
        }
        result
    }

    fn write_out(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        while self.start < self.buf.len() {
            match Pin::new(&mut self.write).poll_write(cx, &self.buf[self.start..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.start += n;
                    self.written += n as u64;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
        if self.flushed < self.written {
            if let Poll::Ready(r) = Pin::new(&mut self.write).poll_flush(cx) {
                r?;
                self.flushed = self.written;
            }
        }
        if self.buf.capacity() > RETAINED_CAPACITY && self.start == self.buf.len() {
            self.buf = Vec::new();
            self.start = 0;
        }
        Ok(())
    }
}

/// What the pending buffer keeps allocated between lines once it is empty: enough for ordinary
/// responses, not the largest output a call ever wrote.
const RETAINED_CAPACITY: usize = 64 * 1024;
