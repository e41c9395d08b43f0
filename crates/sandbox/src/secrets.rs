//! Secrets bound to hosts. A guest never holds a secret's value: it holds a placeholder, fresh
//! for every call, and the host puts the value into the headers of an outgoing `wasi:http`
//! request only when that request goes to one of the secret's hosts. Whatever comes back
//! (response headers, bodies, trailers) and whatever the call leaves (results, logs, progress,
//! stdout, stderr, fault details) has every copy of a value, in every form the host searches
//! for (`echo.rs`), replaced by its placeholder (`redact.rs`). A request to a secret's host
//! cannot ask for an answer in a shape the host cannot search: compressed or in pieces
//! (`network.rs`).

use std::fmt;
use std::sync::Arc;

use super::allowlist::Allowlist;
use super::echo::Forms;

/// Fewest bytes a secret's value may have. Redaction replaces every copy of a value in what
/// comes back; a short value would also match ordinary text, and is guessable anyway.
pub const MIN_SECRET_BYTES: usize = 8;
/// Most bytes a secret's value may have: it must fit in one header field.
pub const MAX_SECRET_BYTES: usize = 4096;
/// Most secrets one component may have: each is searched for in everything a call returns.
pub const MAX_SECRETS_PER_COMPONENT: usize = 16;

/// A secret's value. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    value: String,
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(..)")
    }
}

/// Why a value cannot be a secret (the message never contains the value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretValueError {
    #[error("is {0} bytes long; a secret must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes")]
    Length(usize),
    #[error("holds a character that is not printable ASCII (byte {0} of the value); a secret must be visible ASCII without spaces")]
    Character(usize),
}

impl SecretValue {
    /// A value of [`MIN_SECRET_BYTES`]..=[`MAX_SECRET_BYTES`] visible ASCII characters (no
    /// spaces, no control characters): what a header value may carry unquoted, and what
    /// cannot be split or re-encoded by the text around it.
    pub fn new(value: String) -> Result<Self, SecretValueError> {
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&value.len()) {
            return Err(SecretValueError::Length(value.len()));
        }
        if let Some(at) = value.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(SecretValueError::Character(at + 1));
        }
        Ok(SecretValue { value })
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        self.value.as_bytes()
    }
}

/// One secret of a component: the name the guest knows it by, its value, and the only hosts
/// its value is ever sent to.
#[derive(Debug)]
pub struct Secret {
    /// The environment variable the guest finds its placeholder in.
    pub name: String,
    pub value: SecretValue,
    /// The `host:port` entries the value may be sent to (each also in the tool's network grant).
    pub hosts: Allowlist,
}

/// The secrets of one tool, with the forms their values are searched for in (compiled once,
/// at load). Empty for a tool without secrets.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    list: Vec<Arc<Secret>>,
    forms: Option<Arc<Forms>>,
}

impl Secrets {
    pub fn new(list: Vec<Arc<Secret>>) -> Self {
        let forms = (!list.is_empty())
            .then(|| Arc::new(Forms::new(list.iter().map(|s| s.value.as_bytes()))));
        Secrets { list, forms }
    }
}

impl std::ops::Deref for Secrets {
    type Target = [Arc<Secret>];
    fn deref(&self) -> &[Arc<Secret>] {
        &self.list
    }
}

/// A secret of one call, with the placeholder the guest holds in its place.
#[derive(Debug)]
pub(super) struct Bound {
    pub secret: Arc<Secret>,
    pub placeholder: String,
}

/// The secrets of one call. Cheap to clone; empty for a tool without secrets.
#[derive(Debug, Clone, Default)]
pub struct CallSecrets {
    pub(super) bound: Arc<Vec<Bound>>,
    /// The forms of the values, in the order of `bound` (`None` without secrets).
    pub(super) forms: Option<Arc<Forms>>,
}

impl CallSecrets {
    /// Fresh placeholders for `secrets`: `toolhost-secret-NAME-` and 32 random hex digits, so a
    /// placeholder says nothing of its value (not even its length), and one seen in a call's
    /// output or arguments is useless in any other call.
    pub fn new(secrets: &Secrets) -> Self {
        let bound = secrets
            .iter()
            .map(|secret| Bound {
                placeholder: format!(
                    "toolhost-secret-{}-{}",
                    secret.name,
                    uuid::Uuid::new_v4().simple()
                ),
                secret: secret.clone(),
            })
            .collect();
        CallSecrets {
            bound: Arc::new(bound),
            forms: secrets.forms.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bound.is_empty()
    }

    /// `(name, placeholder)` of each secret: the guest's environment variables.
    pub fn env(&self) -> impl Iterator<Item = (&str, &str)> {
        self.bound
            .iter()
            .map(|b| (b.secret.name.as_str(), b.placeholder.as_str()))
    }

    /// The header value a request to `host:port` carries: `value` with the placeholder of every
    /// secret bound to that destination replaced by the secret's value, or `None` when it
    /// names none. Over plain `http` only a loopback IP literal qualifies: a value never
    /// crosses a network in clear text.
    pub fn substitute(&self, value: &[u8], host: &str, port: u16, https: bool) -> Option<Vec<u8>> {
        if !(https || is_loopback_literal(host)) {
            return None;
        }
        // Placeholders are distinct random strings that never overlap, and a value never holds
        // one, so replacing them one after another is the same as replacing them at once.
        let mut out: Option<Vec<u8>> = None;
        for b in self
            .bound
            .iter()
            .filter(|b| b.secret.hosts.allows_authority(host, port))
        {
            let text = out.as_deref().unwrap_or(value);
            let finder = memchr::memmem::Finder::new(b.placeholder.as_bytes());
            if finder.find(text).is_none() {
                continue;
            }
            let mut next = Vec::with_capacity(text.len());
            let mut pos = 0;
            for at in finder.find_iter(text) {
                next.extend_from_slice(&text[pos..at]);
                next.extend_from_slice(b.secret.value.as_bytes());
                pos = at + b.placeholder.len();
            }
            next.extend_from_slice(&text[pos..]);
            out = Some(next);
        }
        out
    }

    /// Whether a request to `host:port` goes where a secret of this call may be sent: the
    /// host decides the shape of its answer (`network.rs`).
    pub fn bound_to(&self, host: &str, port: u16) -> bool {
        self.bound
            .iter()
            .any(|b| b.secret.hosts.allows_authority(host, port))
    }

    /// The placeholder of the secret at `index`.
    pub(super) fn placeholder(&self, index: usize) -> &[u8] {
        self.bound[index].placeholder.as_bytes()
    }
}

/// Whether `host` is a loopback IP literal (`127.0.0.0/8`, `::1`): the one destination a
/// secret may reach over plain `http`, because its bytes never leave the machine.
fn is_loopback_literal(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostPort;

    fn secret(name: &str, value: &str, hosts: &[&str]) -> Arc<Secret> {
        let hosts = hosts
            .iter()
            .map(|h| HostPort::try_from(h.to_string()).unwrap())
            .collect();
        Arc::new(Secret {
            name: name.into(),
            value: SecretValue::new(value.into()).unwrap(),
            hosts: Allowlist::new(hosts),
        })
    }

    /// Values are visible ASCII of a bounded length; the error never shows the value.
    #[test]
    fn values_are_checked_without_showing_them() {
        assert_eq!(
            SecretValue::new("short".into()),
            Err(SecretValueError::Length(5))
        );
        let spaced = SecretValue::new("abcd efgh".into()).unwrap_err();
        assert_eq!(spaced, SecretValueError::Character(5));
        assert!(!spaced.to_string().contains("abcd"));
        assert!(SecretValue::new("x".repeat(MAX_SECRET_BYTES + 1)).is_err());
        let ok = SecretValue::new("tok_12345678".into()).unwrap();
        assert!(!format!("{ok:?}").contains("tok_"));
    }

    /// Each call gets other placeholders, which never contain the value.
    #[test]
    fn placeholders_are_fresh_per_call() {
        let s = [secret(
            "API_KEY",
            "tok_live_abcdef123",
            &["api.example.com:443"],
        )];
        let s = Secrets::new(s.to_vec());
        let (a, b) = (CallSecrets::new(&s), CallSecrets::new(&s));
        let pa: Vec<_> = a.env().collect();
        let pb: Vec<_> = b.env().collect();
        assert_eq!(pa[0].0, "API_KEY");
        assert_ne!(pa[0].1, pb[0].1);
        assert!(pa[0].1.starts_with("toolhost-secret-API_KEY-"));
        assert!(!pa[0].1.contains("tok_live"));
    }

    /// The value goes only to the secret's own hosts, over https or to a loopback literal.
    #[test]
    fn substitution_only_for_bound_hosts_and_safe_transport() {
        let s = [
            secret("API_KEY", "tok_live_abcdef123", &["api.example.com:443"]),
            secret("LOCAL", "local_value_42", &["127.0.0.1:8080"]),
        ];
        let call = CallSecrets::new(&Secrets::new(s.to_vec()));
        let env: Vec<(String, String)> = call
            .env()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect();
        let header = format!("Bearer {}", env[0].1);
        let sent = call
            .substitute(header.as_bytes(), "API.example.com", 443, true)
            .unwrap();
        assert_eq!(sent, b"Bearer tok_live_abcdef123");
        // Another host, another port, or plain http to a name: the placeholder stays.
        assert!(call
            .substitute(header.as_bytes(), "evil.example.com", 443, true)
            .is_none());
        assert!(call
            .substitute(header.as_bytes(), "api.example.com", 8443, true)
            .is_none());
        assert!(call
            .substitute(header.as_bytes(), "api.example.com", 443, false)
            .is_none());
        // One secret's host never receives another's value.
        assert!(call
            .substitute(header.as_bytes(), "127.0.0.1", 8080, false)
            .is_none());
        let local = call
            .substitute(env[1].1.as_bytes(), "127.0.0.1", 8080, false)
            .unwrap();
        assert_eq!(local, b"local_value_42");
        // Another call's placeholder (one a model saw in an earlier output and put in the
        // arguments) names nothing in this call.
        let later = CallSecrets::new(&Secrets::new(s.to_vec()));
        assert!(later
            .substitute(header.as_bytes(), "api.example.com", 443, true)
            .is_none());
    }

    /// A placeholder's length is the same whatever the value's length.
    #[test]
    fn placeholders_do_not_tell_the_length() {
        let a = secret("K", "12345678", &["a.example:443"]);
        let b = secret("K", &"x".repeat(MAX_SECRET_BYTES), &["a.example:443"]);
        let len = |s: &Arc<Secret>| {
            CallSecrets::new(&Secrets::new(vec![s.clone()]))
                .env()
                .next()
                .unwrap()
                .1
                .len()
        };
        assert_eq!(len(&a), len(&b));
    }
}
