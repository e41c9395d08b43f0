//! A SHA-256 digest as registries, lock files and ledger rows write it: `sha256:` and 64
//! lowercase hex digits.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// `sha256:<64 lowercase hex digits>`, checked when read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Sha256Digest(String);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256Digest {
        Sha256Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// The whole form, `sha256:…`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits alone.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// The first 12 hex digits, for messages.
    pub fn short(&self) -> &str {
        &self.0["sha256:".len().."sha256:".len() + 12]
    }
}

impl TryFrom<String> for Sha256Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = s.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(Sha256Digest(s))
        } else {
            Err(format!(
                "{s:?} is not a digest; write `sha256:` followed by 64 lowercase hex digits"
            ))
        }
    }
}

impl From<Sha256Digest> for String {
    fn from(d: Sha256Digest) -> String {
        d.0
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of known bytes, and the forms a digest may not take.
    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        let d = Sha256Digest::of(b"abc");
        assert_eq!(
            d.as_str(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.short(), "ba7816bf8f01");
        assert_eq!(Sha256Digest::try_from(d.to_string()), Ok(d.clone()));
        for bad in [
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sha256:ba78",
            "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ] {
            let e = Sha256Digest::try_from(bad.to_string()).unwrap_err();
            assert!(e.contains("64 lowercase hex"), "{e}");
        }
    }
}
