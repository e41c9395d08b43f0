//! Which identity each Streamable HTTP session belongs to.
//!
//! A session is bound to the identity that sent its `initialize`, when the server's answer
//! names the new session. Every later HTTP request that carries the session's id — requests,
//! POSTed responses (an elicitation's answer) and notifications (a cancel), the GET stream,
//! the DELETE — must come from that identity; any other gets the answer an unknown session
//! gets, so a leaked id neither works for nor is confirmed to anyone else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::config::Identity;

/// Open HTTP sessions one identity may hold (each is a run with its own state in the host).
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 32;

/// Open HTTP sessions the server holds in all.
pub const MAX_SESSIONS: usize = 1_024;

/// Bound sessions are checked against the session manager (sessions it expired are
/// forgotten) whenever their number doubles past this.
const PRUNE_FROM: usize = 64;

/// The owner of every live HTTP session.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    state: Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<String, Identity>,
    /// Bound sessions after the last prune; the next one runs at twice this.
    after_prune: usize,
}

impl SessionOwners {
    pub fn new(manager: Arc<LocalSessionManager>) -> Self {
        SessionOwners {
            manager,
            state: Mutex::default(),
        }
    }

    /// Bind the new session `id` to `owner`.
    pub async fn bind(&self, id: &str, owner: Identity) {
        let due = {
            let mut s = self.lock();
            s.by_session.insert(id.to_string(), owner);
            s.by_session.len() >= PRUNE_FROM.max(2 * s.after_prune)
        };
        if due {
            self.prune().await;
        }
    }

    /// Whether `id` is a session of `who`.
    pub fn owned_by(&self, id: &str, who: &Identity) -> bool {
        self.lock().by_session.get(id) == Some(who)
    }

    /// Forget a session that ended.
    pub fn forget(&self, id: &str) {
        self.lock().by_session.remove(id);
    }

    /// How many sessions are bound: all of them, and `who`'s.
    pub fn bound(&self, who: &Identity) -> (usize, usize) {
        let s = self.lock();
        let own = s.by_session.values().filter(|o| *o == who).count();
        (s.by_session.len(), own)
    }

    /// Whether `who` may open another session: under [`MAX_SESSIONS`] in all and
    /// [`MAX_SESSIONS_PER_PRINCIPAL`] of its own, once expired sessions are forgotten.
    pub async fn room_for(&self, who: &Identity) -> bool {
        let fits =
            |(all, own): (usize, usize)| all < MAX_SESSIONS && own < MAX_SESSIONS_PER_PRINCIPAL;
        if fits(self.bound(who)) {
            return true;
        }
        self.prune().await;
        fits(self.bound(who))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn who(p: &str) -> Identity {
        Identity::of_test(p)
    }

    /// A session answers only its owner; an unknown id answers nobody; a forgotten one is gone.
    #[tokio::test]
    async fn a_session_is_its_owners_only() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()));
        owners.bind("s1", who("alice")).await;
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
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()));
        for i in 0..PRUNE_FROM {
            owners.bind(&format!("s{i}"), who("alice")).await;
        }
        assert_eq!(owners.bound(&who("alice")), (0, 0));
    }

    /// One identity holds at most its share of sessions; others still get theirs.
    #[tokio::test]
    async fn sessions_per_principal_are_capped() {
        let owners = SessionOwners::new(Arc::new(LocalSessionManager::default()));
        {
            let mut s = owners.lock();
            for i in 0..MAX_SESSIONS_PER_PRINCIPAL {
                s.by_session.insert(format!("s{i}"), who("alice"));
            }
        }
        assert_eq!(owners.bound(&who("alice")).1, MAX_SESSIONS_PER_PRINCIPAL);
        assert!(owners.room_for(&who("mallory")).await);
    }
}
