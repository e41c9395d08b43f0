//! Server-sent event streams a client holds open over HTTP (the GET stream of a session):
//! bounded per identity and in all, and each ends after a lifetime (the client reconnects).
//!
//! A stream holds a connection and a task for as long as it stays open, and nothing a client
//! sends ends it; without these bounds one token holder kept every connection slot.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use toolhost_contract::Caller;

/// Open GET streams one identity may hold.
pub const MAX_STREAMS_PER_PRINCIPAL: usize = 4;

/// Open GET streams the server holds in all: a quarter of its connection slots.
pub const MAX_STREAMS: usize = 64;

/// The permits a stream holds while it is open: its identity's and the server's.
pub struct StreamPermit {
    _own: OwnedSemaphorePermit,
    _all: OwnedSemaphorePermit,
}

/// The stream budgets of one server.
pub struct StreamBudget {
    all: Arc<Semaphore>,
    by_identity: Mutex<HashMap<Caller, Arc<Semaphore>>>,
}

impl Default for StreamBudget {
    fn default() -> Self {
        StreamBudget {
            all: Arc::new(Semaphore::new(MAX_STREAMS)),
            by_identity: Mutex::default(),
        }
    }
}

impl StreamBudget {
    /// A permit for one more stream of `who`, or `None` when its share or the server's is
    /// taken. The map holds one entry per identity that ever opened a stream: identities come
    /// from the config's tokens, so it stays as small as the config.
    pub fn open(&self, who: &Caller) -> Option<StreamPermit> {
        let own = {
            let mut map = self.by_identity.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(who.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(MAX_STREAMS_PER_PRINCIPAL)))
                .clone()
        };
        let own = own.try_acquire_owned().ok()?;
        let all = self.all.clone().try_acquire_owned().ok()?;
        Some(StreamPermit {
            _own: own,
            _all: all,
        })
    }
}

/// A response body that ends after `lifetime` and holds `permit` until it ends or is dropped.
pub struct Bounded<B> {
    inner: B,
    end: Pin<Box<tokio::time::Sleep>>,
    _permit: StreamPermit,
}

impl<B> Bounded<B> {
    pub fn new(inner: B, lifetime: Duration, permit: StreamPermit) -> Self {
        Bounded {
            inner,
            end: Box::pin(tokio::time::sleep(lifetime)),
            _permit: permit,
        }
    }
}

impl<B> Body for Bounded<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.end.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    fn who(p: &str) -> Caller {
        Caller::new(p, "t")
    }

    /// One identity gets its share and no more; another still gets its own; a dropped
    /// permit frees its place.
    #[test]
    fn streams_are_bounded_per_identity() {
        let budget = StreamBudget::default();
        let mut held: Vec<StreamPermit> = (0..MAX_STREAMS_PER_PRINCIPAL)
            .map(|_| budget.open(&who("mallory")).unwrap())
            .collect();
        assert!(budget.open(&who("mallory")).is_none());
        assert!(budget.open(&who("alice")).is_some());
        held.pop();
        assert!(budget.open(&who("mallory")).is_some());
    }

    /// A stream that would never end ends at its lifetime.
    #[tokio::test(start_paused = true)]
    async fn a_stream_ends_at_its_lifetime() {
        let budget = StreamBudget::default();
        let never = StreamBody::new(futures::stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >());
        let permit = budget.open(&who("alice")).unwrap();
        let mut body = Bounded::new(never, Duration::from_secs(300), permit);
        let frame = tokio::time::timeout(Duration::from_secs(299), body.frame()).await;
        assert!(frame.is_err(), "still open before its lifetime");
        assert!(body.frame().await.is_none(), "ended at its lifetime");
    }
}
