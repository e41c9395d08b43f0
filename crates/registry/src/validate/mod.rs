//! JSON Schema (Draft 2020-12) validation of tool arguments and outputs, and operator refinements.
//!
//! # One configuration
//!
//! Every schema the host checks values against is compiled by [`Validator::compile`], always with
//! the same configuration:
//!
//! - **Draft 2020-12, forced.** The schema must itself be valid against the Draft 2020-12
//!   meta-schema (checked first, so the error names the offending location). A top-level
//!   `$schema` other than `https://json-schema.org/draft/2020-12/schema` is refused rather than
//!   honoured. (An embedded resource with its own `$id` and `$schema` is resolved by the engine
//!   like any embedded resource; derived schemas and refinements never contain one.)
//! - **Formats are assertions**, not annotations: `{"format": "email"}` rejects `"not-an-email"`,
//!   `{"format": "date"}` rejects `"2024-13-45"`. A format the engine does not know is refused at
//!   compile time (as the 2020-12 format-assertion vocabulary requires), so a typo such as
//!   `"emial"` cannot silently constrain nothing.
//! - **No retrieval.** Every `$ref` that is not resolvable inside the schema document itself is
//!   refused at compile time by a retriever that always fails: no HTTP, no file system. Such a
//!   schema never compiles, so it can never "fail open" at call time.
//! - **A bounded regex engine** for `pattern` / `patternProperties`: `fancy-regex` (ECMA-like
//!   features such as look-around) with a backtrack limit ([`REGEX_BACKTRACK_LIMIT`]) and size
//!   limits ([`REGEX_SIZE_LIMIT`], [`REGEX_DFA_SIZE_LIMIT`]). Patterns without look-around or
//!   back-references run on the linear-time `regex` engine; the others stop at the backtrack
//!   limit. A match the engine could not finish fails closed: the value is reported as a
//!   violation unless the result would be the same whichever way the match went.
//!
//!
//! # Layout
//!
//! - this file: the one configuration ([`Validator`]) and the schema checks it runs first;
//! - `messages.rs`: model-safe violations (what a refused value is told);
//! - `refine.rs`: operator refinements, which only narrow.
//!
//! Longer than 500 lines: 200 of them are its unit tests, kept beside the code they test (the code is 347 lines).

mod messages;
mod refine;

use std::fmt;
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{PatternOptions, ReferencingError, Retrieve, Uri, ValidationError};
use serde::Serialize;
use serde_json::Value;

use super::schema::DRAFT_2020_12;

/// Most violations [`Validator::validate`] reports for one value; further ones are dropped.
use messages::{describe, plural, preview, truncate, violation};
pub use refine::refine;

pub const MAX_VIOLATIONS: usize = 8;
/// Longest [`Violation::message`], in bytes (cut at a character boundary, ending in `…`).
pub const MAX_MESSAGE_BYTES: usize = 256;
/// Longest [`Violation::instance_path`], in bytes (cut at a character boundary, ending in `…`).
pub const MAX_INSTANCE_PATH_BYTES: usize = 256;
/// Longest rendering of one JSON value (the offending value, an enum option, a pattern) inside a
/// message, in bytes.
pub const MAX_VALUE_PREVIEW_BYTES: usize = 64;
/// Most items of a list (enum options, unexpected property names) shown in a message.
pub const MAX_LISTED_ITEMS: usize = 4;
/// Longest detail in a [`SchemaError`] (operator-facing, but still bounded), in bytes.
pub const MAX_SCHEMA_ERROR_BYTES: usize = 512;
/// Backtracking steps one `fancy-regex` match may take before it is abandoned (and the value
/// fails closed). The engine's own default is 1 000 000.
pub const REGEX_BACKTRACK_LIMIT: usize = 100_000;
/// Approximate size limit of one compiled regex, in bytes (large enough for Unicode classes).
pub const REGEX_SIZE_LIMIT: usize = 8 << 20;
/// Approximate size limit of one regex's lazy-DFA transition cache, in bytes.
pub const REGEX_DFA_SIZE_LIMIT: usize = 4 << 20;

/// The `$id` given to a composed part that needs its own resource (see the module docs).
const DERIVED_ID: &str = "urn:toolhost:derived";
/// The `$id` given to a refinement that needs its own resource (see the module docs).
const REFINEMENT_ID: &str = "urn:toolhost:refinement";

/// Why a schema or a refinement was refused. For operators and tool authors (it names the
/// location in the schema); never shown to a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The document does not validate against the Draft 2020-12 meta-schema.
    #[error("{what} is not a valid JSON Schema (Draft 2020-12){}: {message}", at(.pointer))]
    Invalid {
        /// `schema`, `refinement` or `refined schema`.
        what: &'static str,
        /// JSON pointer into the document (empty for the root).
        pointer: String,
        message: String,
    },
    /// A top-level `$schema` names another dialect.
    #[error("{what} declares `$schema: {declared}`; only Draft 2020-12 (`{DRAFT_2020_12}`) is supported")]
    UnsupportedDraft {
        what: &'static str,
        declared: String,
    },
    /// A `$ref` that is not a local fragment, or one the engine would have had to fetch.
    #[error("{what} refers to `{reference}`{}: remote and file references are refused (only local `#...` fragments are allowed)", at(.pointer))]
    ExternalRef {
        what: &'static str,
        reference: String,
        /// Where the reference is, when known (JSON pointer; empty when unknown).
        pointer: String,
    },
    /// A refinement declares `$id`.
    #[error("refinement declares `$id`{}: a refinement cannot declare its own schema resource (remove `$id`)", at(.pointer))]
    IdInRefinement { pointer: String },
    /// The refinement is neither an object nor a boolean.
    #[error("refinement must be a JSON Schema object (or boolean), not {found}")]
    RefinementNotASchema { found: &'static str },
    /// The engine refused the schema (an unresolvable local `$ref`, an invalid regex, an unknown
    /// `format`, ...).
    #[error("{what} cannot be compiled: {message}")]
    Compile { what: &'static str, message: String },
}

/// ` at `<pointer>`` for a known location, nothing for the root or an unknown one.
fn at(pointer: &str) -> String {
    if pointer.is_empty() {
        String::new()
    } else {
        format!(" at `{pointer}`")
    }
}

/// One reason a value does not match a schema. Safe to show a model (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` for the value itself), at most
    /// [`MAX_INSTANCE_PATH_BYTES`].
    pub instance_path: String,
    /// What is wrong, at most [`MAX_MESSAGE_BYTES`]; does not repeat the path.
    pub message: String,
}

/// `"/from: \"parsec\" is not one of [...]"`; the root is shown as `(root)`.
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() {
            "(root)"
        } else {
            &self.instance_path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// A compiled Draft 2020-12 schema (see the module docs for its fixed configuration). Cloning is
/// cheap (shared); it is `Send + Sync`.
#[derive(Clone)]
pub struct Validator {
    inner: Arc<Compiled>,
}

struct Compiled {
    schema: Value,
    validator: jsonschema::Validator,
}

const _: fn() = || {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<Validator>();
};

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validator").finish_non_exhaustive()
    }
}

impl Validator {
    /// Compile `schema` with the host's one configuration: Draft 2020-12 forced (the schema is
    /// checked against the meta-schema first), formats asserted, unknown formats refused, every
    /// external `$ref` refused, bounded regexes.
    pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
        compile_as("schema", schema)
    }

    /// [`Validator::compile`] for tool arguments: the same configuration, except that
    /// `"type": "integer"` holds only for a number written as an integer (`3`, not `3.0` or
    /// `1e2`), the rule [`super::convert::exact_integer`] states — so no rounded number passes
    /// this stage either (see [`super::exact_type`]).
    pub fn compile_arguments(schema: &Value) -> Result<Validator, SchemaError> {
        compile_with("schema", schema, Integers::Exact)
    }

    /// Check `instance`. `Err` holds 1 to [`MAX_VIOLATIONS`] model-safe violations.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        let validator = &self.inner.validator;
        // Fast path, and the verdict: `iter_errors` only explains it.
        if validator.is_valid(instance) {
            return Ok(());
        }
        let violations: Vec<Violation> = validator
            .iter_errors(instance)
            .take(MAX_VIOLATIONS)
            .map(|error| violation(&error))
            .collect();
        if violations.is_empty() {
            // Never accept what `is_valid` refused, even if no error explains it.
            return Err(vec![Violation {
                instance_path: String::new(),
                message: "value could not be validated".into(),
            }]);
        }
        Err(violations)
    }

    /// Whether `instance` is valid (same verdict as [`Self::validate`], without messages).
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.inner.validator.is_valid(instance)
    }

    /// The schema this validator was compiled from.
    pub fn schema(&self) -> &Value {
        &self.inner.schema
    }
}

/// Refuse a top-level `$schema` that is not Draft 2020-12.
fn check_draft(what: &'static str, schema: &Value) -> Result<(), SchemaError> {
    match schema.as_object().and_then(|m| m.get("$schema")) {
        None => Ok(()),
        Some(Value::String(s)) if s.trim_end_matches('#') == DRAFT_2020_12 => Ok(()),
        Some(other) => Err(SchemaError::UnsupportedDraft {
            what,
            declared: preview(other),
        }),
    }
}

/// Validate `schema` against the Draft 2020-12 meta-schema.
fn meta_check(what: &'static str, schema: &Value) -> Result<(), SchemaError> {
    let meta = jsonschema::draft202012::meta::validator();
    if meta.is_valid(schema) {
        return Ok(());
    }
    let mut errors = meta.iter_errors(schema);
    let (pointer, mut message) = match errors.next() {
        Some(error) => (
            truncate(
                error.instance_path().as_str().to_owned(),
                MAX_SCHEMA_ERROR_BYTES,
            ),
            describe(&error),
        ),
        None => (String::new(), "does not match the meta-schema".to_owned()),
    };
    let more = errors.count();
    if more > 0 {
        message.push_str(&format!(" (and {more} more problem{})", plural(more)));
    }
    Err(SchemaError::Invalid {
        what,
        pointer,
        message,
    })
}

/// What `"type": "integer"` holds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Integers {
    /// As Draft 2020-12 says: any number with a zero fractional part (`3.0` too).
    AsDraft,
    /// Only a number written as an integer ([`super::exact_type`]).
    Exact,
}

fn compile_as(what: &'static str, schema: &Value) -> Result<Validator, SchemaError> {
    compile_with(what, schema, Integers::AsDraft)
}

fn compile_with(
    what: &'static str,
    schema: &Value,
    integers: Integers,
) -> Result<Validator, SchemaError> {
    check_draft(what, schema)?;
    meta_check(what, schema)?;
    let mut options = jsonschema::draft202012::options();
    if integers == Integers::Exact {
        options = options.with_keyword("type", super::exact_type::factory);
    }
    let validator = options
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false)
        .with_retriever(RefuseRetrieval)
        .with_pattern_options(
            PatternOptions::fancy_regex()
                .backtrack_limit(REGEX_BACKTRACK_LIMIT)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_DFA_SIZE_LIMIT),
        )
        .build(schema)
        .map_err(|error| compile_error(what, &error))?;
    Ok(Validator {
        inner: Arc::new(Compiled {
            schema: schema.clone(),
            validator,
        }),
    })
}

fn compile_error(what: &'static str, error: &ValidationError<'_>) -> SchemaError {
    if let ValidationErrorKind::Referencing(ReferencingError::Unretrievable { uri, .. }) =
        error.kind()
    {
        return SchemaError::ExternalRef {
            what,
            reference: truncate(uri.clone(), MAX_SCHEMA_ERROR_BYTES),
            pointer: String::new(),
        };
    }
    let pointer = error.schema_path().as_str();
    let mut message = error.to_string();
    // The engine's advice for unknown formats ("Adjust configuration to ignore ...") does not
    // apply: the host's configuration is fixed.
    if let Some(head) = message.strip_suffix(UNKNOWN_FORMAT_ADVICE) {
        message = format!("{head}: formats are asserted, so only known format names are allowed");
    }
    if !pointer.is_empty() {
        message = format!("{message} (at `{pointer}`)");
    }
    SchemaError::Compile {
        what,
        message: truncate(message, MAX_SCHEMA_ERROR_BYTES),
    }
}

/// The tail of the engine's message for an unknown `format`, replaced in [`compile_error`].
const UNKNOWN_FORMAT_ADVICE: &str = ". Adjust configuration to ignore unrecognized formats";

/// The retriever: refuses every resource not embedded in the schema itself.
struct RefuseRetrieval;

/// The error [`RefuseRetrieval`] returns.
#[derive(Debug, thiserror::Error)]
#[error("retrieval of `{0}` refused: toolhost never fetches schemas (no HTTP, no file)")]
struct RetrievalRefused(String);

impl Retrieve for RefuseRetrieval {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(Box::new(RetrievalRefused(uri.as_str().to_owned())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn compile(schema: Value) -> Validator {
        Validator::compile(&schema).expect("schema compiles")
    }

    fn units() -> Value {
        json!({
            "$schema": DRAFT_2020_12,
            "type": "object",
            "properties": {
                "from": {"type": "string", "enum": ["metre", "foot", "mile", "inch", "yard", "league"]},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["from"],
            "additionalProperties": false,
        })
    }

    /// An enum violation names the path, the value and a bounded list of the options.
    #[test]
    fn enum_violation_has_path_and_options() {
        let v = compile(units());
        let errors = v.validate(&json!({"from": "parsec"})).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].instance_path, "/from");
        assert_eq!(
            errors[0].message,
            r#""parsec" is not one of ["metre", "foot", "mile", "inch", … 2 more]"#
        );
        assert_eq!(
            errors[0].to_string(),
            r#"/from: "parsec" is not one of ["metre", "foot", "mile", "inch", … 2 more]"#
        );
    }

    /// Pattern and range violations are each reported at their own path.
    #[test]
    fn pattern_and_range_violations_have_paths() {
        let v = compile(units());
        let errors = v
            .validate(&json!({"from": "metre", "code": "usd", "count": 11}))
            .unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.instance_path.as_str()).collect();
        assert!(paths.contains(&"/code"), "{errors:?}");
        assert!(paths.contains(&"/count"), "{errors:?}");
        let code = errors.iter().find(|e| e.instance_path == "/code").unwrap();
        assert!(code.message.contains("(pattern)"), "{}", code.message);
        let count = errors.iter().find(|e| e.instance_path == "/count").unwrap();
        assert_eq!(count.message, "11 is greater than the maximum 10 (maximum)");
        assert!(v
            .validate(&json!({"from": "metre", "code": "USD", "count": 3}))
            .is_ok());
    }

    /// Missing and unexpected properties are reported at the object's path.
    #[test]
    fn required_and_additional_properties() {
        let v = compile(units());
        let errors = v.validate(&json!({"extra": 1})).unwrap_err();
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            messages.contains(&r#"(root): missing required property "from" (required)"#.to_owned()),
            "{messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.contains(r#"unexpected property "extra""#)),
            "{messages:?}"
        );
    }

    /// At most MAX_VIOLATIONS violations are reported, each message and path capped in bytes.
    #[test]
    fn violations_and_messages_are_capped() {
        let v = compile(json!({"type": "array", "items": {"type": "integer"}}));
        let many: Vec<Value> = (0..100).map(|i| json!(format!("{i}"))).collect();
        assert_eq!(
            v.validate(&Value::Array(many)).unwrap_err().len(),
            MAX_VIOLATIONS
        );

        let v = compile(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
        let key = "ключ".repeat(200);
        let errors = v
            .validate(&json!({ key.clone(): "é".repeat(10_000) }))
            .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.len() <= MAX_MESSAGE_BYTES);
        assert!(errors[0].message.len() < 100, "{}", errors[0].message);
        assert!(errors[0].instance_path.len() <= MAX_INSTANCE_PATH_BYTES);
        assert!(errors[0].instance_path.ends_with('…'));
    }

    /// A failing `not` does not print its subschema into the model-facing message.
    #[test]
    fn not_does_not_leak_subschema() {
        let v = compile(json!({"not": {"const": "secret-internal-marker"}}));
        let errors = v.validate(&json!("secret-internal-marker")).unwrap_err();
        assert_eq!(
            errors[0].message,
            r#""secret-internal-marker" is not allowed (not)"#
        );
        let v = compile(json!({"anyOf": [{"const": "hidden-a"}, {"const": "hidden-b"}]}));
        let errors = v.validate(&json!("x")).unwrap_err();
        assert!(
            !errors[0].message.contains("hidden"),
            "{}",
            errors[0].message
        );
    }

    /// Format assertion is on: a bad email and an impossible date are rejected.
    #[test]
    fn formats_are_asserted() {
        let email = compile(json!({"type": "string", "format": "email"}));
        let errors = email.validate(&json!("not-an-email")).unwrap_err();
        assert_eq!(
            errors[0].message,
            r#""not-an-email" is not a valid "email" (format)"#
        );
        assert!(email.validate(&json!("a@example.com")).is_ok());
        let date = compile(json!({"type": "string", "format": "date"}));
        assert!(date.validate(&json!("2024-13-45")).is_err());
        assert!(date.validate(&json!("2024-02-29")).is_ok());
    }

    /// An unknown format is refused at compile time rather than silently ignored.
    #[test]
    fn unknown_format_is_a_compile_error() {
        let err = Validator::compile(&json!({"type": "string", "format": "emial"})).unwrap_err();
        assert!(matches!(err, SchemaError::Compile { .. }), "{err}");
        assert!(err.to_string().contains("'emial'"), "{err}");
        assert!(err.to_string().contains("formats are asserted"), "{err}");
    }

    /// A remote `$ref` is a compile error naming the reference; nothing is fetched.
    #[test]
    fn remote_ref_is_a_compile_error() {
        let err = Validator::compile(&json!({"$ref": "https://example.com/s.json"})).unwrap_err();
        assert_eq!(
            err,
            SchemaError::ExternalRef {
                what: "schema",
                reference: "https://example.com/s.json".into(),
                pointer: String::new(),
            }
        );
        assert!(
            err.to_string().contains("https://example.com/s.json"),
            "{err}"
        );
        let err = Validator::compile(&json!({"$ref": "file:///etc/passwd"})).unwrap_err();
        assert!(matches!(err, SchemaError::ExternalRef { .. }), "{err}");
    }

    /// A schema that is not valid Draft 2020-12, or declares another draft, does not compile.
    #[test]
    fn invalid_schema_or_other_draft_is_refused() {
        let err = Validator::compile(&json!({"properties": {"a": {"minLength": -1}}})).unwrap_err();
        match &err {
            SchemaError::Invalid { pointer, .. } => assert_eq!(pointer, "/properties/a/minLength"),
            other => panic!("{other}"),
        }
        let err =
            Validator::compile(&json!({"$schema": "http://json-schema.org/draft-07/schema#"}))
                .unwrap_err();
        assert!(matches!(err, SchemaError::UnsupportedDraft { .. }), "{err}");
        assert!(Validator::compile(&json!({"$schema": format!("{DRAFT_2020_12}#")})).is_ok());
    }

    /// A catastrophic-backtracking pattern returns (valid or a violation) instead of hanging.
    #[test]
    fn catastrophic_regex_returns() {
        let long = format!("{}b", "a".repeat(50_000));
        let v = compile(json!({"type": "string", "pattern": "^(a+)+$"}));
        assert!(v.validate(&json!(long)).is_err());
        assert!(v.validate(&json!("aaaa")).is_ok());
        // A back-reference forces the backtracking engine; the backtrack limit stops it and the
        // value fails closed with a model-safe message.
        let v = compile(json!({"type": "string", "pattern": "^(a|aa)+\\1$"}));
        let errors = v
            .validate(&json!(format!("{}b", "a".repeat(40))))
            .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].instance_path, "");
        assert!(
            errors[0].message.contains("regex limit reached"),
            "{}",
            errors[0].message
        );
        assert!(v.validate(&json!("aaaa")).is_ok());
    }
}
