//! The canonical forms every layer agrees on: canonical JSON (RFC 8785, JCS), the bytes an
//! approval, an admission and a task are bound to; the digest of bytes; and the fingerprint
//! of a call (its tool and canonical arguments).
//!
//! Objects are written with their members sorted by the UTF-16 code units of their names,
//! without whitespace; strings use the minimal JSON escapes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
//! `\t`, and `\u00xx` for the other controls; everything else, `/` and U+2028 included, is written
//! as UTF-8); numbers are written the way ECMAScript prints a double (`1.0` → `1`, `1e21` →
//! `1e+21`, `0.000001` → `0.000001`, `1e-7` → `1e-7`, `-0` → `0`). Non-integer numbers are
//! formatted by `serde_jcs`; strings by serde_json's compact writer, whose escapes are exactly
//! JCS's (tested against `serde_jcs` for every ASCII character) and which, unlike `serde_jcs`,
//! allocates nothing per string.
//!
//! One deliberate extension: RFC 8785 covers I-JSON, where every number is a double, and a
//! double cannot tell `9007199254740993` from `9007199254740992`. Tool arguments may be `u64`, so
//! an integer beyond ±2^53 is written with its exact digits followed by `.0`
//! (`9007199254740993.0`). JCS never prints a number ending in `.0`, so this form collides with
//! nothing, and two different arguments never share canonical bytes. For every I-JSON value the
//! output is byte-for-byte RFC 8785.

use serde::Serialize;
use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use super::ToolCall;

/// The lowercase hex SHA-256 of `bytes`. Callers hash the canonical bytes they chose (e.g. the
/// JCS form of validated arguments).
pub fn digest_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest of `call`'s tool and canonical arguments, whoever asks: two calls with the same
/// digest are the same call.
pub fn call_digest(call: &ToolCall) -> String {
    canonical_call(&call.name, &call.arguments).digest()
}

/// The canonical form of a call (its tool and arguments), computed once and read by every
/// stage that binds to it: admission, approval, tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalCall {
    /// `{"arguments":…,"tool":…}` in canonical JSON.
    bytes: Vec<u8>,
    /// Where the arguments' own canonical form sits within `bytes`.
    arguments: std::ops::Range<usize>,
}

impl CanonicalCall {
    /// The whole canonical call.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The arguments' canonical form (a slice of [`bytes`](Self::bytes)).
    pub fn arguments(&self) -> &[u8] {
        &self.bytes[self.arguments.clone()]
    }

    /// The call's fingerprint: [`digest_bytes`] of [`bytes`](Self::bytes), the same as
    /// [`call_digest`].
    pub fn digest(&self) -> String {
        digest_bytes(&self.bytes)
    }
}

/// The largest integer magnitude a double holds exactly (2^53).
const EXACT_DOUBLE_LIMIT: u64 = 1 << 53;

/// The RFC 8785 canonical form of `v` (with exact integers beyond ±2^53, see the module doc).
pub fn canonical_json(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, v);
    out
}

/// `canonical_json(&json!({"tool": tool, "arguments": arguments}))`, without copying the
/// arguments into a new value first ("arguments" sorts before "tool").
pub fn canonical_call(tool: &str, arguments: &Value) -> CanonicalCall {
    const PREFIX: &[u8] = b"{\"arguments\":";
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(PREFIX);
    write_value(&mut out, arguments);
    let arguments = PREFIX.len()..out.len();
    out.extend_from_slice(b",\"tool\":");
    write_str(&mut out, tool);
    out.push(b'}');
    CanonicalCall {
        bytes: out,
        arguments,
    }
}

/// The canonical form of an object whose members are given in JCS order (names strictly
/// increasing by UTF-16 code units, the caller's promise, checked in debug builds), each value
/// already in canonical form: how a binding over canonical arguments is written without
/// parsing them back.
pub fn canonical_object(members: &[(&str, Member<'_>)]) -> Vec<u8> {
    debug_assert!(
        members.windows(2).all(|w| {
            w[0].0.encode_utf16().cmp(w[1].0.encode_utf16()) == std::cmp::Ordering::Less
        }),
        "members out of JCS order"
    );
    let mut out = Vec::with_capacity(128);
    out.push(b'{');
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(&mut out, name);
        out.push(b':');
        match value {
            Member::Canonical(bytes) => out.extend_from_slice(bytes),
            Member::Str(s) => write_str(&mut out, s),
        }
    }
    out.push(b'}');
    out
}

/// One member value of [`canonical_object`].
#[derive(Debug, Clone, Copy)]
pub enum Member<'a> {
    /// Bytes already in canonical form (e.g. [`CanonicalCall::arguments`]).
    Canonical(&'a [u8]),
    /// A string, written as JCS writes it.
    Str(&'a str),
}

fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) if in_utf16_order(map) => write_members(out, map.iter()),
        Value::Object(map) => {
            let mut members: Vec<(Vec<u16>, &String, &Value)> = map
                .iter()
                .map(|(k, v)| (k.encode_utf16().collect(), k, v))
                .collect();
            members.sort_by(|a, b| a.0.cmp(&b.0));
            write_members(out, members.into_iter().map(|(_, k, v)| (k, v)));
        }
    }
}

/// An object's members, in the order given.
fn write_members<'a>(out: &mut Vec<u8>, members: impl Iterator<Item = (&'a String, &'a Value)>) {
    out.push(b'{');
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

/// Whether `map` already iterates in JCS order, so it needs no sorting: its keys come in
/// strictly increasing UTF-8 byte order and none holds a character at or above U+E000 (UTF-8
/// lead byte 0xEE or more). Below U+E000 the order of UTF-8 bytes, of code points and of UTF-16
/// code units agree; above it UTF-16 puts U+10000.. (surrogate pairs) before U+E000..U+FFFF.
/// serde_json's map is sorted by bytes unless its `preserve_order` feature is on: checked, not
/// assumed.
fn in_utf16_order(map: &serde_json::Map<String, Value>) -> bool {
    let mut previous: Option<&str> = None;
    for key in map.keys() {
        if key.bytes().any(|b| b >= 0xEE) || previous.is_some_and(|p| p >= key.as_str()) {
            return false;
        }
        previous = Some(key);
    }
    true
}

fn write_number(out: &mut Vec<u8>, n: &Number) {
    // An integer a double holds exactly prints as its digits in ECMAScript too.
    let small = match (n.as_u64(), n.as_i64()) {
        (Some(u), _) if u <= EXACT_DOUBLE_LIMIT => Some(i128::from(u)),
        (_, Some(i)) if i.unsigned_abs() <= EXACT_DOUBLE_LIMIT => Some(i128::from(i)),
        _ => None,
    };
    if let Some(i) = small {
        use std::io::Write as _;
        let _ = write!(out, "{i}");
        return;
    }
    let exact = if let Some(u) = n.as_u64() {
        (u > EXACT_DOUBLE_LIMIT).then(|| u.to_string())
    } else if let Some(i) = n.as_i64() {
        (i.unsigned_abs() > EXACT_DOUBLE_LIMIT).then(|| i.to_string())
    } else {
        None
    };
    match exact {
        Some(digits) => {
            out.extend_from_slice(digits.as_bytes());
            out.extend_from_slice(b".0");
        }
        None => write_leaf(out, n),
    }
}

/// A string, quoted and escaped as JCS does: serde_json's compact form uses the same escapes
/// (the two short ones, `\b \f \n \r \t`, and `\u00xx` in lowercase for the other controls)
/// and writes straight into `out`, where `serde_jcs` allocates for every fragment it writes.
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail, and a str always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A number, formatted by `serde_jcs`.
fn write_leaf<T: Serialize + ?Sized>(out: &mut Vec<u8>, leaf: &T) {
    // serde_jcs fails only on a non-finite float, and a serde_json::Value never holds one.
    serde_jcs::to_writer(&mut *out, leaf).expect("a JSON leaf always has a canonical form");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_past_u_e000_are_sorted_by_utf16() {
        // UTF-8 byte order would put U+E000 first; UTF-16 puts the surrogate pair first.
        let v = json!({"\u{e000}": 1, "\u{10000}": 2, "a": 3});
        assert_eq!(
            String::from_utf8(canonical_json(&v)).unwrap(),
            "{\"a\":3,\"\u{10000}\":2,\"\u{e000}\":1}"
        );
    }

    /// Strings are escaped exactly as `serde_jcs` escapes them: every ASCII character, the
    /// quote and the backslash, and characters JCS leaves alone (`/`, DEL, U+2028, astral).
    #[test]
    fn strings_are_escaped_as_jcs_does() {
        let mut samples: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        samples.push("a\"b\\c/d\u{7f}\u{2028}\u{1f600}é\u{0}\u{1f}".to_string());
        samples.push(String::new());
        for s in samples {
            let mut jcs = Vec::new();
            serde_jcs::to_writer(&mut jcs, &s).unwrap();
            let mut ours = Vec::new();
            write_str(&mut ours, &s);
            assert_eq!(ours, jcs, "{s:?}");
        }
    }

    #[test]
    fn small_integers_print_as_jcs_does() {
        for (n, text) in [
            (json!(0), "0"),
            (json!(-7), "-7"),
            (json!(9007199254740992u64), "9007199254740992"),
            (json!(-9007199254740992i64), "-9007199254740992"),
            (json!(9007199254740993u64), "9007199254740993.0"),
        ] {
            assert_eq!(String::from_utf8(canonical_json(&n)).unwrap(), text);
            if text.ends_with(".0") {
                continue;
            }
            let mut jcs = Vec::new();
            serde_jcs::to_writer(&mut jcs, &n).unwrap();
            assert_eq!(String::from_utf8(jcs).unwrap(), text);
        }
    }

    #[test]
    fn canonical_call_is_the_canonical_object() {
        for (tool, args) in [
            ("add", json!({"b": 2, "a": 1})),
            (
                "t\u{2028}\"x",
                json!({"é": [1.5, null, {"z": "\n", "y": 9007199254740993u64}]}),
            ),
            ("", json!({})),
        ] {
            let call = canonical_call(tool, &args);
            assert_eq!(
                call.bytes(),
                canonical_json(&json!({"tool": tool, "arguments": args}))
            );
            assert_eq!(call.arguments(), canonical_json(&args));
            assert_eq!(call.digest(), digest_bytes(call.bytes()));
        }
    }

    /// An object written from canonical members is the canonical form of the same object.
    #[test]
    fn canonical_object_is_the_canonical_object() {
        let args =
            json!({"é": [1.5, null, {"z": "\n", "y": 9007199254740993u64}], "a": "\u{2028}"});
        let canonical_args = canonical_json(&args);
        let written = canonical_object(&[
            ("arguments", Member::Canonical(&canonical_args)),
            ("domain", Member::Str("toolhost\u{7f}\"x")),
            ("part", Member::Str("call")),
        ]);
        let expected = canonical_json(&json!({
            "part": "call",
            "domain": "toolhost\u{7f}\"x",
            "arguments": args,
        }));
        assert_eq!(written, expected);
    }

    fn canon(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap();
        String::from_utf8(canonical_json(&v)).unwrap()
    }

    /// Object members are sorted by name and whitespace is dropped; array order is kept.
    #[test]
    fn sorts_keys_and_drops_whitespace() {
        assert_eq!(
            canon(r#"{ "b": 1, "a": { "d": [3, 1, 2], "c": null } }"#),
            r#"{"a":{"c":null,"d":[3,1,2]},"b":1}"#
        );
    }

    /// Keys sort by UTF-16 code units (RFC 8785 §3.2.3): U+1F600 sorts before U+FB33.
    #[test]
    fn sorts_keys_by_utf16_code_units() {
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let raw = canon(input);
        let positions: Vec<usize> = [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small Letter O",
            "Euro Sign",
            "Emoji",
            "Hebrew Letter",
        ]
        .iter()
        .map(|name| raw.find(name).unwrap())
        .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{raw}");
    }

    /// The RFC 8785 §3.2.2 example: numbers, escapes and literals.
    #[test]
    fn rfc_8785_example() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        assert_eq!(
            canon(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// Numbers print like ECMAScript doubles: 1.0 -> 1, 1e21 -> 1e+21, -0 -> 0.
    #[test]
    fn number_forms() {
        for (input, expected) in [
            ("1.0", "1"),
            ("-1.50", "-1.5"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-0.0", "0"),
            ("9007199254740992", "9007199254740992"),
            ("-9007199254740992", "-9007199254740992"),
            ("123456789", "123456789"),
        ] {
            assert_eq!(canon(input), expected, "{input}");
        }
    }

    /// Strings keep non-ASCII as UTF-8 and escape only what JSON requires, in lower-case hex.
    #[test]
    fn unicode_escapes() {
        assert_eq!(
            canon(r#""\u00e9\u2028\u001f\t/""#),
            "\"é\u{2028}\\u001f\\t/\""
        );
        assert_eq!(canon(r#""\ud83d\ude00""#), "\"😀\"");
    }

    /// Integers beyond ±2^53 keep their exact digits, so distinct u64 values never collide.
    #[test]
    fn large_integers_are_exact_and_distinct() {
        let a = canonical_json(&json!(9_007_199_254_740_992_u64));
        let b = canonical_json(&json!(9_007_199_254_740_993_u64));
        assert_ne!(a, b);
        assert_eq!(b, b"9007199254740993.0");
        assert_eq!(
            canonical_json(&json!(u64::MAX)),
            b"18446744073709551615.0".to_vec()
        );
        assert_eq!(
            canonical_json(&json!(i64::MIN)),
            b"-9223372036854775808.0".to_vec()
        );
        // A double near that value prints in JCS form, which never ends in ".0".
        assert_eq!(canon("1152921504606846976.0"), "1152921504606847000");
        assert_ne!(
            canonical_json(&json!(1_152_921_504_606_847_000_u64)),
            canon("1152921504606846976.0").into_bytes()
        );
    }

    /// On I-JSON values the output is exactly serde_jcs's.
    #[test]
    fn agrees_with_serde_jcs_on_i_json() {
        let v = json!({
            "z": [1, 2.5, -3, 1e300, 5e-324, "x\u{0}y", {"β": true, "a": null}],
            "a": {"nested": {"k": "v", "K": "V"}},
            "": "empty key",
        });
        assert_eq!(canonical_json(&v), serde_jcs::to_vec(&v).unwrap());
    }
}
