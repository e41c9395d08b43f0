//! The PostgreSQL schema of tasks (`crates/ledger/src/tasks.rs`) and of the database's clock: versions 7
//! to 9 of the migrations `schema.rs` applies.

/// Version 7: tasks, as SQLite's version 5 (`crates/ledger/src/tasks.rs`).
pub(super) const SCHEMA_V7: &str = r#"
CREATE TABLE tasks (
    task_id                 TEXT    NOT NULL PRIMARY KEY,
    principal               TEXT    NOT NULL,
    tenant                  TEXT    NOT NULL,
    run_id                  TEXT    NOT NULL,
    call_id                 TEXT    NOT NULL,
    tool                    TEXT    NOT NULL,
    arguments_json          TEXT    NOT NULL,  -- kept until pruned: approval shows and runs them
    owner                   TEXT    NOT NULL,
    created_at_ms           BIGINT  NOT NULL,
    updated_at_ms           BIGINT  NOT NULL,
    expires_at_ms           BIGINT  NOT NULL,
    cancel_requested_at_ms  BIGINT
);
CREATE INDEX tasks_cancelled ON tasks (owner) WHERE cancel_requested_at_ms IS NOT NULL;
CREATE INDEX tasks_expiry ON tasks (expires_at_ms);
"#;

/// Version 8: open tasks and their caps, as SQLite's version 6. `toolhost_create_task` checks
/// a caller's open tasks and records the new one under a lock of that caller, so that two
/// hosts never both take the last place. Tasks of version 7 are kept, closed.
pub(super) const SCHEMA_V8: &str = r#"
ALTER TABLE tasks ALTER COLUMN arguments_json DROP NOT NULL;
UPDATE tasks SET arguments_json = NULL;
ALTER TABLE tasks ADD COLUMN call_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN open_bytes BIGINT;
CREATE INDEX tasks_open ON tasks (principal, tenant) WHERE open_bytes IS NOT NULL;

-- 'exists' (nothing changed), 'full' (the caller holds its caps; nothing recorded) or
-- 'created'.
CREATE FUNCTION toolhost_create_task(t JSONB, p_content TEXT, p_owner TEXT, p_now BIGINT,
                                     p_max_open BIGINT, p_max_bytes BIGINT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    v_open   BIGINT;
    v_bytes  BIGINT;
    v_size   BIGINT := (t->>'size')::BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('toolhost-tasks:' || (t->>'principal')),
                                  hashtext(t->>'tenant'));
    IF EXISTS (SELECT 1 FROM tasks WHERE task_id = t->>'task_id') THEN
        RETURN 'exists';
    END IF;
    SELECT COUNT(*), COALESCE(SUM(open_bytes), 0) INTO v_open, v_bytes FROM tasks
    WHERE principal = t->>'principal' AND tenant = t->>'tenant' AND open_bytes IS NOT NULL
      AND expires_at_ms > p_now;
    IF v_open >= p_max_open OR v_bytes + v_size > p_max_bytes THEN
        RETURN 'full';
    END IF;
    INSERT INTO tasks (task_id, principal, tenant, run_id, call_id, tool, arguments_json,
                       call_digest, open_bytes, owner, created_at_ms, updated_at_ms,
                       expires_at_ms)
    VALUES (t->>'task_id', t->>'principal', t->>'tenant', t->>'run_id', t->>'call_id',
            t->>'tool', p_content, t->>'call_digest', v_size, p_owner, p_now, p_now,
            (t->>'expires_at_ms')::BIGINT)
    ON CONFLICT (task_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'exists';
    END IF;
    RETURN 'created';
END
$$;
"#;

/// The database's clock, in unix milliseconds (leases, rates and token expiry are judged by it
/// alone): the function version 9 defines.
pub(super) const DB_NOW_MS: &str = "toolhost_now_ms()";

/// Version 9: the database's clock as one function, `toolhost_now_ms()` (unix milliseconds),
/// which every judgement of time across hosts reads (leases, rates, token expiry, tasks), so
/// that all of them follow one clock and a test can set it apart from the host's.
pub(super) const SCHEMA_V9: &str = r#"
CREATE OR REPLACE FUNCTION toolhost_now_ms() RETURNS BIGINT LANGUAGE SQL VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
$$;
"#;
