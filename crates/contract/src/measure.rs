//! The size of a value as compact JSON, measured without building the text.

use serde::Serialize;

/// Bytes `value` takes as compact JSON (`serde_json::to_vec(value).len()`), counted as it is
/// written, without allocating. `u64::MAX` if it cannot be serialized.
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> u64 {
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => u64::MAX,
    }
}

struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn counts_what_to_vec_writes() {
        for v in [
            json!(null),
            json!({"a": [1, 2.5, "x\n\u{2028}é"], "b": {"c": true}}),
            json!("a".repeat(10_000)),
        ] {
            assert_eq!(
                super::json_len(&v),
                serde_json::to_vec(&v).unwrap().len() as u64
            );
        }
    }
}
