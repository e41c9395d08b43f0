//! Authorization rules and approval tokens: pipeline stages 4 (authorize) and 5 (approve).
//!
//! The policy sees only plain data — the trusted [`Caller`] (principal and tenant from the
//! authenticated frontend), the model-facing tool name, its [`Risk`], and the *validated*
//! arguments. It knows nothing of wasmtime or of how a tool runs. Arguments are data: an argument
//! named `principal` never changes who is calling.
//!
//! # Configuration
//!
//! ```toml
//! [policy]
//! default = "deny"                  # or "allow"; "deny" once the section exists
//!
//! [[policy.rule]]
//! name = "own-projects"             # optional, for the ledger's reason
//! effect = "allow"                  # or "deny"; a matching deny always wins
//! principals = ["alice", "ops-*"]   # globs; default ["*"]
//! tenants = ["acme"]                # globs; default ["*"]
//! tools = ["read_text", "list_*"]   # globs over model-facing names; default ["*"]
//! risks = ["read", "write"]         # optional; default any risk
//!
//! [[policy.rule.constraint]]        # all must hold, over the validated arguments
//! argument = "path"                 # top-level name, or a JSON pointer "/a/b"
//! prefix = "projects/{principal}/"  # whole-segment path prefix; no "..", "\", NUL
//! # equals = "{tenant}"   one_of = ["a", "b"]   max_length = 200
//!
//! [policy.approval]
//! key_file = "keys/approval.key"   # relative to the config file; default: approval.key
//!                                 # in the data dir; created 0600 with 32 random bytes if missing
//! ttl_secs = 900
//! ```
//!
//! Without a `[policy]` section every principal may call every tool ([`PolicyConfig::default`]);
//! with one, a call is allowed only if an `allow` rule matches and no `deny` rule does. A section
//! that could allow nothing (default deny, no allow rule) is refused at load.
//!
//! # Decisions
//!
//! [`Policy::authorize`] returns a [`Decision`]: `reason` names the rule for the ledger (never
//! argument values), `message` is the same for every refusal and safe to show the model.
//! Constraints have three outcomes (see `constraint.rs`): a value the policy
//! cannot judge (`..`, wrong type) never satisfies an `allow`, and never escapes a `deny`.
//!
//! # Approvals
//!
//! Tools with `approval = "required"`, and `destructive` tools unless `approval = "never"`
//! ([`needs_approval`]), need a human approval bound to the exact call. The handle the human
//! approves is `"{call}.{principal}.{expires_at}"` (the call binding covers tool, canonical
//! arguments ([`canonical_json`]) and run; the principal binding principal and tenant); the
//! token the call carries is `"{handle}.{mac}"`. A token that fails says why with its own code
//! (`approval_invalid`, `_wrong_principal`, `_mismatch`, `_expired`, `_reused`).
//! `approval.rs` documents the exact formats and the order of the checks.
//!
//! Longer than 500 lines: 303 of them are its unit tests, kept beside the code they test (the code is 366 lines).

mod advertise;
mod approval;
mod config;
mod constraint;
mod keyfile;
mod rules;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

pub use advertise::narrowed;
pub use approval::{
    digest, handle_binds_call, needs_approval, parse_handle, request, ApprovalFailure, ApprovalKey,
    ApprovalMode, ApprovalRequest, ApprovalSubject, APPROVAL_DOMAIN, CLOCK_SKEW_SECS,
};
pub use config::{
    ApprovalConfig, ConstraintConfig, Effect, PolicyConfig, RuleConfig, DEFAULT_KEY_FILE_NAME,
    DEFAULT_TTL_SECS, MAX_TTL_SECS,
};
pub use keyfile::KEY_LEN;

use constraint::Outcome;
pub use rules::glob_matches_any;
use rules::Rule;
use toolhost_contract::{Caller, Code};
use toolhost_contract::{ConfigProblem, Risk};

/// The model-facing message of every refusal: it reveals nothing of the policy.
pub const UNAUTHORIZED_MESSAGE: &str = "this call is not authorized";

/// A policy that cannot be loaded, or an approval handle that cannot be approved.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A `[policy]` field is wrong; `field` is its path, e.g. `policy.rule[1].tools[0]`.
    #[error("{field}: {message}")]
    Config { field: String, message: String },
    /// The approval key file cannot be read or created.
    #[error("approval key {}: {message}", path.display())]
    KeyFile { path: PathBuf, message: String },
    /// `toolhost approve` was given a handle it cannot mint a token for.
    #[error("approval handle {handle:?}: {message}")]
    Handle { handle: String, message: String },
}

impl PolicyError {
    /// This error as a config problem at its field (`policy` when it has none).
    pub fn into_problem(self) -> ConfigProblem {
        match self {
            PolicyError::Config { field, message } => ConfigProblem::new(field, message),
            other => ConfigProblem::new("policy", other.to_string()),
        }
    }

    pub(crate) fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        PolicyError::Config {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The outcome of [`Policy::authorize`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub allowed: bool,
    /// Operator detail for the ledger: which rule decided, or why none did. Never argument values.
    pub reason: String,
    /// Safe to show the model: reveals no policy internals.
    pub message: String,
}

impl Decision {
    fn allow(reason: String) -> Self {
        Decision {
            allowed: true,
            reason,
            message: "authorized".to_string(),
        }
    }

    fn deny(reason: String) -> Self {
        Decision {
            allowed: false,
            reason,
            message: UNAUTHORIZED_MESSAGE.to_string(),
        }
    }

    /// `Some(Code::Unauthorized)` for a refusal.
    pub fn code(&self) -> Option<Code> {
        (!self.allowed).then_some(Code::Unauthorized)
    }
}

fn risk_name(risk: Risk) -> &'static str {
    match risk {
        Risk::Read => "read",
        Risk::Write => "write",
        Risk::External => "external",
        Risk::Destructive => "destructive",
    }
}

/// The compiled `[policy]`: its rules and its default.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Effect,
    rules: Vec<Rule>,
    /// `sha256:` and the hex SHA-256 of the canonical JSON of the section's `default` and rules.
    revision: String,
}

/// See [`Policy::revision`].
fn revision(default: Effect, rules: &[RuleConfig]) -> String {
    let doc = serde_json::json!({"default": default, "rules": rules});
    let bytes = toolhost_contract::canonical::canonical_json(&doc);
    format!(
        "sha256:{}",
        toolhost_contract::canonical::digest_bytes(&bytes)
    )
}

impl Policy {
    /// The policy without a `[policy]` section: every principal and tenant may call every tool.
    pub fn allow_all() -> Policy {
        Policy {
            default: Effect::Allow,
            rules: Vec::new(),
            revision: revision(Effect::Allow, &[]),
        }
    }

    /// The revision of the rules (`sha256:…` of the canonical JSON of `default` and every
    /// rule): equal on every host that loads the same rules, and changed by any change to
    /// them. An approval binds it, so a changed rule does not inherit an old approval.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// Compile and check a `[policy]` section. `_base_dir` (the config file's directory) is
    /// reserved: rules hold no paths today, and the key file is resolved by [`load_approval_key`].
    /// Touches no files.
    pub fn from_config(config: &PolicyConfig, _base_dir: &Path) -> Result<Policy, PolicyError> {
        let rules = config
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| Rule::compile(r, i))
            .collect::<Result<Vec<_>, _>>()?;
        if config.default == Effect::Deny && !rules.iter().any(|r| r.effect == Effect::Allow) {
            return Err(PolicyError::config(
                "policy",
                "denies every call: once a [policy] section exists (even only [policy.approval]) \
                 the default is \"deny\", and no [[policy.rule]] has effect = \"allow\"; add one \
                 (e.g. effect = \"allow\", tools = [\"read_*\"]) or set default = \"allow\"",
            ));
        }
        check_approval(&config.approval)?;
        Ok(Policy {
            default: config.default,
            rules,
            revision: revision(config.default, &config.rules),
        })
    }

    /// May `subject` call `tool` (of `risk`) with these validated arguments? A matching deny
    /// wins; otherwise a matching allow; otherwise the default.
    pub fn authorize(&self, subject: &Caller, tool: &str, risk: Risk, args: &Value) -> Decision {
        let who = format!(
            "principal {:?}, tenant {:?}, tool {tool:?} ({})",
            subject.principal,
            subject.tenant,
            risk_name(risk)
        );
        let mut allowed_by: Option<&Rule> = None;
        let mut near_miss: Option<String> = None;
        for rule in &self.rules {
            if !rule.covers(subject, tool, risk) {
                continue;
            }
            match (rule.effect, rule.constraints(subject, args)) {
                (Effect::Deny, Outcome::Holds) => {
                    return Decision::deny(format!("denied by {} for {who}", rule.label))
                }
                (Effect::Deny, Outcome::Unsure(why)) => {
                    return Decision::deny(format!(
                        "denied by {} for {who}: {why}, so the deny applies",
                        rule.label
                    ))
                }
                (Effect::Deny, Outcome::Fails(_)) => {}
                (Effect::Allow, Outcome::Holds) => {
                    allowed_by.get_or_insert(rule);
                }
                (Effect::Allow, Outcome::Fails(why) | Outcome::Unsure(why)) => {
                    near_miss.get_or_insert_with(|| format!("{} covers it but {why}", rule.label));
                }
            }
        }
        if let Some(rule) = allowed_by {
            return Decision::allow(format!("allowed by {} for {who}", rule.label));
        }
        match self.default {
            Effect::Allow => Decision::allow(format!(
                "allowed by default = \"allow\" (or no [policy] section) for {who}"
            )),
            Effect::Deny => Decision::deny(match near_miss {
                Some(miss) => format!("no allow rule matched {who} ({miss}); default is deny"),
                None => format!("no allow rule matched {who}; default is deny"),
            }),
        }
    }

    /// Whether `subject` may see `tool` (of `risk`) at all: whether some arguments could be
    /// allowed. A deny without constraints hides it; otherwise an allow that covers it (with
    /// constraints or without) or an allowing default shows it. What a caller may see is what
    /// it is offered, and a call to a tool it may not see is answered as for no tool.
    pub fn may_see(&self, subject: &Caller, tool: &str, risk: Risk) -> bool {
        let covering = || self.rules.iter().filter(|r| r.covers(subject, tool, risk));
        if covering().any(|r| r.effect == Effect::Deny && r.unconditional()) {
            return false;
        }
        self.default == Effect::Allow || covering().any(|r| r.effect == Effect::Allow)
    }

    /// Refuse rules that name, without a glob, a tool that does not exist (likely a typo).
    pub fn check_tool_names(&self, known: &[&str]) -> Result<(), PolicyError> {
        for rule in &self.rules {
            for (field, name) in &rule.literal_tools {
                if !known.contains(&name.as_str()) {
                    let mut list: Vec<&str> = known.to_vec();
                    list.sort_unstable();
                    let shown = if list.len() > 20 {
                        format!("{}, …", list[..20].join(", "))
                    } else {
                        list.join(", ")
                    };
                    return Err(PolicyError::config(
                        field,
                        format!(
                            "no tool is named {name:?}; use a model-facing name (known: {shown}) \
                             or a glob"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Check `[policy.approval]`: a TTL from 1 s to 7 days, a non-empty key file.
fn check_approval(approval: &ApprovalConfig) -> Result<(), PolicyError> {
    let ttl_secs = approval.ttl_secs;
    if !(1..=MAX_TTL_SECS).contains(&ttl_secs) {
        return Err(PolicyError::config(
            "policy.approval.ttl_secs",
            format!("is {ttl_secs}; give a number of seconds from 1 to {MAX_TTL_SECS} (7 days)"),
        ));
    }
    if approval
        .key_file
        .as_ref()
        .is_some_and(|f| f.as_os_str().is_empty())
    {
        return Err(PolicyError::config(
            "policy.approval.key_file",
            format!(
                "is empty; leave it out for {DEFAULT_KEY_FILE_NAME:?} in the data directory, or \
                 name a file"
            ),
        ));
    }
    Ok(())
}

/// Where the approval key lives: `policy.approval.key_file` relative to `base_dir` (the config
/// file's directory), else `approval.key` in `data_dir`.
pub fn approval_key_path(
    config: Option<&PolicyConfig>,
    base_dir: &Path,
    data_dir: &Path,
) -> PathBuf {
    match config.and_then(|c| c.approval.key_file.as_ref()) {
        Some(file) => base_dir.join(file),
        None => data_dir.join(DEFAULT_KEY_FILE_NAME),
    }
}

/// Every problem of a `[policy]` section, without I/O: each rule on its own, then the section as
/// a whole (a policy that denies every call), then the approval settings.
pub fn validate(config: &PolicyConfig, problems: &mut Vec<ConfigProblem>) {
    let before = problems.len();
    for (i, r) in config.rules.iter().enumerate() {
        if let Err(e) = Rule::compile(r, i) {
            problems.push(e.into_problem());
        }
    }
    if problems.len() == before {
        if let Err(e) = Policy::from_config(config, Path::new("")) {
            problems.push(e.into_problem());
        }
    }
    if let Err(e) = check_approval(&config.approval) {
        problems.push(e.into_problem());
    }
}

/// The host's approval key (read, or created with mode 0600 and 32 random bytes) and the
/// approval TTL in seconds, for a config with or without a `[policy]` section.
pub fn load_approval_key(
    config: Option<&PolicyConfig>,
    base_dir: &Path,
    data_dir: &Path,
) -> Result<(ApprovalKey, u64), PolicyError> {
    let approval = config.map(|c| c.approval.clone()).unwrap_or_default();
    check_approval(&approval)?;
    let path = approval_key_path(config, base_dir, data_dir);
    let key = ApprovalKey::load_or_create(&path)?.with_ttl(approval.ttl_secs);
    Ok((key, approval.ttl_secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        policy: Option<PolicyConfig>,
    }

    fn load(text: &str) -> Result<Policy, PolicyError> {
        let f: File = toml::from_str(text).unwrap();
        Policy::from_config(&f.policy.unwrap_or_default(), Path::new("/cfg"))
    }

    fn policy(text: &str) -> Policy {
        load(text).unwrap()
    }

    fn s(principal: &str, tenant: &str) -> Caller {
        Caller::new(principal, tenant)
    }

    const PROJECTS: &str = r#"
        [[policy.rule]]
        name = "own-projects"
        effect = "allow"
        tools = ["read_text", "list_*"]
        [[policy.rule.constraint]]
        argument = "path"
        prefix = "projects/{principal}/"
    "#;

    /// Without a [policy] section every principal may call every tool.
    #[test]
    fn no_section_allows_all() {
        let p = policy("");
        let d = p.authorize(
            &s("anyone", "any"),
            "delete_all",
            Risk::Destructive,
            &json!({}),
        );
        assert!(d.allowed, "{d:?}");
        let d = Policy::allow_all().authorize(&s("x", "y"), "z", Risk::Write, &json!({}));
        assert!(d.allowed, "{d:?}");
    }

    /// A caller sees a tool some arguments could be allowed for: not one denied outright, nor
    /// one no allow covers under a default deny; one allowed (or denied) only under a
    /// constraint is seen.
    #[test]
    fn visibility_follows_authority() {
        let p = policy(
            r#"
            [policy]
            default = "deny"
            [[policy.rule]]
            effect = "allow"
            principals = ["alice"]
            tools = ["*"]
            [[policy.rule]]
            effect = "allow"
            principals = ["bob"]
            tools = ["read_*"]
            [[policy.rule.constraint]]
            argument = "path"
            prefix = "{principal}/"
            [[policy.rule]]
            effect = "deny"
            principals = ["alice"]
            tools = ["delete_*"]
            [[policy.rule]]
            effect = "deny"
            principals = ["bob"]
            tools = ["read_secret"]
            [[policy.rule.constraint]]
            argument = "path"
            prefix = "vault/"
            "#,
        );
        let alice = s("alice", "t");
        let bob = s("bob", "t");
        assert!(p.may_see(&alice, "read_text", Risk::Read));
        assert!(
            !p.may_see(&alice, "delete_records", Risk::Destructive),
            "denied outright"
        );
        assert!(
            p.may_see(&bob, "read_text", Risk::Read),
            "allowed under a constraint"
        );
        assert!(
            p.may_see(&bob, "read_secret", Risk::Read),
            "denied only for some arguments"
        );
        assert!(
            !p.may_see(&bob, "write_text", Risk::Write),
            "no allow, default deny"
        );
        assert!(!p.may_see(&s("carol", "t"), "read_text", Risk::Read));
        assert!(Policy::allow_all().may_see(&bob, "anything", Risk::Destructive));
    }

    /// A matching deny wins over a matching allow, whatever the order.
    #[test]
    fn deny_wins() {
        for text in [
            "[[policy.rule]]\neffect = \"allow\"\n[[policy.rule]]\neffect = \"deny\"\ntools = [\"rm\"]",
            "[[policy.rule]]\neffect = \"deny\"\ntools = [\"rm\"]\n[[policy.rule]]\neffect = \"allow\"",
        ] {
            let p = policy(text);
            let d = p.authorize(&s("a", "t"), "rm", Risk::Write, &json!({}));
            assert!(!d.allowed);
            assert!(d.reason.contains("denied by rule["), "{}", d.reason);
            assert!(p.authorize(&s("a", "t"), "ls", Risk::Read, &json!({})).allowed);
        }
    }

    /// With a [policy] section, no matching allow means unauthorized.
    #[test]
    fn no_allow_is_unauthorized() {
        let p = policy("[[policy.rule]]\neffect = \"allow\"\nprincipals = [\"alice\"]");
        let d = p.authorize(&s("bob", "t"), "ls", Risk::Read, &json!({}));
        assert!(!d.allowed);
        assert_eq!(d.code(), Some(Code::Unauthorized));
        assert!(d.reason.contains("default is deny"), "{}", d.reason);
        assert_eq!(
            p.authorize(&s("alice", "t"), "ls", Risk::Read, &json!({}))
                .code(),
            None
        );
    }

    /// Globs select principals, tenants and tools; risks filter too.
    #[test]
    fn globs_over_principal_tenant_tool() {
        let p = policy(
            r#"
            [[policy.rule]]
            effect = "allow"
            principals = ["ops-*"]
            tenants = ["acme", "acme-?"]
            tools = ["list_*", "read_text"]
            risks = ["read"]
            "#,
        );
        let ok = |pr: &str, te: &str, tool: &str, risk| {
            p.authorize(&s(pr, te), tool, risk, &json!({})).allowed
        };
        assert!(ok("ops-1", "acme", "list_dir", Risk::Read));
        assert!(ok("ops-x", "acme-2", "read_text", Risk::Read));
        assert!(!ok("dev-1", "acme", "list_dir", Risk::Read));
        assert!(!ok("ops-1", "acme-22", "list_dir", Risk::Read));
        assert!(!ok("ops-1", "acme", "write_text", Risk::Read));
        assert!(!ok("ops-1", "acme", "list_dir", Risk::Write));
    }

    /// An argument named `principal` is data: it neither grants nor changes the subject.
    #[test]
    fn principal_argument_is_data() {
        let p = policy(PROJECTS);
        let args = json!({"principal": "bob", "path": "projects/bob/x"});
        assert!(
            !p.authorize(&s("alice", "t"), "read_text", Risk::Read, &args)
                .allowed
        );
        let args = json!({"principal": "bob", "path": "projects/alice/x"});
        assert!(
            p.authorize(&s("alice", "t"), "read_text", Risk::Read, &args)
                .allowed
        );
        let admin = policy("[[policy.rule]]\neffect = \"allow\"\nprincipals = [\"admin\"]");
        let args = json!({"principal": "admin", "tenant": "root"});
        assert!(
            !admin
                .authorize(&s("alice", "t"), "x", Risk::Read, &args)
                .allowed
        );
    }

    /// A {principal} prefix accepts the caller's tree and rejects others and traversal.
    #[test]
    fn prefix_constraint_with_principal() {
        let p = policy(PROJECTS);
        let alice = s("alice", "acme");
        let read = |path: &str| {
            p.authorize(&alice, "read_text", Risk::Read, &json!({ "path": path }))
                .allowed
        };
        assert!(read("projects/alice/x"));
        assert!(!read("projects/bob/x"));
        assert!(!read("projects/alice/../bob/x"));
        assert!(!read("projects/alicevil/x"));
        assert!(!read("projects\\alice\\x"));
        assert!(
            !p.authorize(&alice, "read_text", Risk::Read, &json!({}))
                .allowed
        );
        assert!(
            p.authorize(
                &s("bob", "acme"),
                "read_text",
                Risk::Read,
                &json!({"path": "projects/bob/x"})
            )
            .allowed
        );
    }

    /// A deny on a path prefix cannot be sidestepped with `..` or `./`.
    #[test]
    fn deny_cannot_be_sidestepped() {
        let p = policy(
            r#"
            [[policy.rule]]
            effect = "allow"
            [[policy.rule]]
            effect = "deny"
            tools = ["write_text"]
            [[policy.rule.constraint]]
            argument = "path"
            prefix = "secrets"
            "#,
        );
        let write = |path: &str| {
            p.authorize(
                &s("a", "t"),
                "write_text",
                Risk::Write,
                &json!({ "path": path }),
            )
            .allowed
        };
        assert!(write("notes/x"));
        assert!(!write("secrets/x"));
        assert!(!write("./secrets//x"));
        assert!(!write("/secrets"));
        assert!(!write("notes/../secrets/x"));
        assert!(!write("secrets\\x"));
    }

    /// The model message is the same for every refusal and names no rule; the reason does.
    #[test]
    fn model_message_reveals_nothing() {
        let p = policy(
            r#"
            [[policy.rule]]
            name = "secret-rule-name"
            effect = "deny"
            tools = ["rm"]
            [[policy.rule]]
            name = "own-projects"
            effect = "allow"
            [[policy.rule.constraint]]
            argument = "path"
            prefix = "projects/{principal}/"
            "#,
        );
        let alice = s("alice", "acme");
        let denied = p.authorize(&alice, "rm", Risk::Write, &json!({}));
        let missed = p.authorize(
            &alice,
            "ls",
            Risk::Read,
            &json!({"path": "projects/bob/hush"}),
        );
        for d in [&denied, &missed] {
            assert!(!d.allowed);
            assert_eq!(d.message, UNAUTHORIZED_MESSAGE);
            assert!(!d.message.contains("rule"));
            assert!(
                !d.reason.contains("hush"),
                "reason leaks argument values: {}",
                d.reason
            );
        }
        assert!(
            denied.reason.contains("secret-rule-name"),
            "{}",
            denied.reason
        );
        assert!(missed.reason.contains("own-projects"), "{}", missed.reason);
    }

    /// A section that can allow nothing, a bad TTL, or a bad glob is refused at load.
    #[test]
    fn load_errors_say_how_to_fix() {
        let e = load("[policy.approval]\nttl_secs = 60")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("denies every call") && e.contains("default = \"allow\""),
            "{e}"
        );
        let e = load("[policy]\ndefault = \"allow\"\n[policy.approval]\nttl_secs = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy.approval.ttl_secs"), "{e}");
        let e = load("[[policy.rule]]\neffect = \"allow\"\ntenants = [\"[z-a]\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy.rule[0].tenants[0]"), "{e}");
    }

    /// Literal tool names that match no tool are reported; globs are not.
    #[test]
    fn unknown_literal_tools() {
        let p = policy("[[policy.rule]]\neffect = \"allow\"\ntools = [\"read_txt\", \"list_*\"]");
        let e = p
            .check_tool_names(&["read_text", "list_dir"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("policy.rule[0].tools[0]") && e.contains("read_text"),
            "{e}"
        );
        assert!(p.check_tool_names(&["read_txt"]).is_ok());
    }

    /// The policy's key is created under the config directory with 0600 and reused.
    #[test]
    fn policy_key_created_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join(".toolhost");
        let path = data.join(DEFAULT_KEY_FILE_NAME);
        assert_eq!(approval_key_path(None, dir.path(), &data), path);
        let (key, ttl) = load_approval_key(None, dir.path(), &data).unwrap();
        assert_eq!(ttl, DEFAULT_TTL_SECS);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let req = request(
            ("rm", "sha256:d", "sha256:p"),
            &json!({}),
            &s("a", "t"),
            "r",
            100,
            ttl,
        );
        let token = key.mint_at(&req.handle, 100).unwrap();
        let (again, _) = load_approval_key(None, dir.path(), &data).unwrap();
        let call = ApprovalSubject::new(
            ("rm", "sha256:d", "sha256:p"),
            &json!({}),
            &s("a", "t"),
            "r",
        );
        assert_eq!(again.verify(&token, &call, 101, |_, _| true), Ok(()));
    }

    /// An explicit key_file resolves against the config directory and sets the TTL.
    #[test]
    fn explicit_key_file_and_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let f: File = toml::from_str(
            "[policy]\ndefault = \"allow\"\n[policy.approval]\nkey_file = \"k/a.key\"\nttl_secs = 60",
        )
        .unwrap();
        let config = f.policy.unwrap();
        let (key, ttl) =
            load_approval_key(Some(&config), dir.path(), Path::new("/nonexistent")).unwrap();
        assert_eq!((ttl, key.ttl_secs()), (60, 60));
        assert!(dir.path().join("k/a.key").is_file());
    }
}
