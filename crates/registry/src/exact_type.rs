//! The `type` keyword of argument schemas, with exact integers.
//!
//! Draft 2020-12 counts any number with a zero fractional part as an `"integer"`, and serde_json
//! holds a number written with a fraction or an exponent as an `f64` — already rounded past
//! 2^53 (`9007199254740993.0` arrives as `9007199254740992.0`). So in the schemas the host
//! checks tool *arguments* against, `"integer"` holds only for a number written as an integer
//! ([`convert::exact_integer`]); every other type name means what the draft says. Output
//! schemas and the advertised schemas are unchanged: what a client reads is standard JSON
//! Schema, and the host only refuses more.

use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

use super::convert;

/// The seven type names of Draft 2020-12.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    String,
    Integer,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "object" => Kind::Object,
            "array" => Kind::Array,
            "number" => Kind::Number,
            "string" => Kind::String,
            "integer" => Kind::Integer,
            _ => return None,
        })
    }

    fn holds(self, v: &Value) -> bool {
        match (self, v) {
            (Kind::Null, Value::Null)
            | (Kind::Boolean, Value::Bool(_))
            | (Kind::Object, Value::Object(_))
            | (Kind::Array, Value::Array(_))
            | (Kind::Number, Value::Number(_))
            | (Kind::String, Value::String(_)) => true,
            (Kind::Integer, Value::Number(n)) => convert::exact_integer(n).is_some(),
            _ => false,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Object => "object",
            Kind::Array => "array",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Integer => "integer",
        }
    }
}

/// One compiled `type`: the value is valid when any of `kinds` holds.
struct ExactType {
    kinds: Vec<Kind>,
}

impl ExactType {
    /// Why `v` is not valid: the draft's wording, plus how to write an integer when a number
    /// was refused only for being written as a float.
    fn explain(&self, v: &Value) -> String {
        let names: Vec<String> = self
            .kinds
            .iter()
            .map(|k| format!("\"{}\"", k.name()))
            .collect();
        let mut message = format!("is not of type {}", names.join(" or "));
        if v.is_number() && self.kinds.contains(&Kind::Integer) {
            message.push_str(
                " (integers are written without a fraction or exponent, from \
                 -9223372036854775808 to 18446744073709551615)",
            );
        }
        message
    }
}

impl<'i> Keyword<'i> for ExactType {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(ValidationError::custom(self.explain(instance)))
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.kinds.iter().any(|k| k.holds(instance))
    }
}

/// The factory [`super::validate`] registers for `type` in argument validators. The schema was
/// checked against the meta-schema first, so a malformed `type` only gets a plain error.
pub(super) fn factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _path: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let kinds: Option<Vec<Kind>> = match value {
        Value::String(s) => Kind::parse(s).map(|k| vec![k]),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().and_then(Kind::parse))
            .collect(),
        _ => None,
    };
    match kinds {
        Some(kinds) if !kinds.is_empty() => Ok(Box::new(ExactType { kinds })),
        _ => Err(ValidationError::schema(
            "`type` must be a type name or a non-empty array of type names",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::validate::Validator;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn args(n: &str) -> Value {
        parse(&format!("{{\"n\": {n}}}"))
    }

    fn u64_schema() -> Value {
        json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 0, "maximum": u64::MAX}}})
    }

    /// In argument schemas `integer` holds only for integer literals: floats, exponents and
    /// literals past the 64-bit range are violations that name the argument.
    #[test]
    fn argument_integers_are_exact() {
        let v = Validator::compile_arguments(&u64_schema()).unwrap();
        for ok in ["9007199254740993", "18446744073709551615", "0"] {
            assert_eq!(v.validate(&args(ok)), Ok(()), "{ok}");
        }
        for bad in [
            "9007199254740993.0",
            "1e19",
            "1.0e2",
            "3.0",
            "-0",
            "18446744073709551616",
        ] {
            let violations = v.validate(&args(bad)).unwrap_err();
            assert!(!v.is_valid(&args(bad)), "{bad}");
            let typed = violations
                .iter()
                .find(|x| x.message.contains("without a fraction or exponent"))
                .unwrap_or_else(|| panic!("{bad}: {violations:?}"));
            assert_eq!(typed.instance_path, "/n", "{bad}");
        }
        let s64 = json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX});
        let v = Validator::compile_arguments(&s64).unwrap();
        assert!(v.is_valid(&parse("-9223372036854775808")));
        assert!(!v.is_valid(&parse("-9223372036854775809")));
    }

    /// Every other type name keeps its meaning, in type arrays and nested subschemas too; a
    /// plain validator (outputs, the test suite) keeps the draft's `integer`.
    #[test]
    fn other_types_and_nesting() {
        let v = Validator::compile_arguments(&json!({
            "type": "object",
            "properties": {
                "n": {"type": ["integer", "null"]},
                "f": {"type": "number"},
                "l": {"type": "array", "items": {"type": "integer"}},
                "o": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                "a": {"allOf": [{"type": "integer"}]}
            }
        }))
        .unwrap();
        assert!(v.is_valid(&json!({"n": null, "f": 3.0, "l": [1, 2], "o": "x", "a": 7})));
        for bad in [
            json!({"n": 1.0}),
            json!({"l": [1, 2.0]}),
            json!({"o": 1.0}),
            json!({"a": 7.0}),
            json!({"f": "3"}),
        ] {
            assert!(!v.is_valid(&bad), "{bad}");
        }
        let plain = Validator::compile(&json!({"type": "integer"})).unwrap();
        assert!(plain.is_valid(&json!(3.0)));
    }

    /// The schema stage compares integers past 2^53 exactly (an operator's `maximum`, `enum`
    /// or `multipleOf` is never checked against a rounded value).
    #[test]
    fn wide_integer_keywords_are_exact() {
        let max =
            Validator::compile_arguments(&json!({"maximum": 9_007_199_254_740_992u64})).unwrap();
        assert!(max.is_valid(&parse("9007199254740992")));
        assert!(!max.is_valid(&parse("9007199254740993")));
        let one =
            Validator::compile_arguments(&json!({"enum": [9_007_199_254_740_993u64]})).unwrap();
        assert!(one.is_valid(&parse("9007199254740993")));
        assert!(!one.is_valid(&parse("9007199254740992")));
        let even = Validator::compile_arguments(&json!({"multipleOf": 2})).unwrap();
        assert!(!even.is_valid(&parse("9007199254740993")));
    }
}
