//! Taking a call's secret values out of what reaches the guest or the host's records: response
//! headers and bodies (a server that echoes a value), and the call's results, reports,
//! captured output and fault details (a value the guest found some other way).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use wasmtime::component::Val;

use super::echo::Span;
use super::secrets::CallSecrets;

/// `text[from..]` with the spans that start before `limit` replaced by their owners'
/// placeholders, up to `limit` or the end of the last such span, whichever is later: the bytes
/// out and where in `text` they end. A span that starts before `from` (a part already passed on)
/// is replaced from `from` on.
fn render(
    text: &[u8],
    spans: &[Span],
    from: usize,
    limit: usize,
    secrets: &CallSecrets,
) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(limit.saturating_sub(from));
    let mut pos = from;
    for s in spans.iter().filter(|s| s.end > from && s.start < limit) {
        let start = s.start.max(pos);
        out.extend_from_slice(&text[pos..start]);
        out.extend_from_slice(secrets.placeholder(s.owner));
        pos = s.end.max(pos);
    }
    let end = pos.max(limit.min(text.len()));
    out.extend_from_slice(&text[pos..end]);
    (out, end)
}

impl CallSecrets {
    /// `bytes` with every form of every secret value replaced by its placeholder (`None`:
    /// nothing to replace).
    pub fn redact_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let forms = self.forms.as_ref()?;
        let scan = forms.scan(bytes);
        if scan.spans.is_empty() {
            return None;
        }
        Some(render(bytes, &scan.spans, 0, bytes.len(), self).0)
    }

    /// `text` with every secret value replaced by its placeholder. Placeholders are ASCII and
    /// replace whole forms (ASCII too), so the result is UTF-8 whenever `text` is.
    pub fn redact_string(&self, text: String) -> String {
        match self.redact_bytes(text.as_bytes()) {
            Some(out) => String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            None => text,
        }
    }

    /// Captured bytes redacted; when they were `cut` at a capacity, also without a trailing
    /// start of a form of a value (what a cut through a value would leave).
    pub fn redact_cut(&self, bytes: Vec<u8>, cut: bool) -> Vec<u8> {
        let Some(forms) = &self.forms else {
            return bytes;
        };
        let scan = forms.scan(&bytes);
        let limit = if cut {
            forms.cut_start(&bytes, &scan)
        } else {
            bytes.len()
        };
        if scan.spans.is_empty() && limit == bytes.len() {
            return bytes;
        }
        // A whole form that runs past the cut stands as its placeholder; nothing after it.
        render(&bytes, &scan.spans, 0, limit, self).0
    }

    /// The first `max` bytes of `text` (and as many more as one form may span) redacted,
    /// without a trailing start of a form; whether anything of `text` was left out. The caller
    /// cuts the result to `max` bytes: no value, whole or in part, survives that cut.
    pub fn redact_window(&self, text: &str, max: usize) -> (String, bool) {
        let reach = self.forms.as_ref().map_or(0, |f| f.reach());
        let end = text.floor_char_boundary(max.saturating_add(reach));
        let out = self.redact_cut(text.as_bytes()[..end].to_vec(), end < text.len());
        let text_out = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (text_out, end < text.len())
    }

    /// Every string inside `vals` (records, lists, variants, options, results…) redacted.
    pub fn redact_vals(&self, vals: &mut [Val]) {
        if self.is_empty() {
            return;
        }
        for v in vals {
            self.redact_val(v);
        }
    }

    fn redact_val(&self, v: &mut Val) {
        match v {
            Val::String(s) => *s = self.redact_string(std::mem::take(s)),
            Val::List(items) | Val::Tuple(items) => self.redact_vals(items),
            Val::Record(fields) => fields.iter_mut().for_each(|(_, f)| self.redact_val(f)),
            Val::Variant(_, Some(inner)) | Val::Option(Some(inner)) => self.redact_val(inner),
            Val::Result(Ok(Some(inner)) | Err(Some(inner))) => self.redact_val(inner),
            _ => {}
        }
    }

    /// Header names and values redacted; `content-length` removed, since a redacted body may
    /// have another length (and the original one would tell the value's length). A header
    /// whose redacted name or value is not valid is dropped, never kept as it came.
    pub fn redact_headers(&self, headers: &mut http::HeaderMap) {
        if self.is_empty() {
            return;
        }
        headers.remove(http::header::CONTENT_LENGTH);
        let mut name = None;
        for (next, value) in std::mem::take(headers) {
            if let Some(next) = next {
                name = match self.redact_bytes(next.as_str().as_bytes()) {
                    Some(out) => http::HeaderName::from_bytes(&out).ok(),
                    None => Some(next),
                };
            }
            let Some(name) = &name else { continue };
            let value = match self.redact_bytes(value.as_bytes()) {
                Some(out) => match http::HeaderValue::from_bytes(&out) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                None => value,
            };
            headers.append(name.clone(), value);
        }
    }
}

/// A response body with every form of every secret value replaced by its placeholder, also
/// across frame boundaries: the last bytes of what arrived, as many as one form may span, wait
/// for the next frame.
pub struct RedactedBody<B> {
    inner: B,
    secrets: CallSecrets,
    /// Bytes received: the first `sent` were passed on (kept so that an escape sequence cut
    /// by a frame is decoded whole), the rest not yet.
    tail: BytesMut,
    sent: usize,
    /// Trailers that arrived while a tail was still to be passed on.
    trailers: Option<http::HeaderMap>,
    ended: bool,
}

impl<B> RedactedBody<B> {
    pub fn new(inner: B, secrets: CallSecrets) -> Self {
        RedactedBody {
            inner,
            secrets,
            tail: BytesMut::new(),
            sent: 0,
            trailers: None,
            ended: false,
        }
    }

    /// Pass on what arrived, keeping back what could be the start of a form. What is kept of
    /// the part passed on starts where every decoder starts afresh.
    fn take_data(&mut self, data: Bytes) -> Option<Bytes> {
        let Some(forms) = self.secrets.forms.as_ref() else {
            return Some(data);
        };
        self.tail.extend_from_slice(&data);
        let keep = forms.reach().saturating_sub(1);
        if self.tail.len() - self.sent <= keep {
            return None;
        }
        let limit = self.tail.len() - keep;
        let scan = forms.scan(&self.tail);
        let (out, end) = render(&self.tail, &scan.spans, self.sent, limit, &self.secrets);
        let restart = scan.restart(end);
        let _ = self.tail.split_to(restart);
        self.sent = end - restart;
        Some(Bytes::from(out))
    }

    /// Everything still held, redacted.
    fn flush(&mut self) -> Option<Bytes> {
        if self.tail.len() == self.sent {
            return None;
        }
        let held = self.tail.split().freeze();
        let from = std::mem::take(&mut self.sent);
        let out = match &self.secrets.forms {
            Some(forms) => {
                let scan = forms.scan(&held);
                render(&held, &scan.spans, from, held.len(), &self.secrets).0
            }
            None => held[from..].to_vec(),
        };
        Some(Bytes::from(out))
    }
}

impl<B> Body for RedactedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                if let Some(rest) = this.flush() {
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.ended = true;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    if let Some(out) = this.take_data(data) {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Err(frame) => {
                    if let Ok(mut trailers) = frame.into_trailers() {
                        this.secrets.redact_headers(&mut trailers);
                        this.trailers = Some(trailers);
                    }
                    this.ended = true;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.tail.len() == self.sent && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{Secret, SecretValue, Secrets};
    use crate::Allowlist;
    use http_body_util::BodyExt;
    use std::sync::Arc;

    fn secrets(values: &[&str]) -> (CallSecrets, Vec<String>) {
        let list: Vec<Arc<Secret>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                Arc::new(Secret {
                    name: format!("S{i}"),
                    value: SecretValue::new(v.to_string()).unwrap(),
                    hosts: Allowlist::default(),
                })
            })
            .collect();
        let call = CallSecrets::new(&Secrets::new(list));
        let placeholders = call.env().map(|(_, p)| p.to_string()).collect();
        (call, placeholders)
    }

    /// Every copy of every value is replaced, leftmost first; untouched text stays as it was.
    #[test]
    fn every_copy_is_replaced() {
        let (call, p) = secrets(&["sk_live_AAAA", "pw_BBBBBBBB"]);
        let text = "a sk_live_AAAA b pw_BBBBBBBB c sk_live_AAAAsk_live_AAAA";
        let out = call.redact_string(text.to_string());
        assert_eq!(out, format!("a {0} b {1} c {0}{0}", p[0], p[1]));
        assert_eq!(call.redact_string("nothing here".into()), "nothing here");
    }

    /// A value with `"`, `\` and `/` is also found as a JSON string escapes it.
    #[test]
    fn json_escaped_echoes_are_redacted() {
        let (call, p) = secrets(&[r#"a"b\c/d_123"#]);
        for echo in [r#"a"b\c/d_123"#, r#"a\"b\\c/d_123"#, r#"a\"b\\c\/d_123"#] {
            let out = call.redact_string(format!("{{\"k\":\"{echo}\"}}"));
            assert_eq!(out, format!("{{\"k\":\"{}\"}}", p[0]), "{echo}");
        }
    }

    /// Of two values starting at one place, the longer is replaced whole.
    #[test]
    fn the_longest_value_at_a_place_wins() {
        let (call, p) = secrets(&["abcdefgh", "abcdefghXYZ"]);
        assert_eq!(
            call.redact_string("<abcdefghXYZ>".into()),
            format!("<{}>", p[1])
        );
        assert_eq!(
            call.redact_string("<abcdefgh>".into()),
            format!("<{}>", p[0])
        );
    }

    /// A value cut off at a capacity leaves no start of itself behind.
    #[test]
    fn a_cut_value_leaves_no_prefix() {
        let (call, p) = secrets(&["sk_live_AAAA"]);
        let out = call.redact_cut(b"ok sk_live_AAAA then sk_live_A".to_vec(), true);
        assert_eq!(out, format!("ok {} then ", p[0]).into_bytes());
        // Bytes that were not cut keep their end, even one that starts like a value.
        let whole = call.redact_cut(b"ends with s".to_vec(), false);
        assert_eq!(whole, b"ends with s");
    }

    /// A report's window: a value inside it is replaced, one cut by the window's end leaves no
    /// prefix, and a shrinking replacement cannot pull a later value's start into the kept part.
    #[test]
    fn a_window_keeps_no_part_of_a_value() {
        let long = format!("tok_{}", "L".repeat(300));
        let (call, p) = secrets(&[long.as_str()]);
        // Longer than the window and the reach of a form (hex, every byte escaped) together.
        let text = format!("{long} ").repeat(20) + "tail";
        let (out, cut) = call.redact_window(&text, 10);
        assert!(cut);
        assert_eq!(
            out,
            format!("{} ", p[0]).repeat(20)[..out.len()].to_string()
        );
        assert!(!out.contains("tok_L"), "{out}");
        let (whole, cut) = call.redact_window("short", 10);
        assert_eq!((whole.as_str(), cut), ("short", false));
    }

    /// Strings nested anywhere in a result are redacted.
    #[test]
    fn nested_values_are_redacted() {
        let (call, p) = secrets(&["sk_live_AAAA"]);
        let s = || Val::String("x sk_live_AAAA".into());
        let mut vals = vec![Val::Record(vec![
            ("a".into(), Val::List(vec![s()])),
            ("b".into(), Val::Option(Some(Box::new(s())))),
            ("c".into(), Val::Result(Err(Some(Box::new(s()))))),
            ("d".into(), Val::Variant("v".into(), Some(Box::new(s())))),
        ])];
        call.redact_vals(&mut vals);
        let shown = format!("{vals:?}");
        assert!(!shown.contains("sk_live"), "{shown}");
        assert_eq!(shown.matches(&p[0]).count(), 4);
    }

    /// `text` sent in frames of `size` bytes through a redacting body: what comes out.
    async fn through_frames(text: &str, size: usize, call: &CallSecrets) -> String {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = text
            .as_bytes()
            .chunks(size)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let inner = http_body_util::StreamBody::new(futures::stream::iter(frames));
        let body = RedactedBody::new(inner, call.clone());
        let out = body.collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A body that echoes a value split over many frames comes out with the placeholder.
    #[tokio::test]
    async fn bodies_are_redacted_across_frames() {
        let (call, p) = secrets(&["sk_live_AAAA", "pw_BBBBBBBB"]);
        let text = "start sk_live_AAAA middle pw_BBBBBBBB end sk_live_AAAA";
        for size in [1, 2, 3, 5, 11, 64] {
            let out = through_frames(text, size, &call).await;
            let want = format!("start {0} middle {1} end {0}", p[0], p[1]);
            assert_eq!(out, want, "frames of {size}");
        }
    }

    /// Escaped and encoded echoes split over frames anywhere, after a run of backslashes of
    /// either parity, come out with the placeholder; the rest of the body is unchanged.
    #[tokio::test]
    async fn encoded_echoes_are_redacted_across_frames() {
        let value = "sk_live_AAAA/BB";
        let (call, p) = secrets(&[value]);
        let unicode: String = value.bytes().map(|b| format!("\\u{b:04x}")).collect();
        let percent: String = value.bytes().map(|b| format!("%{b:02x}")).collect();
        for (form, run) in [
            (unicode.as_str(), "\\\\"),
            (&percent, "\\\\\\"),
            (&hex::encode(value), ""),
        ] {
            let text = format!("{{\"a\":\"x{run}\",\"b\":\"{form}\"}} tail");
            let want = format!("{{\"a\":\"x{run}\",\"b\":\"{}\"}} tail", p[0]);
            for size in [1, 2, 3, 5, 7, 64] {
                let out = through_frames(&text, size, &call).await;
                assert_eq!(out, want, "{form}, frames of {size}");
            }
        }
    }

    /// A header whose name or value holds the value, in any case, is redacted; `content-length`
    /// goes.
    #[test]
    fn headers_are_redacted() {
        let (call, p) = secrets(&["sk_live_AAAA"]);
        let mut h = http::HeaderMap::new();
        h.insert("x-echo", "Bearer sk_live_AAAA".parse().unwrap());
        h.insert("content-length", "42".parse().unwrap());
        h.insert(
            http::HeaderName::from_bytes(b"x-SK_LIVE_AAAA").unwrap(),
            "1".parse().unwrap(),
        );
        h.append("x-echo", "c2tfbGl2ZV9BQUFB".parse().unwrap());
        call.redact_headers(&mut h);
        let echoes: Vec<_> = h.get_all("x-echo").iter().collect();
        assert_eq!(echoes[0], format!("Bearer {}", p[0]).as_str());
        assert_eq!(echoes[1], p[0].as_str());
        assert!(h.get("content-length").is_none());
        let renamed = format!("x-{}", p[0].to_ascii_lowercase());
        assert_eq!(h[renamed.as_str()], "1");
        let shown = format!("{h:?}").to_ascii_lowercase();
        assert!(!shown.contains("sk_live"), "{shown}");
    }
}
