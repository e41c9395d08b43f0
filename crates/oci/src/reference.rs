//! An OCI reference as a config writes it: `registry/repository[:tag][@sha256:…]`.
//!
//! The registry is always named (`ghcr.io/team/tool`, `127.0.0.1:5000/tool`): a bare
//! `team/tool` is refused rather than read as Docker Hub's, so that a config never depends on
//! a default it does not show. Only SHA-256 digests are accepted.

use std::fmt;

use serde::Deserialize;
use toolhost_contract::Sha256Digest;

/// The longest reference accepted, in bytes (the distribution spec bounds a repository name to
/// 255 characters; a registry, a tag and a digest add less than 300).
pub const MAX_REFERENCE_BYTES: usize = 600;

/// A parsed reference. A digest, when present, is what is pulled; a tag alone names a
/// manifest that a lock must pin.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// `team/tool`: lowercase path components.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Sha256Digest>,
}

impl Reference {
    /// The same repository, at `digest` (no tag).
    pub fn at(&self, digest: &Sha256Digest) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.clone()),
        }
    }
}

/// Whether `host[:port]` names this machine.
pub fn is_loopback_host(host_port: &str) -> bool {
    let host = match host_port.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reference {
    type Err = String;
    fn from_str(s: &str) -> Result<Reference, String> {
        Reference::try_from(s.to_string())
    }
}

impl TryFrom<String> for Reference {
    type Error = String;
    fn try_from(s: String) -> Result<Reference, String> {
        if s.len() > MAX_REFERENCE_BYTES {
            return Err(format!(
                "is {} bytes long; a reference has at most {MAX_REFERENCE_BYTES}",
                s.len()
            ));
        }
        let example = "write `registry.example.com/team/tool@sha256:…` (or `…/tool:TAG`, pinned by `toolhost lock`)";
        let (name, digest) = match s.split_once('@') {
            Some((name, d)) => {
                let digest = Sha256Digest::try_from(d.to_string()).map_err(|_| {
                    format!("{s:?}: the digest must be `sha256:` and 64 lowercase hex digits")
                })?;
                (name, Some(digest))
            }
            None => (s.as_str(), None),
        };
        let Some((registry, rest)) = name.split_once('/') else {
            return Err(format!("{s:?} names no repository; {example}"));
        };
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(format!(
                "{s:?} does not start with a registry host (a name with a dot or a port, or \
                 `localhost`); Docker Hub is not assumed: {example}"
            ));
        }
        if !registry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        {
            return Err(format!("{s:?}: {registry:?} is not a registry host[:port]"));
        }
        // A tag follows the last `:` of the last path component.
        let last = rest.rsplit('/').next().unwrap_or(rest);
        let (repository, tag) = match last.split_once(':') {
            Some((_, tag)) => (&rest[..rest.len() - tag.len() - 1], Some(tag)),
            None => (rest, None),
        };
        if repository.is_empty()
            || repository.len() > 255
            || !repository.split('/').all(valid_component)
        {
            return Err(format!(
                "{s:?}: {repository:?} is not a repository; use lowercase letters, digits and \
                 `.`, `_`, `-` between them, in `/`-separated parts"
            ));
        }
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.as_bytes()[0] != b'.'
                && t.as_bytes()[0] != b'-'
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(format!(
                    "{s:?}: {t:?} is not a tag (letters, digits, `.`, `_`, `-`, at most 128)"
                ));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("{s:?} names neither a tag nor a digest; {example}"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }
}

/// One path component of a repository: `[a-z0-9]+` groups joined by `.`, `_`, `__` or `-`s.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    /// Each part is read from the forms a config writes, and written back the same way.
    #[test]
    fn references_parse_into_registry_repository_tag_and_digest() {
        let r: Reference = format!("127.0.0.1:5000/team/greet:1.0@{D}")
            .parse()
            .unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/greet");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert_eq!(r.digest.as_ref().map(|d| d.as_str()), Some(D));
        assert_eq!(r.to_string(), format!("127.0.0.1:5000/team/greet:1.0@{D}"));
        assert!(is_loopback_host(&r.registry));
        let t: Reference = "ghcr.io/a/b-c__d.e:v1".parse().unwrap();
        assert_eq!(
            (t.repository.as_str(), t.tag.as_deref()),
            ("a/b-c__d.e", Some("v1"))
        );
        assert!(!is_loopback_host(&t.registry));
        assert_eq!(
            t.at(&Sha256Digest::of(b"abc")).to_string(),
            format!("ghcr.io/a/b-c__d.e@{D}")
        );
        assert!(is_loopback_host(
            &"[::1]:5000/x:1".parse::<Reference>().unwrap().registry
        ));
    }

    /// What is refused, each with a message that says what to write instead.
    #[test]
    fn references_without_a_registry_or_with_bad_parts_are_refused() {
        for (bad, says) in [
            ("team/greet:1.0", "Docker Hub is not assumed"),
            ("greet:1.0", "names no repository"),
            ("ghcr.io/team/greet", "neither a tag nor a digest"),
            ("ghcr.io/Team/greet:1", "is not a repository"),
            ("ghcr.io/team//greet:1", "is not a repository"),
            ("ghcr.io/team/greet:-x", "is not a tag"),
            ("ghcr.io/team/greet@sha512:00", "the digest must be"),
            ("ghcr.io/team/greet@sha256:ABC", "the digest must be"),
        ] {
            let e = bad.parse::<Reference>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("ghcr.io/{}:1", "a".repeat(MAX_REFERENCE_BYTES));
        assert!(long.parse::<Reference>().unwrap_err().contains("at most"));
    }
}
