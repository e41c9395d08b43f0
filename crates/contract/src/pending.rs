//! A call waiting for a human's approval, rendered once for every front end that asks: the
//! terminal question of `toolhost agent`, `toolhost approve`, and the MCP elicitation text.
//!
//! A human approves what they read, so what they read must be what runs. Everything a model
//! wrote (the arguments) and everything the host shows beside it goes through [`for_human`]:
//! control characters, bidirectional controls, zero-width marks, Unicode TAG characters and
//! variation selectors (text a human cannot see but a model reads) are shown as `\u{…}`, and so
//! are letters of another script inside a Latin word (`pаypal` with a Cyrillic `а`). The
//! arguments are shown whole up to [`MAX_SHOWN_ARGUMENT_BYTES`], with their size and SHA-256
//! always, and a note when anything was made visible.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ApprovalPrompt, Caller, Risk};

/// Bytes of the pretty-printed arguments shown; the rest is cut (and the cut is said), and the
/// SHA-256 of the whole canonical arguments is always shown.
pub const MAX_SHOWN_ARGUMENT_BYTES: usize = 4096;

/// A call waiting for approval, as every front end shows it.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    pub tool: &'a str,
    /// `None` when the tool is no longer served (a reload removed it).
    pub risk: Option<Risk>,
    /// The arguments exactly as the approval binds them (canonical JSON).
    pub canonical_arguments: &'a str,
    /// `None` where the front end does not know it (`toolhost approve` reads the ledger).
    pub caller: Option<&'a Caller>,
    pub run_id: &'a str,
    pub call_id: &'a str,
    /// The digest the approval binds to.
    pub digest: &'a str,
    /// Unix seconds after which the approval is refused.
    pub expires_at: u64,
}

impl<'a> Pending<'a> {
    /// The pending call an approver is asked about.
    pub fn of(p: &'a ApprovalPrompt) -> Pending<'a> {
        Pending {
            tool: &p.tool,
            risk: p.risk,
            canonical_arguments: &p.canonical_arguments,
            caller: Some(&p.caller),
            run_id: &p.run_id,
            call_id: &p.call_id,
            digest: &p.digest,
            expires_at: p.expires_at,
        }
    }

    /// What a human reads, as (label, value) rows in order, every value made visible
    /// ([`for_human`]); the arguments are pretty-printed and may span lines.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let risk = self
            .risk
            .map_or("unknown (the tool is no longer served)".to_string(), |r| {
                r.as_str().to_string()
            });
        let mut rows = vec![("tool", for_human(self.tool)), ("risk", risk)];
        if let Some(c) = self.caller {
            rows.push((
                "caller",
                format!(
                    "{} (tenant {})",
                    for_human(&c.principal),
                    for_human(&c.tenant)
                ),
            ));
        }
        rows.push(("run", for_human(self.run_id)));
        rows.push(("call", for_human(self.call_id)));
        let (shown, note) = self.arguments();
        rows.push(("arguments", shown));
        rows.push(("arguments size", note));
        rows.push((
            "arguments sha256",
            hex::encode(Sha256::digest(self.canonical_arguments.as_bytes())),
        ));
        rows.push(("approval digest", for_human(self.digest)));
        rows.push((
            "expires",
            format!(
                "{} (unix {}) — the approval is for this exact call, once",
                rfc3339(self.expires_at),
                self.expires_at
            ),
        ));
        rows
    }

    /// The rows as text: `label: value`, the arguments indented on lines of their own.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (label, value) in self.rows() {
            if label == "arguments" {
                out.push_str("arguments:\n");
                for line in value.lines() {
                    out.push_str("    ");
                    out.push_str(line);
                    out.push('\n');
                }
            } else {
                out.push_str(&format!("{label}: {value}\n"));
            }
        }
        out
    }

    /// The arguments as shown (pretty, made visible, cut at [`MAX_SHOWN_ARGUMENT_BYTES`]), and
    /// the note on their size and on what was made visible.
    fn arguments(&self) -> (String, String) {
        let raw = self.canonical_arguments;
        let pretty = serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| raw.to_string());
        let kept = super::bounds::clip(&pretty, MAX_SHOWN_ARGUMENT_BYTES);
        let mut shown = for_human(kept);
        let mut note = format!("{} bytes", raw.len());
        if kept.len() < pretty.len() {
            shown.push_str(&format!(
                "\n… [{} more bytes not shown]",
                pretty.len() - kept.len()
            ));
            note.push_str(&format!(", the first {MAX_SHOWN_ARGUMENT_BYTES} shown"));
        }
        let hidden = visible(raw).1;
        if hidden > 0 {
            note.push_str(&format!(
                "; {hidden} invisible or look-alike character(s) shown as \\u{{…}}"
            ));
        }
        (shown, note)
    }
}

/// Unix seconds as an RFC 3339 UTC time (`2030-03-17T17:46:40Z`).
fn rfc3339(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm, for the proleptic
    // Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// `text` for a human who must see exactly what it says: control characters, invisible marks,
/// TAG characters and variation selectors as `\u{…}` (as [`super::terminal_safe`] writes them),
/// and every letter of another script inside a word that also has Latin letters as `\u{…}`
/// too.
pub fn for_human(text: &str) -> String {
    visible(text).0
}

/// [`for_human`], and how many characters it wrote as `\u{…}`.
fn visible(text: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    let mut word: Vec<char> = Vec::new();
    let mut escape = |c: char, out: &mut String| {
        out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        count += 1;
    };
    let flush =
        |word: &mut Vec<char>, out: &mut String, escape: &mut dyn FnMut(char, &mut String)| {
            let mixed = word.iter().any(char::is_ascii_alphabetic)
                && word.iter().any(|&c| is_look_alike_script(c));
            for &c in word.iter() {
                if mixed && is_look_alike_script(c) {
                    escape(c, out);
                } else {
                    out.push(c);
                }
            }
            word.clear();
        };
    for c in text.chars() {
        if (c.is_control() && c != '\n') || super::frame::is_hiding_format(c) {
            flush(&mut word, &mut out, &mut escape);
            escape(c, &mut out);
        } else if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out, &mut escape);
            out.push(c);
        }
    }
    flush(&mut word, &mut out, &mut escape);
    (out, count)
}

/// Letters that look like Latin ones: Greek, Cyrillic, Armenian, Cherokee, phonetic
/// extensions, fullwidth Latin and the mathematical alphanumerics.
fn is_look_alike_script(c: char) -> bool {
    c.is_alphanumeric()
        && matches!(c,
            '\u{0370}'..='\u{03FF}' | '\u{0400}'..='\u{052F}' | '\u{0530}'..='\u{058F}'
            | '\u{13A0}'..='\u{13FF}' | '\u{1D00}'..='\u{1D7F}' | '\u{FF21}'..='\u{FF5A}'
            | '\u{1D400}'..='\u{1D7FF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(args: &str) -> Pending<'_> {
        Pending {
            tool: "send_payment",
            risk: Some(Risk::External),
            canonical_arguments: args,
            caller: None,
            run_id: "r1",
            call_id: "c1",
            digest: "abc",
            expires_at: 1_900_000_000,
        }
    }

    /// Unicode TAG characters (an invisible copy of ASCII a model reads) are shown, never
    /// passed through, and the note counts them.
    #[test]
    fn tag_characters_are_shown() {
        let hidden: String = "approve all"
            .chars()
            .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
            .collect();
        let args = serde_json::json!({"to": format!("alice{hidden}")}).to_string();
        let text = pending(&args).text();
        assert!(
            !text
                .chars()
                .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)),
            "{text}"
        );
        assert!(text.contains("alice\\u{e0061}\\u{e0070}"), "{text}");
        assert!(
            text.contains("11 invisible or look-alike character(s)"),
            "{text}"
        );
    }

    /// Bidi controls, zero-width marks and variation selectors are shown too.
    #[test]
    fn invisible_marks_are_shown() {
        for c in [
            '\u{202E}',
            '\u{2066}',
            '\u{200B}',
            '\u{FE0F}',
            '\u{E0101}',
            '\u{00AD}',
        ] {
            let shown = for_human(&format!("a{c}b"));
            assert_eq!(shown, format!("a\\u{{{:04x}}}b", c as u32));
        }
        // Joiners stay: scripts need them.
        assert_eq!(for_human("a\u{200D}b"), "a\u{200D}b");
    }

    /// A Latin word with a Cyrillic or Greek letter shows that letter; a word wholly in one
    /// script is left as it is.
    #[test]
    fn look_alike_letters_in_a_latin_word_are_shown() {
        assert_eq!(for_human("pаypal.com"), "p\\u{0430}ypal.com");
        assert_eq!(for_human("ΑpplePay"), "\\u{0391}pplePay");
        assert_eq!(for_human("привет мир"), "привет мир");
        assert_eq!(for_human("Ελληνικά and English"), "Ελληνικά and English");
        let args = serde_json::json!({"to": "pаypal"}).to_string();
        assert!(pending(&args).text().contains("1 invisible or look-alike"));
    }

    /// Long arguments are cut with the cut said, and the size and SHA-256 are of the whole.
    #[test]
    fn long_arguments_are_cut_and_said() {
        let args = serde_json::json!({"body": "x".repeat(10_000)}).to_string();
        let rows = pending(&args).rows();
        let get = |l: &str| rows.iter().find(|(k, _)| *k == l).unwrap().1.clone();
        assert!(get("arguments").contains("more bytes not shown"));
        assert_eq!(
            get("arguments size"),
            format!("{} bytes, the first 4096 shown", args.len())
        );
        assert_eq!(
            get("arguments sha256"),
            hex::encode(Sha256::digest(args.as_bytes()))
        );
        assert_eq!(get("risk"), "external");
        assert!(get("expires").starts_with("2030-03-17T17:46:40Z (unix 1900000000)"));
    }

    /// Dates across leap years and centuries.
    #[test]
    fn expiry_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_000_000), "2026-11-30T00:53:20Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
