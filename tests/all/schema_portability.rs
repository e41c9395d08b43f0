//! Every schema toolhost advertises is portable to the strictest clients we know, for every tool
//! of every component in the repository:
//!
//! - what MCP clients see (`tools/list`: `inputSchema`, `outputSchema`) is valid Draft 2020-12,
//!   has no finding under the MCP Inspector's `--strict` portability rules (re-stated below in
//!   our own words: no bare boolean schema outside the four keywords that take one, no `type`
//!   array, no remote `$ref`, no schema that constrains nothing), and closes every object;
//! - what an OpenAI-compatible provider sees (`agent::schema::provider_schema`) keeps the
//!   structural rules of OpenAI's strict mode: an object at the root, every object closed and
//!   all its properties required, every array with `items`, and none of the keywords strict
//!   mode refuses.
//!
//! `just inspect` runs the real Inspector against `toolhost serve` for the same configs.

use serde_json::{json, Value};
use toolhost::agent::schema::provider_schema;
use toolhost::serve::mapping::mcp_tool;
use toolhost::Runtime;

use crate::support::{adversarial_config, example_config, guest, runtime, temp_config, toml_path};

/// Keywords whose value may be a bare `true`/`false` (Inspector: `BOOLEAN_VALUED_KEYWORDS`).
const BOOLEAN_OK: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
];
/// Keywords that hold one subschema.
const ONE_SUBSCHEMA: &[&str] = &[
    "items",
    "contains",
    "not",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords that hold a list of subschemas.
const LIST_OF_SUBSCHEMAS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords that hold a map of name → subschema.
const MAP_OF_SUBSCHEMAS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "$defs",
    "definitions",
];
/// Keywords that constrain an instance; a schema object with none of them accepts anything.
const CONSTRAINING: &[&str] = &[
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "items",
    "prefixItems",
    "contains",
    "additionalItems",
    "unevaluatedItems",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependentSchemas",
    "dependencies",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
];

/// Call `visit(node, path, keyword)` for `schema` and every subschema below it.
fn walk(
    schema: &Value,
    path: &str,
    keyword: Option<&str>,
    visit: &mut dyn FnMut(&Value, &str, Option<&str>),
) {
    visit(schema, path, keyword);
    let Some(o) = schema.as_object() else { return };
    for k in MAP_OF_SUBSCHEMAS {
        for (name, sub) in o.get(*k).and_then(Value::as_object).into_iter().flatten() {
            walk(sub, &format!("{path}/{k}/{name}"), Some(k), visit);
        }
    }
    for k in LIST_OF_SUBSCHEMAS {
        for (i, sub) in o
            .get(*k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk(sub, &format!("{path}/{k}/{i}"), Some(k), visit);
        }
    }
    for k in ONE_SUBSCHEMA {
        if let Some(sub) = o.get(*k) {
            walk(sub, &format!("{path}/{k}"), Some(k), visit);
        }
    }
}

/// The Inspector `--strict` findings for one schema, as `rule at path`.
fn inspector_findings(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(schema, "", None, &mut |node, path, keyword| match node {
        Value::Bool(_) if !keyword.is_some_and(|k| BOOLEAN_OK.contains(&k)) => {
            found.push(format!("boolean-schema at {path}"))
        }
        Value::Object(o) => {
            if o.get("type").is_some_and(Value::is_array) {
                found.push(format!("type-union at {path}"));
            }
            if o.get("$ref")
                .and_then(Value::as_str)
                .is_some_and(|r| !r.starts_with('#'))
            {
                found.push(format!("remote-ref at {path}"));
            }
            let constrains = o.keys().any(|k| CONSTRAINING.contains(&k.as_str()))
                || (o.contains_key("if") && (o.contains_key("then") || o.contains_key("else")));
            if !constrains && keyword != Some("not") {
                found.push(format!("untyped-schema at {path}"));
            }
        }
        _ => {}
    });
    found
}

/// Objects that are not closed: every node of type `object` must say `additionalProperties:
/// false` and require every property it names.
fn open_objects(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(schema, "", None, &mut |node, path, _| {
        let Some(o) = node.as_object() else { return };
        if o.get("type") != Some(&json!("object")) {
            return;
        }
        if o.get("additionalProperties") != Some(&json!(false)) {
            found.push(format!("additionalProperties not false at {path}"));
        }
        let mut props: Vec<&str> = o
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        props.sort();
        required.sort();
        if props != required {
            found.push(format!(
                "required {required:?} is not every property {props:?} at {path}"
            ));
        }
    });
    found
}

/// Where a provider schema breaks OpenAI strict mode's structural rules.
fn openai_strict_findings(schema: &Value) -> Vec<String> {
    const REFUSED: &[&str] = &[
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "prefixItems",
        "$schema",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
    ];
    let mut found = open_objects(schema);
    if schema.get("type") != Some(&json!("object")) || schema.get("anyOf").is_some() {
        found.push("the root is not a plain object schema".into());
    }
    walk(schema, "", None, &mut |node, path, keyword| {
        let Some(o) = node.as_object() else {
            if !keyword.is_some_and(|k| BOOLEAN_OK.contains(&k)) {
                found.push(format!("boolean schema at {path}"));
            }
            return;
        };
        for k in REFUSED {
            if o.contains_key(*k) {
                found.push(format!("{k} at {path}"));
            }
        }
        if o.get("type") == Some(&json!("array")) && !o.contains_key("items") {
            found.push(format!("array without items at {path}"));
        }
    });
    found
}

fn meta_errors(schema: &Value) -> Vec<String> {
    jsonschema::draft202012::meta::validator()
        .iter_errors(schema)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Every repository runtime: the example config, the adversarial one, and the components that
/// only tests load (every WIT type; the benchmark tools).
fn runtimes() -> Vec<(String, Runtime, Option<tempfile::TempDir>)> {
    let mut all = vec![
        (
            "toolhost.toml".to_string(),
            runtime(&example_config()),
            None,
        ),
        (
            "adversarial.toml".to_string(),
            runtime(&adversarial_config()),
            None,
        ),
    ];
    for component in ["types", "bench-tools", "conformance"] {
        let (dir, cfg) = temp_config(&format!(
            "data_dir = {}\n[[component]]\npath = {}\n",
            crate::support::own_data(),
            toml_path(&guest(component))
        ));
        all.push((component.to_string(), runtime(&cfg), Some(dir)));
    }
    let (dir, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\nrisk = \"read\"\n{CONSTRAINED}",
        crate::support::own_data(),
        toml_path(&guest("fs_tools"))
    ));
    all.push(("constrained fs-tools".to_string(), runtime(&cfg), Some(dir)));
    all
}

/// A policy whose constraints narrow what `alice` is offered: a prefix, two rules on one
/// argument, a length and an exact value.
const CONSTRAINED: &str = r#"
[policy]
[[policy.rule]]
principals = ["alice"]
effect = "allow"
tools = ["read_text", "list_dir"]
[[policy.rule.constraint]]
argument = "path"
prefix = "projects/{principal}/"
[[policy.rule.constraint]]
argument = "path"
max_length = 200
[[policy.rule]]
principals = ["alice"]
effect = "allow"
tools = ["read_text"]
[[policy.rule.constraint]]
argument = "path"
one_of = ["README.md", "{tenant}.md"]
"#;

/// The caller whose view of the tools is checked.
fn viewer() -> toolhost::contract::Caller {
    toolhost::contract::Caller::new("alice", "acme")
}

fn problems(origin: &str, rt: &Runtime) -> Vec<String> {
    let mut out = Vec::new();
    let viewer = viewer();
    let seen = rt.visibility(&viewer);
    for tool in seen.tools() {
        let offered = seen.input_schema(tool);
        let wire = serde_json::to_value(mcp_tool(tool, &offered)).unwrap();
        let name = wire["name"].as_str().unwrap().to_string();
        for key in ["inputSchema", "outputSchema"] {
            let s = &wire[key];
            for p in inspector_findings(s)
                .into_iter()
                .chain(open_objects(s))
                .chain(meta_errors(s))
            {
                out.push(format!("{origin} {name} {key}: {p}"));
            }
        }
        let provider = provider_schema(&offered);
        for p in openai_strict_findings(&provider) {
            out.push(format!("{origin} {name} provider schema: {p}"));
        }
    }
    out
}

/// Every advertised schema in the repository, as a caller a policy confines sees it too, passes
/// every rule above.
#[test]
fn every_advertised_schema_is_portable() {
    let mut all = Vec::new();
    let mut tools = 0;
    let mut narrowed = 0;
    let viewer = viewer();
    for (origin, rt, _dir) in runtimes() {
        let seen = rt.visibility(&viewer);
        for tool in seen.tools() {
            tools += 1;
            if *seen.input_schema(tool) != tool.input_schema {
                narrowed += 1;
            }
        }
        all.extend(problems(&origin, &rt));
    }
    assert!(tools >= 30, "only {tools} tools were checked");
    assert_eq!(narrowed, 2, "read_text and list_dir are offered narrowed");
    assert!(
        all.is_empty(),
        "{} findings:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// The rules find what they are for (so an empty list above means something).
#[test]
fn the_rules_catch_what_strict_clients_refuse() {
    let tuple_with_false =
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": false});
    assert_eq!(
        inspector_findings(&tuple_with_false),
        ["boolean-schema at /items"]
    );
    assert!(
        inspector_findings(&json!({"type": "object", "additionalProperties": false})).is_empty()
    );
    assert_eq!(
        inspector_findings(&json!({"type": ["string", "null"]})),
        ["type-union at "]
    );
    assert_eq!(
        inspector_findings(&json!({"properties": {"a": {"description": "x"}}})),
        ["untyped-schema at /properties/a"]
    );
    assert_eq!(
        inspector_findings(&json!({"$ref": "https://x/y"})),
        ["remote-ref at "]
    );
    assert!(inspector_findings(&json!({"not": {}})).is_empty());
    assert_eq!(
        open_objects(
            &json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": []})
        ),
        [
            "additionalProperties not false at ",
            "required [] is not every property [\"a\"] at "
        ]
    );
    let p = json!({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}},
                   "required": ["t"], "additionalProperties": false});
    assert_eq!(
        openai_strict_findings(&p),
        [
            "prefixItems at /properties/t",
            "array without items at /properties/t"
        ]
    );
    assert!(!meta_errors(&json!({"type": "array", "minItems": -1})).is_empty());
}
