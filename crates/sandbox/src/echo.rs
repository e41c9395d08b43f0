//! Where a secret's value shows in bytes that came back: every form a server may echo it in that
//! the host can compute cheaply. Each value is searched for as itself, as lower- or upper-case
//! hex, and as the base64 and base64url text of its bytes at each of the three alignments a
//! longer encoded text can give it; every search ignores ASCII case. Each of these is searched
//! for in the bytes as they are, in the bytes with JSON string escapes decoded (`\"`, `\\`, `\/`,
//! `\n` and the like, and `\uXXXX` in any mix with plain characters, so every escape an encoder
//! may choose), and in the bytes with percent-encoding decoded. What is found is a span of the
//! original bytes, whatever view found it.
//!
//! Not found: an encoding applied twice (JSON inside JSON, percent inside percent), HTML
//! entities, compression (the host refuses compressed and partial answers instead,
//! `network.rs`), and a value returned in pieces or transformed in any other way.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;

/// Most bytes one escape sequence takes (`\u0041`): a decoded view's byte comes from at most
/// this many bytes of the original.
const MAX_ESCAPE_BYTES: usize = 6;

/// The byte a decoded view holds for a character no form contains (a `\u` escape of a
/// non-ASCII character): forms are visible ASCII, so this byte ends any match.
const NOT_IN_ANY_FORM: u8 = 0;

/// The forms of a set of secret values, compiled once into one searcher.
pub(super) struct Forms {
    finder: AhoCorasick,
    /// The value (its index in the set) each pattern is a form of.
    owners: Vec<usize>,
    /// The patterns, lower-cased (for the check of a cut text's end).
    patterns: Vec<Vec<u8>>,
    /// The longest pattern, in bytes.
    longest: usize,
}

impl std::fmt::Debug for Forms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Forms({} patterns)", self.patterns.len())
    }
}

/// Where a value was found: `text[start..end]`, a form of the value at index `owner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
    pub owner: usize,
}

/// The forms one value is searched for in: the value, its hex, and the base64 and base64url
/// text of its bytes from offsets 0, 1 and 2 on, whole groups of three bytes only (the
/// characters that stand for the value alone, whatever bytes surround it).
fn forms_of(value: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![value.to_vec(), hex::encode(value).into_bytes()];
    for skip in 0..3 {
        let rest = &value[skip.min(value.len())..];
        let whole = &rest[..rest.len() / 3 * 3];
        if whole.len() < 3 {
            continue;
        }
        forms.push(STANDARD_NO_PAD.encode(whole).into_bytes());
        forms.push(URL_SAFE_NO_PAD.encode(whole).into_bytes());
    }
    forms
}

impl Forms {
    /// The forms of `values` (each at least one byte; index order names the owner).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Forms {
        let mut owners = Vec::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for (owner, value) in values.into_iter().enumerate() {
            for form in forms_of(value) {
                let form = form.to_ascii_lowercase();
                if !patterns.contains(&form) {
                    patterns.push(form);
                    owners.push(owner);
                }
            }
        }
        let finder = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .expect("a few short literal patterns always compile");
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        Forms {
            finder,
            owners,
            patterns,
            longest,
        }
    }

    /// The most bytes of the original one match may span (a form whose every byte is escaped).
    pub fn reach(&self) -> usize {
        self.longest * MAX_ESCAPE_BYTES
    }

    /// Every place in `text` that holds a form of a value, in any view; overlapping places
    /// merged into one span, in order.
    pub fn scan(&self, text: &[u8]) -> Scan {
        let mut spans = Vec::new();
        self.find(text, &mut spans, |at| at, |at| at + 1);
        let mut views = Vec::new();
        for decode in [decode_json as Decoder, decode_percent] {
            if let Some(view) = decode(text) {
                self.find(&view.bytes, &mut spans, |i| view.starts[i], |i| view.end(i));
                views.push(view);
            }
        }
        spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
        for s in spans {
            match merged.last_mut() {
                Some(last) if s.start < last.end => last.end = last.end.max(s.end),
                _ => merged.push(s),
            }
        }
        Scan {
            spans: merged,
            views,
        }
    }

    /// The matches in `bytes`, as spans of the original through `start` (of a byte's first
    /// original byte) and `end` (of the byte's last, exclusive).
    fn find(
        &self,
        bytes: &[u8],
        spans: &mut Vec<Span>,
        start: impl Fn(usize) -> usize,
        end: impl Fn(usize) -> usize,
    ) {
        for m in self.finder.find_overlapping_iter(bytes) {
            spans.push(Span {
                start: start(m.start()),
                end: end(m.end() - 1),
                owner: self.owners[m.pattern().as_usize()],
            });
        }
    }

    /// The earliest place from which the end of `text` (a text cut at a capacity) could be the
    /// start of a form, in any view; `text.len()` when none could. What `scan` returned for
    /// `text` is passed in, with its decoded views.
    pub fn cut_start(&self, text: &[u8], scan: &Scan) -> usize {
        let mut at = text.len() - self.partial(text);
        for view in &scan.views {
            let n = self.partial(&view.bytes);
            if n > 0 {
                at = at.min(view.starts[view.bytes.len() - n]);
            }
        }
        at
    }

    /// The length of the longest end of `bytes` that is a proper start of some pattern.
    fn partial(&self, bytes: &[u8]) -> usize {
        self.patterns
            .iter()
            .map(|p| longest_border(p, &bytes[bytes.len().saturating_sub(p.len() - 1)..]))
            .max()
            .unwrap_or(0)
    }
}

/// The length of the longest end of `tail` that equals a start of `pattern` (ASCII case
/// ignored), by the Knuth–Morris–Pratt automaton: linear in both lengths. `tail` is shorter
/// than `pattern`, so the whole pattern never matches.
fn longest_border(pattern: &[u8], tail: &[u8]) -> usize {
    let eq = |a: u8, b: u8| a.eq_ignore_ascii_case(&b);
    let mut fail = vec![0usize; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && !eq(pattern[i], pattern[k]) {
            k = fail[k - 1];
        }
        if eq(pattern[i], pattern[k]) {
            k += 1;
        }
        fail[i] = k;
    }
    let mut q = 0;
    for &b in tail {
        while q > 0 && !eq(b, pattern[q]) {
            q = fail[q - 1];
        }
        if eq(b, pattern[q]) {
            q += 1;
        }
    }
    q
}

/// What a scan found, and the decoded views it searched.
pub(super) struct Scan {
    pub spans: Vec<Span>,
    views: Vec<View>,
}

impl Scan {
    /// A place at or before `at` where every view's decoder is between escapes: the start of
    /// an escape sequence that holds `at`, or `at` itself. Decoding again from there reads the
    /// rest of the text exactly as this scan did.
    pub fn restart(&self, at: usize) -> usize {
        self.views.iter().fold(at, |r, view| {
            let i = view.starts.partition_point(|&s| s < at);
            match i.checked_sub(1) {
                Some(prev) if view.end(prev) > at => r.min(view.starts[prev]),
                _ => r,
            }
        })
    }
}

/// The text with one kind of escape decoded: each byte with the place in the original it came
/// from.
struct View {
    bytes: Vec<u8>,
    /// Where each byte's escape (or the byte itself) starts in the original.
    starts: Vec<usize>,
    /// How many bytes of the original each byte came from.
    lens: Vec<u8>,
}

impl View {
    fn with_capacity(n: usize) -> View {
        View {
            bytes: Vec::with_capacity(n),
            starts: Vec::with_capacity(n),
            lens: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, byte: u8, start: usize, len: usize) {
        self.bytes.push(byte);
        self.starts.push(start);
        self.lens.push(len as u8);
    }

    /// Where byte `i`'s source ends in the original.
    fn end(&self, i: usize) -> usize {
        self.starts[i] + usize::from(self.lens[i])
    }
}

type Decoder = fn(&[u8]) -> Option<View>;

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `text` with JSON string escapes decoded; `None` when it has no backslash.
fn decode_json(text: &[u8]) -> Option<View> {
    memchr::memchr(b'\\', text)?;
    let mut view = View::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let (byte, len) = match (text[i], text.get(i + 1)) {
            (b'\\', Some(&c @ (b'"' | b'\\' | b'/'))) => (c, 2),
            (b'\\', Some(b'b')) => (0x08, 2),
            (b'\\', Some(b'f')) => (0x0c, 2),
            (b'\\', Some(b'n')) => (b'\n', 2),
            (b'\\', Some(b'r')) => (b'\r', 2),
            (b'\\', Some(b't')) => (b'\t', 2),
            (b'\\', Some(b'u')) => match unicode_escape(&text[i + 2..]) {
                Some(code) => (u8::try_from(code).unwrap_or(NOT_IN_ANY_FORM), 6),
                None => (b'\\', 1),
            },
            (b, _) => (b, 1),
        };
        view.push(byte, i, len);
        i += len;
    }
    Some(view)
}

/// The code of the four hex digits that start `rest`, if they do; a code past ASCII is kept
/// as one that no form holds.
fn unicode_escape(rest: &[u8]) -> Option<u16> {
    let digits = rest.get(..4)?;
    digits.iter().try_fold(0u16, |code, &d| {
        let d = hex_value(d)?;
        Some(code << 4 | u16::from(d))
    })
}

/// `text` with percent-encoding decoded; `None` when it has no `%`.
fn decode_percent(text: &[u8]) -> Option<View> {
    memchr::memchr(b'%', text)?;
    let mut view = View::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let pair = (text[i] == b'%')
            .then(|| Some(hex_value(*text.get(i + 1)?)? << 4 | hex_value(*text.get(i + 2)?)?))
            .flatten();
        match pair {
            Some(byte) => {
                view.push(byte, i, 3);
                i += 3;
            }
            None => {
                view.push(text[i], i, 1);
                i += 1;
            }
        }
    }
    Some(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "sk_live_Ab1+/Zq9xY";

    fn spans(text: &str) -> Vec<(usize, usize)> {
        let forms = Forms::new([VALUE.as_bytes()]);
        forms
            .scan(text.as_bytes())
            .spans
            .iter()
            .map(|s| (s.start, s.end))
            .collect()
    }

    /// The whole form is found wherever it stands: a span of exactly its bytes.
    fn found_whole(prefix: &str, form: &str) {
        let text = format!("{prefix}{form}>");
        assert_eq!(
            spans(&text),
            vec![(prefix.len(), prefix.len() + form.len())],
            "{form}"
        );
    }

    /// The value, in any case, as hex in either case, and as base64/base64url at every
    /// alignment inside a longer encoded text.
    #[test]
    fn plain_forms_are_found() {
        found_whole("<", VALUE);
        found_whole("<", &VALUE.to_ascii_lowercase());
        found_whole("<", &VALUE.to_ascii_uppercase());
        found_whole("<", &hex::encode(VALUE));
        found_whole("<", &hex::encode_upper(VALUE));
        for pad in ["", "x", "xy", "xyz"] {
            for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
                let encoded = engine.encode(format!("{pad}{VALUE}trailing"));
                assert!(!spans(&encoded).is_empty(), "{pad:?} {encoded}");
                // What is left of the encoding around the span tells at most two bytes at
                // each end of the value.
                let s = spans(&encoded)[0];
                let left = engine.decode(&encoded[..s.0 / 4 * 4]).unwrap_or_default();
                assert!(left.len() <= pad.len() + 2, "{pad:?}: {left:?}");
            }
        }
    }

    /// Every JSON escape form, in any mix with plain characters, and percent-encoding.
    #[test]
    fn escaped_forms_are_found() {
        let every_escaped: String = VALUE.bytes().map(|b| format!("\\u{b:04X}")).collect();
        let mixed: String = VALUE
            .bytes()
            .enumerate()
            .map(|(i, b)| match (i % 3, b) {
                (0, _) => format!("\\u{b:04x}"),
                (1, b'/') => "\\/".to_string(),
                _ => (b as char).to_string(),
            })
            .collect();
        let slashes = VALUE.replace('/', "\\/");
        let percent: String = VALUE.bytes().map(|b| format!("%{b:02X}")).collect();
        let some_percent = VALUE.replace('+', "%2B").replace('/', "%2f");
        for form in [every_escaped, mixed, slashes, percent, some_percent] {
            found_whole("{\"k\":\"", &form);
        }
    }

    /// Text without a form, and near misses, have no span; a non-ASCII escape ends a match.
    #[test]
    fn near_misses_are_not_found() {
        assert!(spans("nothing here at all, sk_live_ and more").is_empty());
        assert!(spans(&VALUE[1..]).is_empty());
        assert!(spans(&VALUE.replacen('A', "\\u0141", 1)).is_empty());
        assert!(spans("\\u00 %4 %zz \\x").is_empty());
    }

    /// Overlapping finds (a value inside its own escape run) merge into one span.
    #[test]
    fn overlapping_finds_merge() {
        let text = format!("{VALUE}{}", &hex::encode(VALUE));
        let got = spans(&text);
        assert_eq!(got, vec![(0, VALUE.len()), (VALUE.len(), text.len())]);
        let double = format!("{}{}", &VALUE[..4], VALUE);
        assert_eq!(spans(&double), vec![(4, double.len())]);
    }

    /// A cut text's end that could start a form, in any view, is found; a harmless end is not.
    #[test]
    fn a_cut_end_that_starts_a_form_is_found() {
        let forms = Forms::new([VALUE.as_bytes()]);
        let check = |text: &str, want: usize| {
            let scan = forms.scan(text.as_bytes());
            assert_eq!(forms.cut_start(text.as_bytes(), &scan), want, "{text}");
        };
        check("ok sk_li", 3);
        check("ok \\u0073\\u006B_l", 3);
        check("ok %73k", 3);
        // `x` could start the base64 of `_li`: an end that starts any form is cut.
        check("ok sk_x", 6);
        check("ok sk_!", 7);
        check(&format!("ok {}", &hex::encode(VALUE)[..9]), 3);
    }

    /// A restart point never falls inside an escape sequence.
    #[test]
    fn restarts_are_between_escapes() {
        let forms = Forms::new([VALUE.as_bytes()]);
        let text = b"ab\\u0041cd%41";
        let scan = forms.scan(text);
        assert_eq!(scan.restart(0), 0);
        assert_eq!(scan.restart(2), 2);
        for inside in 3..8 {
            assert_eq!(scan.restart(inside), 2, "{inside}");
        }
        assert_eq!(scan.restart(8), 8);
        assert_eq!(scan.restart(11), 10);
        assert_eq!(scan.restart(13), 13);
    }
}
