//! Server-sent events (the WHATWG "event stream" format) → the data of each event, as
//! chat-completions endpoints stream them.
//!
//! What the format allows, and this reader accepts: lines ended by CRLF, LF or a bare CR (a CR
//! and the LF after it are one line end even when they arrive in different reads), a leading
//! byte-order mark (ignored once, at the very start of the stream), comment lines (`:` —
//! keep-alives), fields without a value, and `data` spread over several lines (joined with
//! LF). Fields other than `data` (`event`, `id`, `retry`) carry nothing a chat-completions
//! stream needs and are skipped. Every buffer is bounded by [`MAX_EVENT_BYTES`].

use super::turn::TurnError;

/// Bytes of one line, and of one event's data, kept; more is a malformed stream.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// Splits a byte stream into server-sent events and returns each event's data.
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    /// The last byte ended a line with a CR: an LF right after it ends nothing more.
    after_cr: bool,
    /// No line has ended yet: a byte-order mark at its start is dropped.
    first_line: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            after_cr: false,
            first_line: true,
        }
    }
}

impl SseParser {
    /// Feed bytes; returns the data of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, TurnError> {
        let mut events = Vec::new();
        for &b in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {} // the LF of a CRLF whose CR ended the line
                b'\n' | b'\r' => self.end_line(&mut events)?,
                _ => {
                    if self.line.len() >= MAX_EVENT_BYTES {
                        return Err(too_large());
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(events)
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<(), TurnError> {
        let line = String::from_utf8(std::mem::take(&mut self.line))
            .map_err(|_| TurnError::Malformed("an event is not UTF-8".into()))?;
        let line = if std::mem::replace(&mut self.first_line, false) {
            line.strip_prefix('\u{feff}').unwrap_or(&line).to_string()
        } else {
            line
        };
        if line.is_empty() {
            if self.has_data {
                events.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            if self.data.len() + value.len() > MAX_EVENT_BYTES {
                return Err(too_large());
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }
}

fn too_large() -> TurnError {
    TurnError::TooLarge("an event")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split of `text` into two reads gives `want`.
    fn every_split(text: &[u8], want: &[&str]) {
        for cut in 0..=text.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&text[..cut]).unwrap();
            got.extend(p.push(&text[cut..]).unwrap());
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    /// Events split anywhere across reads come out whole; comments and CRLF are handled.
    #[test]
    fn events_survive_any_split() {
        let text = ": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        every_split(text.as_bytes(), &["{\"a\":1}", "x\ny", "[DONE]"]);
    }

    /// Bare CR ends a line as LF does, and a CR at the end of one read followed by an LF at
    /// the start of the next is one line end, not two (which would end the event early).
    #[test]
    fn bare_cr_line_endings() {
        every_split(b"data: a\rdata: b\r\rdata: c\r\r", &["a\nb", "c"]);
        every_split(b"data: a\r\ndata: b\r\n\r\n", &["a\nb"]);
        // Mixed in one stream.
        every_split(b"data: 1\r\rdata: 2\n\ndata: 3\r\n\r\n", &["1", "2", "3"]);
    }

    /// A byte-order mark at the start of the stream is ignored, wherever the read splits it;
    /// anywhere else it is part of the line (here: an unknown field, skipped).
    #[test]
    fn leading_byte_order_mark() {
        every_split(b"\xEF\xBB\xBFdata: a\n\n", &["a"]);
        every_split(b"\xEF\xBB\xBF: comment\ndata: a\n\n", &["a"]);
        every_split(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n", &["a"]);
    }

    /// Lines and events past the cap are refused as too large (not retried: see provider.rs).
    #[test]
    fn bounded() {
        let mut p = SseParser::default();
        let long = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(p.push(&long).unwrap_err(), TurnError::TooLarge("an event"));
        let mut p = SseParser::default();
        let half = format!("data: {}\n", "y".repeat(MAX_EVENT_BYTES / 2 + 1));
        assert!(p.push(half.as_bytes()).unwrap().is_empty());
        assert_eq!(
            p.push(half.as_bytes()).unwrap_err(),
            TurnError::TooLarge("an event")
        );
    }

    /// Bytes that are not UTF-8 make the stream malformed.
    #[test]
    fn not_utf8() {
        let mut p = SseParser::default();
        assert!(matches!(
            p.push(b"data: \xFF\n\n"),
            Err(TurnError::Malformed(_))
        ));
    }
}
