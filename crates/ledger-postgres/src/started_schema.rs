//! Version 12 of the PostgreSQL migrations `schema.rs` applies: a call admitted late without
//! its outcome is inserted started.

/// Version 12: admission (`toolhost_apply_one`, version 10) inserts a call admitted late and
/// not yet finished as `started`, where it inserted it `admitted` and updated it at once: one
/// row write and one chain link fewer (as SQLite's backend does). Nothing else in it changes.
pub(super) const SCHEMA_V12: &str = r#"
CREATE OR REPLACE FUNCTION toolhost_apply_one(p_owner TEXT, w JSONB, p_cap BIGINT, p_marker TEXT)
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
            -- A late admission without its outcome is inserted started: one row write.
            INSERT INTO calls (run_id, call_id, tool, args_digest, args_size, state,
                               admitted_at_ms, started_at_ms, owner, events, component_digest,
                               definition_digest)
            VALUES (v_run, v_call, k->>'tool', k->>'args_digest', (k->>'args_size')::BIGINT,
                    CASE WHEN w->>'op' = 'admit_late' THEN 'started' ELSE 'admitted' END,
                    (w->>'at_ms')::BIGINT,
                    CASE WHEN w->>'op' = 'admit_late' THEN v_now END, p_owner, w->>'lines',
                    k->>'component_digest', k->>'definition_digest')
            ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq INTO v_seq;
        ELSE
            INSERT INTO calls (status, code, message, diagnostic_id, output_digest, output_size,
                               fuel_consumed, wall_ms, memory_peak_bytes, output_bytes,
                               result_json, started_at_ms, run_id, call_id, tool, args_digest,
                               args_size, state, admitted_at_ms, owner, events, finished_at_ms,
                               component_digest, definition_digest)
            VALUES (o->>'status', o->>'code', o->>'message', o->>'diagnostic_id',
                    o->>'output_digest', (o->>'output_size')::BIGINT,
                    (o->>'fuel_consumed')::BIGINT, (o->>'wall_ms')::BIGINT,
                    (o->>'memory_peak_bytes')::BIGINT, (o->>'output_bytes')::BIGINT,
                    o->>'result_json', (o->>'started_at_ms')::BIGINT, v_run, v_call, k->>'tool',
                    k->>'args_digest', (k->>'args_size')::BIGINT, 'finished',
                    (w->>'at_ms')::BIGINT, p_owner, w->>'lines', v_now,
                    k->>'component_digest', k->>'definition_digest')
            ON CONFLICT (run_id, call_id) DO NOTHING RETURNING seq INTO v_seq;
        END IF;
        IF v_seq IS NULL THEN
            RETURN toolhost_decide(v_run, v_call, k, v_now, p_cap, p_marker);
        END IF;
        IF w->>'op' = 'admit_late' THEN
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
"#;
