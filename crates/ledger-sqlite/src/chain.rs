//! The hash chain in SQLite: the two SQL functions its triggers call, registered on every
//! connection, and the reads `toolhost ledger verify` checks (`toolhost_ledger_store::chain`).
//!
//! The triggers of schema version 9 ([`SCHEMA_V9`], applied by `schema.rs`) append one link per write to `chain_links`,
//! whatever connection writes: a connection without these functions cannot write a chained
//! table at all (the trigger fails, and the write with it).

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::Db;
use toolhost_ledger_store::chain::{line_digests, ChainedRow, Evidence, FieldDigest, Link};
use toolhost_ledger_store::LedgerError;

/// The one chain of a SQLite ledger (every write of the file takes its one write lock).
pub const LOCAL_CHAIN: &str = "local";

/// Version 9: the hash chain (`crates/ledger-store/src/chain.rs`). Every write to a chained
/// table appends one link to `chain_links` from a trigger, in the write's own transaction:
/// `chain_append` is where the triggers append (its own trigger reads the position, the
/// predecessor's hash, which SQLite does not store twice, and the time), `chain_rows` every
/// chained row with the digest of its recorded columns (the same expression its trigger uses;
/// `toolhost ledger verify` compares them). The rows already here
/// are chained in order when the version is applied: calls by admission, then reconciliations,
/// transcript entries, spent tokens and tasks.
pub(crate) const SCHEMA_V9: &str = r#"
-- A link's digests are stored as bytes and its predecessor's hash is not stored again: every
-- commit writes the chain's last page, and the smaller the links, the fewer pages they fill.
CREATE TABLE chain_links (
    seq       INTEGER PRIMARY KEY,             -- position in the chain, from 1
    kind      TEXT    NOT NULL,                -- call, reconcile, transcript, token, task
    run_id    TEXT    NOT NULL,
    key       TEXT    NOT NULL,                -- call id, entry id, token id or task id
    first     INTEGER NOT NULL,                -- a call's first event line this write appended
    lines     BLOB    NOT NULL,                -- the SHA-256 of each of those lines, in order
    attached  TEXT,                            -- the digest of the row's recorded columns
    at_ms     INTEGER NOT NULL,
    hash      BLOB    NOT NULL                 -- over the fields and the previous link's hash
);

CREATE VIEW chain_append AS
SELECT kind, run_id, key, first, lines, attached FROM chain_links WHERE 0;

-- One row inserted with VALUES: an INSERT … SELECT that reads chain_links would copy its
-- rows to a temporary table first. NEW.lines is the hex of the digests, as the hash covers it.
-- Each scalar subquery reads only what it gives: the next position (the table's last rowid),
-- the previous link's hash (read once, for the hash), and the time, which SQLite holds still
-- for the whole statement, so its two readings agree.
CREATE TRIGGER chain_append_link INSTEAD OF INSERT ON chain_append BEGIN
    INSERT INTO chain_links (seq, kind, run_id, key, first, lines, attached, at_ms, hash)
    VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM chain_links), NEW.kind, NEW.run_id,
            NEW.key, NEW.first, unhex(replace(NEW.lines, ' ', '')), NEW.attached,
            CAST(unixepoch('subsec') * 1000 AS INTEGER),
            unhex(toolhost_digest(
                'toolhost.chain.v1', 'local',
                (SELECT COALESCE(MAX(seq), 0) + 1 FROM chain_links),
                COALESCE((SELECT lower(hex(hash)) FROM chain_links ORDER BY seq DESC LIMIT 1),
                         ''),
                NEW.kind, NEW.run_id, NEW.key, NEW.first, NEW.lines, NEW.attached,
                CAST(unixepoch('subsec') * 1000 AS INTEGER))));
END;

CREATE VIEW chain_rows AS
SELECT 'call' AS kind, run_id, call_id AS key, events,
       state || ':' ||
       toolhost_digest(tool, args_digest, args_size, component_digest, definition_digest,
                       status, code, message, diagnostic_id, output_digest, output_size,
                       result_json) AS digest, seq AS n
FROM calls
UNION ALL
SELECT 'reconcile', run_id, call_id, NULL,
       toolhost_digest(status, code, output_digest, output_size, result_json, operator, why,
                       at_ms), NULL
FROM reconciliations
UNION ALL
SELECT 'transcript', run_id, CAST(id AS TEXT), NULL,
       toolhost_digest(step, kind, digest, size, at_ms, detail), NULL
FROM transcript
UNION ALL
SELECT 'token', '', token_id, NULL, toolhost_digest(expires_at_unix, used_at_ms), NULL
FROM used_tokens
UNION ALL
SELECT 'task', run_id, task_id, NULL,
       toolhost_digest(principal, tenant, call_id, tool, arguments_json, call_digest, open_bytes,
                       owner, created_at_ms, updated_at_ms, expires_at_ms,
                       cancel_requested_at_ms), NULL
FROM tasks;

INSERT INTO chain_append
SELECT kind, run_id, key, 0, toolhost_lines(events), digest FROM chain_rows
WHERE kind = 'call' ORDER BY n;
INSERT INTO chain_append
SELECT kind, run_id, key, 0, '', digest FROM chain_rows WHERE kind <> 'call';

CREATE TRIGGER chain_calls_insert AFTER INSERT ON calls BEGIN
    INSERT INTO chain_append VALUES ('call', NEW.run_id, NEW.call_id, 0,
        toolhost_lines(NEW.events),
        NEW.state || ':' ||
        toolhost_digest(NEW.tool, NEW.args_digest, NEW.args_size, NEW.component_digest,
                        NEW.definition_digest, NEW.status, NEW.code, NEW.message,
                        NEW.diagnostic_id, NEW.output_digest, NEW.output_size,
                        NEW.result_json));
END;

CREATE TRIGGER chain_calls_update AFTER UPDATE ON calls
WHEN NEW.events IS NOT OLD.events
  OR (NEW.state, NEW.tool, NEW.args_digest, NEW.args_size, NEW.component_digest, NEW.definition_digest,
      NEW.status, NEW.code, NEW.message, NEW.diagnostic_id, NEW.output_digest,
      NEW.output_size, NEW.result_json)
     IS NOT (OLD.state, OLD.tool, OLD.args_digest, OLD.args_size, OLD.component_digest,
             OLD.definition_digest, OLD.status, OLD.code, OLD.message, OLD.diagnostic_id,
             OLD.output_digest, OLD.output_size, OLD.result_json)
BEGIN
    INSERT INTO chain_append VALUES ('call', NEW.run_id, NEW.call_id,
        length(OLD.events) - length(replace(OLD.events, char(10), '')),
        toolhost_lines(substr(NEW.events, length(OLD.events) + 1)),
        CASE WHEN (NEW.state, NEW.tool, NEW.args_digest, NEW.args_size, NEW.component_digest,
                   NEW.definition_digest, NEW.status, NEW.code, NEW.message,
                   NEW.diagnostic_id, NEW.output_digest, NEW.output_size, NEW.result_json)
               IS NOT (OLD.state, OLD.tool, OLD.args_digest, OLD.args_size, OLD.component_digest,
                       OLD.definition_digest, OLD.status, OLD.code, OLD.message,
                       OLD.diagnostic_id, OLD.output_digest, OLD.output_size, OLD.result_json)
        THEN NEW.state || ':' ||
             toolhost_digest(NEW.tool, NEW.args_digest, NEW.args_size, NEW.component_digest,
                             NEW.definition_digest, NEW.status, NEW.code, NEW.message,
                             NEW.diagnostic_id, NEW.output_digest, NEW.output_size,
                             NEW.result_json) END);
END;

CREATE TRIGGER chain_reconciliations AFTER INSERT ON reconciliations BEGIN
    INSERT INTO chain_append VALUES ('reconcile', NEW.run_id, NEW.call_id, 0, '',
        toolhost_digest(NEW.status, NEW.code, NEW.output_digest, NEW.output_size,
                        NEW.result_json, NEW.operator, NEW.why, NEW.at_ms));
END;

CREATE TRIGGER chain_transcript AFTER INSERT ON transcript BEGIN
    INSERT INTO chain_append VALUES ('transcript', NEW.run_id, CAST(NEW.id AS TEXT), 0, '',
        toolhost_digest(NEW.step, NEW.kind, NEW.digest, NEW.size, NEW.at_ms, NEW.detail));
END;

CREATE TRIGGER chain_tokens_insert AFTER INSERT ON used_tokens BEGIN
    INSERT INTO chain_append VALUES ('token', '', NEW.token_id, 0, '',
        toolhost_digest(NEW.expires_at_unix, NEW.used_at_ms));
END;

CREATE TRIGGER chain_tokens_delete AFTER DELETE ON used_tokens BEGIN
    INSERT INTO chain_append VALUES ('token', '', OLD.token_id, 0, '', NULL);
END;

CREATE TRIGGER chain_tasks_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO chain_append VALUES ('task', NEW.run_id, NEW.task_id, 0, '',
        toolhost_digest(NEW.principal, NEW.tenant, NEW.call_id, NEW.tool, NEW.arguments_json,
                        NEW.call_digest, NEW.open_bytes, NEW.owner, NEW.created_at_ms,
                        NEW.updated_at_ms, NEW.expires_at_ms, NEW.cancel_requested_at_ms));
END;

CREATE TRIGGER chain_tasks_update AFTER UPDATE ON tasks BEGIN
    INSERT INTO chain_append VALUES ('task', NEW.run_id, NEW.task_id, 0, '',
        toolhost_digest(NEW.principal, NEW.tenant, NEW.call_id, NEW.tool, NEW.arguments_json,
                        NEW.call_digest, NEW.open_bytes, NEW.owner, NEW.created_at_ms,
                        NEW.updated_at_ms, NEW.expires_at_ms, NEW.cancel_requested_at_ms));
END;

CREATE TRIGGER chain_tasks_delete AFTER DELETE ON tasks BEGIN
    INSERT INTO chain_append VALUES ('task', OLD.run_id, OLD.task_id, 0, '', NULL);
END;
"#;

/// Register `toolhost_digest(…)` and `toolhost_lines(text)` on `conn`.
pub fn register(conn: &Connection) -> Result<(), LedgerError> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("toolhost_digest", -1, flags, digest)
        .db()?;
    conn.create_scalar_function("toolhost_lines", 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => String::new(),
            value => line_digests(value.as_str().map_err(bad_value)?),
        })
    })
    .db()?;
    Ok(())
}

/// `toolhost_digest(…)`: [`digest_fields`](toolhost_ledger_store::chain::digest_fields) of its
/// arguments, integers in decimal, each hashed where SQLite holds it.
fn digest(ctx: &mut Context<'_>) -> rusqlite::Result<String> {
    let mut digest = FieldDigest::default();
    for i in 0..ctx.len() {
        match ctx.get_raw(i) {
            ValueRef::Null => digest.push(None),
            ValueRef::Integer(n) => digest.push(Some(n.to_string().as_bytes())),
            ValueRef::Text(t) | ValueRef::Blob(t) => digest.push(Some(t)),
            ValueRef::Real(_) => {
                return Err(rusqlite::Error::UserFunctionError(
                    "toolhost_digest takes no real numbers".into(),
                ))
            }
        }
    }
    Ok(digest.finish())
}

fn bad_value(e: rusqlite::types::FromSqlError) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(Box::new(e))
}

/// Every link, every head (none: SQLite's head is its last link) and every chained row.
pub fn evidence(conn: &Connection) -> Result<Evidence, LedgerError> {
    Ok(Evidence {
        links: links(conn, "", &[])?,
        heads: Vec::new(),
        rows: rows(conn, "", &[])?,
    })
}

/// The links and chained rows of one call: its own and its reconciliation's. The links are
/// found by a scan of the chain (it has no index of its own, so that a write adds no page).
pub fn evidence_of_call(
    conn: &Connection,
    run_id: &str,
    call_id: &str,
) -> Result<Evidence, LedgerError> {
    let of_call = "WHERE run_id = ?1 AND key = ?2 AND (kind = 'call' OR kind = 'reconcile')";
    Ok(Evidence {
        links: links(conn, of_call, &[run_id, call_id])?,
        heads: Vec::new(),
        rows: rows(conn, of_call, &[run_id, call_id])?,
    })
}

fn links(conn: &Connection, filter: &str, params: &[&str]) -> Result<Vec<Link>, LedgerError> {
    // A link's `prev` is its predecessor's hash: empty for the first, and for one whose
    // predecessor is gone (`verify` names the gap).
    let mut stmt = conn
        .prepare(&format!(
            "SELECT seq, COALESCE((SELECT lower(hex(p.hash)) FROM chain_links p
                                   WHERE p.seq = chain_links.seq - 1), ''),
                    kind, run_id, key, first, lower(hex(lines)), attached, at_ms, lower(hex(hash))
             FROM chain_links {filter} ORDER BY seq"
        ))
        .db()?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params)).db()?;
    let mut links = Vec::new();
    while let Some(row) = rows.next().db()? {
        let lines: String = row.get(6).db()?;
        links.push(Link {
            chain: LOCAL_CHAIN.to_owned(),
            seq: row.get(0).db()?,
            prev: row.get(1).db()?,
            kind: row.get(2).db()?,
            run_id: row.get(3).db()?,
            key: row.get(4).db()?,
            first: row.get(5).db()?,
            lines: spaced(&lines),
            attached: row.get(7).db()?,
            at_ms: row.get(8).db()?,
            hash: row.get(9).db()?,
        });
    }
    Ok(links)
}

/// The hex of concatenated SHA-256 digests, one digest per 64 characters, separated by spaces
/// (as `toolhost_lines` writes them and the link's hash covers them).
fn spaced(hex: &str) -> String {
    hex.as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
}

fn rows(conn: &Connection, filter: &str, params: &[&str]) -> Result<Vec<ChainedRow>, LedgerError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT kind, run_id, key, events, digest FROM chain_rows {filter}"
        ))
        .db()?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params)).db()?;
    let mut chained = Vec::new();
    while let Some(row) = rows.next().db()? {
        chained.push(ChainedRow {
            kind: row.get(0).db()?,
            run_id: row.get(1).db()?,
            key: row.get(2).db()?,
            events: row.get(3).db()?,
            digest: row.get(4).db()?,
        });
    }
    Ok(chained)
}
