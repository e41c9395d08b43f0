//! Target `convert`: JSON → component value ([`to_val`]) and back ([`to_json`]), over every WIT
//! type of the `types` guest.
//!
//! Input: the first byte picks the type, the rest is JSON text, parsed as every frontend parses
//! it ([`super::arguments::parse`]: the strict parse, checked against serde_json's). Invariants, beyond "no panic":
//!
//! - a value that converts is one the type's derived (standard) JSON Schema accepts: the strict
//!   conversion never admits what the advertised schema refuses;
//! - it has a JSON form ([`to_json`]), that form converts back to the same value, and the
//!   schema accepts that form too (what the host returns matches what it advertises);
//! - [`json_size_lower_bound`] is a lower bound of the serialized form's length (it refuses
//!   oversized results before they are copied, so it must never over-estimate).

use serde_json::Value;
use toolhost_registry::convert::{json_size_lower_bound, to_json, to_val};

use super::fixture::{fixture, TypeCase};

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let Some(value) = super::arguments::parse(text) else {
        return;
    };
    let types = &fixture().types;
    check_value(&types[usize::from(selector) % types.len()], &value);
}

/// The invariants for one value against one type.
pub fn check_value(case: &TypeCase, value: &Value) {
    let label = &case.label;
    let Ok(val) = to_val(&case.ty, value, "/v") else {
        return;
    };
    assert!(
        case.schema.is_valid(value),
        "{label}: {value} converts, but the derived schema refuses it"
    );
    let bound = json_size_lower_bound(&val);
    let json = to_json(val.clone(), "output")
        .unwrap_or_else(|e| panic!("{label}: {value} converts but has no JSON form: {e}"));
    let again = to_val(&case.ty, &json, "/v")
        .unwrap_or_else(|e| panic!("{label}: the JSON form {json} of {value} is refused: {e}"));
    assert_eq!(again, val, "{label}: {value} → {json} does not round-trip");
    assert!(
        case.schema.is_valid(&json),
        "{label}: the JSON form {json} of {value} does not match the derived schema"
    );
    let size = serde_json::to_vec(&json).expect("serializes").len() as u64;
    assert!(
        bound <= size,
        "{label}: json_size_lower_bound {bound} > the real size {size} of {json}"
    );
}
