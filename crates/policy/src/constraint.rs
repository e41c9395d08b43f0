//! Resource constraints: conditions a rule puts on the *validated* arguments of a call.
//!
//! A constraint evaluates to one of three outcomes — it holds, it fails, or it cannot be judged
//! (the value has the wrong type, or is a path with `..`, `\` or NUL). An `allow` rule applies only
//! when every constraint holds; a `deny` rule applies unless some constraint fails. So a value the
//! policy cannot judge is never allowed by a constraint and never slips past a deny.
//!
//! `prefix` compares paths by whole segments, exactly as written: `projects/alice/` covers
//! `projects/alice` and `projects/alice/x`, but not `projects/alicevil/x`. Nothing is
//! normalized. A value is judged only in canonical form — relative, segments joined by single
//! `/`, none of them empty, `.` or `..`, no `\`, NUL or percent-escape of `.`, `/`, `\`, `%` or
//! NUL (a tool might decode it) — and any other form cannot be judged: `/projects/alice/x`,
//! `projects//alice/x`, `./projects/alice/x`, `projects/alice/x/`, `projects/alice/../bob` and
//! `projects/alice/%2e%2e/bob` are never allowed by a prefix and never slip past a deny. The
//! same form is required of the prefix itself at load (one trailing `/` allowed, meaning a
//! directory). The comparison is lexical: it does not follow symlinks, and it is
//! case-sensitive.
//!
//! Longer than 500 lines: 205 of them are its unit tests, kept beside the code they test (the code is 359 lines).

use serde_json::Value;

use super::config::ConstraintConfig;
use super::PolicyError;
use toolhost_contract::Caller;

/// The result of checking a condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Holds,
    /// The condition is false; the reason is operator detail without argument content.
    Fails(String),
    /// The condition cannot be judged; treated as false for `allow`, as true for `deny`.
    Unsure(String),
}

impl Outcome {
    /// Kleene conjunction: false if any is false, else unknown if any is unknown.
    fn and(self, other: Outcome) -> Outcome {
        match (self, other) {
            (f @ Outcome::Fails(_), _) | (_, f @ Outcome::Fails(_)) => f,
            (u @ Outcome::Unsure(_), _) | (_, u @ Outcome::Unsure(_)) => u,
            (Outcome::Holds, Outcome::Holds) => Outcome::Holds,
        }
    }

    /// Conjunction over many outcomes (an empty list holds).
    pub(crate) fn all(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
        outcomes.into_iter().fold(Outcome::Holds, Outcome::and)
    }
}

/// A piece of a constraint value: literal text or a placeholder for the trusted subject.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Principal,
    Tenant,
}

/// A constraint value with `{principal}` / `{tenant}` placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Template(Vec<Part>);

impl Template {
    fn parse(s: &str, field: &str) -> Result<Template, PolicyError> {
        let mut parts = Vec::new();
        let mut rest = s;
        while let Some(open) = rest.find(['{', '}']) {
            if rest[open..].starts_with('}') {
                return Err(PolicyError::config(
                    field,
                    format!("{s:?} has a '}}' without '{{'; the only placeholders are {{principal}} and {{tenant}}"),
                ));
            }
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let after = &rest[open..];
            if let Some(tail) = after.strip_prefix("{principal}") {
                parts.push(Part::Principal);
                rest = tail;
            } else if let Some(tail) = after.strip_prefix("{tenant}") {
                parts.push(Part::Tenant);
                rest = tail;
            } else {
                let shown: String = after.chars().take_while(|c| *c != '}').collect();
                return Err(PolicyError::config(
                    field,
                    format!(
                        "{s:?} has the unknown placeholder {shown}}}; use {{principal}} or {{tenant}}"
                    ),
                ));
            }
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template(parts))
    }

    /// The text with the subject substituted. With `as_segment`, a substituted value must be one
    /// plain path segment (no `/`, `\`, NUL, and not empty, `.` or `..`).
    pub(super) fn render(&self, subject: &Caller, as_segment: bool) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.0 {
            let (name, value) = match part {
                Part::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Part::Principal => ("principal", subject.principal.as_str()),
                Part::Tenant => ("tenant", subject.tenant.as_str()),
            };
            if as_segment && (matches!(value, "" | "." | "..") || value.contains(['/', '\\', '\0']))
            {
                return Err(format!(
                    "the {name} cannot be used as a path segment ({value:?})"
                ));
            }
            out.push_str(value);
        }
        Ok(out)
    }
}

/// Where the constrained value sits in the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Argument {
    /// A top-level argument name.
    Name(String),
    /// An RFC 6901 JSON pointer.
    Pointer(String),
}

/// A compiled `[[policy.rule.constraint]]`.
#[derive(Debug, Clone)]
pub(crate) struct Constraint {
    /// How the reason names it: `constraint[0] on "path"`.
    label: String,
    pub(super) argument: Argument,
    pub(super) prefix: Option<Template>,
    pub(super) equals: Option<Template>,
    pub(super) one_of: Option<Vec<Template>>,
    pub(super) max_length: Option<usize>,
}

impl Constraint {
    pub(crate) fn compile(c: &ConstraintConfig, field: &str) -> Result<Constraint, PolicyError> {
        let argument = if c.argument.is_empty() {
            return Err(PolicyError::config(
                format!("{field}.argument"),
                "is empty; name a top-level argument (\"path\") or give a JSON pointer (\"/target/path\")",
            ));
        } else if c.argument.starts_with('/') {
            check_pointer(&c.argument, &format!("{field}.argument"))?;
            Argument::Pointer(c.argument.clone())
        } else {
            Argument::Name(c.argument.clone())
        };
        if c.prefix.is_none() && c.equals.is_none() && c.one_of.is_none() && c.max_length.is_none()
        {
            return Err(PolicyError::config(
                field,
                format!(
                    "constraint on {:?} checks nothing; give prefix, equals, one_of or max_length",
                    c.argument
                ),
            ));
        }
        let prefix = match &c.prefix {
            Some(p) => {
                let f = format!("{field}.prefix");
                let template = Template::parse(p, &f)?;
                // The literal text must be canonical whatever the placeholders become.
                let sample = p.replace("{principal}", "x").replace("{tenant}", "x");
                if let Err(why) = prefix_segments(&sample) {
                    return Err(PolicyError::config(
                        f,
                        format!(
                            "{p:?} {why}; write a relative path of plain segments, like \
                             \"projects/{{principal}}/\" (arguments are compared with it as \
                             written, never normalized)"
                        ),
                    ));
                }
                Some(template)
            }
            None => None,
        };
        let equals = match &c.equals {
            Some(e) => Some(Template::parse(e, &format!("{field}.equals"))?),
            None => None,
        };
        let one_of = match &c.one_of {
            Some(list) if list.is_empty() => {
                return Err(PolicyError::config(
                    format!("{field}.one_of"),
                    "is empty, so nothing could satisfy it; list the accepted values",
                ))
            }
            Some(list) => Some(
                list.iter()
                    .enumerate()
                    .map(|(i, v)| Template::parse(v, &format!("{field}.one_of[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => None,
        };
        Ok(Constraint {
            label: format!(
                "{} on {:?}",
                field.rsplit('.').next().unwrap_or(field),
                c.argument
            ),
            argument,
            prefix,
            equals,
            one_of,
            max_length: c.max_length,
        })
    }

    /// Check the constraint against the validated arguments of a call by `subject`.
    pub(crate) fn evaluate(&self, subject: &Caller, args: &Value) -> Outcome {
        let value = match &self.argument {
            Argument::Name(name) => args.as_object().and_then(|o| o.get(name)),
            Argument::Pointer(p) => args.pointer(p),
        };
        let value = match value {
            None | Some(Value::Null) => {
                return Outcome::Fails(format!("{}: the argument is absent", self.label))
            }
            Some(v) => v,
        };
        let Some(text) = value.as_str() else {
            return Outcome::Unsure(format!("{}: the argument is not a string", self.label));
        };
        let mut checks = Vec::new();
        if let Some(prefix) = &self.prefix {
            checks.push(self.check_prefix(prefix, subject, text));
        }
        if let Some(equals) = &self.equals {
            checks.push(match equals.render(subject, false) {
                Ok(expected) if expected == text => Outcome::Holds,
                Ok(_) => Outcome::Fails(format!("{}: not the required value", self.label)),
                Err(why) => Outcome::Unsure(format!("{}: {why}", self.label)),
            });
        }
        if let Some(one_of) = &self.one_of {
            let hit = one_of
                .iter()
                .any(|t| t.render(subject, false).is_ok_and(|v| v == text));
            checks.push(if hit {
                Outcome::Holds
            } else {
                Outcome::Fails(format!("{}: not one of the accepted values", self.label))
            });
        }
        if let Some(max) = self.max_length {
            let len = text.chars().count();
            checks.push(if len <= max {
                Outcome::Holds
            } else {
                Outcome::Fails(format!(
                    "{}: {len} characters, more than max_length = {max}",
                    self.label
                ))
            });
        }
        Outcome::all(checks)
    }

    fn check_prefix(&self, prefix: &Template, subject: &Caller, text: &str) -> Outcome {
        let value = match path_segments(text) {
            Ok(segments) => segments,
            Err(why) => return Outcome::Unsure(format!("{}: the value {why}", self.label)),
        };
        let prefix = match prefix.render(subject, true) {
            Ok(p) => p,
            Err(why) => return Outcome::Unsure(format!("{}: {why}", self.label)),
        };
        let prefix = match prefix_segments(&prefix) {
            Ok(segments) => segments,
            Err(why) => return Outcome::Unsure(format!("{}: the prefix {why}", self.label)),
        };
        if value.len() >= prefix.len() && value[..prefix.len()] == prefix[..] {
            Outcome::Holds
        } else {
            Outcome::Fails(format!("{}: the path is outside the prefix", self.label))
        }
    }
}

/// The segments of a path-like value, exactly as written, or why it cannot be judged: only a
/// canonical relative path is (see the module docs). Nothing is dropped or normalized, so what
/// is compared is what the tool receives.
pub(crate) fn path_segments(path: &str) -> Result<Vec<&str>, &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.contains('\0') {
        return Err("contains NUL");
    }
    if path.contains('\\') {
        return Err("contains a backslash");
    }
    if has_escaped_separator(path) {
        return Err("contains a percent-escaped '.', '/', '\\', '%' or NUL");
    }
    if path.starts_with('/') {
        return Err("starts with '/'");
    }
    let segments: Vec<&str> = path.split('/').collect();
    for segment in &segments {
        match *segment {
            "" => return Err("has an empty segment ('//' or a trailing '/')"),
            "." => return Err("has a '.' segment"),
            ".." => return Err("has a '..' segment"),
            _ => {}
        }
    }
    Ok(segments)
}

/// The segments of a prefix: [`path_segments`] after one trailing `/` (a directory); the empty
/// prefix has none and covers every canonical path.
pub(super) fn prefix_segments(prefix: &str) -> Result<Vec<&str>, &'static str> {
    let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
    if prefix.is_empty() {
        return Ok(Vec::new());
    }
    path_segments(prefix)
}

/// Whether `path` holds `%XX` for `.`, `/`, `\`, `%` or NUL: a tool that percent-decodes its
/// argument would see a different path than the policy did.
fn has_escaped_separator(path: &str) -> bool {
    let hex = |b: u8| (b as char).to_digit(16);
    path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && matches!(
                (hex(w[1]), hex(w[2])),
                (Some(hi), Some(lo)) if matches!(hi * 16 + lo, 0x2e | 0x2f | 0x5c | 0x25 | 0)
            )
    })
}

/// Check RFC 6901 syntax: `~` only as `~0` or `~1`.
fn check_pointer(pointer: &str, field: &str) -> Result<(), PolicyError> {
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(PolicyError::config(
                field,
                format!("{pointer:?} is not a JSON pointer: '~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn alice() -> Caller {
        Caller::new("alice", "acme")
    }

    fn prefix_config(p: &str) -> ConstraintConfig {
        ConstraintConfig {
            argument: "path".into(),
            prefix: Some(p.into()),
            equals: None,
            one_of: None,
            max_length: None,
        }
    }

    fn prefix(p: &str) -> Constraint {
        Constraint::compile(&prefix_config(p), "policy.rule[0].constraint[0]").unwrap()
    }

    fn check(c: &Constraint, path: &str) -> Outcome {
        c.evaluate(&alice(), &json!({ "path": path }))
    }

    /// Prefixes compare by whole segments, exactly as written.
    #[test]
    fn prefix_compares_segments() {
        let c = prefix("projects/{principal}/");
        for ok in ["projects/alice/x", "projects/alice", "projects/alice/a/b"] {
            assert_eq!(check(&c, ok), Outcome::Holds, "{ok}");
        }
        for bad in [
            "projects/alicevil/x",
            "projects/bob/x",
            "projects",
            "x/projects/alice",
        ] {
            assert!(matches!(check(&c, bad), Outcome::Fails(_)), "{bad}");
        }
    }

    /// Every form that a normalization would turn into another path is unjudgeable, never a
    /// match: a leading `/`, empty, `.` and `..` segments, backslashes, NUL, percent-escapes.
    #[test]
    fn prefix_refuses_every_normalization_gap() {
        let c = prefix("{principal}/");
        assert_eq!(check(&c, "alice/x"), Outcome::Holds);
        for bad in [
            "/alice/x",
            "//alice/x",
            "alice//x",
            "alice/x/",
            "./alice/x",
            "alice/./x",
            "alice/../bob/x",
            "alice/..",
            "alice\\x",
            "alice\\..\\bob",
            "alice/x\0",
            "alice/%2e%2e/bob/x",
            "alice/%2E%2e/bob/x",
            "alice%2f..%2fbob",
            "alice/%252e%252e/bob",
            "alice/%00",
            "",
        ] {
            match check(&c, bad) {
                Outcome::Unsure(why) => assert!(why.contains("the value"), "{bad:?}: {why}"),
                other => panic!("{bad:?} was judged: {other:?}"),
            }
        }
    }

    /// `..`, backslashes and NUL make a path unjudgeable, never a match.
    #[test]
    fn prefix_refuses_traversal() {
        let c = prefix("projects/{principal}/");
        for bad in [
            "projects/alice/../bob/x",
            "projects/alice/..",
            "projects\\alice\\x",
            "projects/alice/x\0",
        ] {
            assert!(matches!(check(&c, bad), Outcome::Unsure(_)), "{bad:?}");
        }
    }

    /// A prefix that is not canonical itself is refused at load, with the fix.
    #[test]
    fn non_canonical_prefixes_are_refused_at_load() {
        for p in [
            "/projects/",
            "projects//{principal}/",
            "./projects",
            "projects/./x",
            "a/../b",
            "a\\b",
            "a/%2e%2e/b",
            "projects//",
        ] {
            let e = Constraint::compile(&prefix_config(p), "policy.rule[0].constraint[0]")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("policy.rule[0].constraint[0].prefix") && e.contains("relative path"),
                "{p}: {e}"
            );
        }
        assert_eq!(check(&prefix(""), "any/x"), Outcome::Holds);
        assert_eq!(check(&prefix("data"), "data/x"), Outcome::Holds);
    }

    /// A principal that is not a plain segment is never substituted into a prefix.
    #[test]
    fn odd_principals_are_not_substituted() {
        let c = prefix("projects/{principal}/");
        for principal in ["a/b", "..", "", "a\\b"] {
            let s = Caller::new(principal, "acme");
            let out = c.evaluate(&s, &json!({ "path": format!("projects/{principal}/x") }));
            assert!(matches!(out, Outcome::Unsure(_)), "{principal:?}: {out:?}");
        }
    }

    /// Absent or null arguments fail; non-strings cannot be judged.
    #[test]
    fn absent_and_mistyped_values() {
        let c = prefix("projects/");
        assert!(matches!(
            c.evaluate(&alice(), &json!({})),
            Outcome::Fails(_)
        ));
        assert!(matches!(
            c.evaluate(&alice(), &json!({"path": null})),
            Outcome::Fails(_)
        ));
        assert!(matches!(
            c.evaluate(&alice(), &json!({"path": 3})),
            Outcome::Unsure(_)
        ));
    }

    /// equals, one_of and max_length substitute the subject and combine as a conjunction.
    #[test]
    fn other_checks() {
        let c = Constraint::compile(
            &ConstraintConfig {
                argument: "/target/account".into(),
                prefix: None,
                equals: Some("{tenant}-{principal}".into()),
                one_of: Some(vec!["acme-alice".into(), "other".into()]),
                max_length: Some(10),
            },
            "f",
        )
        .unwrap();
        let args = |v: &str| json!({"target": {"account": v}});
        assert_eq!(c.evaluate(&alice(), &args("acme-alice")), Outcome::Holds);
        assert!(matches!(
            c.evaluate(&alice(), &args("acme-bob")),
            Outcome::Fails(_)
        ));
    }

    /// Unknown placeholders, empty checks and bad pointers are refused at load, naming the field.
    #[test]
    fn bad_constraints_are_refused() {
        let base = ConstraintConfig {
            argument: "path".into(),
            prefix: None,
            equals: None,
            one_of: None,
            max_length: None,
        };
        let err = |c: ConstraintConfig| {
            Constraint::compile(&c, "policy.rule[2].constraint[1]")
                .unwrap_err()
                .to_string()
        };
        let e = err(ConstraintConfig {
            prefix: Some("p/{user}/".into()),
            ..base.clone()
        });
        assert!(
            e.contains("policy.rule[2].constraint[1].prefix") && e.contains("{principal}"),
            "{e}"
        );
        let e = err(base.clone());
        assert!(e.contains("checks nothing"), "{e}");
        let e = err(ConstraintConfig {
            argument: "/a~2".into(),
            max_length: Some(1),
            ..base.clone()
        });
        assert!(e.contains("JSON pointer"), "{e}");
        let e = err(ConstraintConfig {
            prefix: Some("a/../b".into()),
            ..base.clone()
        });
        assert!(e.contains(".."), "{e}");
    }
}
