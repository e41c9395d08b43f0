//! The ledger's SQL schema, in one place, and how a connection is set up and migrated.
//!
//! The schema version lives in SQLite's `user_version`. [`MIGRATIONS`]`[i]` takes a database
//! from version `i` to `i + 1`; [`migrate`] applies the missing ones at open, each in its own
//! `BEGIN IMMEDIATE` transaction (so two processes opening a fresh file do not both create it).
//! A file newer than this build is refused rather than guessed at.
//!
//! # Why version 2 has one row per call
//!
//! On the machines we measure, a commit costs about 25 µs for each B-tree page it changes
//! (SQLite writes every changed page to the WAL, each with its own system calls), and the pages
//! touched, not the statements, set the ledger's cost. Version 1 kept a call in `calls`,
//! `outcomes` and `events`, each with its indexes: 16 page writes per executed call. Version 2
//! keeps the whole life of a call — admission, outcome, stage decisions — in one `calls` row:
//! admission changes the row and its key index, the start mark and the outcome change only the
//! row's page. See `docs/benchmarks-history.md` for the figures.

use crate::Db;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use std::time::Duration;

use super::{LedgerError, LedgerOptions};

/// How long a statement waits for another connection's write lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Version 2: one `calls` row holds a call's admission, outcome and stage decisions (see the
/// module docs); `outcomes` and `events` are folded into it. The approval requests that
/// `toolhost approve` looks up get their own small table, and `meta` keeps recovery's
/// watermark. Existing rows move over unchanged, events in their order.
///
/// Invariants the schema enforces:
/// - one admission per `(run_id, call_id)`: the unique index `calls_key`;
/// - a call is `finished` exactly when it has its recorded result (the `CHECK`);
/// - content rows only for admitted calls: the foreign key of `call_content`.
const SCHEMA_V2: &str = r#"
CREATE TABLE calls_v2 (
    seq               INTEGER PRIMARY KEY,     -- admission order across the ledger, from 1
    run_id            TEXT    NOT NULL,
    call_id           TEXT    NOT NULL,
    tool              TEXT    NOT NULL,
    args_digest       TEXT    NOT NULL,        -- sha256 hex, computed by the caller
    args_size         INTEGER NOT NULL,        -- bytes the digest was computed over
    state             TEXT    NOT NULL
                      CHECK (state IN ('admitted', 'started', 'finished')),
    admitted_at_ms    INTEGER NOT NULL,        -- unix milliseconds
    started_at_ms     INTEGER,
    owner             TEXT,                    -- the host process that admitted it (its lease)
    -- The one terminal outcome, NULL until the call is finished. result_json is replay storage:
    -- the ToolResult exactly as it was returned to the caller (output included).
    status            TEXT
                      CHECK (status IS NULL
                             OR status IN ('completed', 'failed', 'cancelled', 'outcome_unknown')),
    code              TEXT,                    -- stable snake_case failure code, or NULL
    message           TEXT,                    -- model-safe message
    diagnostic_id     TEXT,
    output_digest     TEXT,                    -- sha256 hex of the serialized output, or NULL
    output_size       INTEGER,
    fuel_consumed     INTEGER,
    wall_ms           INTEGER,
    memory_peak_bytes INTEGER,
    output_bytes      INTEGER,
    result_json       TEXT,
    finished_at_ms    INTEGER,
    -- The audit trail: one JSON object per line ({at_ms, stage, decision, detail}), in order.
    -- detail is operator text - never argument content unless content recording is on.
    events            TEXT    NOT NULL DEFAULT '',
    CHECK ((state = 'finished') = (result_json IS NOT NULL AND status IS NOT NULL))
);

INSERT INTO calls_v2 (seq, run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms,
                      started_at_ms, owner, status, code, message, diagnostic_id, output_digest,
                      output_size, fuel_consumed, wall_ms, memory_peak_bytes, output_bytes,
                      result_json, finished_at_ms, events)
SELECT c.seq, c.run_id, c.call_id, c.tool, c.args_digest, c.args_size, c.state, c.admitted_at_ms,
       c.started_at_ms, c.owner, o.status, o.code, o.message, o.diagnostic_id, o.output_digest,
       o.output_size, o.fuel_consumed, o.wall_ms, o.memory_peak_bytes, o.output_bytes,
       o.result_json, o.recorded_at_ms,
       COALESCE((SELECT group_concat(json_object('at_ms', e.at_ms, 'stage', e.stage,
                                                 'decision', e.decision, 'detail', e.detail)
                                     || char(10), '' ORDER BY e.id)
                 FROM events e WHERE e.run_id = c.run_id AND e.call_id = c.call_id), '')
FROM calls c
LEFT JOIN outcomes o ON o.run_id = c.run_id AND o.call_id = c.call_id;

-- Which call asked for approval of a digest first (what `toolhost approve HANDLE` looks up).
CREATE TABLE approval_requests (
    digest   TEXT NOT NULL PRIMARY KEY,
    run_id   TEXT NOT NULL,
    call_id  TEXT NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO approval_requests (digest, run_id, call_id)
SELECT detail, run_id, call_id FROM events
WHERE stage = 'approve' AND decision = 'approval_required' ORDER BY id;

-- Small settings of the ledger itself: recovery's watermark (every call below it is finished
-- or belongs to a host that was alive at the last recovery).
CREATE TABLE meta (
    key    TEXT    NOT NULL PRIMARY KEY,
    value  INTEGER NOT NULL
) WITHOUT ROWID;

-- call_content keeps its rows; it is rebuilt so that its foreign key names the new table.
CREATE TABLE call_content_v2 (
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    arguments_json  TEXT    NOT NULL,
    recorded_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);
INSERT INTO call_content_v2 SELECT run_id, call_id, arguments_json, recorded_at_ms
FROM call_content;

DROP TABLE call_content;
DROP TABLE events;
DROP TABLE outcomes;
DROP TABLE calls;
ALTER TABLE calls_v2 RENAME TO calls;
ALTER TABLE call_content_v2 RENAME TO call_content;
CREATE UNIQUE INDEX calls_key ON calls (run_id, call_id);
"#;

/// Version 3: a transcript entry may say more than a digest — an attempt's outcome, why a run
/// stopped (operator text, never content).
const SCHEMA_V3: &str = r#"
ALTER TABLE transcript ADD COLUMN detail TEXT NOT NULL DEFAULT '';
"#;

/// Version 4: reconciliations (`crates/ledger/src/reconcile.rs`). A call that ended `outcome_unknown`
/// keeps its row as it is; what an operator recorded for it is a row here, at most one per call
/// (the primary key). `calls_unknown` lists the calls waiting for one without reading the rest.
const SCHEMA_V4: &str = r#"
CREATE TABLE reconciliations (
    run_id         TEXT    NOT NULL,
    call_id        TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('completed', 'failed')),
    code           TEXT,
    output_digest  TEXT,
    output_size    INTEGER,
    result_json    TEXT    NOT NULL,           -- what a replay of the call answers from now on
    operator       TEXT    NOT NULL,           -- who recorded it (operator text)
    why            TEXT    NOT NULL,
    at_ms          INTEGER NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
) WITHOUT ROWID;
CREATE INDEX calls_unknown ON calls (seq) WHERE status = 'outcome_unknown';
"#;

/// Version 5: tasks (`crates/ledger/src/tasks.rs`): a handle on one call, bound to its caller, with the
/// host that runs it, its expiry and a cancel mark any host may set. No foreign key: a task is
/// created before its call is admitted.
const SCHEMA_V5: &str = r#"
CREATE TABLE tasks (
    task_id                 TEXT    NOT NULL PRIMARY KEY,
    principal               TEXT    NOT NULL,
    tenant                  TEXT    NOT NULL,
    run_id                  TEXT    NOT NULL,
    call_id                 TEXT    NOT NULL,
    tool                    TEXT    NOT NULL,
    arguments_json          TEXT    NOT NULL,  -- kept until pruned: approval shows and runs them
    owner                   TEXT    NOT NULL,  -- the host that runs its call (its lease)
    created_at_ms           INTEGER NOT NULL,
    updated_at_ms           INTEGER NOT NULL,
    expires_at_ms           INTEGER NOT NULL,
    cancel_requested_at_ms  INTEGER
) WITHOUT ROWID;
CREATE INDEX tasks_cancelled ON tasks (owner) WHERE cancel_requested_at_ms IS NOT NULL;
CREATE INDEX tasks_expiry ON tasks (expires_at_ms);
"#;

/// Version 6: a task is open until its call ends (other than waiting for approval), it is
/// cancelled or it expires; `open_bytes` (its arguments' length, `NULL` once closed) counts
/// against its caller's caps, `tasks_open` finds a caller's open tasks, and `arguments_json`
/// is kept only while open under `record_content` or for an approval (`crates/ledger/src/tasks.rs`).
/// Tasks of version 5 are kept, closed, with an empty digest (a resend of one is answered as a
/// request).
const SCHEMA_V6: &str = r#"
CREATE TABLE tasks_v6 (
    task_id                 TEXT    NOT NULL PRIMARY KEY,
    principal               TEXT    NOT NULL,
    tenant                  TEXT    NOT NULL,
    run_id                  TEXT    NOT NULL,
    call_id                 TEXT    NOT NULL,
    tool                    TEXT    NOT NULL,
    arguments_json          TEXT,              -- while open: record_content, or an approval
    call_digest             TEXT    NOT NULL,  -- the tool and canonical arguments: a resend's
    open_bytes              INTEGER,           -- the arguments' length while open, else NULL
    owner                   TEXT    NOT NULL,  -- the host that runs its call (its lease)
    created_at_ms           INTEGER NOT NULL,
    updated_at_ms           INTEGER NOT NULL,
    expires_at_ms           INTEGER NOT NULL,
    cancel_requested_at_ms  INTEGER
) WITHOUT ROWID;
INSERT INTO tasks_v6 SELECT task_id, principal, tenant, run_id, call_id, tool, NULL, '', NULL,
    owner, created_at_ms, updated_at_ms, expires_at_ms, cancel_requested_at_ms FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_v6 RENAME TO tasks;
CREATE INDEX tasks_cancelled ON tasks (owner) WHERE cancel_requested_at_ms IS NOT NULL;
CREATE INDEX tasks_expiry ON tasks (expires_at_ms);
CREATE INDEX tasks_open ON tasks (principal, tenant) WHERE open_bytes IS NOT NULL;
"#;

/// Version 7: the same `calls`, its value checks written as comparisons. SQLite evaluates a
/// `CHECK (x IN (…))` of three or more values by building a temporary table of the values, on
/// every row written: two per call, about a sixth of a read call's instructions. Rows, keys and
/// the foreign keys of the tables that name `calls` are unchanged.
const SCHEMA_V7: &str = r#"
CREATE TABLE calls_v7 (
    seq               INTEGER PRIMARY KEY,     -- admission order across the ledger, from 1
    run_id            TEXT    NOT NULL,
    call_id           TEXT    NOT NULL,
    tool              TEXT    NOT NULL,
    args_digest       TEXT    NOT NULL,        -- sha256 hex, computed by the caller
    args_size         INTEGER NOT NULL,        -- bytes the digest was computed over
    state             TEXT    NOT NULL
                      CHECK (state = 'admitted' OR state = 'started' OR state = 'finished'),
    admitted_at_ms    INTEGER NOT NULL,        -- unix milliseconds
    started_at_ms     INTEGER,
    owner             TEXT,                    -- the host process that admitted it (its lease)
    -- The one terminal outcome, NULL until the call is finished. result_json is replay storage:
    -- the ToolResult exactly as it was returned to the caller (output included).
    status            TEXT
                      CHECK (status IS NULL OR status = 'completed' OR status = 'failed'
                             OR status = 'cancelled' OR status = 'outcome_unknown'),
    code              TEXT,                    -- stable snake_case failure code, or NULL
    message           TEXT,                    -- model-safe message
    diagnostic_id     TEXT,
    output_digest     TEXT,                    -- sha256 hex of the serialized output, or NULL
    output_size       INTEGER,
    fuel_consumed     INTEGER,
    wall_ms           INTEGER,
    memory_peak_bytes INTEGER,
    output_bytes      INTEGER,
    result_json       TEXT,
    finished_at_ms    INTEGER,
    -- The audit trail: one JSON object per line ({at_ms, stage, decision, detail}), in order.
    -- detail is operator text - never argument content unless content recording is on.
    events            TEXT    NOT NULL DEFAULT '',
    CHECK ((state = 'finished') = (result_json IS NOT NULL AND status IS NOT NULL))
);
INSERT INTO calls_v7 (seq, run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms,
                      started_at_ms, owner, status, code, message, diagnostic_id, output_digest,
                      output_size, fuel_consumed, wall_ms, memory_peak_bytes, output_bytes,
                      result_json, finished_at_ms, events)
SELECT seq, run_id, call_id, tool, args_digest, args_size, state, admitted_at_ms,
       started_at_ms, owner, status, code, message, diagnostic_id, output_digest,
       output_size, fuel_consumed, wall_ms, memory_peak_bytes, output_bytes,
       result_json, finished_at_ms, events
FROM calls;
DROP TABLE calls;
ALTER TABLE calls_v7 RENAME TO calls;
CREATE UNIQUE INDEX calls_key ON calls (run_id, call_id);
CREATE INDEX calls_unknown ON calls (seq) WHERE status = 'outcome_unknown';
"#;

/// Version 8: which code a call named — the SHA-256 of its component's bytes and the digest of
/// its tool's definition (`sha256:…` each; NULL for a tool that was not loaded, and for calls
/// recorded before this version).
const SCHEMA_V8: &str = r#"
ALTER TABLE calls ADD COLUMN component_digest TEXT;
ALTER TABLE calls ADD COLUMN definition_digest TEXT;
"#;

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_V3,
    SCHEMA_V4,
    SCHEMA_V5,
    SCHEMA_V6,
    SCHEMA_V7,
    SCHEMA_V8,
    crate::chain::SCHEMA_V9,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Per-connection settings: the chain's SQL functions, WAL, synchronous level, foreign keys, busy timeout, and plans that
/// do not change with the values bound.
pub fn configure(conn: &Connection, options: &LedgerOptions) -> Result<(), LedgerError> {
    conn.busy_timeout(BUSY_TIMEOUT).db()?;
    // The chain's triggers call these: without them no chained table can be written.
    crate::chain::register(conn)?;
    // A statement keeps the plan it was prepared with. Without this, SQLite re-plans a cached
    // statement whose plan it judges may depend on the values bound to it, each time new
    // values are bound: the admission read was re-prepared on every call.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .db()?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .db()?;
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
    conn.pragma_update(None, "synchronous", sync).db()?;
    conn.pragma_update(None, "foreign_keys", true).db()?;
    let fk: bool = conn
        .pragma_query_value(None, "foreign_keys", |row| row.get(0))
        .db()?;
    if !fk {
        return Err(LedgerError::Unsupported(
            "this SQLite build cannot enforce foreign keys".into(),
        ));
    }
    Ok(())
}

/// Bring the schema to [`SCHEMA_VERSION`]. Foreign keys are off while tables are rebuilt
/// (SQLite cannot switch them inside a transaction) and checked before each commit.
pub fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    conn.pragma_update(None, "foreign_keys", false).db()?;
    let migrated = migrate_steps(conn);
    conn.pragma_update(None, "foreign_keys", true).db()?;
    migrated
}

fn migrate_steps(conn: &mut Connection) -> Result<(), LedgerError> {
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db()?;
        // Read inside the write transaction: another process may have migrated meanwhile.
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .db()?;
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
        tx.execute_batch(MIGRATIONS[step]).db()?;
        let broken: Option<String> = tx
            .query_row("PRAGMA foreign_key_check", [], |row| row.get(0))
            .optional()
            .db()?;
        if let Some(table) = broken {
            return Err(LedgerError::Corrupt(format!(
                "migrating to schema {}: rows of {table} point at calls that do not exist",
                version + 1
            )));
        }
        tx.pragma_update(None, "user_version", version + 1).db()?;
        tx.commit().db()?;
    }
}
