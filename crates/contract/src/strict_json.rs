//! The one strict JSON parse for every untrusted JSON text the host takes in: tool-call
//! arguments (`toolhost call`, `toolhost batch`, the agent loop, MCP) and MCP frames.
//!
//! RFC 8259 only says object names SHOULD be unique, so parsers disagree on `{"a": 1, "a": 2}`:
//! serde_json keeps the last value, others keep the first or refuse. Such a differential is an
//! attack class (a policy check and the tool could read different values), so here a repeated
//! key is an error that names its path, at any depth. Beyond that the parse is serde_json's,
//! which already refuses what cannot be represented: a number past `f64` (`1e400`), a lone
//! surrogate escape (`"\ud800"`), invalid UTF-8, trailing characters. Nesting is bounded by
//! [`MAX_DEPTH`].
//!
//! [`parse`] refuses every repeated key; [`parse_with`] lets the caller tolerate some (the MCP
//! frame reader tolerates them inside `params.arguments`, to refuse that call as
//! `invalid_arguments` rather than the whole frame). A tolerated repeat keeps the last value,
//! as serde_json does.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects accepted (the top-level value is depth 1).
///
/// Every stage after the parse walks the value recursively — schema validation, canonical JSON
/// for digests, the conversion to component values — on async worker stacks, so depth is what
/// bounds their stack use. No WIT type a tool declares nests anywhere near this deep, and an MCP
/// frame adds two levels (`params`, `arguments`). serde_json's own guard (128) is a backstop.
pub const MAX_DEPTH: usize = 64;

/// How much of a key path an error message shows; a key can be as long as the text itself.
pub const MAX_SHOWN_PATH_BYTES: usize = 200;

/// One step of a path into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object member, by name.
    Key(String),
    /// An array element, by index.
    Index(usize),
}

impl Segment {
    /// Whether this is the object member `name`.
    pub fn is_key(&self, name: &str) -> bool {
        matches!(self, Segment::Key(k) if k == name)
    }
}

/// Where a value sits in a document. Displayed as a JSON Pointer (RFC 6901), cut to
/// [`MAX_SHOWN_PATH_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyPath(pub Vec<Segment>);

impl KeyPath {
    /// The whole path as a JSON Pointer (`/params/arguments/value`), never cut.
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        for s in &self.0 {
            out.push('/');
            match s {
                Segment::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Segment::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.pointer();
        if p.len() <= MAX_SHOWN_PATH_BYTES {
            return f.write_str(&p);
        }
        write!(f, "{}…", &p[..p.floor_char_boundary(MAX_SHOWN_PATH_BYTES)])
    }
}

/// Why a text is not strict JSON. Every message is safe to show a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// Not JSON at all, or a value JSON cannot carry here (serde_json's message, with its line
    /// and column): a syntax error, a number out of range, a lone surrogate, invalid UTF-8.
    #[error("not valid JSON: {0}")]
    Syntax(String),
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// An object repeats a key; the path ends at the repeated key.
    #[error("the key {0} appears more than once in one object")]
    DuplicateKey(KeyPath),
}

/// Parse `text` strictly: one JSON value, no repeated key in any object, at most [`MAX_DEPTH`]
/// levels, every number an `f64` or a 64-bit integer.
pub fn parse(text: &[u8]) -> Result<Value, StrictJsonError> {
    parse_with(text, &mut |_| false)
}

/// [`parse`], except that a repeated key is passed to `on_repeat` with its path (ending at the
/// key): `true` tolerates it (the last value wins), `false` fails the parse with
/// [`StrictJsonError::DuplicateKey`]. The callback sees every repeat, in document order.
pub fn parse_with(
    text: &[u8],
    on_repeat: &mut dyn FnMut(&[Segment]) -> bool,
) -> Result<Value, StrictJsonError> {
    let state = RefCell::new(State {
        path: Vec::new(),
        on_repeat,
        stop: None,
    });
    let mut de = serde_json::Deserializer::from_slice(text);
    let parsed = Node {
        state: &state,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(v) => Ok(v),
        Err(e) => Err(state
            .into_inner()
            .stop
            .unwrap_or_else(|| StrictJsonError::Syntax(e.to_string()))),
    }
}

/// What the walk shares: where it is, and why it stopped (serde's error type cannot say).
struct State<'a> {
    path: Vec<Segment>,
    on_repeat: &'a mut dyn FnMut(&[Segment]) -> bool,
    stop: Option<StrictJsonError>,
}

/// One value being parsed, `depth` levels down.
struct Node<'s, 'a> {
    state: &'s RefCell<State<'a>>,
    depth: usize,
}

impl<'s, 'a> Node<'s, 'a> {
    fn child(&self) -> Node<'s, 'a> {
        Node {
            state: self.state,
            depth: self.depth + 1,
        }
    }

    /// Enter an array or object, or stop at the depth bound.
    fn enter<E: de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_DEPTH {
            self.state.borrow_mut().stop = Some(StrictJsonError::TooDeep);
            return Err(E::custom("too deep"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json refuses non-finite numbers while parsing; this is a backstop.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = Vec::new();
        loop {
            self.state.borrow_mut().path.push(Segment::Index(out.len()));
            let next = seq.next_element_seed(self.child())?;
            self.state.borrow_mut().path.pop();
            match next {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let repeated = out.contains_key(&key);
            {
                let mut st = self.state.borrow_mut();
                st.path.push(Segment::Key(key.clone()));
                if repeated {
                    let st = &mut *st;
                    if !(st.on_repeat)(&st.path) {
                        st.stop = Some(StrictJsonError::DuplicateKey(KeyPath(st.path.clone())));
                        return Err(de::Error::custom("repeated key"));
                    }
                }
            }
            let v = map.next_value_seed(self.child())?;
            self.state.borrow_mut().path.pop();
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_string())
    }

    /// Plain JSON parses to exactly what serde_json gives.
    #[test]
    fn agrees_with_serde_json_on_valid_text() {
        let text = br#"{"a": [1, -2, 3.5, 18446744073709551615, true, null, "\u00e9x"],
                        "b": {"c": {}, "d": []}, "e": 1e300}"#;
        let ours = parse(text).unwrap();
        let theirs: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(parse(b" 7 ").unwrap(), json!(7));
    }

    /// A repeated key is refused at any depth, naming its path as a JSON Pointer.
    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        assert_eq!(
            parse(br#"{"value": 3, "value": 4}"#),
            Err(StrictJsonError::DuplicateKey(KeyPath(vec![key("value")])))
        );
        let deep = br#"{"a": [0, {"b/c": {"x": 1, "x": 1}}]}"#;
        match parse(deep) {
            Err(StrictJsonError::DuplicateKey(p)) => assert_eq!(p.pointer(), "/a/1/b~1c/x"),
            other => panic!("{other:?}"),
        }
        // Different keys in sibling objects are not repeats.
        assert!(parse(br#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }

    /// `parse_with` shows every repeat to the caller, who may tolerate it (last value wins).
    #[test]
    fn tolerated_repeats_keep_the_last_value() {
        let mut seen = Vec::new();
        let v = parse_with(br#"{"a": {"k": 1, "k": 2}, "a2": 0, "a2": 5}"#, &mut |p| {
            seen.push(KeyPath(p.to_vec()).pointer());
            true
        })
        .unwrap();
        assert_eq!(v, json!({"a": {"k": 2}, "a2": 5}));
        assert_eq!(seen, ["/a/k", "/a2"]);
    }

    /// Numbers past f64, lone surrogates, invalid UTF-8 and trailing text are syntax errors.
    #[test]
    fn unrepresentable_values_are_syntax_errors() {
        for bad in [
            &br#"{"x": 1e400}"#[..],
            br#"{"x": -1e400}"#,
            br#"{"x": "\ud800"}"#,
            br#"{"\udc00": 1}"#,
            b"{\"x\": \"\xff\"}",
            br#"{"x": 1} {"#,
            b"",
            b"nul",
        ] {
            match parse(bad) {
                Err(StrictJsonError::Syntax(m)) => assert!(!m.is_empty()),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(bad)),
            }
        }
    }

    /// Nesting is bounded: MAX_DEPTH levels parse, one more (or 10,000) is TooDeep.
    #[test]
    fn nesting_is_bounded() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(nest(MAX_DEPTH).as_bytes()).is_ok());
        assert_eq!(
            parse(nest(MAX_DEPTH + 1).as_bytes()),
            Err(StrictJsonError::TooDeep)
        );
        assert_eq!(
            parse(nest(10_000).as_bytes()),
            Err(StrictJsonError::TooDeep)
        );
        let objects = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
        assert_eq!(parse(objects.as_bytes()), Err(StrictJsonError::TooDeep));
    }

    /// A path's display is cut on a character boundary; the pointer itself is whole.
    #[test]
    fn long_paths_are_cut_for_display() {
        let long = "é".repeat(300);
        let text = format!(r#"{{"{long}": 1, "{long}": 2}}"#);
        let Err(StrictJsonError::DuplicateKey(p)) = parse(text.as_bytes()) else {
            panic!("not refused");
        };
        assert_eq!(p.pointer().len(), 1 + long.len());
        let shown = p.to_string();
        assert!(
            shown.len() <= MAX_SHOWN_PATH_BYTES + '…'.len_utf8(),
            "{shown}"
        );
        assert!(shown.ends_with('…'));
    }
}
