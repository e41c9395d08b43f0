//! The ledger's SQL schema, in one place, and how a connection is set up and migrated.
//!
//! The schema version lives in SQLite's `user_version`. [`MIGRATIONS`]`[i]` takes a database
//! from version `i` to `i + 1`; [`migrate`] applies the missing ones at open, each in its own
//! `BEGIN IMMEDIATE` transaction (so two processes opening a fresh file do not both create it).
//! A file newer than this build is refused rather than guessed at.

use rusqlite::{Connection, TransactionBehavior};

use super::{LedgerError, LedgerOptions, BUSY_TIMEOUT};

/// Version 1: calls, outcomes, events, content, transcript, used tokens.
///
/// Invariants the schema itself enforces:
/// - one admission per `(run_id, call_id)`: the primary key of `calls`;
/// - at most one terminal outcome per call: the primary key of `outcomes`;
/// - no outcome, event or content row for a call that was never admitted: foreign keys.
const SCHEMA_V1: &str = r#"
-- One row per admitted call. (run_id, call_id) is the admission key.
-- Holds no argument content: the caller's digest of the canonical arguments and their size.
CREATE TABLE calls (
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    seq             INTEGER NOT NULL UNIQUE,   -- admission order across the ledger, from 1
    tool            TEXT    NOT NULL,
    args_digest     TEXT    NOT NULL,          -- sha256 hex, computed by the caller
    args_size       INTEGER NOT NULL,          -- bytes the digest was computed over
    state           TEXT    NOT NULL
                    CHECK (state IN ('admitted', 'started', 'finished')),
    admitted_at_ms  INTEGER NOT NULL,          -- unix milliseconds
    started_at_ms   INTEGER,
    owner           TEXT,                      -- the host process that admitted it (its lease)
    PRIMARY KEY (run_id, call_id)
);

-- Calls a stopped host may have left open; what recovery scans at startup.
CREATE INDEX calls_open ON calls (state) WHERE state <> 'finished';

-- The one terminal outcome of a call, written in the same transaction that sets
-- calls.state = 'finished'. Summary columns are for listing and audit; result_json is
-- replay storage: the ToolResult exactly as it was returned to the caller (output included).
CREATE TABLE outcomes (
    run_id            TEXT    NOT NULL,
    call_id           TEXT    NOT NULL,
    status            TEXT    NOT NULL
                      CHECK (status IN ('completed', 'failed', 'cancelled', 'outcome_unknown')),
    code              TEXT,                    -- stable snake_case failure code, or NULL
    message           TEXT    NOT NULL,        -- model-safe message
    diagnostic_id     TEXT,
    output_digest     TEXT,                    -- sha256 hex of the serialized output, or NULL
    output_size       INTEGER,                 -- bytes of the serialized output, or NULL
    fuel_consumed     INTEGER NOT NULL,
    wall_ms           INTEGER NOT NULL,
    memory_peak_bytes INTEGER NOT NULL,
    output_bytes      INTEGER NOT NULL,
    result_json       TEXT    NOT NULL,
    recorded_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);

-- The audit trail: one row per pipeline stage decision, in append order (id).
-- detail is operator text (the rule that matched, digests, sizes) - never argument content
-- unless the operator turned content recording on.
CREATE TABLE events (
    id        INTEGER PRIMARY KEY,
    run_id    TEXT    NOT NULL,
    call_id   TEXT    NOT NULL,
    at_ms     INTEGER NOT NULL,
    stage     TEXT    NOT NULL,                -- admit, resolve, validate, ..., record, recover
    decision  TEXT    NOT NULL,
    detail    TEXT    NOT NULL,
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);
CREATE INDEX events_by_call ON events (run_id, call_id, id);

-- Argument content; written only when the ledger is opened with record_content.
CREATE TABLE call_content (
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    arguments_json  TEXT    NOT NULL,
    recorded_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);

-- Model steps of agent runs, by digest and size only.
CREATE TABLE transcript (
    id      INTEGER PRIMARY KEY,
    run_id  TEXT    NOT NULL,
    step    INTEGER NOT NULL,
    kind    TEXT    NOT NULL,                  -- e.g. request, response
    digest  TEXT    NOT NULL,
    size    INTEGER NOT NULL,
    at_ms   INTEGER NOT NULL
);
CREATE INDEX transcript_by_run ON transcript (run_id, step, id);

-- Approval tokens already spent: single use, across restarts.
CREATE TABLE used_tokens (
    token_id         TEXT    PRIMARY KEY,
    expires_at_unix  INTEGER NOT NULL,
    used_at_ms       INTEGER NOT NULL
) WITHOUT ROWID;
"#;

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[SCHEMA_V1];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Per-connection settings: WAL, synchronous level, foreign keys, busy timeout.
pub(crate) fn configure(conn: &Connection, options: &LedgerOptions) -> Result<(), LedgerError> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(LedgerError::Unsupported(format!(
            "the ledger needs WAL journaling; SQLite chose {mode:?} for this file"
        )));
    }
    let sync = if options.synchronous_full {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    let fk: bool = conn.pragma_query_value(None, "foreign_keys", |row| row.get(0))?;
    if !fk {
        return Err(LedgerError::Unsupported(
            "this SQLite build cannot enforce foreign keys".into(),
        ));
    }
    Ok(())
}

/// Bring the schema to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Read inside the write transaction: another process may have migrated meanwhile.
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(LedgerError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        let step = usize::try_from(version)
            .map_err(|_| LedgerError::Corrupt(format!("negative schema version {version}")))?;
        tx.execute_batch(MIGRATIONS[step])?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}
