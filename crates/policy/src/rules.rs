//! Compiled rules: globs over principal, tenant and tool, a risk filter, and constraints.
//!
//! Globs use `globset` syntax (`*`, `?`, `[abc]`, `{a,b}`), are case-sensitive and match the
//! whole name; `*` also matches `/`. A bad glob is refused at load, naming its field.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::Value;

use super::config::{Effect, RuleConfig};
use super::constraint::{Constraint, Outcome};
use super::PolicyError;
use toolhost_contract::Caller;
use toolhost_contract::Risk;

/// Characters that make a pattern a glob rather than a literal name.
const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\', '!', '^'];

/// A compiled list of globs.
#[derive(Debug, Clone)]
struct Globs {
    set: GlobSet,
}

impl Globs {
    fn compile(patterns: &[String], field: &str, tool_names: bool) -> Result<Globs, PolicyError> {
        if patterns.is_empty() {
            return Err(PolicyError::config(
                field,
                "is empty, so the rule could never match; leave it out to match everything, or list globs",
            ));
        }
        let mut set = GlobSetBuilder::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let f = format!("{field}[{i}]");
            if pattern.is_empty() {
                return Err(PolicyError::config(
                    f,
                    "is an empty pattern; use \"*\" to match everything",
                ));
            }
            if tool_names {
                if let Some(c) = pattern.chars().find(|c| {
                    !(c.is_ascii_alphanumeric()
                        || matches!(c, '_' | '-' | ',')
                        || GLOB_META.contains(c))
                }) {
                    return Err(PolicyError::config(
                        f,
                        format!(
                            "{pattern:?} contains {c:?}, which no tool name has; tool names use letters, \
                             digits, '_' and '-' (the model-facing name, e.g. \"read_text\")"
                        ),
                    ));
                }
            }
            let glob = GlobBuilder::new(pattern)
                .literal_separator(false)
                .backslash_escape(true)
                .empty_alternates(false)
                .build()
                .map_err(|e| {
                    PolicyError::config(
                        &f,
                        format!(
                            "{pattern:?} is not a valid glob ({}); use '*' for any text, '?' for one \
                             character, [abc] for a set, {{a,b}} for alternatives",
                            e.kind()
                        ),
                    )
                })?;
            set.add(glob);
        }
        let set = set
            .build()
            .map_err(|e| PolicyError::config(field, format!("globs do not compile: {e}")))?;
        Ok(Globs { set })
    }

    fn matches(&self, s: &str) -> bool {
        self.set.is_match(s)
    }
}

/// Whether a rule's tool pattern (as a rule compiles it) matches any of `tools`; a pattern that
/// does not compile matches nothing.
pub fn glob_matches_any(pattern: &str, tools: &[&str]) -> bool {
    match Globs::compile(&[pattern.to_string()], "", true) {
        Ok(g) => tools.iter().any(|t| g.matches(t)),
        Err(_) => false,
    }
}

/// A compiled `[[policy.rule]]`.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// How the decision reason names it: `rule[0] "alice-projects"`.
    pub(crate) label: String,
    pub(crate) effect: Effect,
    principals: Globs,
    tenants: Globs,
    tools: Globs,
    /// The literal (glob-free) tool patterns, for [`super::Policy::check_tool_names`].
    pub(crate) literal_tools: Vec<(String, String)>,
    risks: Option<Vec<Risk>>,
    pub(super) constraints: Vec<Constraint>,
}

impl Rule {
    pub(crate) fn compile(r: &RuleConfig, index: usize) -> Result<Rule, PolicyError> {
        let field = format!("policy.rule[{index}]");
        let label = match &r.name {
            Some(name) if name.trim().is_empty() => {
                return Err(PolicyError::config(
                    format!("{field}.name"),
                    "is empty; give the rule a name or leave the key out",
                ))
            }
            Some(name) => format!("rule[{index}] {name:?}"),
            None => format!("rule[{index}]"),
        };
        if r.risks.as_ref().is_some_and(|r| r.is_empty()) {
            return Err(PolicyError::config(
                format!("{field}.risks"),
                "is empty, so the rule could never match; leave it out to match every risk",
            ));
        }
        let constraints = r
            .constraints
            .iter()
            .enumerate()
            .map(|(i, c)| Constraint::compile(c, &format!("{field}.constraint[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Rule {
            label,
            effect: r.effect,
            principals: Globs::compile(&r.principals, &format!("{field}.principals"), false)?,
            tenants: Globs::compile(&r.tenants, &format!("{field}.tenants"), false)?,
            tools: Globs::compile(&r.tools, &format!("{field}.tools"), true)?,
            literal_tools: r
                .tools
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.contains(GLOB_META))
                .map(|(i, t)| (format!("{field}.tools[{i}]"), t.clone()))
                .collect(),
            risks: r.risks.clone(),
            constraints,
        })
    }

    /// Whether the rule covers this subject, tool and risk (constraints aside).
    pub(crate) fn covers(&self, subject: &Caller, tool: &str, risk: Risk) -> bool {
        self.principals.matches(&subject.principal)
            && self.tenants.matches(&subject.tenant)
            && self.tools.matches(tool)
            && self.risks.as_ref().is_none_or(|r| r.contains(&risk))
    }

    /// Whether the rule holds whatever the arguments (it has no constraints).
    pub(crate) fn unconditional(&self) -> bool {
        self.constraints.is_empty()
    }

    /// The conjunction of the rule's constraints over the validated arguments.
    pub(crate) fn constraints(&self, subject: &Caller, args: &Value) -> Outcome {
        Outcome::all(self.constraints.iter().map(|c| c.evaluate(subject, args)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(toml_text: &str) -> Result<Rule, PolicyError> {
        let r: RuleConfig = toml::from_str(toml_text).unwrap();
        Rule::compile(&r, 3)
    }

    /// A bad glob is refused, naming the field and the pattern.
    #[test]
    fn bad_glob_is_named() {
        let e = rule("effect = \"allow\"\ntools = [\"ok\", \"read_[\"]")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("policy.rule[3].tools[1]") && e.contains("read_["),
            "{e}"
        );
        let e = rule("effect = \"allow\"\nprincipals = [\"{a,\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy.rule[3].principals[0]"), "{e}");
    }

    /// Empty lists and impossible tool names are refused with a fix.
    #[test]
    fn empty_lists_and_impossible_tools() {
        let e = rule("effect = \"allow\"\ntenants = []")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("policy.rule[3].tenants") && e.contains("leave it out"),
            "{e}"
        );
        let e = rule("effect = \"allow\"\ntools = [\"fs.read\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'.'") && e.contains("model-facing"), "{e}");
        let e = rule("effect = \"allow\"\nrisks = []")
            .unwrap_err()
            .to_string();
        assert!(e.contains("risks"), "{e}");
    }

    /// Globs match whole names, case-sensitively, with alternatives.
    #[test]
    fn glob_semantics() {
        let r = rule("effect = \"allow\"\nprincipals = [\"ops-*\", \"{alice,bob}\"]").unwrap();
        let s = |p: &str| Caller::new(p, "t");
        assert!(r.covers(&s("ops-1"), "x", Risk::Read));
        assert!(r.covers(&s("bob"), "x", Risk::Read));
        assert!(!r.covers(&s("OPS-1"), "x", Risk::Read));
        assert!(!r.covers(&s("xops-1"), "x", Risk::Read));
        assert!(!r.covers(&s("alice2"), "x", Risk::Read));
    }
}
