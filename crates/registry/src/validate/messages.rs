//! Model-safe violations.
//!
//! [`Validator::validate`] returns at most [`MAX_VIOLATIONS`] [`Violation`]s. Each message names
//! the failing keyword and a short, truncated rendering of the offending value and of the
//! keyword's own value (an enum's first options, a pattern, a limit) — never the rest of the
//! schema (a failing `not` does not print its subschema) and never engine internals. Values are
//! rendered in at most [`MAX_VALUE_PREVIEW_BYTES`], lists in at most [`MAX_LISTED_ITEMS`] items, a
//! message in at most [`MAX_MESSAGE_BYTES`] and a path in at most [`MAX_INSTANCE_PATH_BYTES`]
//! (cut at a character boundary, ending in `…`).
//!

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;
use serde_json::Value;
use toolhost_contract::bounds::clip;

use super::*;

pub(super) fn violation(error: &ValidationError<'_>) -> Violation {
    Violation {
        instance_path: truncate(
            error.instance_path().as_str().to_owned(),
            MAX_INSTANCE_PATH_BYTES,
        ),
        message: describe(error),
    }
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A short, model-safe sentence for one error: the value, the keyword, the keyword's value when
/// it is short and useful; never a subschema. At most [`MAX_MESSAGE_BYTES`].
pub(super) fn describe(error: &ValidationError<'_>) -> String {
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

pub(super) fn plural_u64(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// At most [`MAX_LISTED_ITEMS`] items, comma-separated, then how many were left out.
pub(super) fn list(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut out: Vec<String> = items.take(MAX_LISTED_ITEMS).collect();
    if total > MAX_LISTED_ITEMS {
        out.push(format!("… {} more", total - MAX_LISTED_ITEMS));
    }
    out.join(", ")
}

/// A string rendered as a JSON string, bounded.
pub(super) fn preview_str(s: &str) -> String {
    // Only the first bytes can show: do not copy a megabyte to keep 64 bytes of it. The cut keeps
    // more than fits, so a cut string always ends in `…`.
    preview(&Value::String(
        clip(s, MAX_VALUE_PREVIEW_BYTES + 8).to_owned(),
    ))
}

/// A plain string, bounded.
pub(super) fn bounded(s: &str) -> String {
    truncate(
        clip(s, MAX_VALUE_PREVIEW_BYTES + 1).to_owned(),
        MAX_VALUE_PREVIEW_BYTES,
    )
}

/// Compact JSON of `value`, at most [`MAX_VALUE_PREVIEW_BYTES`]. Serialization stops as soon as
/// the limit is passed, so a huge value costs no more than a small one.
pub(super) fn preview(value: &Value) -> String {
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

/// `s` if it fits in `max` bytes, else its longest prefix that fits together with `…`.
pub(super) fn truncate(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    const ELLIPSIS: &str = "…";
    let mut out = clip(&s, max.saturating_sub(ELLIPSIS.len())).to_owned();
    out.push_str(ELLIPSIS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
