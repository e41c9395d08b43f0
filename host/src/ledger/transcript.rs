//! An agent run's transcript: per model step, what was sent and received (digest and size,
//! never content), each attempt, each tool result, and why the run stopped (`detail`: operator
//! text). `toolhost ledger --run RUN` shows it beside the run's calls.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::codec::{from_sql_u64, to_sql_u64};
use super::error::check_key;
use super::{now_ms, Conn, Ledger, LedgerError};

/// Bytes of a transcript entry's `detail` kept.
pub const MAX_TRANSCRIPT_DETAIL: usize = 1024;

/// One model step of an agent run, by digest and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub run_id: String,
    pub step: u32,
    pub kind: String,
    pub digest: String,
    pub size: u64,
    pub at_ms: i64,
    /// What else the entry says (an attempt's outcome, why the run stopped); operator text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl Ledger {
    /// Append one entry of an agent run's transcript (`kind` e.g. "model_request",
    /// "model_attempt", "run_stopped"): a digest and size of what was sent or received, and
    /// operator text in `detail` (cut at [`MAX_TRANSCRIPT_DETAIL`]).
    pub fn transcript(
        &self,
        run_id: &str,
        step: u32,
        kind: &str,
        digest: &str,
        size: u64,
        detail: &str,
    ) -> Result<(), LedgerError> {
        check_key(run_id, "", "")?;
        let detail = cut(detail, MAX_TRANSCRIPT_DETAIL);
        let conn = match self.conn() {
            Conn::Sqlite(conn) => conn,
            Conn::Postgres(pg) => return pg.transcript(run_id, step, kind, digest, size, detail),
        };
        conn.prepare_cached(
            "INSERT INTO transcript (run_id, step, kind, digest, size, at_ms, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            run_id,
            step,
            kind,
            digest,
            to_sql_u64(size),
            now_ms(),
            detail
        ])?;
        Ok(())
    }

    /// The transcript of a run, by step and then append order.
    pub fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        let conn = match self.conn() {
            Conn::Sqlite(conn) => conn,
            Conn::Postgres(pg) => return pg.transcript_entries(run_id),
        };
        let mut stmt = conn.prepare_cached(
            "SELECT run_id, step, kind, digest, size, at_ms, detail FROM transcript
             WHERE run_id = ?1 ORDER BY step, id",
        )?;
        let rows = stmt.query_map([run_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
                row.get::<_, String>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (run_id, step, kind, digest, size, at_ms, detail) = row?;
            out.push(TranscriptEntry {
                run_id,
                step,
                kind,
                digest,
                size: from_sql_u64("transcript size", size)?,
                at_ms,
                detail,
            });
        }
        Ok(out)
    }
}
