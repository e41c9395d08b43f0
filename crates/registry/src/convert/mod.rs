//! JSON ↔ component values, strictly: no silent coercion, no lossy integers, every range
//! checked. The shapes are the ones [`super::schema`] advertises.
//!
//! | WIT | JSON |
//! |---|---|
//! | integers | integers written as integers, in range (`3`, `-7`; not `3.0`, `1e2`: see [`exact_integer`]) |
//! | floats | numbers (NaN and infinities cannot be returned: JSON has none) |
//! | `char` | a string of exactly one Unicode scalar |
//! | `list<T>`, `tuple<..>` | arrays (tuples of exactly their length) |
//! | `record` | an object with exactly the record's fields |
//! | `variant` | `"case"` without a payload, `{"case": payload}` with one |
//! | `enum` | `"case"` |
//! | `option<T>` | `null` or `T` |
//! | `result<T, E>` | `{"ok": T}` or `{"err": E}` (`null` for a missing payload) |
//! | `flags` | an array of distinct flag names |

mod back;

pub use back::{json_size_lower_bound, to_json, Unrepresentable};

use serde_json::{Number, Value};
use wasmtime::component::types::Type;
use wasmtime::component::Val;

/// Why a JSON value does not fit a WIT type. `at` is a JSON path; the message is model-safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {expected}")]
pub struct Mismatch {
    pub at: String,
    pub expected: String,
}

fn mismatch(at: &At<'_>, expected: impl Into<String>) -> Mismatch {
    Mismatch {
        at: at.to_string(),
        expected: expected.into(),
    }
}

/// Where a conversion is inside a value: a path written out only when an error names it
/// (building it for every element cost more than the conversion itself).
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    Root(&'a str),
    /// `{parent}/{index}`
    Index(&'a At<'a>, usize),
    /// `{parent}/{key}`
    Key(&'a At<'a>, &'a str),
    /// `{parent}.{field}` (a record field of a returned value)
    Field(&'a At<'a>, &'a str),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Root(s) => f.write_str(s),
            At::Index(parent, i) => write!(f, "{parent}/{i}"),
            At::Key(parent, k) => write!(f, "{parent}/{k}"),
            At::Field(parent, k) => write!(f, "{parent}.{k}"),
        }
    }
}

/// The exact value of a JSON number written as an integer, or `None`.
///
/// The rule for every integer WIT type: only a JSON integer, a number written without a
/// fraction or exponent (`3`, `-7`), counts. serde_json (built without `arbitrary_precision`)
/// holds such a literal exactly as an `i64` or `u64`; anything else it holds as an `f64`, which
/// may already be rounded — `9007199254740993.0` arrives as `9007199254740992.0`, and
/// `18446744073709551616` (one past `u64::MAX`) or `-9223372036854775809` arrive as floats that
/// look like integers. No float can tell us what was written, so none is accepted: `3.0`,
/// `1e2` and `-0` are refused too (write `3`, `100`, `0`). The same rule holds in the JSON
/// Schema stage ([`super::validate::Validator::compile_arguments`]).
pub fn exact_integer(n: &Number) -> Option<i128> {
    match n.as_i64() {
        Some(i) => Some(i128::from(i)),
        None => n.as_u64().map(i128::from),
    }
}

/// `f`, with −0 made +0. The approval digest's canonical JSON writes −0 as `0`, so a call
/// approved for `0` must not run with −0 (nor one approved for −0 with a different value).
fn positive_zero(f: f64) -> f64 {
    if f == 0.0 {
        0.0
    } else {
        f
    }
}

fn integer(v: &Value, at: &At<'_>, min: i128, max: i128) -> Result<i128, Mismatch> {
    let expected = || {
        format!("expected an integer from {min} to {max}, written without a fraction or exponent")
    };
    let i = match v {
        Value::Number(n) => exact_integer(n).ok_or_else(|| mismatch(at, expected()))?,
        _ => return Err(mismatch(at, expected())),
    };
    if i < min || i > max {
        return Err(mismatch(at, expected()));
    }
    Ok(i)
}

/// Every item of a JSON array as a value of type `ty`, into a list allocated once.
fn vals(ty: &Type, items: &[Value], at: &At<'_>) -> Result<Vec<Val>, Mismatch> {
    let mut out = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        out.push(val(ty, x, &At::Index(at, i))?);
    }
    Ok(out)
}

/// Convert a JSON value to a component value of type `ty`; errors name their place from `at`.
pub fn to_val(ty: &Type, v: &Value, at: &str) -> Result<Val, Mismatch> {
    val(ty, v, &At::Root(at))
}

fn val(ty: &Type, v: &Value, at: &At<'_>) -> Result<Val, Mismatch> {
    Ok(match ty {
        Type::Bool => Val::Bool(
            v.as_bool()
                .ok_or_else(|| mismatch(at, "expected true or false"))?,
        ),
        Type::S8 => Val::S8(integer(v, at, i8::MIN.into(), i8::MAX.into())? as i8),
        Type::U8 => Val::U8(integer(v, at, 0, u8::MAX.into())? as u8),
        Type::S16 => Val::S16(integer(v, at, i16::MIN.into(), i16::MAX.into())? as i16),
        Type::U16 => Val::U16(integer(v, at, 0, u16::MAX.into())? as u16),
        Type::S32 => Val::S32(integer(v, at, i32::MIN.into(), i32::MAX.into())? as i32),
        Type::U32 => Val::U32(integer(v, at, 0, u32::MAX.into())? as u32),
        Type::S64 => Val::S64(integer(v, at, i64::MIN.into(), i64::MAX.into())? as i64),
        Type::U64 => Val::U64(integer(v, at, 0, u64::MAX.into())? as u64),
        Type::Float32 => {
            let f = v
                .as_f64()
                .ok_or_else(|| mismatch(at, "expected a number"))?;
            if f.abs() > f64::from(f32::MAX) {
                return Err(mismatch(
                    at,
                    "expected a number within the 32-bit float range",
                ));
            }
            Val::Float32(positive_zero(f) as f32)
        }
        Type::Float64 => Val::Float64(positive_zero(
            v.as_f64()
                .ok_or_else(|| mismatch(at, "expected a number"))?,
        )),
        Type::Char => {
            let s = v
                .as_str()
                .ok_or_else(|| mismatch(at, "expected a one-character string"))?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(mismatch(at, "expected a one-character string")),
            }
        }
        Type::String => Val::String(
            v.as_str()
                .ok_or_else(|| mismatch(at, "expected a string"))?
                .to_string(),
        ),
        Type::List(l) => {
            let items = v
                .as_array()
                .ok_or_else(|| mismatch(at, "expected an array"))?;
            let ty = l.ty();
            Val::List(vals(&ty, items, at)?)
        }
        Type::FixedLengthList(l) => {
            let items = v
                .as_array()
                .ok_or_else(|| mismatch(at, "expected an array"))?;
            if items.len() != l.len() as usize {
                return Err(mismatch(
                    at,
                    format!("expected an array of exactly {} items", l.len()),
                ));
            }
            let ty = l.ty();
            Val::FixedLengthList(vals(&ty, items, at)?)
        }
        Type::Record(r) => {
            let obj = v
                .as_object()
                .ok_or_else(|| mismatch(at, "expected an object"))?;
            let mut fields = Vec::with_capacity(r.fields().len());
            for f in r.fields() {
                let x = obj
                    .get(f.name)
                    .ok_or_else(|| mismatch(at, format!("missing field {:?}", f.name)))?;
                fields.push((f.name.to_string(), val(&f.ty, x, &At::Key(at, f.name))?));
            }
            // Every field was found and the object's keys are distinct, so it has another key
            // exactly when it has more keys than fields (only then is the extra one looked up).
            if obj.len() > fields.len() {
                let extra = obj
                    .keys()
                    .find(|k| !fields.iter().any(|(name, _)| name == *k))
                    .map_or_else(String::new, |k| format!(" {k:?}"));
                return Err(mismatch(at, format!("unexpected field{extra}")));
            }
            Val::Record(fields)
        }
        Type::Tuple(t) => {
            let items = v
                .as_array()
                .ok_or_else(|| mismatch(at, "expected an array"))?;
            if items.len() != t.types().len() {
                return Err(mismatch(
                    at,
                    format!("expected an array of exactly {} items", t.types().len()),
                ));
            }
            Val::Tuple(
                t.types()
                    .zip(items)
                    .enumerate()
                    .map(|(i, (ty, x))| val(&ty, x, &At::Index(at, i)))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Variant(var) => {
            let names = || {
                var.cases()
                    .map(|c| format!("{:?}", c.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let (name, payload) = case_of(v).ok_or_else(|| {
                mismatch(
                    at,
                    format!(
                        "expected one of {} (as \"case\" or {{\"case\": value}})",
                        names()
                    ),
                )
            })?;
            let case = var.cases().find(|c| c.name == name).ok_or_else(|| {
                mismatch(
                    at,
                    format!("unknown case {name:?}; expected one of {}", names()),
                )
            })?;
            match (&case.ty, payload) {
                (None, None) => Val::Variant(name.to_string(), None),
                (Some(ty), Some(p)) => Val::Variant(
                    name.to_string(),
                    Some(Box::new(val(ty, p, &At::Key(at, name))?)),
                ),
                (None, Some(_)) => {
                    return Err(mismatch(
                        at,
                        format!("case {name:?} takes no value; write \"{name}\""),
                    ))
                }
                (Some(_), None) => {
                    return Err(mismatch(
                        at,
                        format!("case {name:?} needs a value; write {{\"{name}\": value}}"),
                    ))
                }
            }
        }
        Type::Enum(e) => {
            let s = v.as_str();
            match s.and_then(|s| e.names().find(|n| *n == s)) {
                Some(n) => Val::Enum(n.to_string()),
                None => {
                    let names: Vec<String> = e.names().map(|n| format!("{n:?}")).collect();
                    return Err(mismatch(
                        at,
                        format!("expected one of {}", names.join(", ")),
                    ));
                }
            }
        }
        Type::Option(o) => match v {
            Value::Null => Val::Option(None),
            x => Val::Option(Some(Box::new(val(&o.ty(), x, at)?))),
        },
        Type::Result(r) => {
            let obj = v
                .as_object()
                .filter(|o| o.len() == 1)
                .ok_or_else(|| mismatch(at, "expected {\"ok\": value} or {\"err\": value}"))?;
            let (k, x) = obj.iter().next().expect("one entry");
            let payload = |ty: Option<Type>, key: &str| -> Result<Option<Box<Val>>, Mismatch> {
                match ty {
                    Some(ty) => Ok(Some(Box::new(val(&ty, x, &At::Key(at, key))?))),
                    None if x.is_null() => Ok(None),
                    None => Err(mismatch(&At::Key(at, key), "expected null")),
                }
            };
            match k.as_str() {
                "ok" => Val::Result(Ok(payload(r.ok(), "ok")?)),
                "err" => Val::Result(Err(payload(r.err(), "err")?)),
                _ => return Err(mismatch(at, "expected {\"ok\": value} or {\"err\": value}")),
            }
        }
        Type::Flags(f) => {
            let items = v
                .as_array()
                .ok_or_else(|| mismatch(at, "expected an array of flag names"))?;
            let mut out: Vec<String> = Vec::new();
            for (i, x) in items.iter().enumerate() {
                let name = x
                    .as_str()
                    .and_then(|s| f.names().find(|n| *n == s))
                    .ok_or_else(|| mismatch(&At::Index(at, i), "expected a flag name"))?;
                if out.iter().any(|o| o == name) {
                    return Err(mismatch(
                        &At::Index(at, i),
                        format!("flag {name:?} is repeated"),
                    ));
                }
                out.push(name.to_string());
            }
            Val::Flags(out)
        }
        Type::Map(_)
        | Type::Own(_)
        | Type::Borrow(_)
        | Type::Future(_)
        | Type::Stream(_)
        | Type::ErrorContext => return Err(mismatch(at, "this type cannot be passed as JSON")),
    })
}

/// `"case"` or `{"case": payload}`.
fn case_of(v: &Value) -> Option<(&str, Option<&Value>)> {
    match v {
        Value::String(s) => Some((s.as_str(), None)),
        Value::Object(o) if o.len() == 1 => o.iter().next().map(|(k, x)| (k.as_str(), Some(x))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// Integers written as integers convert exactly, up to the extremes of s64 and u64.
    #[test]
    fn integer_literals_convert_exactly() {
        let cases = [
            (
                Type::U64,
                "9007199254740993",
                Val::U64(9_007_199_254_740_993),
            ),
            (Type::U64, "18446744073709551615", Val::U64(u64::MAX)),
            (Type::S64, "-9223372036854775808", Val::S64(i64::MIN)),
            (
                Type::S64,
                "9007199254740993",
                Val::S64(9_007_199_254_740_993),
            ),
            (Type::U8, "255", Val::U8(255)),
            (Type::S8, "-128", Val::S8(-128)),
            (Type::U32, "0", Val::U32(0)),
        ];
        for (ty, text, want) in cases {
            assert_eq!(to_val(&ty, &parse(text), "/n"), Ok(want), "{text}");
        }
    }

    /// `-0`, `-0.0` and `-0e3` reach a float parameter as +0: the approval digest's canonical
    /// JSON writes −0 as 0, so the guest receives exactly the value an approval bound.
    #[test]
    fn negative_zero_reaches_a_float_as_zero() {
        for text in ["-0", "-0.0", "-0e3", "0"] {
            for ty in [Type::Float64, Type::Float32] {
                match to_val(&ty, &parse(text), "/x").unwrap() {
                    Val::Float64(f) => assert!(f == 0.0 && f.is_sign_positive(), "{text}"),
                    Val::Float32(f) => assert!(f == 0.0 && f.is_sign_positive(), "{text}"),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(
            to_val(&Type::Float64, &parse("-1.5"), "/x"),
            Ok(Val::Float64(-1.5))
        );
    }

    /// No number written with a fraction or an exponent, and no literal past the 64-bit range,
    /// reaches an integer type — rounded or otherwise.
    #[test]
    fn floats_and_out_of_range_literals_are_refused() {
        let refused = [
            (Type::U64, "9007199254740993.0"),
            (Type::U64, "9007199254740992.0"),
            (Type::U64, "1e19"),
            (Type::U64, "1.0e2"),
            (Type::U64, "1E2"),
            (Type::U64, "18446744073709551616"),
            (Type::U64, "-1"),
            (Type::S64, "-9223372036854775809"),
            (Type::S64, "9223372036854775808"),
            (Type::S64, "-0"),
            (Type::S64, "9.3e18"),
            (Type::U32, "3.0"),
            (Type::U8, "256"),
            (Type::U8, "255.0"),
            (Type::S16, "1.5"),
        ];
        for (ty, text) in refused {
            let err = to_val(&ty, &parse(text), "/n").unwrap_err();
            assert_eq!(err.at, "/n", "{text}");
            assert!(
                err.expected.contains("without a fraction or exponent"),
                "{text}: {err}"
            );
        }
    }

    /// serde_json is built without `arbitrary_precision`: a literal past `u64` is held as a
    /// float (so [`exact_integer`] refuses it), and a float's text is not kept.
    #[test]
    fn serde_json_has_no_arbitrary_precision() {
        let Value::Number(past) = parse("18446744073709551616") else {
            panic!("not a number")
        };
        assert!(past.is_f64());
        assert_eq!(exact_integer(&past), None);
        assert_eq!(parse("1.000").to_string(), "1.0");
    }

    /// 64-bit results leave the host exactly: no float on the way out either.
    #[test]
    fn wide_integer_results_are_exact_json() {
        let v = Val::List(vec![
            Val::U64(u64::MAX),
            Val::U64(9_007_199_254_740_993),
            Val::S64(i64::MIN),
        ]);
        let json = to_json(v, "output").unwrap();
        assert_eq!(
            serde_json::to_string(&json).unwrap(),
            "[18446744073709551615,9007199254740993,-9223372036854775808]"
        );
    }
}
