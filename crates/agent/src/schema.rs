//! The input schema a provider sees: the canonical Draft 2020-12 schema reduced to the subset
//! OpenAI-compatible endpoints accept for function parameters. Validation still uses the full
//! canonical schema; this is advertisement only, so dropping a keyword can only make the model
//! propose something the pipeline then refuses with `invalid_arguments`.
//!
//! - Refinements (`allOf` of the derived schema and the operator's narrowing) are merged into
//!   one object schema: properties per name, `required` united, and for any other keyword the
//!   later (narrower) value wins.
//! - `oneOf` becomes `anyOf`; `const` becomes a one-value `enum`.
//! - A tuple (`prefixItems`, which strict providers refuse) is advertised as an array of its
//!   length whose `items` is `anyOf` its element schemas: wider than the tuple (order is not
//!   said), never narrower.
//! - Kept: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`, `anyOf`,
//!   `description`, `title`, `default`, `minimum`, `maximum`, `exclusiveMinimum`,
//!   `exclusiveMaximum`, `minLength`, `maxLength`, `pattern`, `minItems`, `maxItems`.
//! - Dropped: everything else (`$schema`, `$id`, `format`, `prefixItems`, `uniqueItems`,
//!   `multipleOf`, `not`, `if`/`then`/`else`, `dependentRequired`, …).

use serde_json::{Map, Value};

/// Keywords passed through unchanged (their subschemas converted where they hold any).
const KEPT: &[&str] = &[
    "type",
    "required",
    "additionalProperties",
    "enum",
    "description",
    "title",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
];

/// Nesting past this depth is cut to `{}` (any value): WIT types are finite, but a refinement
/// could nest deeply and providers reject very deep schemas.
const MAX_DEPTH: usize = 32;

/// The advertised parameters schema for a canonical input schema.
pub fn provider_schema(canonical: &Value) -> Value {
    let mut out = convert(canonical, 0);
    if let Some(o) = out.as_object_mut() {
        // Function parameters must be an object schema.
        o.entry("type")
            .or_insert_with(|| Value::String("object".into()));
        o.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    out
}

fn convert(schema: &Value, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        return schema.clone(); // `true` / `false` schemas
    };
    if depth > MAX_DEPTH {
        return Value::Object(Map::new());
    }
    let merged = flatten_all_of(obj);
    let mut out = Map::new();
    for (k, v) in &merged {
        match k.as_str() {
            "properties" => {
                if let Some(props) = v.as_object() {
                    let converted = props
                        .iter()
                        .map(|(name, s)| (name.clone(), convert(s, depth + 1)))
                        .collect();
                    out.insert(k.clone(), Value::Object(converted));
                }
            }
            "items" => {
                out.insert(k.clone(), convert(v, depth + 1));
            }
            "prefixItems" if !merged.contains_key("items") => {
                if let Some(list) = v.as_array() {
                    out.insert("items".into(), tuple_items(list, depth + 1));
                }
            }
            "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), convert(v, depth + 1));
            }
            "anyOf" | "oneOf" => {
                if let Some(list) = v.as_array() {
                    let converted = list.iter().map(|s| convert(s, depth + 1)).collect();
                    out.insert("anyOf".into(), Value::Array(converted));
                }
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![v.clone()]));
            }
            k if KEPT.contains(&k) => {
                out.insert(k.to_string(), v.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// The one `items` schema a tuple is advertised with: its element schemas, each once, as
/// `anyOf` (the schema itself when there is only one).
fn tuple_items(elements: &[Value], depth: usize) -> Value {
    let mut distinct: Vec<Value> = Vec::new();
    for e in elements {
        let c = convert(e, depth);
        if !distinct.contains(&c) {
            distinct.push(c);
        }
    }
    match distinct.len() {
        1 => distinct.remove(0),
        _ => serde_json::json!({ "anyOf": distinct }),
    }
}

/// Merge an object schema's `allOf` members into it, recursively, later members winning.
fn flatten_all_of(obj: &Map<String, Value>) -> Map<String, Value> {
    let mut base: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| k.as_str() != "allOf")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(members) = obj.get("allOf").and_then(Value::as_array) {
        for m in members {
            if let Some(mo) = m.as_object() {
                let flat = flatten_all_of(mo);
                merge(&mut base, &flat);
            }
        }
    }
    base
}

fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (k.as_str(), into.get_mut(k)) {
            ("properties", Some(Value::Object(existing))) => {
                if let Some(props) = v.as_object() {
                    for (name, s) in props {
                        match (existing.get_mut(name), s.as_object()) {
                            (Some(Value::Object(e)), Some(so)) => {
                                let flat = flatten_all_of(so);
                                let mut merged = flatten_all_of(e);
                                merge(&mut merged, &flat);
                                *e = merged;
                            }
                            _ => {
                                existing.insert(name.clone(), s.clone());
                            }
                        }
                    }
                }
            }
            ("required", Some(Value::Array(existing))) => {
                for r in v.as_array().into_iter().flatten() {
                    if !existing.contains(r) {
                        existing.push(r.clone());
                    }
                }
            }
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A refined schema is flattened: properties merged, narrower keywords win, `required`
    /// united, and unsupported keywords dropped.
    #[test]
    fn refinements_are_flattened() {
        let canonical = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "allOf": [
                {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "n": {"type": "integer", "minimum": 0, "maximum": 255}
                    },
                    "required": ["path", "n"],
                    "additionalProperties": false
                },
                {
                    "properties": {
                        "path": {"pattern": "^notes/", "format": "uri-reference"},
                        "n": {"maximum": 10}
                    },
                    "required": ["path"]
                }
            ]
        });
        let p = provider_schema(&canonical);
        assert_eq!(
            p,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "pattern": "^notes/"},
                    "n": {"type": "integer", "minimum": 0, "maximum": 10}
                },
                "required": ["path", "n"],
                "additionalProperties": false
            })
        );
    }

    /// `oneOf` becomes `anyOf`, `const` a one-value enum, and a tuple an array whose items are
    /// any of its element schemas.
    #[test]
    fn unsupported_keywords_are_mapped_or_dropped() {
        let p = provider_schema(&json!({
            "type": "object",
            "properties": {
                "v": {"oneOf": [{"const": "a"}, {"type": "null"}]},
                "t": {"type": "array", "prefixItems": [{"type": "string"}], "minItems": 1},
                "u": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}, {"type": "string"}],
                      "minItems": 3, "maxItems": 3}
            }
        }));
        assert_eq!(
            p["properties"]["v"],
            json!({"anyOf": [{"enum": ["a"]}, {"type": "null"}]})
        );
        assert_eq!(
            p["properties"]["t"],
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
        );
        assert_eq!(
            p["properties"]["u"],
            json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                   "minItems": 3, "maxItems": 3})
        );
    }

    /// A schema without properties still advertises an object.
    #[test]
    fn empty_parameters_are_an_object() {
        let p = provider_schema(&json!({"type": "object", "additionalProperties": false}));
        assert_eq!(p["properties"], json!({}));
    }
}
