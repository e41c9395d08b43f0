//! Connections that have not yet sent an authenticated request.
//!
//! Anyone who can reach the port can open a connection and send half a request head; hyper
//! gives it [`super::http::HEADER_READ_TIMEOUT`] before closing it. Such connections must not
//! take the slots authenticated clients need, so at most [`MAX_UNAUTHENTICATED`] wait at once:
//! a new connection past that closes the one that has waited longest. A connection leaves the
//! set when a request on it passes authentication, and is never evicted afterwards.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Connections that may wait for their first authenticated request at once: a quarter of the
/// connection slots, so authenticated clients always have the rest.
pub const MAX_UNAUTHENTICATED: usize = 64;

/// The unauthenticated connections of one listener, oldest first.
#[derive(Default)]
pub struct Pending {
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    next_id: u64,
    queue: VecDeque<(u64, CancellationToken)>,
}

/// One accepted connection's place among the unauthenticated ones.
pub struct Admission {
    id: u64,
    evicted: CancellationToken,
    pending: Arc<Pending>,
}

impl Pending {
    /// Admit a new connection, closing the longest-waiting one when the set is full.
    pub fn admit(self: &Arc<Self>) -> Admission {
        let evicted = CancellationToken::new();
        let mut w = self.lock();
        if w.queue.len() >= MAX_UNAUTHENTICATED {
            if let Some((_, oldest)) = w.queue.pop_front() {
                oldest.cancel();
            }
        }
        let id = w.next_id;
        w.next_id += 1;
        w.queue.push_back((id, evicted.clone()));
        Admission {
            id,
            evicted,
            pending: self.clone(),
        }
    }

    /// Connections waiting now.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether none wait.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Admission {
    /// Cancelled when the connection is evicted: its task closes it.
    pub fn evicted(&self) -> CancellationToken {
        self.evicted.clone()
    }

    /// A request on this connection passed authentication: it is no longer evictable.
    pub fn authenticated(&self) {
        let mut w = self.pending.lock();
        if let Some(i) = w.queue.iter().position(|(id, _)| *id == self.id) {
            w.queue.remove(i);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.authenticated();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the cap the longest-waiting connection is evicted; an authenticated one is never
    /// evicted and frees its place; a closed one frees its place.
    #[test]
    fn the_longest_waiting_connection_is_evicted() {
        let pending = Arc::new(Pending::default());
        let first = pending.admit();
        let second = pending.admit();
        second.authenticated();
        let rest: Vec<Admission> = (1..MAX_UNAUTHENTICATED).map(|_| pending.admit()).collect();
        assert_eq!(pending.len(), MAX_UNAUTHENTICATED);
        assert!(!first.evicted().is_cancelled());
        let newest = pending.admit();
        assert!(first.evicted().is_cancelled(), "the oldest goes first");
        assert!(
            !second.evicted().is_cancelled(),
            "authenticated: never evicted"
        );
        assert!(!newest.evicted().is_cancelled());
        assert_eq!(pending.len(), MAX_UNAUTHENTICATED);
        drop(rest);
        drop(newest);
        assert!(pending.is_empty());
    }
}
