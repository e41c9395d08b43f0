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
//! # Model-safe violations
//!
//! [`Validator::validate`] returns at most [`MAX_VIOLATIONS`] [`Violation`]s. Each message names
//! the failing keyword and a short, truncated rendering of the offending value and of the
//! keyword's own value (an enum's first options, a pattern, a limit) — never the rest of the
//! schema (a failing `not` does not print its subschema) and never engine internals. Values are
//! rendered in at most [`MAX_VALUE_PREVIEW_BYTES`], lists in at most [`MAX_LISTED_ITEMS`] items, a
//! message in at most [`MAX_MESSAGE_BYTES`] and a path in at most [`MAX_INSTANCE_PATH_BYTES`]
//! (cut at a character boundary, ending in `…`).
//!
//! # Refinements only narrow
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

use std::fmt;
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{PatternOptions, ReferencingError, Retrieve, Uri, ValidationError};
use serde::Serialize;
use serde_json::{Map, Value};

use super::schema::DRAFT_2020_12;

/// Most violations [`Validator::validate`] reports for one value; further ones are dropped.
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

/// Refuse a top-level `$schema` that is not Draft 2020-12.
fn check_draft(what: &'static str, schema: &Value) -> Result<(), SchemaError> {
    match top_level(schema, "$schema") {
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

fn violation(error: &ValidationError<'_>) -> Violation {
    Violation {
        instance_path: truncate(
            error.instance_path().as_str().to_owned(),
            MAX_INSTANCE_PATH_BYTES,
        ),
        message: describe(error),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A short, model-safe sentence for one error: the value, the keyword, the keyword's value when
/// it is short and useful; never a subschema. At most [`MAX_MESSAGE_BYTES`].
fn describe(error: &ValidationError<'_>) -> String {
    use ValidationErrorKind as K;
    let value = || preview(error.instance());
    let message = match error.kind() {
        K::AdditionalItems { limit } => {
            format!(
                "at most {limit} item{} allowed (additionalItems)",
                plural(*limit)
            )
        }
        K::AdditionalProperties { unexpected } => format!(
            "unexpected propert{} {} (additionalProperties)",
            if unexpected.len() == 1 { "y" } else { "ies" },
            list(unexpected.iter().map(|s| preview_str(s)))
        ),
        K::AnyOf { .. } => format!(
            "{} does not match any of the allowed alternatives (anyOf)",
            value()
        ),
        K::OneOfNotValid { .. } => {
            format!("{} does not match any of the alternatives (oneOf)", value())
        }
        K::OneOfMultipleValid { .. } => {
            format!("{} matches more than one alternative (oneOf)", value())
        }
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => format!(
            "{} could not be checked against the pattern: regex limit reached (pattern)",
            value()
        ),
        K::Constant { expected_value } => {
            format!("{} is not {} (const)", value(), preview(expected_value))
        }
        K::Contains => format!(
            "{} does not contain the required number of matching items (contains)",
            value()
        ),
        K::ContentEncoding { content_encoding } => format!(
            "{} is not valid {} content (contentEncoding)",
            value(),
            preview_str(content_encoding)
        ),
        K::ContentMediaType { content_media_type } => format!(
            "{} is not valid {} content (contentMediaType)",
            value(),
            preview_str(content_media_type)
        ),
        // The host's own keywords (`type` in argument schemas): their message is model-safe.
        K::Custom { message, .. } => format!("{} {message}", value()),
        K::Enum { options } => {
            let options = match options.as_ref() {
                Value::Array(items) => list(items.iter().map(preview)),
                other => preview(other),
            };
            format!("{} is not one of [{options}]", value())
        }
        K::ExclusiveMaximum { limit } => {
            format!(
                "{} must be less than {} (exclusiveMaximum)",
                value(),
                preview(limit)
            )
        }
        K::ExclusiveMinimum { limit } => {
            format!(
                "{} must be greater than {} (exclusiveMinimum)",
                value(),
                preview(limit)
            )
        }
        K::FalseSchema => format!("{} is not allowed here", value()),
        K::Format { format } => {
            format!(
                "{} is not a valid {} (format)",
                value(),
                preview_str(format)
            )
        }
        K::FromUtf8 { .. } => "decoded content is not valid UTF-8 (contentEncoding)".to_owned(),
        K::MaxItems { limit } => {
            format!(
                "array has more than {limit} item{} (maxItems)",
                plural_u64(*limit)
            )
        }
        K::Maximum { limit } => {
            format!(
                "{} is greater than the maximum {} (maximum)",
                value(),
                preview(limit)
            )
        }
        K::MaxLength { limit } => format!(
            "{} is longer than {limit} character{} (maxLength)",
            value(),
            plural_u64(*limit)
        ),
        K::MaxProperties { limit } => format!(
            "object has more than {limit} propert{} (maxProperties)",
            if *limit == 1 { "y" } else { "ies" }
        ),
        K::MinItems { limit } => {
            format!(
                "array has fewer than {limit} item{} (minItems)",
                plural_u64(*limit)
            )
        }
        K::Minimum { limit } => {
            format!(
                "{} is less than the minimum {} (minimum)",
                value(),
                preview(limit)
            )
        }
        K::MinLength { limit } => format!(
            "{} is shorter than {limit} character{} (minLength)",
            value(),
            plural_u64(*limit)
        ),
        K::MinProperties { limit } => format!(
            "object has fewer than {limit} propert{} (minProperties)",
            if *limit == 1 { "y" } else { "ies" }
        ),
        K::MultipleOf { multiple_of } => {
            format!(
                "{} is not a multiple of {multiple_of} (multipleOf)",
                value()
            )
        }
        K::Not { .. } => format!("{} is not allowed (not)", value()),
        K::Pattern { pattern } => format!(
            "{} does not match the pattern {} (pattern)",
            value(),
            preview_str(pattern)
        ),
        K::PropertyNames { error } => format!("property name {}", describe(error)),
        K::Required { property } => {
            format!("missing required property {} (required)", preview(property))
        }
        K::Type { kind } => match kind {
            TypeKind::Single(ty) => format!("{} is not of type \"{ty}\"", value()),
            TypeKind::Multiple(types) => format!(
                "{} is not of type {}",
                value(),
                types
                    .iter()
                    .map(|t| format!("\"{t}\""))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        },
        K::UnevaluatedItems { unexpected } => format!(
            "unexpected item{} {} (unevaluatedItems)",
            plural(unexpected.len()),
            list(unexpected.iter().map(|s| bounded(s)))
        ),
        K::UnevaluatedProperties { unexpected } => format!(
            "unexpected propert{} {} (unevaluatedProperties)",
            if unexpected.len() == 1 { "y" } else { "ies" },
            list(unexpected.iter().map(|s| preview_str(s)))
        ),
        K::UniqueItems => "array has duplicate items (uniqueItems)".to_owned(),
        K::Referencing(_) => "a schema reference could not be resolved ($ref)".to_owned(),
    };
    truncate(message, MAX_MESSAGE_BYTES)
}

fn plural_u64(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// At most [`MAX_LISTED_ITEMS`] items, comma-separated, then how many were left out.
fn list(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut out: Vec<String> = items.take(MAX_LISTED_ITEMS).collect();
    if total > MAX_LISTED_ITEMS {
        out.push(format!("… {} more", total - MAX_LISTED_ITEMS));
    }
    out.join(", ")
}

/// A string rendered as a JSON string, bounded.
fn preview_str(s: &str) -> String {
    // Only the first bytes can show: do not copy a megabyte to keep 64 bytes of it. The cut keeps
    // more than fits, so a cut string always ends in `…`.
    preview(&Value::String(
        cut(s, MAX_VALUE_PREVIEW_BYTES + 8).to_owned(),
    ))
}

/// A plain string, bounded.
fn bounded(s: &str) -> String {
    truncate(
        cut(s, MAX_VALUE_PREVIEW_BYTES + 1).to_owned(),
        MAX_VALUE_PREVIEW_BYTES,
    )
}

/// Compact JSON of `value`, at most [`MAX_VALUE_PREVIEW_BYTES`]. Serialization stops as soon as
/// the limit is passed, so a huge value costs no more than a small one.
fn preview(value: &Value) -> String {
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = (MAX_VALUE_PREVIEW_BYTES + 4).saturating_sub(self.0.len());
            if room == 0 {
                return Err(std::io::Error::other("preview full"));
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut capped = Capped(Vec::new());
    // An error only means the cap was reached; what was written is kept.
    let _ = serde_json::to_writer(&mut capped, value);
    let text = match String::from_utf8(capped.0) {
        Ok(text) => text,
        // Cut inside a multi-byte character: keep the valid prefix.
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    };
    truncate(text, MAX_VALUE_PREVIEW_BYTES)
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` if it fits in `max` bytes, else its longest prefix that fits together with `…`.
fn truncate(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    const ELLIPSIS: &str = "…";
    let mut out = cut(&s, max.saturating_sub(ELLIPSIS.len())).to_owned();
    out.push_str(ELLIPSIS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(schema: Value) -> Validator {
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

    /// Bounded previews never split a character and say when they cut.
    #[test]
    fn previews_are_bounded() {
        let p = preview(&json!("ü".repeat(1_000)));
        assert!(
            p.len() <= MAX_VALUE_PREVIEW_BYTES && p.ends_with('…'),
            "{p}"
        );
        assert_eq!(preview(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        assert_eq!(truncate("abc".into(), 3), "abc");
        assert_eq!(truncate("abcdef".into(), 4), "a…");
        let s = preview_str(&"x".repeat(1_000));
        assert!(
            s.len() <= MAX_VALUE_PREVIEW_BYTES && s.ends_with('…'),
            "{s}"
        );
    }
}
