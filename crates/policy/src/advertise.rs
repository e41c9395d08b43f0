//! What a listing tells a caller of the constraints that bound them: the argument constraints of
//! the rules that allow a tool, as a JSON Schema narrowing of its input schema.
//!
//! [`Policy::narrowing`] is advertisement: the pipeline still decides with
//! [`Policy::authorize`]. It is sound in one direction: arguments the policy could allow always
//! validate against it, so a client that validates before calling never blocks an allowed call.
//! The converse holds except for path form: a `prefix` pattern accepts `..`, `//` and the other
//! forms the policy cannot judge, which the pipeline then refuses.
//!
//! - Each constraint is rendered for the caller (`{principal}` and `{tenant}` substituted) and
//!   becomes `"type": "string"` on its argument plus: `equals` → `const`, `one_of` → `enum`,
//!   `max_length` → `maxLength` (both count code points), `prefix` → `pattern`
//!   `^<prefix>(/|$)` (whole segments; the empty prefix adds none). The argument is `required`,
//!   as an absent one fails. A JSON pointer becomes nested `properties`, each level `required`.
//! - A rule's constraints are conjoined: keywords merged, a keyword set twice kept in `allOf`.
//! - Several constrained allow rules are disjoined where they constrain the same one argument:
//!   `anyOf` on it (`projects/{principal}/` or `shared/`). Rules over different arguments would
//!   need `anyOf` at the root, which strict clients refuse (an OpenAI-compatible endpoint wants a
//!   plain object there), so nothing is shown for them: wider, never narrower.
//! - Nothing narrows when an unconditional allow rule or an allowing default covers the call.
//!   A rule that can hold for no arguments of this caller (a principal that is no path segment,
//!   say) is left out; when every rule is, nothing is shown rather than an unsatisfiable schema.
//! - Deny rules are not shown: a constrained deny refuses what it matches at call time.
//! - [`narrowed`] merges the narrowing into the tool's own schema, property by property, so
//!   clients read a constraint where they read the type; an argument the tool's schema closes
//!   out is not added (that would widen it), and a keyword the property already sets
//!   differently goes in an `allOf` beside it.
//!
//! Longer than 500 lines: half of them are its unit tests, which check every narrowing against
//! the decisions of [`Policy::authorize`] over the same samples.

use serde_json::{json, Map, Value};

use super::config::Effect;
use super::constraint::{prefix_segments, Argument, Constraint};
use super::rules::Rule;
use super::Policy;
use toolhost_contract::Caller;
use toolhost_contract::Risk;

impl Policy {
    /// The schema the arguments of `subject`'s calls to `tool` must also meet to be allowed, or
    /// `None` when the allow side puts no constraint on them (see the module docs).
    pub fn narrowing(&self, subject: &Caller, tool: &str, risk: Risk) -> Option<Value> {
        if self.default == Effect::Allow {
            return None;
        }
        let mut alternatives = Vec::new();
        for rule in self.rules.iter() {
            if rule.effect != Effect::Allow || !rule.covers(subject, tool, risk) {
                continue;
            }
            if rule.unconditional() {
                return None;
            }
            alternatives.extend(rule_schema(rule, subject));
        }
        match alternatives.len() {
            0 => None,
            1 => alternatives.pop(),
            _ => disjoin(&alternatives),
        }
    }
}

/// The name of the one argument `schema` constrains and the schema it puts on it, when it is of
/// the form `{"properties": {NAME: S}, "required": [NAME]}`; for a list of such schemas, the
/// name when it is the same for all.
fn one_argument(alternatives: &[Value]) -> Option<(&str, Vec<&Value>)> {
    let mut name = None;
    let mut inner = Vec::new();
    for alt in alternatives {
        let o = alt.as_object()?;
        let props = o.get("properties")?.as_object()?;
        let (n, s) = props.iter().next().filter(|_| props.len() == 1)?;
        if o.len() != 2 || o.get("required")? != &json!([n]) || name.is_some_and(|m| m != n) {
            return None;
        }
        name = Some(n.as_str());
        inner.push(s);
    }
    Some((name?, inner))
}

/// `alternatives` as one schema on the one argument they all constrain, or `None` when they
/// do not share one: disjoined further down while they share a nested argument, else `anyOf`
/// there.
fn disjoin(alternatives: &[Value]) -> Option<Value> {
    let (name, inner) = one_argument(alternatives)?;
    let inner: Vec<Value> = inner.into_iter().cloned().collect();
    let on_it = disjoin(&inner).unwrap_or_else(|| json!({ "anyOf": inner }));
    Some(json!({ "properties": { name: on_it }, "required": [name] }))
}

/// `schema` (a tool's input schema) with `narrowing` merged in: each constrained property gets
/// the constraint's keywords beside its own, so a client reads them where it reads the type.
pub fn narrowed(schema: &Value, narrowing: &Value) -> Value {
    match (schema, narrowing) {
        (Value::Object(base), Value::Object(n)) => {
            let mut out = base.clone();
            conjoin(&mut out, n.clone());
            Value::Object(out)
        }
        (Value::Bool(true), n) => n.clone(),
        (schema, _) => schema.clone(),
    }
}

/// The conjunction of a rule's constraints, or `None` when one of them cannot hold.
fn rule_schema(rule: &Rule, subject: &Caller) -> Option<Value> {
    let mut all = Map::new();
    for c in &rule.constraints {
        let Value::Object(one) = constraint_schema(c, subject)? else {
            unreachable!("a constraint's schema is an object");
        };
        conjoin(&mut all, one);
    }
    Some(Value::Object(all))
}

/// One constraint as a schema over the whole arguments, or `None` when it cannot hold for
/// `subject`.
fn constraint_schema(c: &Constraint, subject: &Caller) -> Option<Value> {
    let mut value = Map::new();
    value.insert("type".into(), json!("string"));
    if let Some(prefix) = &c.prefix {
        let rendered = prefix.render(subject, true).ok()?;
        let segments = prefix_segments(&rendered).ok()?;
        if !segments.is_empty() {
            let pattern = format!("^{}(/|$)", escape_regex(&segments.join("/")));
            value.insert("pattern".into(), Value::String(pattern));
        }
    }
    if let Some(equals) = &c.equals {
        value.insert(
            "const".into(),
            Value::String(equals.render(subject, false).ok()?),
        );
    }
    if let Some(one_of) = &c.one_of {
        let mut accepted: Vec<Value> = Vec::new();
        for v in one_of.iter().filter_map(|t| t.render(subject, false).ok()) {
            if !accepted.iter().any(|a| a == v.as_str()) {
                accepted.push(Value::String(v));
            }
        }
        if accepted.is_empty() {
            return None;
        }
        value.insert("enum".into(), Value::Array(accepted));
    }
    if let Some(max) = c.max_length {
        value.insert("maxLength".into(), json!(max));
    }
    let mut schema = Value::Object(value);
    for name in argument_path(&c.argument).into_iter().rev() {
        schema = json!({ "properties": { name.clone(): schema }, "required": [name] });
    }
    Some(schema)
}

/// The property names from the top of the arguments down to the constrained value.
fn argument_path(argument: &Argument) -> Vec<String> {
    match argument {
        Argument::Name(name) => vec![name.clone()],
        Argument::Pointer(pointer) => pointer
            .split('/')
            .skip(1)
            .map(|token| token.replace("~1", "/").replace("~0", "~"))
            .collect(),
    }
}

/// Add the assertions of `from` to `into`: properties conjoined by name, `required` united, and
/// a keyword both set differently kept in `allOf` so that neither is lost. A property `into`
/// closes out (`additionalProperties: false` without it) is not added, nor required: naming it
/// would widen what `into` accepts.
fn conjoin(into: &mut Map<String, Value>, from: Map<String, Value>) {
    let closed = into.get("additionalProperties") == Some(&Value::Bool(false));
    let declared = |into: &Map<String, Value>, name: &str| {
        into.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(name))
    };
    for (key, value) in from {
        match (key.as_str(), value) {
            ("properties", Value::Object(theirs)) => {
                for (name, schema) in theirs {
                    if closed && !declared(into, &name) {
                        continue;
                    }
                    let mine = into
                        .entry("properties")
                        .or_insert_with(|| Value::Object(Map::new()));
                    let Value::Object(mine) = mine else { continue };
                    match (mine.get_mut(&name), schema) {
                        (Some(Value::Object(m)), Value::Object(t)) => conjoin(m, t),
                        (Some(m @ Value::Bool(true)), schema) => *m = schema,
                        (Some(_), _) => {} // `false`, or equal: nothing to add
                        (None, schema) => {
                            mine.insert(name, schema);
                        }
                    }
                }
            }
            ("required", Value::Array(theirs)) => {
                let names: Vec<Value> = theirs
                    .into_iter()
                    .filter(|n| !closed || n.as_str().is_some_and(|n| declared(into, n)))
                    .collect();
                let Value::Array(mine) = into
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()))
                else {
                    continue;
                };
                for name in names {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, value) => match into.get(&key) {
                None => {
                    into.insert(key, value);
                }
                Some(mine) if *mine == value => {}
                Some(_) => {
                    let extra = json!({ key: value });
                    match into.get_mut("allOf") {
                        Some(Value::Array(list)) => list.push(extra),
                        _ => {
                            into.insert("allOf".into(), json!([extra]));
                        }
                    }
                }
            },
        }
    }
}

/// `text` as an ECMA-262 regular expression that matches it literally.
fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "^$\\.*+?()[]{}|".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::PolicyConfig;

    fn policy(rules: &str) -> Policy {
        #[derive(serde::Deserialize)]
        struct File {
            policy: PolicyConfig,
        }
        let f: File = toml::from_str(&format!("[policy]\n{rules}")).unwrap();
        Policy::from_config(&f.policy, Path::new("/cfg")).unwrap()
    }

    /// The tool's own schema in these tests: two string arguments and a nested object.
    fn base() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"type": "string"},
                "target": {
                    "type": "object",
                    "properties": {"a/b": {"type": "string"}},
                    "required": ["a/b"],
                    "additionalProperties": false
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    /// Arguments that probe every constraint below, allowed or not.
    fn samples() -> Vec<Value> {
        let mut out = Vec::new();
        for path in [
            "projects/alice",
            "projects/alice/x",
            "projects/alice/x/y.txt",
            "projects/alicevil/x",
            "projects/bob/x",
            "shared/x",
            "shared",
            "sharedx",
            "projects/a.c/x",
            "projects/abc/x",
            "other",
            "",
        ] {
            for mode in [
                None,
                Some("read"),
                Some("append"),
                Some("alice"),
                Some("acme"),
            ] {
                let mut args = json!({ "path": path, "target": {"a/b": "acme"} });
                if let Some(m) = mode {
                    args["mode"] = json!(m);
                }
                out.push(args.clone());
                args["target"]["a/b"] = json!("other");
                out.push(args);
            }
        }
        out
    }

    /// For each policy: the caller's narrowed schema accepts every sample the policy allows, and
    /// (with no prefix involved) refuses every sample it refuses.
    fn check(rules: &str, subject: &Caller, exact: bool) -> Value {
        let p = policy(rules);
        let narrowing = p
            .narrowing(subject, "read_text", Risk::Read)
            .expect("the constraints are shown");
        let offered = narrowed(&base(), &narrowing);
        let v = jsonschema::draft202012::new(&offered).expect("the narrowed schema compiles");
        let mut allowed = 0;
        for args in samples() {
            let decision = p.authorize(subject, "read_text", Risk::Read, &args);
            let valid = v.is_valid(&args);
            if decision.allowed {
                allowed += 1;
                assert!(
                    valid,
                    "{args} is allowed but the schema refuses it: {offered:#}"
                );
            } else if exact {
                assert!(
                    !valid,
                    "{args} is refused but the schema accepts it: {offered:#}"
                );
            }
        }
        assert!(allowed > 0, "no sample is allowed under {rules}");
        narrowing
    }

    const ALLOW: &str = "[[policy.rule]]\neffect = \"allow\"\ntools = [\"read_text\"]\n";

    /// A prefix becomes a whole-segment pattern rendered for the caller.
    #[test]
    fn a_prefix_is_a_pattern() {
        let rules = format!("{ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"projects/{{principal}}/\"");
        let n = check(&rules, &Caller::new("alice", "acme"), false);
        assert_eq!(
            n,
            json!({"properties": {"path": {"type": "string", "pattern": "^projects/alice(/|$)"}}, "required": ["path"]})
        );
        let n = check(&rules, &Caller::new("a.c", "acme"), false);
        assert_eq!(n["properties"]["path"]["pattern"], "^projects/a\\.c(/|$)");
    }

    /// `equals`, `one_of` and `max_length` are exact, alone and together, through a pointer too.
    #[test]
    fn equals_one_of_and_max_length_are_exact() {
        let alice = Caller::new("alice", "acme");
        for constraint in [
            "argument = \"mode\"\nequals = \"{principal}\"",
            "argument = \"mode\"\none_of = [\"read\", \"append\", \"read\"]",
            "argument = \"path\"\nmax_length = 8",
            "argument = \"/target/a~1b\"\nequals = \"{tenant}\"",
        ] {
            check(
                &format!("{ALLOW}[[policy.rule.constraint]]\n{constraint}"),
                &alice,
                true,
            );
        }
        let both = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"mode\"\none_of = [\"read\", \"alice\"]\n\
             [[policy.rule.constraint]]\nargument = \"mode\"\nequals = \"{{principal}}\"\n\
             [[policy.rule.constraint]]\nargument = \"path\"\nmax_length = 8"
        );
        let n = check(&both, &alice, true);
        assert_eq!(n["required"], json!(["mode", "path"]));
        assert_eq!(n["properties"]["mode"]["enum"], json!(["read", "alice"]));
        assert_eq!(n["properties"]["mode"]["const"], json!("alice"));
    }

    /// Two allow rules on one argument are `anyOf` on it; on different arguments nothing is shown.
    #[test]
    fn several_rules_disjoin_on_one_argument() {
        let two = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"projects/{{principal}}\"\n\
             {ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"shared\""
        );
        let alice = Caller::new("alice", "acme");
        let n = check(&two, &alice, false);
        assert_eq!(n["required"], json!(["path"]));
        assert_eq!(
            n["properties"]["path"]["anyOf"].as_array().unwrap().len(),
            2
        );
        let nested = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"/target/a~1b\"\nequals = \"{{tenant}}\"\n\
             {ALLOW}[[policy.rule.constraint]]\nargument = \"/target/a~1b\"\nequals = \"other\""
        );
        let n = check(&nested, &alice, true);
        assert!(
            n["properties"]["target"]["properties"]["a/b"]["anyOf"].is_array(),
            "{n}"
        );
        let apart = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"shared\"\n\
             {ALLOW}[[policy.rule.constraint]]\nargument = \"mode\"\nequals = \"read\""
        );
        assert_eq!(
            policy(&apart).narrowing(&alice, "read_text", Risk::Read),
            None
        );
    }

    /// An unconditional allow, an allowing default, or a rule for another caller narrows nothing;
    /// a rule that cannot hold for this caller is left out.
    #[test]
    fn what_narrows_nothing() {
        let alice = Caller::new("alice", "acme");
        let constrained = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"shared\"\n"
        );
        let with_plain = format!("{constrained}{ALLOW}");
        assert_eq!(
            policy(&with_plain).narrowing(&alice, "read_text", Risk::Read),
            None
        );
        let default_allow = format!("default = \"allow\"\n{constrained}");
        assert_eq!(
            policy(&default_allow).narrowing(&alice, "read_text", Risk::Read),
            None
        );
        assert!(policy(&constrained)
            .narrowing(&alice, "other_tool", Risk::Read)
            .is_none());
        assert!(Policy::allow_all()
            .narrowing(&alice, "read_text", Risk::Read)
            .is_none());
        let segment = format!(
            "{ALLOW}[[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"home/{{principal}}\""
        );
        let odd = Caller::new("a/b", "acme");
        assert_eq!(
            policy(&segment).narrowing(&odd, "read_text", Risk::Read),
            None
        );
        let with_it = format!("{segment}\n{constrained}");
        assert_eq!(
            policy(&with_it).narrowing(&odd, "read_text", Risk::Read),
            Some(
                json!({"properties": {"path": {"type": "string", "pattern": "^shared(/|$)"}}, "required": ["path"]})
            )
        );
    }

    /// Merging into the tool's schema keeps it closed: the constraint joins the declared
    /// property, an undeclared argument is not added, a second value of a keyword is kept.
    #[test]
    fn merging_never_widens_the_tool_schema() {
        let n = json!({
            "properties": {
                "path": {"type": "string", "pattern": "^a(/|$)", "maxLength": 3},
                "undeclared": {"type": "string", "const": "x"},
                "target": {"properties": {"a/b": {"type": "string", "const": "acme"}}, "required": ["a/b"]}
            },
            "required": ["path", "undeclared", "target"]
        });
        let mut base = base();
        base["properties"]["path"]["maxLength"] = json!(10);
        let out = narrowed(&base, &n);
        assert_eq!(
            out["properties"]["path"],
            json!({"type": "string", "maxLength": 10, "pattern": "^a(/|$)", "allOf": [{"maxLength": 3}]})
        );
        assert!(out["properties"].get("undeclared").is_none(), "{out}");
        assert_eq!(out["required"], json!(["path", "target"]));
        assert_eq!(
            out["properties"]["target"]["properties"]["a/b"]["const"],
            "acme"
        );
        assert_eq!(out["additionalProperties"], false);
        assert_eq!(narrowed(&json!(true), &n), n);
    }

    /// Every character a regular expression treats specially is escaped.
    #[test]
    fn regex_metacharacters_are_literal() {
        assert_eq!(
            escape_regex("a.b*c+(d)[e]{f}|g^h$i?j\\k"),
            "a\\.b\\*c\\+\\(d\\)\\[e\\]\\{f\\}\\|g\\^h\\$i\\?j\\\\k"
        );
    }
}
