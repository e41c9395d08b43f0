//! The `[policy]` section of `toolhost.toml`, as written by the operator.
//!
//! Parsing is strict (`deny_unknown_fields`); [`Policy::from_config`](super::Policy::from_config)
//! then checks what serde cannot (globs, placeholders, argument pointers) and names the field that
//! is wrong, e.g. `policy.rule[1].tools[0]`.
//!
//! Without a `[policy]` section every principal may call every tool ([`PolicyConfig::default`]).
//! Once the section exists — even only as `[policy.approval]` — the default is `deny`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use toolhost_contract::Risk;

/// The approval key's file name in the data directory, when `key_file` is not given.
pub const DEFAULT_KEY_FILE_NAME: &str = "approval.key";
/// Default lifetime of an approval, in seconds (15 minutes).
pub const DEFAULT_TTL_SECS: u64 = 900;
/// Longest lifetime an approval may be given, in seconds (7 days).
pub const MAX_TTL_SECS: u64 = 7 * 24 * 3600;

/// What a rule, or the policy default, does with a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Deny,
}

impl Effect {
    fn deny() -> Effect {
        Effect::Deny
    }
}

/// The `[policy]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// What happens to a call no rule matches: `"deny"` (the default once the section exists)
    /// or `"allow"`.
    #[serde(default = "Effect::deny")]
    pub default: Effect,
    /// The rules, as `[[policy.rule]]` tables. A matching `deny` always wins over an `allow`.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleConfig>,
    /// Where the approval key lives and how long an approval lasts.
    #[serde(default)]
    pub approval: ApprovalConfig,
}

impl Default for PolicyConfig {
    /// No `[policy]` section: every principal and tenant may call every tool.
    fn default() -> Self {
        PolicyConfig {
            default: Effect::Allow,
            rules: Vec::new(),
            approval: ApprovalConfig::default(),
        }
    }
}

fn any() -> Vec<String> {
    vec!["*".to_string()]
}

/// One `[[policy.rule]]`: which subjects and tools it covers, and under which constraints.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// A name for the ledger's decision reason (default: `rule[N]`).
    #[serde(default)]
    pub name: Option<String>,
    /// `"allow"` or `"deny"`.
    pub effect: Effect,
    /// Globs over the principal (default `["*"]`).
    #[serde(default = "any")]
    pub principals: Vec<String>,
    /// Globs over the tenant (default `["*"]`).
    #[serde(default = "any")]
    pub tenants: Vec<String>,
    /// Globs over model-facing tool names, e.g. `"list_*"` (default `["*"]`).
    #[serde(default = "any")]
    pub tools: Vec<String>,
    /// Only tools of these risks (default: any risk).
    #[serde(default)]
    pub risks: Option<Vec<Risk>>,
    /// Conditions on the validated arguments, as `[[policy.rule.constraint]]`; all must hold.
    #[serde(default, rename = "constraint")]
    pub constraints: Vec<ConstraintConfig>,
}

/// One `[[policy.rule.constraint]]` over one argument of the validated input. Every check given
/// must hold; `{principal}` and `{tenant}` in a check are replaced by the caller's.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintConfig {
    /// A top-level argument name (`"path"`) or a JSON pointer (`"/target/path"`).
    pub argument: String,
    /// The value is a path at or below this one, compared by whole `/`-separated segments after
    /// dropping empty and `.` segments; values with `..`, `\` or NUL never satisfy it.
    #[serde(default)]
    pub prefix: Option<String>,
    /// The value is exactly this string.
    #[serde(default)]
    pub equals: Option<String>,
    /// The value is exactly one of these strings.
    #[serde(default)]
    pub one_of: Option<Vec<String>>,
    /// The value is a string of at most this many characters.
    #[serde(default)]
    pub max_length: Option<usize>,
}

fn default_ttl() -> u64 {
    DEFAULT_TTL_SECS
}

/// `[policy.approval]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    /// The host's approval key, relative to the config file's directory; created (mode 0600,
    /// 32 random bytes) if missing. Default: `approval.key` in the data directory
    /// (`.toolhost/approval.key` unless `data_dir` says otherwise).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// How long an approval stays valid after the call asked for it, in seconds (default 900).
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
    /// Who may approve a tool that does not say (`client` or `operator`; default `client`).
    #[serde(default)]
    pub approvers: toolhost_contract::Approvers,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            key_file: None,
            ttl_secs: DEFAULT_TTL_SECS,
            approvers: toolhost_contract::Approvers::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct File {
        #[serde(default)]
        policy: Option<PolicyConfig>,
    }

    fn parse(text: &str) -> Result<PolicyConfig, String> {
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        Ok(f.policy.unwrap_or_default())
    }

    /// No `[policy]` section means allow-all; a present section defaults to deny.
    #[test]
    fn section_presence_sets_the_default() {
        assert_eq!(parse("").unwrap().default, Effect::Allow);
        assert_eq!(parse("[policy]").unwrap().default, Effect::Deny);
        assert_eq!(
            parse("[policy.approval]\nttl_secs = 60").unwrap().default,
            Effect::Deny
        );
        assert_eq!(
            parse("[policy]\ndefault = \"allow\"").unwrap().default,
            Effect::Allow
        );
    }

    /// The documented example parses, with defaults filled in.
    #[test]
    fn example_parses() {
        let p = parse(
            r#"
            [policy]
            default = "deny"
            [[policy.rule]]
            effect = "allow"
            principals = ["alice", "ops-*"]
            tenants = ["acme"]
            tools = ["read_text", "list_*"]
            [[policy.rule.constraint]]
            argument = "path"
            prefix = "projects/{principal}/"
            [[policy.rule]]
            effect = "deny"
            tools = ["delete_*"]
            risks = ["destructive"]
            [policy.approval]
            key_file = "keys/approval.key"
            ttl_secs = 300
            "#,
        )
        .unwrap();
        assert_eq!(p.rules.len(), 2);
        assert_eq!(
            p.rules[0].constraints[0].prefix.as_deref(),
            Some("projects/{principal}/")
        );
        assert_eq!(p.rules[1].principals, vec!["*"]);
        assert_eq!(p.rules[1].risks, Some(vec![Risk::Destructive]));
        assert_eq!(p.approval.ttl_secs, 300);
        assert_eq!(
            p.approval.key_file,
            Some(PathBuf::from("keys/approval.key"))
        );
    }

    /// An unknown effect or field is refused with the accepted names.
    #[test]
    fn unknown_effect_and_fields_are_refused() {
        let err = parse("[[policy.rule]]\neffect = \"permit\"").unwrap_err();
        assert!(err.contains("allow") && err.contains("deny"), "{err}");
        let err = parse("[[policy.rules]]\neffect = \"allow\"").unwrap_err();
        assert!(err.contains("rules") && err.contains("rule"), "{err}");
        let err = parse("[[policy.rule]]\ntools = [\"x\"]").unwrap_err();
        assert!(err.contains("effect"), "{err}");
    }
}
