//! The PostgreSQL schema and its migrations.
//!
//! The version lives in the one-row table `ledger_version`. [`MIGRATIONS`]`[i]` takes a schema
//! from version `i` to `i + 1`; [`migrate`] applies the missing ones in one transaction that
//! first takes an advisory lock on the schema's name, so hosts that start together migrate
//! once, one after another. A schema newer than this build is refused.
//!
//! The tables mirror SQLite's version 2 (`ledger/schema.rs`): one `calls` row holds a call's
//! admission, outcome and stage decisions, so the call path's writes touch one row.

use tokio_postgres::Client;

use super::super::LedgerError;

const SCHEMA_V1: &str = r#"
CREATE TABLE calls (
    seq               BIGSERIAL PRIMARY KEY,   -- admission order across the ledger, from 1
    run_id            TEXT    NOT NULL,
    call_id           TEXT    NOT NULL,
    tool              TEXT    NOT NULL,
    args_digest       TEXT    NOT NULL,        -- sha256 hex, computed by the caller
    args_size         BIGINT  NOT NULL,        -- bytes the digest was computed over
    state             TEXT    NOT NULL
                      CHECK (state IN ('admitted', 'started', 'finished')),
    admitted_at_ms    BIGINT  NOT NULL,        -- unix milliseconds
    started_at_ms     BIGINT,
    owner             TEXT,                    -- the host that admitted it (its lease)
    -- The one terminal outcome, NULL until the call is finished. result_json is replay
    -- storage: the ToolResult exactly as it was returned to the caller (output included).
    status            TEXT
                      CHECK (status IS NULL
                             OR status IN ('completed', 'failed', 'cancelled', 'outcome_unknown')),
    code              TEXT,
    message           TEXT,
    diagnostic_id     TEXT,
    output_digest     TEXT,
    output_size       BIGINT,
    fuel_consumed     BIGINT,
    wall_ms           BIGINT,
    memory_peak_bytes BIGINT,
    output_bytes      BIGINT,
    result_json       TEXT,
    finished_at_ms    BIGINT,
    -- The audit trail: one JSON object per line ({at_ms, stage, decision, detail}), in order.
    events            TEXT    NOT NULL DEFAULT '',
    CHECK ((state = 'finished') = (result_json IS NOT NULL AND status IS NOT NULL)),
    UNIQUE (run_id, call_id)
);
CREATE INDEX calls_open ON calls (state) WHERE state <> 'finished';

CREATE TABLE approval_requests (
    digest   TEXT NOT NULL PRIMARY KEY,
    run_id   TEXT NOT NULL,
    call_id  TEXT NOT NULL
);

CREATE TABLE call_content (
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    arguments_json  TEXT    NOT NULL,
    recorded_at_ms  BIGINT  NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);

CREATE TABLE transcript (
    id      BIGSERIAL PRIMARY KEY,
    run_id  TEXT    NOT NULL,
    step    BIGINT  NOT NULL,
    kind    TEXT    NOT NULL,
    digest  TEXT    NOT NULL,
    size    BIGINT  NOT NULL,
    at_ms   BIGINT  NOT NULL
);
CREATE INDEX transcript_by_run ON transcript (run_id, step, id);

CREATE TABLE used_tokens (
    token_id         TEXT    PRIMARY KEY,
    expires_at_unix  BIGINT  NOT NULL,
    used_at_ms       BIGINT  NOT NULL
);
"#;

/// Version 2: host leases. A host holds its row's lease while it runs and renews it; when the
/// lease has passed (by the database's clock, so hosts' clocks do not matter), any host closes
/// the calls the lapsed host left open as `outcome_unknown`.
const SCHEMA_V2: &str = r#"
CREATE TABLE hosts (
    owner           TEXT    PRIMARY KEY,
    lease_until_ms  BIGINT  NOT NULL,          -- database clock, unix milliseconds
    started_at_ms   BIGINT  NOT NULL
);
"#;

/// Version 3: the limits every host shares. Run budgets are counters per run (tool `''` is the
/// run's total; tool names are never empty), taken by `take_budget` under an advisory lock on
/// the run so that two hosts cannot both take the last call. Rate limits are token buckets per
/// principal, taken by one `INSERT … ON CONFLICT DO UPDATE … WHERE` (the row lock makes it
/// exact), timed by the database's clock.
const SCHEMA_V3: &str = r#"
CREATE TABLE run_counts (
    run_id  TEXT    NOT NULL,
    tool    TEXT    NOT NULL,
    n       BIGINT  NOT NULL,
    PRIMARY KEY (run_id, tool)
);

CREATE TABLE rate_buckets (
    principal  TEXT              PRIMARY KEY,
    tokens     DOUBLE PRECISION  NOT NULL,
    at_ms      BIGINT            NOT NULL      -- database clock, unix milliseconds
);

-- Count one call of p_tool in p_run, or return which budget it would break ('run' or 'tool')
-- and count nothing. NULL maxima are unlimited.
CREATE FUNCTION take_budget(p_run TEXT, p_tool TEXT, p_max_calls BIGINT, p_max_tool BIGINT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    total    BIGINT;
    per_tool BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('toolhost-budget:' || p_run));
    SELECT n INTO total FROM run_counts WHERE run_id = p_run AND tool = '';
    SELECT n INTO per_tool FROM run_counts WHERE run_id = p_run AND tool = p_tool;
    IF p_max_calls IS NOT NULL AND COALESCE(total, 0) >= p_max_calls THEN
        RETURN 'run';
    END IF;
    IF p_max_tool IS NOT NULL AND COALESCE(per_tool, 0) >= p_max_tool THEN
        RETURN 'tool';
    END IF;
    INSERT INTO run_counts AS c (run_id, tool, n) VALUES (p_run, '', 1), (p_run, p_tool, 1)
    ON CONFLICT (run_id, tool) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END
$$;
"#;

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[SCHEMA_V1, SCHEMA_V2, SCHEMA_V3];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Create `schema` if needed and bring it (first on `client`'s search path) to
/// [`SCHEMA_VERSION`]; returns the version it found.
pub async fn migrate(client: &mut Client, schema: &str) -> Result<i64, LedgerError> {
    let tx = client.transaction().await?;
    // One migrator per schema at a time (creating the schema included: `IF NOT EXISTS` alone
    // races); the lock ends with the transaction.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1 || '.toolhost-ledger'))",
        &[&schema],
    )
    .await?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS ledger_version (version BIGINT NOT NULL)")
        .await?;
    let found: i64 = match tx
        .query_opt("SELECT version FROM ledger_version", &[])
        .await?
    {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO ledger_version (version) VALUES (0)", &[])
                .await?;
            0
        }
    };
    if found > SCHEMA_VERSION {
        return Err(LedgerError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let first = usize::try_from(found)
        .map_err(|_| LedgerError::Corrupt(format!("negative schema version {found}")))?;
    for step in &MIGRATIONS[first..] {
        tx.batch_execute(step).await?;
    }
    tx.execute("UPDATE ledger_version SET version = $1", &[&SCHEMA_VERSION])
        .await?;
    tx.commit().await?;
    Ok(found)
}
