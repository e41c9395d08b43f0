//! WIT types → JSON Schema (Draft 2020-12): the model-facing shape of every tool.
//!
//! The mapping mirrors [`super::convert`] exactly: a JSON value the schema accepts converts,
//! and one it refuses does not. Types that cannot cross a JSON boundary (resources, futures,
//! streams, error contexts, maps, `option<option<T>>`) are refused with a clear error.

use serde_json::{json, Map, Value};
use wasmtime::component::types::{ComponentFunc, Type};

/// The dialect every derived schema declares.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Why a WIT type cannot be used in a tool signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at {at} cannot be used in a tool signature: {why}")]
pub struct UnsupportedType {
    pub what: &'static str,
    pub at: String,
    pub why: &'static str,
}

/// The input schema: one property per parameter, all required, nothing else allowed.
pub fn input_schema(func: &ComponentFunc) -> Result<Value, UnsupportedType> {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, ty) in func.params() {
        props.insert(name.to_string(), type_schema(&ty, name)?);
        required.push(Value::String(name.to_string()));
    }
    Ok(json!({
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    }))
}

/// The output schema: the schema of the completed output (`T` of a top-level `result<T, E>`;
/// `null` for no result).
pub fn output_schema(func: &ComponentFunc) -> Result<Value, UnsupportedType> {
    let mut schema = match func.results().next() {
        None => json!({"type": "null"}),
        Some(Type::Result(r)) => {
            if let Some(err) = r.err() {
                // Checked so an unsupported error type is refused at load, not at call time.
                type_schema(&err, "result.err")?;
            }
            match r.ok() {
                Some(ok) => type_schema(&ok, "result.ok")?,
                None => json!({"type": "null"}),
            }
        }
        Some(ty) => type_schema(&ty, "result")?,
    };
    if let Value::Object(m) = &mut schema {
        m.insert("$schema".into(), Value::String(DRAFT_2020_12.into()));
    }
    Ok(schema)
}

fn int(min: i128, max: i128) -> Value {
    json!({"type": "integer", "minimum": num(min), "maximum": num(max)})
}

fn num(v: i128) -> serde_json::Number {
    if v < 0 {
        serde_json::Number::from(v as i64)
    } else {
        serde_json::Number::from(v as u64)
    }
}

fn unsupported(what: &'static str, at: &str, why: &'static str) -> UnsupportedType {
    UnsupportedType {
        what,
        at: at.to_string(),
        why,
    }
}

/// The schema of one WIT type; `at` names where it occurs, for errors.
pub fn type_schema(ty: &Type, at: &str) -> Result<Value, UnsupportedType> {
    Ok(match ty {
        Type::Bool => json!({"type": "boolean"}),
        Type::S8 => int(i8::MIN.into(), i8::MAX.into()),
        Type::U8 => int(0, u8::MAX.into()),
        Type::S16 => int(i16::MIN.into(), i16::MAX.into()),
        Type::U16 => int(0, u16::MAX.into()),
        Type::S32 => int(i32::MIN.into(), i32::MAX.into()),
        Type::U32 => int(0, u32::MAX.into()),
        Type::S64 => int(i64::MIN.into(), i64::MAX.into()),
        Type::U64 => int(0, u64::MAX.into()),
        Type::Float32 | Type::Float64 => json!({"type": "number"}),
        Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
        Type::String => json!({"type": "string"}),
        Type::List(l) => {
            json!({"type": "array", "items": type_schema(&l.ty(), &format!("{at}[]"))?})
        }
        Type::FixedLengthList(l) => json!({
            "type": "array",
            "items": type_schema(&l.ty(), &format!("{at}[]"))?,
            "minItems": l.len(),
            "maxItems": l.len(),
        }),
        Type::Record(r) => {
            let mut props = Map::new();
            let mut required = Vec::new();
            for f in r.fields() {
                props.insert(
                    f.name.to_string(),
                    type_schema(&f.ty, &format!("{at}.{}", f.name))?,
                );
                required.push(Value::String(f.name.to_string()));
            }
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
        }
        Type::Tuple(t) => {
            let items = t
                .types()
                .enumerate()
                .map(|(i, ty)| type_schema(&ty, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            // `minItems` = `maxItems` = n closes the tuple without a bare `items: false`,
            // which strict clients (MCP Inspector `--strict`) refuse as a boolean schema.
            let n = items.len();
            json!({"type": "array", "prefixItems": items, "minItems": n, "maxItems": n})
        }
        Type::Variant(v) => {
            let mut one_of = Vec::new();
            for c in v.cases() {
                one_of.push(match &c.ty {
                    None => json!({"const": c.name}),
                    Some(ty) => single_key(c.name, type_schema(ty, &format!("{at}.{}", c.name))?),
                });
            }
            json!({"oneOf": one_of})
        }
        Type::Enum(e) => json!({"type": "string", "enum": e.names().collect::<Vec<_>>()}),
        Type::Option(o) => {
            let inner = o.ty();
            if matches!(inner, Type::Option(_)) {
                return Err(unsupported(
                    "option<option<_>>",
                    at,
                    "JSON null cannot tell the two levels of none apart",
                ));
            }
            json!({"anyOf": [{"type": "null"}, type_schema(&inner, at)?]})
        }
        Type::Result(r) => {
            let ok = match r.ok() {
                Some(t) => type_schema(&t, &format!("{at}.ok"))?,
                None => json!({"type": "null"}),
            };
            let err = match r.err() {
                Some(t) => type_schema(&t, &format!("{at}.err"))?,
                None => json!({"type": "null"}),
            };
            json!({"oneOf": [single_key("ok", ok), single_key("err", err)]})
        }
        Type::Flags(f) => json!({
            "type": "array",
            "items": {"enum": f.names().collect::<Vec<_>>()},
            "uniqueItems": true,
        }),
        Type::Map(_) => {
            return Err(unsupported(
                "map",
                at,
                "maps are not supported yet; use list<tuple<K, V>>",
            ))
        }
        Type::Own(_) | Type::Borrow(_) => {
            return Err(unsupported(
                "a resource",
                at,
                "resources live in the guest and cannot cross a JSON boundary",
            ))
        }
        Type::Future(_) => {
            return Err(unsupported(
                "a future",
                at,
                "tool calls are request/response; futures cannot be expressed",
            ))
        }
        Type::Stream(_) => {
            return Err(unsupported(
                "a stream",
                at,
                "tool calls are request/response; streams cannot be expressed",
            ))
        }
        Type::ErrorContext => {
            return Err(unsupported(
                "an error-context",
                at,
                "error contexts cannot be expressed in JSON",
            ))
        }
    })
}

fn single_key(key: &str, schema: Value) -> Value {
    json!({
        "type": "object",
        "properties": {key: schema},
        "required": [key],
        "additionalProperties": false,
    })
}
