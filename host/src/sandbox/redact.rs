//! Taking a call's secret values out of what reaches the guest or the host's records: response
//! headers and bodies (a server that echoes a value), and the call's results, reports,
//! captured output and fault details (a value the guest found some other way).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use wasmtime::component::Val;

use super::secrets::CallSecrets;

/// `hay` with every occurrence of each `from` replaced by its `to`, leftmost first (the longest
/// of those starting at one place); `None` when nothing matched. Each pattern's next match is searched for once per match it makes,
/// so the work is linear in `hay` for each pattern.
pub(super) fn replace_all(hay: &[u8], pairs: &[(&[u8], &[u8])]) -> Option<Vec<u8>> {
    let (out, _, any) = replace_before(hay, pairs, hay.len());
    any.then_some(out)
}

/// Replace the matches of `pairs` in `hay` that start before `limit`: the text up to the end of
/// the last such match or `limit` (whichever is later) with them replaced, how many bytes of
/// `hay` that covers, and whether anything matched.
fn replace_before(hay: &[u8], pairs: &[(&[u8], &[u8])], limit: usize) -> (Vec<u8>, usize, bool) {
    let finders: Vec<memchr::memmem::Finder<'_>> = pairs
        .iter()
        .map(|(from, _)| memchr::memmem::Finder::new(from))
        .collect();
    let find = |i: usize, from: usize| finders[i].find(&hay[from..]).map(|at| from + at);
    let mut next: Vec<Option<usize>> = (0..pairs.len()).map(|i| find(i, 0)).collect();
    let mut out = Vec::with_capacity(hay.len());
    let (mut pos, mut any) = (0, false);
    loop {
        let best = next
            .iter()
            .enumerate()
            .filter_map(|(i, at)| at.filter(|&a| a < limit).map(|a| (a, i)))
            .min_by_key(|&(a, i)| (a, std::cmp::Reverse(pairs[i].0.len())));
        let Some((at, i)) = best else { break };
        out.extend_from_slice(&hay[pos..at]);
        out.extend_from_slice(pairs[i].1);
        pos = at + pairs[i].0.len();
        any = true;
        for (j, slot) in next.iter_mut().enumerate() {
            if slot.is_some_and(|a| a < pos) {
                *slot = if pos <= hay.len() { find(j, pos) } else { None };
            }
        }
    }
    let end = pos.max(limit.min(hay.len()));
    out.extend_from_slice(&hay[pos..end]);
    (out, end, any)
}

impl CallSecrets {
    /// `bytes` with every secret value replaced by its placeholder (`None`: nothing to replace).
    pub fn redact_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        replace_all(bytes, &self.redactions())
    }

    /// `text` with every secret value replaced by its placeholder. Values are ASCII, so the
    /// result is UTF-8 whenever `text` is.
    pub fn redact_string(&self, text: String) -> String {
        match self.redact_bytes(text.as_bytes()) {
            Some(out) => String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            None => text,
        }
    }

    /// Captured bytes redacted; when they were `cut` at a capacity, also without a trailing
    /// start of a value (what a cut through a value would leave).
    pub fn redact_cut(&self, bytes: Vec<u8>, cut: bool) -> Vec<u8> {
        if self.is_empty() {
            return bytes;
        }
        let mut out = self.redact_bytes(&bytes).unwrap_or(bytes);
        if !cut {
            return out;
        }
        let partial = self
            .redactions()
            .iter()
            .filter_map(|(value, _)| {
                (1..value.len())
                    .rev()
                    .find(|&n| out.len() >= n && out.ends_with(&value[..n]))
            })
            .max();
        if let Some(n) = partial {
            out.truncate(out.len() - n);
        }
        out
    }

    /// The first `max` bytes of `text` (and the length of one value more) redacted, without a
    /// trailing start of a value; whether anything of `text` was left out. The caller cuts the
    /// result to `max` bytes: no value, whole or in part, survives that cut.
    pub fn redact_window(&self, text: &str, max: usize) -> (String, bool) {
        let end = text.floor_char_boundary(max.saturating_add(self.longest()));
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

    /// Header values redacted in place; `content-length` removed, since a redacted body may
    /// have another length (and the original one would tell the value's length).
    pub fn redact_headers(&self, headers: &mut http::HeaderMap) {
        if self.is_empty() {
            return;
        }
        headers.remove(http::header::CONTENT_LENGTH);
        for value in headers.values_mut() {
            if let Some(out) = self.redact_bytes(value.as_bytes()) {
                // A replaced value holds only bytes of the original and of a placeholder.
                if let Ok(v) = http::HeaderValue::from_bytes(&out) {
                    *value = v;
                }
            }
        }
    }
}

/// A response body with every secret value replaced by its placeholder, also across frame
/// boundaries: the last `longest - 1` bytes of what arrived wait for the next frame.
pub struct RedactedBody<B> {
    inner: B,
    secrets: CallSecrets,
    /// Bytes received and not yet passed on (shorter than the longest value).
    tail: BytesMut,
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
            trailers: None,
            ended: false,
        }
    }

    /// Pass on what arrived, keeping back what could be the start of a value.
    fn take_data(&mut self, data: Bytes) -> Option<Bytes> {
        self.tail.extend_from_slice(&data);
        let keep = self.secrets.longest().saturating_sub(1);
        if self.tail.len() <= keep {
            return None;
        }
        let limit = self.tail.len() - keep;
        let (out, used, _) = replace_before(&self.tail, &self.secrets.redactions(), limit);
        let _ = self.tail.split_to(used);
        Some(Bytes::from(out))
    }

    /// Everything still held, redacted.
    fn flush(&mut self) -> Option<Bytes> {
        if self.tail.is_empty() {
            return None;
        }
        let held = self.tail.split().freeze();
        Some(self.secrets.redact_bytes(&held).map_or(held, Bytes::from))
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
        self.ended && self.tail.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::secrets::{Secret, SecretValue};
    use crate::sandbox::Allowlist;
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
        let call = CallSecrets::new(&list);
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
        let text = format!("{long} {long} tail");
        let (out, cut) = call.redact_window(&text, 10);
        assert!(cut);
        assert_eq!(out, format!("{0} {0} ", p[0])[..out.len()].to_string());
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

    /// A body that echoes a value split over many frames comes out with the placeholder.
    #[tokio::test]
    async fn bodies_are_redacted_across_frames() {
        let (call, p) = secrets(&["sk_live_AAAA", "pw_BBBBBBBB"]);
        let text = "start sk_live_AAAA middle pw_BBBBBBBB end sk_live_AAAA";
        for size in [1, 2, 3, 5, 11, 64] {
            let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = text
                .as_bytes()
                .chunks(size)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            let inner = http_body_util::StreamBody::new(futures::stream::iter(frames));
            let body = RedactedBody::new(inner, call.clone());
            let out = body.collect().await.unwrap().to_bytes();
            let want = format!("start {0} middle {1} end {0}", p[0], p[1]);
            assert_eq!(String::from_utf8_lossy(&out), want, "frames of {size}");
        }
    }

    /// Headers are redacted and lose `content-length`.
    #[test]
    fn headers_are_redacted() {
        let (call, p) = secrets(&["sk_live_AAAA"]);
        let mut h = http::HeaderMap::new();
        h.insert("x-echo", "Bearer sk_live_AAAA".parse().unwrap());
        h.insert("content-length", "42".parse().unwrap());
        call.redact_headers(&mut h);
        assert_eq!(h["x-echo"], format!("Bearer {}", p[0]).as_str());
        assert!(h.get("content-length").is_none());
    }
}
