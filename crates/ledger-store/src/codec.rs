//! How contract values map to SQL columns and back: statuses and codes as their stable
//! snake_case names, unsigned sizes as SQLite integers, the replay result as JSON.

use serde::de::DeserializeOwned;
use serde_json::Value;

use std::time::{SystemTime, UNIX_EPOCH};

use super::LedgerError;
use toolhost_contract::{Code, ToolResult};

/// A status or code back from its stored snake_case name.
pub fn parse_name<T: DeserializeOwned>(what: &str, name: &str) -> Result<T, LedgerError> {
    serde_json::from_value(Value::String(name.to_owned()))
        .map_err(|_| LedgerError::Corrupt(format!("unknown {what} {name:?}")))
}

/// An optional stored code.
pub fn parse_code(name: Option<&str>) -> Result<Option<Code>, LedgerError> {
    name.map(|n| parse_name("code", n)).transpose()
}

/// A size or counter as a SQLite integer (saturating: SQLite integers are signed 64-bit).
pub fn to_sql_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored size or counter back as `u64`.
pub fn from_sql_u64(what: &str, v: i64) -> Result<u64, LedgerError> {
    u64::try_from(v).map_err(|_| LedgerError::Corrupt(format!("negative {what} {v}")))
}

/// The replay result back from its stored JSON.
pub fn decode_result(json: &str) -> Result<ToolResult, LedgerError> {
    serde_json::from_str(json)
        .map_err(|e| LedgerError::Corrupt(format!("stored result does not decode: {e}")))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_contract::Status;

    /// Every status and code round-trips through its stored name.
    #[test]
    fn names_round_trip() {
        for s in Status::ALL {
            assert_eq!(parse_name::<Status>("status", s.as_str()).unwrap(), *s);
        }
        for c in Code::ALL {
            assert_eq!(parse_code(Some(c.as_str())).unwrap(), Some(*c));
        }
        assert!(parse_code(Some("no_such_code")).is_err());
    }
}
