//! Which identity each Streamable HTTP session belongs to.
//!
//! A session is bound to the identity that sent its `initialize`, when the server's answer
//! names the new session. Every later HTTP request that carries the session's id — requests,
//! POSTed responses (an elicitation's answer) and notifications (a cancel), the GET stream,
//! the DELETE — must come from that identity; any other gets the answer an unknown session
//! gets, so a leaked id neither works for nor is confirmed to anyone else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;

use toolhost_contract::Caller;

/// Open HTTP sessions one identity may hold (each is a run with its own state in the host).
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 32;

/// Open HTTP sessions the server holds in all.
pub const MAX_SESSIONS: usize = 1_024;

/// The least time a session must have gone without a request before a new session of its
/// owner may take its place: a client that holds every session it may have and opens another
/// closes its longest-idle one, never one it used this half-minute. A server whose tools run
/// longer waits longer ([`SessionOwners::new`]), so that no call still running is closed.
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(30);

/// Bound sessions are checked against the session manager (sessions it expired are
/// forgotten) whenever their number doubles past this.
const PRUNE_FROM: usize = 64;

/// The owner of every live HTTP session.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    state: Mutex<Owners>,
    /// How long a session must have gone without a request before it may be closed for
    /// another of its owner's.
    evictable_after: Duration,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<String, Bound>,
    /// Places taken by `initialize` requests not answered yet, by identity.
    reserved: HashMap<Caller, usize>,
    /// Bound sessions after the last prune; the next one runs at twice this.
    after_prune: usize,
}

/// A bound session: its owner, and when it last served a request.
struct Bound {
    owner: Caller,
    seen: Instant,
}

/// A place for one new session, taken by an `initialize` until its answer binds the session
/// ([`Reservation::bind`]); dropped unbound (the initialize failed), it frees the place.
pub struct Reservation<'a> {
    owners: &'a SessionOwners,
    who: Caller,
}

impl Reservation<'_> {
    /// Bind the new session `id` to the reservation's identity.
    pub async fn bind(self, id: &str) {
        let due = {
            let mut s = self.owners.lock();
            s.by_session.insert(
                id.to_string(),
                Bound {
                    owner: self.who.clone(),
                    seen: Instant::now(),
                },
            );
            s.by_session.len() >= PRUNE_FROM.max(2 * s.after_prune)
        };
        // The bound session holds the place now: dropping the reservation frees its count.
        let owners = self.owners;
        drop(self);
        if due {
            owners.prune().await;
        }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut s = self.owners.lock();
        if let Some(n) = s.reserved.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                s.reserved.remove(&self.who);
            }
        }
    }
}

impl SessionOwners {
    /// Owners of `manager`'s sessions, whose calls run at most `longest_call`: a session is
    /// closed for another only after [`EVICTABLE_AFTER`], and never sooner than a call of it
    /// could still be running (a request's last sign of life is its start).
    pub fn new(manager: Arc<LocalSessionManager>, longest_call: Duration) -> Self {
        SessionOwners {
            manager,
            state: Mutex::default(),
            evictable_after: longest_call + EVICTABLE_AFTER,
        }
    }

    /// Take a place for a new session of `who`, counted with the bound sessions and the other
    /// places taken, so that concurrent `initialize`s never pass the caps together. When `who`
    /// holds [`MAX_SESSIONS_PER_PRINCIPAL`] already, its longest-idle session (idle long enough,
    /// see [`SessionOwners::new`]) is closed to make room; when none may be closed, or the
    /// server holds [`MAX_SESSIONS`], the answer is how long to wait before trying again.
    pub async fn reserve(&self, who: &Caller) -> Result<Reservation<'_>, Duration> {
        let mut pruned = false;
        loop {
            let taken = {
                let mut s = self.lock();
                let reserved_all: usize = s.reserved.values().sum();
                let reserved_own = s.reserved.get(who).copied().unwrap_or(0);
                let own = s.by_session.values().filter(|b| b.owner == *who).count();
                let all = s.by_session.len() + reserved_all;
                let own = own + reserved_own;
                if all < MAX_SESSIONS && own < MAX_SESSIONS_PER_PRINCIPAL {
                    *s.reserved.entry(who.clone()).or_default() += 1;
                    Ok(None)
                } else if own >= MAX_SESSIONS_PER_PRINCIPAL {
                    // Closing one of `who`'s own sessions leaves the total as it was.
                    match longest_idle(&s, who) {
                        Some((id, idle)) if idle >= self.evictable_after => {
                            s.by_session.remove(&id);
                            *s.reserved.entry(who.clone()).or_default() += 1;
                            Ok(Some(id))
                        }
                        Some((_, idle)) => Err(self.evictable_after - idle),
                        None => Err(self.evictable_after),
                    }
                } else {
                    Err(EVICTABLE_AFTER)
                }
            };
            match taken {
                Ok(evicted) => {
                    if let Some(id) = evicted {
                        let _ = self.manager.close_session(&Arc::from(id.as_str())).await;
                    }
                    return Ok(Reservation {
                        owners: self,
                        who: who.clone(),
                    });
                }
                Err(wait) if pruned => return Err(wait.max(Duration::from_secs(1))),
                // Sessions the manager expired may be what fills the caps: once more after
                // forgetting them.
                Err(_) => {
                    self.prune().await;
                    pruned = true;
                }
            }
        }
    }

    /// Whether `id` is a session of `who`; a request of its owner marks it used now.
    pub fn owned_by(&self, id: &str, who: &Caller) -> bool {
        let mut s = self.lock();
        match s.by_session.get_mut(id) {
            Some(b) if b.owner == *who => {
                b.seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Forget a session that ended.
    pub fn forget(&self, id: &str) {
        self.lock().by_session.remove(id);
    }

    /// How many sessions are bound: all of them, and `who`'s.
    pub fn bound(&self, who: &Caller) -> (usize, usize) {
        let s = self.lock();
        let own = s.by_session.values().filter(|b| b.owner == *who).count();
        (s.by_session.len(), own)
    }

    /// Forget the sessions the manager no longer has (expired or closed).
    pub async fn prune(&self) {
        let live = self.manager.sessions.read().await;
        let mut s = self.lock();
        s.by_session.retain(|id, _| live.contains_key(id.as_str()));
        s.after_prune = s.by_session.len();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `who`'s session that went longest without a request, and for how long.
fn longest_idle(s: &Owners, who: &Caller) -> Option<(String, Duration)> {
    s.by_session
        .iter()
        .filter(|(_, b)| b.owner == *who)
        .min_by_key(|(_, b)| b.seen)
        .map(|(id, b)| (id.clone(), b.seen.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(p: &str) -> Caller {
        Caller::new(p, "t")
    }

    /// Bind `id` to `p` through a reservation.
    async fn open(owners: &SessionOwners, id: &str, p: &str) {
        owners.reserve(&who(p)).await.expect("room").bind(id).await;
    }

    /// `n` sessions of `p` the manager holds, each last used `idle` ago: their ids, and their
    /// transports (kept by the caller while the sessions should live).
    async fn held(
        owners: &SessionOwners,
        p: &str,
        n: usize,
        idle: Duration,
    ) -> (Vec<String>, Vec<impl Sized>) {
        let (mut ids, mut transports) = (Vec::new(), Vec::new());
        // One instant for all, so that the i-th is the i-th longest idle however slowly the
        // sessions are created.
        let now = Instant::now();
        for i in 0..n {
            let (id, transport) = owners.manager.create_session().await.expect("a session");
            transports.push(transport);
            let seen = now.checked_sub(idle + Duration::from_millis(i as u64));
            let seen = seen.expect("the clock is past the idle time");
            let bound = Bound {
                owner: who(p),
                seen,
            };
            owners.lock().by_session.insert(id.to_string(), bound);
            ids.push(id.to_string());
        }
        (ids, transports)
    }

    /// A session answers only its owner; an unknown id answers nobody; a forgotten one is gone.
    #[tokio::test]
    async fn a_session_is_its_owners_only() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()), Duration::ZERO);
        open(&owners, "s1", "alice").await;
        assert!(owners.owned_by("s1", &who("alice")));
        assert!(!owners.owned_by("s1", &who("mallory")));
        assert!(!owners.owned_by("s2", &who("alice")));
        assert_eq!(owners.bound(&who("alice")), (1, 1));
        assert_eq!(owners.bound(&who("mallory")), (1, 0));
        owners.forget("s1");
        assert!(!owners.owned_by("s1", &who("alice")));
    }

    /// Sessions the manager does not have are forgotten once enough are bound.
    #[tokio::test]
    async fn expired_sessions_are_pruned() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()), Duration::ZERO);
        for i in 0..PRUNE_FROM {
            open(&owners, &format!("s{i}"), &format!("p{i}")).await;
        }
        assert_eq!(owners.bound(&who("alice")), (0, 0));
    }

    /// Reservations count with bound sessions: an identity's concurrent `initialize`s never
    /// pass its cap together, and a reservation dropped unbound frees its place.
    #[tokio::test]
    async fn reservations_count_until_bound_or_dropped() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()), Duration::ZERO);
        let mut places = Vec::new();
        for _ in 0..MAX_SESSIONS_PER_PRINCIPAL {
            places.push(owners.reserve(&who("alice")).await.expect("room"));
        }
        let wait = owners.reserve(&who("alice")).await.err();
        assert_eq!(
            wait,
            Some(EVICTABLE_AFTER),
            "no session to close, none idle"
        );
        assert!(owners.reserve(&who("mallory")).await.is_ok());
        places.pop();
        assert!(owners.reserve(&who("alice")).await.is_ok());
    }

    /// An identity at its cap gets a new session in place of its longest-idle one (idle past
    /// [`EVICTABLE_AFTER`]); when all are in use it is told how long to wait; another
    /// identity is never touched.
    #[tokio::test]
    async fn a_full_identity_replaces_its_longest_idle_session() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()), Duration::ZERO);
        let (alice, _a) = held(
            &owners,
            "alice",
            MAX_SESSIONS_PER_PRINCIPAL,
            Duration::from_secs(60),
        )
        .await;
        let _m = held(&owners, "mallory", 3, Duration::from_secs(600)).await;
        owners
            .reserve(&who("alice"))
            .await
            .expect("room")
            .bind("new")
            .await;
        let last = &alice[MAX_SESSIONS_PER_PRINCIPAL - 1];
        assert!(
            !owners.owned_by(last, &who("alice")),
            "the longest idle is closed"
        );
        let live = owners.manager.sessions.read().await;
        assert!(!live.keys().any(|id| **id == **last), "and closed");
        drop(live);
        assert!(owners.owned_by(&alice[0], &who("alice")));
        assert_eq!(owners.bound(&who("alice")).1, MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(owners.bound(&who("mallory")).1, 3);

        let busy = SessionOwners::new(Arc::new(LocalSessionManager::default()), Duration::ZERO);
        let _b = held(
            &busy,
            "alice",
            MAX_SESSIONS_PER_PRINCIPAL,
            Duration::from_secs(20),
        )
        .await;
        let wait = busy.reserve(&who("alice")).await.err().expect("no room");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(10),
            "{wait:?}"
        );
        assert_eq!(busy.bound(&who("alice")).1, MAX_SESSIONS_PER_PRINCIPAL);
    }

    /// A session that may still be running a call (idle less than the longest call plus the
    /// margin) is never closed for another.
    #[tokio::test]
    async fn a_session_that_may_run_a_call_is_not_closed() {
        let long = Duration::from_secs(600);
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()), long);
        let _a = held(
            &owners,
            "alice",
            MAX_SESSIONS_PER_PRINCIPAL,
            Duration::from_secs(300),
        )
        .await;
        let wait = owners.reserve(&who("alice")).await.err().expect("no room");
        assert!(wait > Duration::from_secs(300), "{wait:?}");
        assert_eq!(owners.bound(&who("alice")).1, MAX_SESSIONS_PER_PRINCIPAL);
    }
}
