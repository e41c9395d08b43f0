//! The `[serve.console]` section: who may sign in to the approval console, by the SHA-256 of
//! a token of their own (never one of the MCP callers').
//!
//! ```toml
//! [serve.console]
//! session_idle_secs = 900             # a session unused this long signs out (default 900)
//! url = "https://approvals.example"   # where operators' browsers reach it (default: unset)
//!
//! [[serve.console.operator]]
//! name = "ops-alice"                  # shown on every page and in the log of each decision
//! sha256 = "5e884898…"                # hex SHA-256 of the operator's token
//! ```

use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{TokenConfig, TokenHash};
use toolhost_contract::ConfigProblem;

/// The console's operators and how long a session lasts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Who may sign in. The console is served only with at least one.
    #[serde(default, rename = "operator")]
    pub operators: Vec<OperatorConfig>,
    /// Seconds a session may go unused before it signs out. From 60 to 86400; default 900.
    #[serde(default = "default_session_idle")]
    pub session_idle_secs: u64,
    /// The console's origin as operators' browsers reach it (`https://approvals.example`).
    /// With it, a 2026-07-28 client that takes URL elicitation is pointed, for a task only the
    /// operator approves, at that task's page (`tasks/get`: `input_required`, key `console`).
    /// Default: unset, and such a task shows `approval_required`.
    #[serde(default)]
    pub url: Option<String>,
    /// The private key receipts are signed with: the data directory's `receipt.key`, set by
    /// the command that serves (not read from the file).
    #[serde(skip)]
    pub receipt_key: Option<PathBuf>,
}

/// One operator: a name and the hash of the token they sign in with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub name: String,
    /// Hex SHA-256 of the operator's token (`printf %s "$TOKEN" | sha256sum`).
    pub sha256: TokenHash,
}

fn default_session_idle() -> u64 {
    900
}

/// Longest name shown for an operator.
const MAX_OPERATOR_NAME_CHARS: usize = 64;

impl ConsoleConfig {
    /// Every problem of the section: at least one operator, each named once, printable, and
    /// signing in with a token no MCP caller holds (a caller's token must never open the
    /// console).
    pub fn validate(&self, callers: &[TokenConfig], problems: &mut Vec<ConfigProblem>) {
        if self.operators.is_empty() {
            problems.push(ConfigProblem::new(
                "serve.console.operator",
                "is empty, so nobody could sign in; add [[serve.console.operator]] entries with \
                 a name and the sha256 of each operator's token",
            ));
        }
        if !(60..=86_400).contains(&self.session_idle_secs) {
            problems.push(ConfigProblem::new(
                "serve.console.session_idle_secs",
                "must be from 60 to 86400 seconds: an unused session signs out after it",
            ));
        }
        if self
            .url
            .as_deref()
            .is_some_and(|u| !crate::config::valid_origin(u))
        {
            problems.push(ConfigProblem::new(
                "serve.console.url",
                "is not an origin; write scheme://host[:port] with no path, like \
                 \"https://approvals.example\"",
            ));
        }
        for (i, o) in self.operators.iter().enumerate() {
            let key = format!("serve.console.operator[{i}]");
            let name = o.name.trim();
            if name.is_empty()
                || o.name.chars().count() > MAX_OPERATOR_NAME_CHARS
                || o.name.chars().any(char::is_control)
            {
                problems.push(ConfigProblem::new(
                    format!("{key}.name"),
                    "must be 1 to 64 printable characters (it names who decided, in the log)",
                ));
            }
            if self.operators[..i].iter().any(|p| p.name == o.name) {
                problems.push(ConfigProblem::new(
                    format!("{key}.name"),
                    "names an operator listed before; each operator needs a name of their own",
                ));
            }
            if self.operators[..i].iter().any(|p| p.sha256 == o.sha256) {
                problems.push(ConfigProblem::new(
                    format!("{key}.sha256"),
                    "is another operator's token; each operator needs a token of their own",
                ));
            }
            if callers.iter().any(|t| t.sha256 == o.sha256) {
                problems.push(ConfigProblem::new(
                    format!("{key}.sha256"),
                    "is also an MCP caller's token ([[serve.token]]); an operator's token must \
                     be one no caller holds",
                ));
            }
        }
    }

    /// The operator whose token this is, compared with every operator in constant time.
    pub fn operator(&self, token: &str) -> Option<&str> {
        let presented = TokenHash::of(token);
        let mut found = None;
        for o in &self.operators {
            if o.sha256.matches(&presented) {
                found = Some(o.name.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ConsoleConfig {
        toml::from_str(text).unwrap()
    }

    fn hash(t: &str) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(t.as_bytes()))
    }

    /// An operator signs in with their own token; any other token names nobody.
    #[test]
    fn an_operator_is_found_by_token() {
        let c = parse(&format!(
            "[[operator]]\nname = \"ops\"\nsha256 = \"{}\"\n",
            hash("s3cret")
        ));
        assert_eq!(c.operator("s3cret"), Some("ops"));
        assert_eq!(c.operator("s3cre"), None);
        assert_eq!(c.session_idle_secs, 900);
    }

    /// No operator, a shared or reused token, a caller's token, a bad name or lifetime: each
    /// is a problem naming its key.
    #[test]
    fn bad_sections_name_their_key() {
        let mut problems = Vec::new();
        parse("").validate(&[], &mut problems);
        assert_eq!(problems[0].key, "serve.console.operator");
        let h = hash("t");
        let c = parse(&format!(
            "session_idle_secs = 5\nurl = \"https://a.example/console\"\n\
             [[operator]]\nname = \"a\"\nsha256 = \"{h}\"\n\
             [[operator]]\nname = \"a\"\nsha256 = \"{h}\"\n\
             [[operator]]\nname = \" \"\nsha256 = \"{}\"\n",
            hash("u")
        ));
        let caller: TokenConfig =
            toml::from_str(&format!("sha256 = \"{}\"\nprincipal = \"p\"\n", hash("u"))).unwrap();
        let mut problems = Vec::new();
        c.validate(&[caller], &mut problems);
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "serve.console.session_idle_secs",
                "serve.console.url",
                "serve.console.operator[1].name",
                "serve.console.operator[1].sha256",
                "serve.console.operator[2].name",
                "serve.console.operator[2].sha256",
            ]
        );
    }
}
