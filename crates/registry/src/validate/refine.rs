//! Operator refinements only narrow.
//!
//! An operator may refine a WIT-derived schema in the config (patterns, ranges, enums,
//! descriptions). [`refine`] composes the two as
//!
//! ```json
//! {"$schema": "https://json-schema.org/draft/2020-12/schema",
//!  "description": "<the refinement's top-level description, else the derived one, if any>",
//!  "type": "<the derived top-level type, if any>",
//!  "allOf": [<derived without $schema>, <refinement without $schema>]}
//! ```
//!
//! A value is valid only if it is valid under *both* parts, so a refinement can only narrow what
//! WIT allows: `{"maximum": 100}` on a derived `{"type": "integer", "maximum": 10}` still rejects
//! `50`, and a refinement cannot add properties the derived `additionalProperties: false` forbids.
//! The top-level `description` and `type` are there so clients that only read the top level see
//! them; `type` is a copy of a constraint the derived part already imposes, and `description` is
//! an annotation, so neither widens anything.
//!
//! Before composing, the refinement alone must be a valid Draft 2020-12 schema (object or
//! boolean), declare no `$schema` other than Draft 2020-12, contain no `$id` and no `$ref` /
//! `$dynamicRef` other than a local `#...` fragment. This check is deliberately conservative: it
//! looks at every object in the refinement, so an `enum` / `const` value that happens to be an
//! object with a string `$id` or a remote-looking `$ref` is refused too.
//!
//! Local references (`#/$defs/...`, `#anchor`) are relative to the document they were written in.
//! So that they keep pointing into their own part after composition, a part that uses `$ref`,
//! `$dynamicRef`, `$anchor` or `$dynamicAnchor` (and has no top-level `$id` of its own) is given
//! an `$id` of the form `urn:toolhost:derived` / `urn:toolhost:refinement` (with a numeric
//! suffix if that name is already taken), which makes it its own schema resource. Parts without
//! references stay exactly as written. The composed schema is compiled once before it is
//! returned, so a refinement that cannot be compiled (an invalid regex, say) is refused at load.

use serde_json::{Map, Value};

use super::*;

/// Compose the WIT-derived schema with an operator refinement so that the result can only be
/// narrower than `derived` (see the module docs for the exact shape and checks).
pub fn refine(derived: &Value, refinement: &Value) -> Result<Value, SchemaError> {
    const WHAT: &str = "refinement";
    let found = match refinement {
        Value::Object(_) | Value::Bool(_) => None,
        Value::Null => Some("null"),
        Value::Number(_) => Some("a number"),
        Value::String(_) => Some("a string"),
        Value::Array(_) => Some("an array"),
    };
    if let Some(found) = found {
        return Err(SchemaError::RefinementNotASchema { found });
    }
    check_draft("derived schema", derived)?;
    check_draft(WHAT, refinement)?;
    meta_check(WHAT, refinement)?;
    check_refinement_refs(refinement, &mut String::new())?;

    let derived_part = as_part(derived, DERIVED_ID, None);
    let refinement_part = as_part(refinement, REFINEMENT_ID, Some(&derived_part));

    let mut out = Map::new();
    out.insert("$schema".into(), Value::String(DRAFT_2020_12.into()));
    let description =
        top_level(refinement, "description").or_else(|| top_level(derived, "description"));
    if let Some(description) = description {
        out.insert("description".into(), description.clone());
    }
    if let Some(ty) = top_level(derived, "type") {
        out.insert("type".into(), ty.clone());
    }
    out.insert(
        "allOf".into(),
        Value::Array(vec![derived_part, refinement_part]),
    );
    let refined = Value::Object(out);
    compile_as("refined schema", &refined)?;
    Ok(refined)
}

fn top_level<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema.as_object().and_then(|m| m.get(key))
}

/// `schema` without its top-level `$schema`, given a fresh `$id` if it uses local references
/// and has none (so they stay relative to it inside `allOf`).
fn as_part(schema: &Value, id_base: &str, taken: Option<&Value>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut map = map.clone();
    map.remove("$schema");
    if !map.contains_key("$id") && uses_local_resolution(schema) {
        let mut id = id_base.to_string();
        let mut n = 1;
        while contains_string(schema, &id) || taken.is_some_and(|t| contains_string(t, &id)) {
            n += 1;
            id = format!("{id_base}:{n}");
        }
        map.insert("$id".into(), Value::String(id));
    }
    Value::Object(map)
}

/// Whether any object in `value` has a reference or anchor keyword.
fn uses_local_resolution(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            ["$ref", "$dynamicRef", "$anchor", "$dynamicAnchor"]
                .iter()
                .any(|k| map.get(*k).is_some_and(Value::is_string))
                || map.values().any(uses_local_resolution)
        }
        Value::Array(items) => items.iter().any(uses_local_resolution),
        _ => false,
    }
}

fn contains_string(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s == needle,
        Value::Object(map) => map.values().any(|v| contains_string(v, needle)),
        Value::Array(items) => items.iter().any(|v| contains_string(v, needle)),
        _ => false,
    }
}

/// Refuse `$id` and non-local `$ref` / `$dynamicRef` anywhere in a refinement (conservatively:
/// in every object, see the module docs). `pointer` is the JSON pointer of `value`.
fn check_refinement_refs(value: &Value, pointer: &mut String) -> Result<(), SchemaError> {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(_)) = map.get("$id") {
                return Err(SchemaError::IdInRefinement {
                    pointer: pointer.clone(),
                });
            }
            for key in ["$ref", "$dynamicRef"] {
                if let Some(Value::String(reference)) = map.get(key) {
                    if !reference.starts_with('#') {
                        return Err(SchemaError::ExternalRef {
                            what: "refinement",
                            reference: truncate(reference.clone(), MAX_SCHEMA_ERROR_BYTES),
                            pointer: format!("{pointer}/{key}"),
                        });
                    }
                }
            }
            for (key, child) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                check_refinement_refs(child, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                check_refinement_refs(child, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::super::tests::compile;

    fn derived() -> Value {
        json!({
            "$schema": DRAFT_2020_12,
            "description": "Convert a length.",
            "type": "object",
            "properties": {
                "from": {"type": "string"},
                "amount": {"type": "integer", "maximum": 10},
            },
            "required": ["from", "amount"],
            "additionalProperties": false,
        })
    }

    /// A refinement narrows: a value valid under the derived schema but not the refinement fails.
    #[test]
    fn refine_narrows() {
        let refined = refine(
            &derived(),
            &json!({"properties": {"from": {"enum": ["metre", "foot"]}}}),
        )
        .unwrap();
        let v = compile(refined);
        let errors = v
            .validate(&json!({"from": "parsec", "amount": 1}))
            .unwrap_err();
        assert_eq!(errors[0].instance_path, "/from");
        assert!(v.validate(&json!({"from": "metre", "amount": 1})).is_ok());
        // The derived constraints still hold.
        assert!(v
            .validate(&json!({"from": "metre", "amount": 1, "x": 1}))
            .is_err());
    }

    /// A refinement cannot widen: `maximum: 100` on a derived `maximum: 10` still rejects 50.
    #[test]
    fn refine_cannot_widen() {
        let small = json!({"type": "integer", "maximum": 10});
        let v = compile(refine(&small, &json!({"maximum": 100})).unwrap());
        let errors = v.validate(&json!(50)).unwrap_err();
        assert_eq!(
            errors[0].message,
            "50 is greater than the maximum 10 (maximum)"
        );
        assert!(v.validate(&json!(5)).is_ok());
        // Nor can it re-allow a property the derived schema forbids.
        let widening = json!({"properties": {"x": {}}, "additionalProperties": true});
        let v = compile(refine(&derived(), &widening).unwrap());
        assert!(v
            .validate(&json!({"from": "a", "amount": 1, "x": 1}))
            .is_err());
    }

    /// The refined schema has the documented shape and keeps descriptions at top level.
    #[test]
    fn refine_shape_and_description() {
        let refined = refine(&derived(), &json!({"description": "Lengths only, please."})).unwrap();
        assert_eq!(refined["$schema"], DRAFT_2020_12);
        assert_eq!(refined["description"], "Lengths only, please.");
        assert_eq!(refined["type"], "object");
        let parts = refined["allOf"].as_array().unwrap();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].get("$schema").is_none());
        assert_eq!(parts[1], json!({"description": "Lengths only, please."}));
        // Without a refinement description, the derived one is kept at top level.
        let refined = refine(&derived(), &json!({"minProperties": 1})).unwrap();
        assert_eq!(refined["description"], "Convert a length.");
    }

    /// An invalid refinement is refused with a message that names the problem.
    #[test]
    fn refine_rejects_invalid_refinement() {
        let err = refine(&derived(), &json!({"type": 5})).unwrap_err();
        match &err {
            SchemaError::Invalid { what, pointer, .. } => {
                assert_eq!(*what, "refinement");
                assert_eq!(pointer, "/type");
            }
            other => panic!("{other}"),
        }
        assert!(
            err.to_string()
                .starts_with("refinement is not a valid JSON Schema"),
            "{err}"
        );
        let err = refine(&derived(), &json!("string")).unwrap_err();
        assert!(
            matches!(err, SchemaError::RefinementNotASchema { .. }),
            "{err}"
        );
        let err = refine(&derived(), &json!({"pattern": "(unclosed"})).unwrap_err();
        assert!(
            matches!(
                err,
                SchemaError::Compile { .. } | SchemaError::Invalid { .. }
            ),
            "{err}"
        );
    }

    /// A refinement with `$id`, a remote `$ref` or another draft is refused.
    #[test]
    fn refine_rejects_remote_refs_and_ids() {
        let err = refine(
            &derived(),
            &json!({"properties": {"from": {"$ref": "https://example.com/units.json"}}}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            SchemaError::ExternalRef {
                what: "refinement",
                reference: "https://example.com/units.json".into(),
                pointer: "/properties/from/$ref".into(),
            }
        );
        let err = refine(&derived(), &json!({"$ref": "other.json#/x"})).unwrap_err();
        assert!(matches!(err, SchemaError::ExternalRef { .. }), "{err}");
        let err = refine(&derived(), &json!({"$id": "urn:mine"})).unwrap_err();
        assert_eq!(
            err,
            SchemaError::IdInRefinement {
                pointer: String::new()
            }
        );
        let err = refine(
            &derived(),
            &json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
        )
        .unwrap_err();
        assert!(matches!(err, SchemaError::UnsupportedDraft { .. }), "{err}");
    }

    /// Local `#/$defs/...` references in a refinement still resolve inside its own part.
    #[test]
    fn refine_keeps_local_refs_working() {
        let refinement = json!({
            "$defs": {"unit": {"enum": ["metre", "foot"]}},
            "properties": {"from": {"$ref": "#/$defs/unit"}},
        });
        let refined = refine(&derived(), &refinement).unwrap();
        assert_eq!(refined["allOf"][1]["$id"], REFINEMENT_ID);
        assert!(refined["allOf"][0].get("$id").is_none());
        let v = compile(refined.clone());
        assert!(v.validate(&json!({"from": "foot", "amount": 2})).is_ok());
        assert_eq!(
            v.validate(&json!({"from": "parsec", "amount": 2}))
                .unwrap_err()[0]
                .instance_path,
            "/from"
        );
        // Refining a refined schema picks fresh ids.
        let twice = refine(&refined, &refinement).unwrap();
        assert_ne!(twice["allOf"][1]["$id"], REFINEMENT_ID);
        assert!(Validator::compile(&twice).is_ok());
    }
}
