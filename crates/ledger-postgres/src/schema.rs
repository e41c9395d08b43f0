//! The PostgreSQL schema and its migrations.
//!
//! The version lives in the one-row table `ledger_version`. [`MIGRATIONS`]`[i]` takes a schema
//! from version `i` to `i + 1`; [`migrate`] applies the missing ones in one transaction that
//! first takes an advisory lock on the schema's name, so hosts that start together migrate
//! once, one after another. A schema newer than this build is refused.
//!
//! The tables mirror SQLite's version 2 (`crates/ledger-sqlite/src/schema.rs`): one `calls` row holds a call's
//! admission, outcome and stage decisions, so the call path's writes touch one row.

use crate::Db;
use tokio_postgres::Client;

use super::pin_schema::SCHEMA_V10;
use super::task_schema::{SCHEMA_V7, SCHEMA_V8, SCHEMA_V9};
use toolhost_ledger_store::LedgerError;

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

/// Version 4: a group of writes in one round trip. `toolhost_apply` applies a group's writes
/// (JSON, built by `backend.rs`) in order, each in a subtransaction of its own (a write that
/// fails changes nothing and the others go on), in the one transaction of its statement, and
/// returns one answer per write. It remembers each group's answers under the group's id, so a
/// group sent again after its connection dropped — committed or not, the writer cannot tell —
/// is answered from that record instead of being applied twice. The statements mirror
/// `calls.rs`, which recovery still uses.
const SCHEMA_V4: &str = r#"
-- Kept for APPLIED_GROUPS_KEPT_MS (a resend comes within seconds), then pruned by the hosts.
CREATE TABLE applied_groups (
    id       TEXT    PRIMARY KEY,
    answers  JSONB   NOT NULL,
    at_ms    BIGINT  NOT NULL                 -- database clock, unix milliseconds
);

-- One stored event line, as the ledger writes it everywhere: {"at_ms","stage","decision","detail"}.
CREATE FUNCTION toolhost_event_line(p_at BIGINT, p_stage TEXT, p_decision TEXT, p_detail TEXT)
RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"at_ms":' || p_at || ',"stage":' || to_json(p_stage)::TEXT
        || ',"decision":' || to_json(p_decision)::TEXT
        || ',"detail":' || to_json(p_detail)::TEXT || '}' || E'\n'
$$;

-- Append event lines to a call, capped (then one marker); false if the call does not exist.
CREATE FUNCTION toolhost_append(p_run TEXT, p_call TEXT, p_lines TEXT, p_cap BIGINT,
                                p_marker TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    UPDATE calls SET events = events || CASE
        WHEN length(events) + length(p_lines) <= p_cap THEN p_lines
        WHEN strpos(events, '"decision":"not_recorded"') > 0 THEN ''
        ELSE p_marker END
    WHERE run_id = p_run AND call_id = p_call;
    RETURN FOUND;
END
$$;

CREATE FUNCTION toolhost_note_approvals(p_run TEXT, p_call TEXT, p_digests JSONB)
RETURNS VOID LANGUAGE sql AS $$
    INSERT INTO approval_requests (digest, run_id, call_id)
    SELECT d, p_run, p_call FROM jsonb_array_elements_text(COALESCE(p_digests, '[]')) AS d
    ON CONFLICT (digest) DO NOTHING
$$;

-- The admission of an id already in the ledger: conflict, replay or in flight.
CREATE FUNCTION toolhost_decide(p_run TEXT, p_call TEXT, k JSONB, p_now BIGINT, p_cap BIGINT,
                                p_marker TEXT)
RETURNS JSONB LANGUAGE plpgsql AS $$
DECLARE
    v_tool TEXT; v_digest TEXT; v_result TEXT; v_events TEXT; v_lines TEXT[];
BEGIN
    SELECT tool, args_digest, result_json, events INTO v_tool, v_digest, v_result, v_events
    FROM calls WHERE run_id = p_run AND call_id = p_call FOR UPDATE;
    IF v_tool <> k->>'tool' OR v_digest <> k->>'args_digest' THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'conflict',
            format('call id reused for tool %s with arguments sha256 %s, %s bytes (admitted: '
                   'tool %s, sha256 %s); refused as duplicate_call_id, this call unchanged',
                   to_json(k->>'tool')::TEXT, k->>'args_digest', k->>'args_size',
                   to_json(v_tool)::TEXT, v_digest)), p_cap, p_marker);
        RETURN '{"admission": "conflict"}';
    END IF;
    IF v_result IS NOT NULL THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'replay',
            'same call again; answered from its recorded outcome, not re-run'), p_cap, p_marker);
        RETURN jsonb_build_object('admission', 'replay', 'result', v_result);
    END IF;
    -- A duplicate may poll admit until the original ends: one event per streak.
    v_lines := regexp_split_to_array(rtrim(v_events, E'\n'), E'\n');
    IF strpos(COALESCE(v_lines[array_upper(v_lines, 1)], ''),
              '"stage":"admit","decision":"in_flight"') = 0 THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'in_flight',
            'same call again while it has no outcome yet; not run twice'), p_cap, p_marker);
    END IF;
    RETURN '{"admission": "in_flight"}';
END
$$;

-- The state of a call that an update did not find in the state it needed.
CREATE FUNCTION toolhost_refuse(p_run TEXT, p_call TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE v_state TEXT;
BEGIN
    SELECT state INTO v_state FROM calls WHERE run_id = p_run AND call_id = p_call;
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'toolhost:unknown_call';
    END IF;
    IF v_state = 'finished' THEN
        RAISE EXCEPTION 'toolhost:already_finished';
    END IF;
END
$$;

CREATE FUNCTION toolhost_apply_one(p_owner TEXT, w JSONB, p_cap BIGINT, p_marker TEXT)
RETURNS JSONB LANGUAGE plpgsql AS $$
DECLARE
    k JSONB := w->'key';
    o JSONB := NULLIF(w->'outcome', 'null'::JSONB);
    v_run TEXT := COALESCE(k->>'run_id', w->>'run_id');
    v_call TEXT := COALESCE(k->>'call_id', w->>'call_id');
    v_now BIGINT := (w->>'now')::BIGINT;
    v_seq BIGINT;
BEGIN
    IF w->>'op' IN ('admit', 'admit_late') THEN
        IF o IS NULL THEN
            INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state,
                               admitted_at_ms, owner, events)
            VALUES (v_run, v_call, k->>'tool', k->>'args_digest', (k->>'args_size')::BIGINT,
                    'admitted', (w->>'at_ms')::BIGINT, p_owner, w->>'lines')
            ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq INTO v_seq;
        ELSE
            INSERT INTO calls (status, code, message, diagnostic_id, output_digest, output_size,
                               fuel_consumed, wall_ms, memory_peak_bytes, output_bytes,
                               result_json, started_at_ms, run_id, call_id, tool, args_digest,
                               args_size, state, admitted_at_ms, owner, events, finished_at_ms)
            VALUES (o->>'status', o->>'code', o->>'message', o->>'diagnostic_id',
                    o->>'output_digest', (o->>'output_size')::BIGINT,
                    (o->>'fuel_consumed')::BIGINT, (o->>'wall_ms')::BIGINT,
                    (o->>'memory_peak_bytes')::BIGINT, (o->>'output_bytes')::BIGINT,
                    o->>'result_json', (o->>'started_at_ms')::BIGINT, v_run, v_call, k->>'tool',
                    k->>'args_digest', (k->>'args_size')::BIGINT, 'finished',
                    (w->>'at_ms')::BIGINT, p_owner, w->>'lines', v_now)
            ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq INTO v_seq;
        END IF;
        IF v_seq IS NULL THEN
            RETURN toolhost_decide(v_run, v_call, k, v_now, p_cap, p_marker);
        END IF;
        IF w->>'op' = 'admit_late' THEN
            IF o IS NULL THEN
                UPDATE calls SET state = 'started', started_at_ms = v_now WHERE seq = v_seq;
            END IF;
            IF w->>'content' IS NOT NULL THEN
                INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
                VALUES (v_run, v_call, w->>'content', (w->>'at_ms')::BIGINT);
            END IF;
            PERFORM toolhost_note_approvals(v_run, v_call, w->'approvals');
        END IF;
        RETURN jsonb_build_object('admission', 'new', 'seq', v_seq);
    ELSIF w->>'op' = 'mark_started' THEN
        UPDATE calls SET state = 'started', started_at_ms = v_now, events = events || (w->>'lines')
        WHERE run_id = v_run AND call_id = v_call AND state = 'admitted';
        IF NOT FOUND THEN
            PERFORM toolhost_refuse(v_run, v_call);
            PERFORM toolhost_append(v_run, v_call, w->>'lines', p_cap, p_marker);
        END IF;
        PERFORM toolhost_note_approvals(v_run, v_call, w->'approvals');
        RETURN '"done"';
    ELSIF w->>'op' = 'finish' THEN
        UPDATE calls SET state = 'finished', status = o->>'status', code = o->>'code',
            message = o->>'message', diagnostic_id = o->>'diagnostic_id',
            output_digest = o->>'output_digest', output_size = (o->>'output_size')::BIGINT,
            fuel_consumed = (o->>'fuel_consumed')::BIGINT, wall_ms = (o->>'wall_ms')::BIGINT,
            memory_peak_bytes = (o->>'memory_peak_bytes')::BIGINT,
            output_bytes = (o->>'output_bytes')::BIGINT, result_json = o->>'result_json',
            started_at_ms = COALESCE(started_at_ms, (o->>'started_at_ms')::BIGINT),
            finished_at_ms = v_now, events = events || (w->>'lines')
        WHERE run_id = v_run AND call_id = v_call AND state <> 'finished';
        IF NOT FOUND THEN
            PERFORM toolhost_refuse(v_run, v_call);
        END IF;
        PERFORM toolhost_note_approvals(v_run, v_call, w->'approvals');
        RETURN '"done"';
    ELSIF w->>'op' = 'event' THEN
        IF NOT toolhost_append(v_run, v_call, w->>'lines', p_cap, p_marker) THEN
            RAISE EXCEPTION 'toolhost:unknown_call';
        END IF;
        PERFORM toolhost_note_approvals(v_run, v_call, w->'approvals');
        RETURN '"done"';
    END IF;
    RAISE EXCEPTION 'toolhost:unknown_write %', w->>'op';
END
$$;

-- Apply a group: each write in its own subtransaction, one answer per write, remembered
-- under p_group so that the same group sent again is answered, not applied again.
CREATE FUNCTION toolhost_apply(p_group TEXT, p_owner TEXT, p_writes JSONB, p_cap BIGINT,
                               p_marker TEXT)
RETURNS JSONB LANGUAGE plpgsql AS $$
DECLARE
    w JSONB;
    answer JSONB;
    answers JSONB := '[]';
BEGIN
    SELECT a.answers INTO answer FROM applied_groups a WHERE a.id = p_group;
    IF FOUND THEN
        RETURN answer;
    END IF;
    FOR w IN SELECT value FROM jsonb_array_elements(p_writes) LOOP
        BEGIN
            answer := toolhost_apply_one(p_owner, w, p_cap, p_marker);
        EXCEPTION WHEN OTHERS THEN
            answer := jsonb_build_object('error', SQLERRM, 'state', SQLSTATE);
        END;
        answers := answers || jsonb_build_array(answer);
    END LOOP;
    INSERT INTO applied_groups (id, answers, at_ms)
    VALUES (p_group, answers, (extract(epoch from clock_timestamp()) * 1000)::BIGINT);
    RETURN answers;
END
$$;
"#;

/// Version 5: a transcript entry may say more than a digest — an attempt's outcome, why a run
/// stopped (operator text, never content).
const SCHEMA_V5: &str = r#"
ALTER TABLE transcript ADD COLUMN detail TEXT NOT NULL DEFAULT '';
"#;

/// Version 6: reconciliations (`crates/ledger/src/reconcile.rs`), as SQLite's version 4: at most one per
/// call that ended `outcome_unknown`, beside its row, never instead of it. Admission's
/// `toolhost_decide` replays a reconciled call's reconciliation.
const SCHEMA_V6: &str = r#"
CREATE TABLE reconciliations (
    run_id         TEXT    NOT NULL,
    call_id        TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('completed', 'failed')),
    code           TEXT,
    output_digest  TEXT,
    output_size    BIGINT,
    result_json    TEXT    NOT NULL,
    operator       TEXT    NOT NULL,
    why            TEXT    NOT NULL,
    at_ms          BIGINT  NOT NULL,
    PRIMARY KEY (run_id, call_id),
    FOREIGN KEY (run_id, call_id) REFERENCES calls (run_id, call_id)
);
CREATE INDEX calls_unknown ON calls (seq) WHERE status = 'outcome_unknown';

CREATE OR REPLACE FUNCTION toolhost_decide(p_run TEXT, p_call TEXT, k JSONB, p_now BIGINT, p_cap BIGINT,
                                p_marker TEXT)
RETURNS JSONB LANGUAGE plpgsql AS $$
DECLARE
    v_tool TEXT; v_digest TEXT; v_result TEXT; v_events TEXT; v_lines TEXT[];
BEGIN
    SELECT tool, args_digest, result_json, events INTO v_tool, v_digest, v_result, v_events
    FROM calls WHERE run_id = p_run AND call_id = p_call FOR UPDATE;
    -- A reconciled call replays what the operator recorded.
    v_result := COALESCE((SELECT result_json FROM reconciliations
                          WHERE run_id = p_run AND call_id = p_call), v_result);
    IF v_tool <> k->>'tool' OR v_digest <> k->>'args_digest' THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'conflict',
            format('call id reused for tool %s with arguments sha256 %s, %s bytes (admitted: '
                   'tool %s, sha256 %s); refused as duplicate_call_id, this call unchanged',
                   to_json(k->>'tool')::TEXT, k->>'args_digest', k->>'args_size',
                   to_json(v_tool)::TEXT, v_digest)), p_cap, p_marker);
        RETURN '{"admission": "conflict"}';
    END IF;
    IF v_result IS NOT NULL THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'replay',
            'same call again; answered from its recorded outcome, not re-run'), p_cap, p_marker);
        RETURN jsonb_build_object('admission', 'replay', 'result', v_result);
    END IF;
    -- A duplicate may poll admit until the original ends: one event per streak.
    v_lines := regexp_split_to_array(rtrim(v_events, E'\n'), E'\n');
    IF strpos(COALESCE(v_lines[array_upper(v_lines, 1)], ''),
              '"stage":"admit","decision":"in_flight"') = 0 THEN
        PERFORM toolhost_append(p_run, p_call, toolhost_event_line(p_now, 'admit', 'in_flight',
            'same call again while it has no outcome yet; not run twice'), p_cap, p_marker);
    END IF;
    RETURN '{"admission": "in_flight"}';
END
$$;
"#;

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_V3,
    SCHEMA_V4,
    SCHEMA_V5,
    SCHEMA_V6,
    SCHEMA_V7,
    SCHEMA_V8,
    SCHEMA_V9,
    SCHEMA_V10,
    super::chain::SCHEMA_V11,
    super::started_schema::SCHEMA_V12,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Create `schema` if needed and bring it (first on `client`'s search path) to
/// [`SCHEMA_VERSION`]; returns the version it found.
pub async fn migrate(client: &mut Client, schema: &str) -> Result<i64, LedgerError> {
    migrate_to(client, schema, SCHEMA_VERSION).await
}

/// [`migrate`], to `version` (at most [`SCHEMA_VERSION`]): a test makes an older ledger.
pub(super) async fn migrate_to(
    client: &mut Client,
    schema: &str,
    version: i64,
) -> Result<i64, LedgerError> {
    let tx = client.transaction().await.db()?;
    // One migrator per schema at a time (creating the schema included: `IF NOT EXISTS` alone
    // races); the lock ends with the transaction.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1 || '.toolhost-ledger'))",
        &[&schema],
    )
    .await
    .db()?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await
        .db()?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS ledger_version (version BIGINT NOT NULL)")
        .await
        .db()?;
    let found: i64 = match tx
        .query_opt("SELECT version FROM ledger_version", &[])
        .await
        .db()?
    {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO ledger_version (version) VALUES (0)", &[])
                .await
                .db()?;
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
    let last = usize::try_from(version.clamp(found, SCHEMA_VERSION)).unwrap_or(first);
    for step in &MIGRATIONS[first..last] {
        tx.batch_execute(step).await.db()?;
    }
    let now = version.clamp(found, SCHEMA_VERSION);
    tx.execute("UPDATE ledger_version SET version = $1", &[&now])
        .await
        .db()?;
    tx.commit().await.db()?;
    Ok(found)
}
