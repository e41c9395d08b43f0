//! How long a provider asked us to wait before the next attempt: `retry-after-ms` (OpenAI's
//! milliseconds) when present, else `Retry-After` in either of its forms (seconds, or an HTTP
//! date), never longer than [`MAX_RETRY_AFTER`].

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};

/// Longest wait honoured; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The wait `headers` ask for, judged against `now` (for an HTTP date); `None` when they ask
/// for none or say nothing readable. A date already past asks for no wait.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let millis = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64((ms / 1000.0).min(MAX_RETRY_AFTER.as_secs_f64())));
    let wait = millis.or_else(|| {
        let v = text(RETRY_AFTER.as_str())?;
        match v.parse::<u64>() {
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(_) => {
                let at = httpdate::parse_http_date(v).ok()?;
                Some(at.duration_since(now).unwrap_or(Duration::ZERO))
            }
        }
    })?;
    Some(wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// 2015-10-21 07:28:00 UTC.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn seconds_dates_and_milliseconds_are_each_read() {
        let wait = |pairs: &[(&'static str, &str)]| retry_after(&headers(pairs), now());
        assert_eq!(wait(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            wait(&[("retry-after", "Wed, 21 Oct 2015 07:28:03 GMT")]),
            Some(Duration::from_secs(3)),
            "an HTTP date, three seconds from now"
        );
        assert_eq!(
            wait(&[("retry-after-ms", "2500")]),
            Some(Duration::from_millis(2500)),
            "milliseconds alone"
        );
        assert_eq!(
            wait(&[("retry-after", "9"), ("retry-after-ms", "2500")]),
            Some(Duration::from_millis(2500)),
            "milliseconds are the finer of the two"
        );
    }

    #[test]
    fn past_huge_and_unreadable_waits_are_bounded() {
        let wait = |pairs: &[(&'static str, &str)]| retry_after(&headers(pairs), now());
        assert_eq!(
            wait(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
            Some(Duration::ZERO),
            "a date already past"
        );
        assert_eq!(wait(&[("retry-after", "86400")]), Some(MAX_RETRY_AFTER));
        assert_eq!(
            wait(&[("retry-after", "Thu, 01 Jan 2099 00:00:00 GMT")]),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(wait(&[("retry-after-ms", "1e300")]), Some(MAX_RETRY_AFTER));
        for junk in ["soon", "-3", "3.5 seconds", ""] {
            assert_eq!(wait(&[("retry-after", junk)]), None, "{junk:?}");
        }
        for junk in ["NaN", "-1", "later"] {
            assert_eq!(wait(&[("retry-after-ms", junk)]), None, "{junk:?}");
        }
        assert_eq!(
            wait(&[("retry-after-ms", "later"), ("retry-after", "2")]),
            Some(Duration::from_secs(2)),
            "an unreadable retry-after-ms falls back to Retry-After"
        );
        assert_eq!(wait(&[]), None);
    }
}
