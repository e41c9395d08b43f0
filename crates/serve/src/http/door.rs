//! Per-caller limits at the HTTP door, checked right after authentication and before anything
//! else is read or run: a request rate (a token bucket), a bound on requests in flight and a
//! bound on open connections, per principal. One caller's flood (calls, `tools/list`,
//! `tasks/get` polls, connections opened and left idle) costs it 429s and leaves every other
//! caller's budget, and the host's connection slots, as they were.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use http_body::{Body, Frame, SizeHint};

use crate::oauth::ResourceServer;

/// Most principals tracked at once; past it, idle ones are forgotten first.
pub const MAX_TRACKED_CALLERS: usize = 10_000;

/// Why a request was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The caller's request rate is spent.
    Rate,
    /// The caller has its most requests in flight.
    InFlight,
    /// The caller has its most connections open.
    Connections,
}

/// One caller's bucket and how many of its requests are in flight.
struct Account {
    tokens: f64,
    last: Instant,
    in_flight: usize,
    connections: usize,
}

/// The door's limits and what each caller has used of them.
pub struct Door {
    /// Requests per second per caller.
    rate: f64,
    burst: f64,
    max_in_flight: usize,
    max_connections: usize,
    callers: Mutex<HashMap<String, Account>>,
}

impl Door {
    /// `rate` requests per second with bursts of `burst` (default twice the rate),
    /// `max_in_flight` at once and `max_connections` open connections, for each principal.
    pub fn new(
        rate: f64,
        burst: Option<u32>,
        max_in_flight: usize,
        max_connections: usize,
    ) -> Arc<Door> {
        let burst = burst.map_or_else(|| (2.0 * rate).ceil(), f64::from);
        Arc::new(Door {
            rate,
            burst: burst.max(1.0),
            max_in_flight: max_in_flight.max(1),
            max_connections: max_connections.max(1),
            callers: Mutex::new(HashMap::new()),
        })
    }

    /// Charge one open connection to `principal` (the first principal a request on it
    /// authenticated as), or refuse it past the caller's bound. The charge lasts until the
    /// returned value is dropped (keep it as long as the connection).
    pub fn connect(self: &Arc<Self>, principal: &str) -> Result<Connection, Refused> {
        let mut callers = self.lock();
        let c = self.caller(&mut callers, principal, Instant::now());
        if c.connections >= self.max_connections {
            return Err(Refused::Connections);
        }
        c.connections += 1;
        Ok(Connection {
            door: self.clone(),
            principal: principal.to_string(),
        })
    }

    /// Let one request of `principal` in, or say why not. The pass it returns counts the
    /// request in flight until it is dropped (keep it with the response's body).
    pub fn enter(self: &Arc<Self>, principal: &str) -> Result<Pass, Refused> {
        self.admit(principal, true)
    }

    /// Count one more of `principal`'s calls in flight without taking from its rate (a task
    /// that runs on after the request that started it, which took from the rate, was
    /// answered), or say why not. The request that starts a task holds a pass of its own while
    /// it asks, so a caller allowed `n` in flight runs at most `n - 1` tasks at once and always
    /// has room left to poll them.
    pub fn hold(self: &Arc<Self>, principal: &str) -> Result<Pass, Refused> {
        self.admit(principal, false)
    }

    /// One more of `principal`'s requests in flight, taking from its rate when `rated`.
    fn admit(self: &Arc<Self>, principal: &str, rated: bool) -> Result<Pass, Refused> {
        let now = Instant::now();
        let mut callers = self.lock();
        let c = self.caller(&mut callers, principal, now);
        if c.in_flight >= self.max_in_flight {
            return Err(Refused::InFlight);
        }
        if rated {
            let refill = now.duration_since(c.last).as_secs_f64() * self.rate;
            c.tokens = (c.tokens + refill).min(self.burst);
            c.last = now;
            if c.tokens < 1.0 {
                return Err(Refused::Rate);
            }
            c.tokens -= 1.0;
        }
        c.in_flight += 1;
        Ok(Pass {
            door: self.clone(),
            principal: principal.to_string(),
        })
    }

    /// `principal`'s entry, made (with a full bucket) when it has none.
    fn caller<'m>(
        &self,
        callers: &'m mut HashMap<String, Account>,
        principal: &str,
        now: Instant,
    ) -> &'m mut Account {
        if callers.len() >= MAX_TRACKED_CALLERS && !callers.contains_key(principal) {
            self.forget_idle(callers, now);
        }
        callers.entry(principal.to_string()).or_insert(Account {
            tokens: self.burst,
            last: now,
            in_flight: 0,
            connections: 0,
        })
    }

    /// Drop callers with nothing in flight, no connection open and a refilled bucket (they
    /// lose nothing).
    fn forget_idle(&self, callers: &mut HashMap<String, Account>, now: Instant) {
        let (rate, burst) = (self.rate, self.burst);
        callers.retain(|_, c| {
            let elapsed = now.duration_since(c.last).as_secs_f64();
            let full = c.tokens + elapsed * rate >= burst;
            c.in_flight > 0 || c.connections > 0 || !full
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Account>> {
        self.callers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One open connection charged to a caller; dropping it frees the place.
pub struct Connection {
    door: Arc<Door>,
    principal: String,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(c) = self.door.lock().get_mut(&self.principal) {
            c.connections = c.connections.saturating_sub(1);
        }
    }
}

/// What the door let a request in with, for the handler to hold a task to the same bounds
/// (`serve/tasks.rs`): the caller's place at the door and the scopes of its access token.
/// The gate puts it in the request's extensions; a request without it (stdio) has no door.
#[derive(Clone)]
pub struct Admitted {
    door: Arc<Door>,
    principal: String,
    scopes: Option<(Arc<ResourceServer>, Vec<String>)>,
}

impl Admitted {
    pub(crate) fn new(
        door: Arc<Door>,
        principal: &str,
        oauth: Option<&Arc<ResourceServer>>,
        scopes: Option<&[String]>,
    ) -> Admitted {
        Admitted {
            door,
            principal: principal.to_string(),
            scopes: oauth.zip(scopes).map(|(o, s)| (o.clone(), s.to_vec())),
        }
    }

    /// A pass that counts a task of this caller in flight until it is dropped.
    pub fn hold(&self) -> Result<Pass, Refused> {
        self.door.hold(&self.principal)
    }

    /// The scope a call of `tool` needs and this request's access token lacks, if any (a
    /// static token, or no `[serve.oauth]`, lacks none).
    pub fn missing_scope(&self, tool: &str) -> Option<&str> {
        let (server, granted) = self.scopes.as_ref()?;
        let needed = server.scope_for(tool)?;
        (!granted.iter().any(|s| s == needed)).then_some(needed)
    }
}

/// One request in flight; dropping it lets the next one in.
pub struct Pass {
    door: Arc<Door>,
    principal: String,
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some(c) = self.door.lock().get_mut(&self.principal) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }
}

/// A response body that keeps its request's [`Pass`] until the body ends or is dropped (a
/// streamed answer is in flight as long as it streams).
pub struct Held<B> {
    inner: B,
    _pass: Pass,
}

impl<B> Held<B> {
    pub fn new(inner: B, pass: Pass) -> Self {
        Held { inner, _pass: pass }
    }
}

impl<B: Body + Unpin> Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst passes, the next request is refused for rate; another caller is untouched; a
    /// pass held counts in flight until dropped.
    #[test]
    fn each_caller_has_its_own_budget() {
        let door = Door::new(0.001, Some(3), 2, 64);
        let a1 = door.enter("alice").unwrap();
        let a2 = door.enter("alice").unwrap();
        assert_eq!(door.enter("alice").err(), Some(Refused::InFlight));
        drop(a1);
        let a3 = door.enter("alice").unwrap();
        drop((a2, a3));
        assert_eq!(door.enter("alice").err(), Some(Refused::Rate));
        assert!(
            door.enter("bob").is_ok(),
            "another caller's budget is its own"
        );
        // A task's hold counts in flight and takes no rate: with two in flight allowed, the
        // request that starts a task and the task fit, and the next request still enters.
        let door = Door::new(0.001, Some(3), 2, 64);
        let request = door.enter("carol").unwrap();
        let task = door.hold("carol").unwrap();
        assert_eq!(door.hold("carol").err(), Some(Refused::InFlight));
        drop(request);
        let poll = door.enter("carol").unwrap();
        assert_eq!(door.enter("carol").err(), Some(Refused::InFlight));
        drop((poll, task));
        let fast = Door::new(1e9, None, 1, 64);
        let held = fast.enter("alice").unwrap();
        assert_eq!(fast.enter("alice").err(), Some(Refused::InFlight));
        drop(held);
        for _ in 0..1000 {
            drop(fast.enter("alice").unwrap());
        }
    }

    /// A caller's open connections are bounded, each dropped one frees a place, another
    /// caller has its own, and a caller with a connection open is never forgotten.
    #[test]
    fn each_caller_has_its_own_connections() {
        let door = Door::new(1.0, None, 4, 2);
        let a1 = door.connect("alice").unwrap();
        let a2 = door.connect("alice").unwrap();
        assert_eq!(door.connect("alice").err(), Some(Refused::Connections));
        let b = door.connect("bob").unwrap();
        drop(a1);
        let a3 = door.connect("alice").unwrap();
        let mut callers = door.lock();
        door.forget_idle(
            &mut callers,
            Instant::now() + std::time::Duration::from_secs(60),
        );
        assert_eq!(callers["alice"].connections, 2, "held connections are kept");
        drop(callers);
        drop((a2, a3, b));
        let mut callers = door.lock();
        door.forget_idle(
            &mut callers,
            Instant::now() + std::time::Duration::from_secs(60),
        );
        assert!(callers.is_empty(), "idle callers are forgotten");
    }
}
