//! Operator sessions: a random id in an `HttpOnly`, `SameSite=Strict` cookie scoped to the
//! console's path, bound on this host to one operator and one CSRF token of its own.
//!
//! A session ends when it goes unused for the configured idle time, after
//! [`SESSION_LIFETIME`] whatever its use, on sign-out, or when [`MAX_SESSIONS`] newer ones
//! need its place. The host keeps only the SHA-256 of each id, so its memory holds nothing a
//! browser could present.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie that carries a session's id.
pub const COOKIE: &str = "toolhost_console";

/// Sessions held at once on one host; past it, the least recently used one ends.
pub const MAX_SESSIONS: usize = 64;

/// The longest a session lasts, however busy: a stolen cookie is good for no more than this.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// Sign-ins that fail in one [`FAILED_SIGN_IN_WINDOW`] before the console refuses every
/// sign-in (429) until the window ends: guessing a token is bounded per host.
pub const MAX_FAILED_SIGN_INS: u32 = 20;

/// The window [`MAX_FAILED_SIGN_INS`] counts over.
pub const FAILED_SIGN_IN_WINDOW: Duration = Duration::from_secs(60);

/// A signed-in operator, as a request's cookie names them.
#[derive(Debug, Clone)]
pub struct Operator {
    pub name: String,
    /// The CSRF token every form of this session carries.
    pub csrf: String,
}

impl Operator {
    /// Whether a form's `csrf` field is this session's token (constant time).
    pub fn csrf_matches(&self, given: &str) -> bool {
        self.csrf.as_bytes().ct_eq(given.as_bytes()).into()
    }
}

struct Session {
    operator: Operator,
    opened: Instant,
    used: Instant,
}

/// This host's operator sessions.
pub struct Sessions {
    idle: Duration,
    held: Mutex<HashMap<[u8; 32], Session>>,
    failures: Mutex<(Instant, u32)>,
}

impl Sessions {
    /// Sessions that end after `idle` unused.
    pub fn new(idle: Duration) -> Sessions {
        Sessions {
            idle,
            held: Mutex::new(HashMap::new()),
            failures: Mutex::new((Instant::now(), 0)),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new session for `operator`: the cookie value that names it. `None` when the OS has
    /// no randomness to give.
    pub fn open(&self, operator: &str, now: Instant) -> Option<String> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut held = self.held();
        held.retain(|_, s| self.live(s, now));
        if held.len() >= MAX_SESSIONS {
            if let Some(oldest) = held.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| *k) {
                held.remove(&oldest);
            }
        }
        let session = Session {
            operator: Operator {
                name: operator.to_owned(),
                csrf,
            },
            opened: now,
            used: now,
        };
        held.insert(key(&id), session);
        Some(id)
    }

    /// The operator of the session `cookie` names, if it is live; its use is noted.
    pub fn find(&self, cookie: &str, now: Instant) -> Option<Operator> {
        let mut held = self.held();
        let k = key(cookie);
        match held.get_mut(&k) {
            Some(s) if self.live(s, now) => {
                s.used = now;
                Some(s.operator.clone())
            }
            Some(_) => {
                held.remove(&k);
                None
            }
            None => None,
        }
    }

    /// End the session `cookie` names.
    pub fn close(&self, cookie: &str) {
        self.held().remove(&key(cookie));
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now.saturating_duration_since(s.used) < self.idle
            && now.saturating_duration_since(s.opened) < SESSION_LIFETIME
    }

    /// Whether a sign-in may be tried now: fewer than [`MAX_FAILED_SIGN_INS`] failed in the
    /// current window.
    pub fn may_sign_in(&self, now: Instant) -> bool {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(f.0) >= FAILED_SIGN_IN_WINDOW {
            *f = (now, 0);
        }
        f.1 < MAX_FAILED_SIGN_INS
    }

    /// Count a failed sign-in.
    pub fn failed_sign_in(&self, now: Instant) {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(f.0) >= FAILED_SIGN_IN_WINDOW {
            *f = (now, 0);
        }
        f.1 = f.1.saturating_add(1);
    }
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 32 random bytes as hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(900);

    /// A session names its operator until it goes unused for the idle time, or outlives
    /// its lifetime however busy, or is closed; an id it never issued names nobody.
    #[test]
    fn a_session_lives_until_idle_old_or_closed() {
        let s = Sessions::new(IDLE);
        let t0 = Instant::now();
        let id = s.open("ops", t0).unwrap();
        assert_eq!(s.find(&id, t0).unwrap().name, "ops");
        assert!(s.find("0123", t0).is_none());
        assert!(s.find(&id, t0 + IDLE).is_none(), "idle: gone");
        let id = s.open("ops", t0).unwrap();
        let mut t = t0;
        while t < t0 + SESSION_LIFETIME {
            assert!(s.find(&id, t).is_some());
            t += Duration::from_secs(600);
        }
        assert!(s.find(&id, t).is_none(), "past its lifetime: gone");
        let id = s.open("ops", t0).unwrap();
        s.close(&id);
        assert!(s.find(&id, t0).is_none());
    }

    /// Two sessions have different ids and CSRF tokens; a token matches its own session only.
    #[test]
    fn each_session_has_its_own_csrf_token() {
        let s = Sessions::new(IDLE);
        let t0 = Instant::now();
        let a = s.find(&s.open("a", t0).unwrap(), t0).unwrap();
        let b = s.find(&s.open("b", t0).unwrap(), t0).unwrap();
        assert_ne!(a.csrf, b.csrf);
        assert!(a.csrf_matches(&a.csrf));
        assert!(!a.csrf_matches(&b.csrf));
        assert!(!a.csrf_matches(""));
    }

    /// Past the cap the least recently used session ends, and no more than the cap are held.
    #[test]
    fn sessions_are_capped() {
        let s = Sessions::new(IDLE);
        let t0 = Instant::now();
        let first = s.open("a", t0).unwrap();
        for i in 1..=MAX_SESSIONS {
            s.open("a", t0 + Duration::from_millis(i as u64)).unwrap();
        }
        assert_eq!(s.held().len(), MAX_SESSIONS);
        assert!(s.find(&first, t0 + Duration::from_secs(1)).is_none());
    }

    /// Failed sign-ins past the bound stop every sign-in until the window ends.
    #[test]
    fn failed_sign_ins_are_bounded() {
        let s = Sessions::new(IDLE);
        let t0 = Instant::now();
        for _ in 0..MAX_FAILED_SIGN_INS {
            assert!(s.may_sign_in(t0));
            s.failed_sign_in(t0);
        }
        assert!(!s.may_sign_in(t0));
        assert!(s.may_sign_in(t0 + FAILED_SIGN_IN_WINDOW));
    }
}
