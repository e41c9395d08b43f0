//! Component values back to JSON: the output direction of [`super`], and a bound on a value's
//! JSON size computed before converting it.

use serde_json::{Map, Number, Value};
use wasmtime::component::Val;

use super::At;

/// Why a returned value cannot be shown as JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {why}")]
pub struct Unrepresentable {
    pub at: String,
    pub why: &'static str,
}

fn float(f: f64, at: &At<'_>) -> Result<Value, Unrepresentable> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| Unrepresentable {
            at: at.to_string(),
            why: "NaN and infinities have no JSON form",
        })
}

/// Convert a component value back to JSON; errors name their place from `at`. The value is
/// consumed: its strings and field names move into the JSON, none is copied.
pub fn to_json(v: Val, at: &str) -> Result<Value, Unrepresentable> {
    json(v, &At::Root(at))
}

fn json(v: Val, at: &At<'_>) -> Result<Value, Unrepresentable> {
    Ok(match v {
        Val::Bool(b) => Value::Bool(b),
        Val::S8(i) => Value::from(i),
        Val::U8(i) => Value::from(i),
        Val::S16(i) => Value::from(i),
        Val::U16(i) => Value::from(i),
        Val::S32(i) => Value::from(i),
        Val::U32(i) => Value::from(i),
        Val::S64(i) => Value::from(i),
        Val::U64(i) => Value::from(i),
        Val::Float32(f) => float(f64::from(f), at)?,
        Val::Float64(f) => float(f, at)?,
        Val::Char(c) => Value::String(c.to_string()),
        Val::String(s) => Value::String(s),
        Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, x)| json(x, &At::Index(at, i)))
                .collect::<Result<_, _>>()?,
        ),
        Val::Record(fields) => {
            let mut m = Map::new();
            for (k, x) in fields {
                let value = json(x, &At::Field(at, &k))?;
                m.insert(k, value);
            }
            Value::Object(m)
        }
        Val::Variant(name, None) | Val::Enum(name) => Value::String(name),
        Val::Variant(name, Some(p)) => {
            let value = json(*p, &At::Key(at, &name))?;
            let mut m = Map::new();
            m.insert(name, value);
            Value::Object(m)
        }
        Val::Option(None) => Value::Null,
        Val::Option(Some(x)) => json(*x, at)?,
        Val::Result(r) => {
            let (key, payload) = match r {
                Ok(p) => ("ok", p),
                Err(p) => ("err", p),
            };
            let inner = match payload {
                Some(p) => json(*p, &At::Key(at, key))?,
                None => Value::Null,
            };
            let mut m = Map::new();
            m.insert(key.to_string(), inner);
            Value::Object(m)
        }
        Val::Flags(names) => Value::Array(names.into_iter().map(Value::String).collect()),
        Val::Map(_) | Val::Resource(_) | Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) => {
            return Err(Unrepresentable {
                at: at.to_string(),
                why: "this type has no JSON form",
            })
        }
    })
}

/// A lower bound on the size of `v` as JSON, computed without allocating, so an oversized
/// result is refused before the host copies it again.
pub fn json_size_lower_bound(v: &Val) -> u64 {
    match v {
        Val::String(s) => s.len() as u64 + 2,
        Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => {
            2 + items.iter().map(json_size_lower_bound).sum::<u64>()
        }
        Val::Record(fields) => {
            2 + fields
                .iter()
                .map(|(k, x)| k.len() as u64 + 3 + json_size_lower_bound(x))
                .sum::<u64>()
        }
        Val::Variant(name, p) => {
            name.len() as u64 + 2 + p.as_deref().map_or(0, json_size_lower_bound)
        }
        Val::Enum(name) => name.len() as u64 + 2,
        Val::Option(Some(x)) => json_size_lower_bound(x),
        Val::Result(Ok(Some(x)) | Err(Some(x))) => json_size_lower_bound(x),
        Val::Flags(names) => 2 + names.iter().map(|n| n.len() as u64 + 2).sum::<u64>(),
        _ => 1,
    }
}
