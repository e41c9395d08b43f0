//! The hash chain in PostgreSQL (`toolhost_ledger_store::chain`): schema version 11, and the
//! reads `toolhost ledger verify` checks.
//!
//! Each connection a host opens writes its own chain, named `<host>/<role>` (the session
//! setting `toolhost.host`, set by [`PgConfig::connect_as`](super::PgConfig::connect_as)).
//! A connection runs one transaction at a time, so a chain's head row is never waited for:
//! hosts do not contend on one head, and a host's writer and store never wait on each other.
//! The heads live in `chain_heads`, one row per chain, updated with each link.

use tokio_postgres::Client;

use super::Db;
use toolhost_ledger_store::chain::{ChainedRow, Evidence, Head, Link};
use toolhost_ledger_store::LedgerError;

/// Version 11: the chain's tables, its functions (the same digests as
/// `toolhost_ledger_store::chain`), one trigger per chained table, and every row already here
/// chained in order (calls by admission first).
pub(super) const SCHEMA_V11: &str = r#"
CREATE TABLE chain_heads (
    chain  TEXT   NOT NULL PRIMARY KEY,
    seq    BIGINT NOT NULL,
    prev   TEXT   NOT NULL,                -- the hash before the head's
    hash   TEXT   NOT NULL
);
CREATE TABLE chain_links (
    chain     TEXT   NOT NULL,
    seq       BIGINT NOT NULL,
    prev      TEXT   NOT NULL,
    kind      TEXT   NOT NULL,
    run_id    TEXT   NOT NULL,
    key       TEXT   NOT NULL,
    first     BIGINT NOT NULL,
    lines     TEXT   NOT NULL,
    attached  TEXT,
    at_ms     BIGINT NOT NULL,
    hash      TEXT   NOT NULL,
    PRIMARY KEY (chain, seq)
);

-- Each field as `<bytes>:<value>;`, a NULL as `-;`; the SHA-256 of all, in hex. PL/pgSQL, so
-- that its plan is made once a session (a SQL function with a set is planned on every call).
CREATE FUNCTION toolhost_digest(VARIADIC f TEXT[]) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    buf TEXT := '';
    x TEXT;
BEGIN
    FOREACH x IN ARRAY f LOOP
        IF x IS NULL THEN
            buf := buf || '-;';
        ELSE
            buf := buf || octet_length(x) || ':' || x || ';';
        END IF;
    END LOOP;
    RETURN encode(sha256(convert_to(buf, 'UTF8')), 'hex');
END
$$;

-- The SHA-256 of each line (the piece after a last newline is none), joined by spaces.
CREATE FUNCTION toolhost_lines(t TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    out TEXT := '';
    l TEXT;
BEGIN
    IF t IS NULL OR t = '' THEN
        RETURN '';
    END IF;
    IF right(t, 1) = E'\n' THEN
        t := left(t, -1);
    END IF;
    FOREACH l IN ARRAY string_to_array(t, E'\n') LOOP
        IF out <> '' THEN
            out := out || ' ';
        END IF;
        out := out || encode(sha256(convert_to(l, 'UTF8')), 'hex');
    END LOOP;
    RETURN out;
END
$$;

-- One statement moves the head: the right-hand sides of SET all read the row as it was, so
-- `prev` takes the old hash and the new hash is computed over it.
CREATE FUNCTION toolhost_chain_append(p_kind TEXT, p_run TEXT, p_key TEXT, p_first BIGINT,
                                      p_lines TEXT, p_attached TEXT)
RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    v_chain TEXT := COALESCE(NULLIF(current_setting('toolhost.host', true), ''), 'unnamed');
    v_at BIGINT := floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
    v_seq BIGINT; v_prev TEXT; v_hash TEXT;
BEGIN
    UPDATE chain_heads SET seq = seq + 1, prev = hash,
        hash = toolhost_digest('toolhost.chain.v1', v_chain, (seq + 1)::TEXT, hash, p_kind,
                               p_run, p_key, p_first::TEXT, p_lines, p_attached, v_at::TEXT)
    WHERE chain = v_chain
    RETURNING seq, prev, hash INTO v_seq, v_prev, v_hash;
    IF NOT FOUND THEN
        v_seq := 1;
        v_prev := '';
        v_hash := toolhost_digest('toolhost.chain.v1', v_chain, '1', '', p_kind, p_run, p_key,
                                  p_first::TEXT, p_lines, p_attached, v_at::TEXT);
        INSERT INTO chain_heads (chain, seq, prev, hash) VALUES (v_chain, 1, '', v_hash);
    END IF;
    INSERT INTO chain_links VALUES (v_chain, v_seq, v_prev, p_kind, p_run, p_key, p_first,
                                    p_lines, p_attached, v_at, v_hash);
END
$$;

-- The recorded columns of each chained table, as one digest (a call's after its state).
CREATE FUNCTION toolhost_call_digest(c calls) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT c.state || ':' ||
           toolhost_digest(c.tool, c.args_digest, c.args_size::TEXT, c.component_digest,
                           c.definition_digest, c.status, c.code, c.message, c.diagnostic_id,
                           c.output_digest, c.output_size::TEXT, c.result_json)
$$;
CREATE FUNCTION toolhost_reconcile_digest(r reconciliations) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT toolhost_digest(r.status, r.code, r.output_digest, r.output_size::TEXT,
                           r.result_json, r.operator, r.why, r.at_ms::TEXT)
$$;
CREATE FUNCTION toolhost_transcript_digest(t transcript) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT toolhost_digest(t.step::TEXT, t.kind, t.digest, t.size::TEXT, t.at_ms::TEXT,
                           t.detail)
$$;
CREATE FUNCTION toolhost_token_digest(t used_tokens) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT toolhost_digest(t.expires_at_unix::TEXT, t.used_at_ms::TEXT)
$$;
CREATE FUNCTION toolhost_task_digest(t tasks) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT toolhost_digest(t.principal, t.tenant, t.call_id, t.tool, t.arguments_json,
                           t.call_digest, t.open_bytes::TEXT, t.owner, t.created_at_ms::TEXT,
                           t.updated_at_ms::TEXT, t.expires_at_ms::TEXT,
                           t.cancel_requested_at_ms::TEXT)
$$;

CREATE VIEW chain_rows AS
SELECT 'call' AS kind, run_id, call_id AS key, events, toolhost_call_digest(c) AS digest,
       seq AS n
FROM calls c
UNION ALL
SELECT 'reconcile', run_id, call_id, NULL, toolhost_reconcile_digest(r), NULL
FROM reconciliations r
UNION ALL
SELECT 'transcript', run_id, id::TEXT, NULL, toolhost_transcript_digest(t), NULL
FROM transcript t
UNION ALL
SELECT 'token', '', token_id, NULL, toolhost_token_digest(t), NULL FROM used_tokens t
UNION ALL
SELECT 'task', run_id, task_id, NULL, toolhost_task_digest(t), NULL FROM tasks t;

DO $$
DECLARE r RECORD;
BEGIN
    FOR r IN SELECT * FROM chain_rows ORDER BY kind <> 'call', n LOOP
        PERFORM toolhost_chain_append(r.kind, r.run_id, r.key, 0, toolhost_lines(r.events),
                                      r.digest);
    END LOOP;
END
$$;

CREATE FUNCTION toolhost_chain_calls() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE v_digest TEXT;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM toolhost_chain_append('call', NEW.run_id, NEW.call_id, 0,
                                      toolhost_lines(NEW.events), toolhost_call_digest(NEW));
        RETURN NULL;
    END IF;
    IF (NEW.state, NEW.tool, NEW.args_digest, NEW.args_size, NEW.component_digest, NEW.definition_digest,
        NEW.status, NEW.code, NEW.message, NEW.diagnostic_id, NEW.output_digest,
        NEW.output_size, NEW.result_json)
       IS DISTINCT FROM (OLD.state, OLD.tool, OLD.args_digest, OLD.args_size, OLD.component_digest,
                         OLD.definition_digest, OLD.status, OLD.code, OLD.message,
                         OLD.diagnostic_id, OLD.output_digest, OLD.output_size, OLD.result_json)
    THEN
        v_digest := toolhost_call_digest(NEW);
    END IF;
    IF v_digest IS NOT NULL OR NEW.events IS DISTINCT FROM OLD.events THEN
        PERFORM toolhost_chain_append('call', NEW.run_id, NEW.call_id,
            length(OLD.events) - length(replace(OLD.events, E'\n', '')),
            toolhost_lines(substr(NEW.events, length(OLD.events) + 1)), v_digest);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER chain_calls AFTER INSERT OR UPDATE ON calls
FOR EACH ROW EXECUTE FUNCTION toolhost_chain_calls();

CREATE FUNCTION toolhost_chain_rows() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE v_run TEXT; v_key TEXT; v_digest TEXT;
BEGIN
    IF TG_TABLE_NAME = 'reconciliations' THEN
        PERFORM toolhost_chain_append('reconcile', NEW.run_id, NEW.call_id, 0, '',
                                      toolhost_reconcile_digest(NEW));
    ELSIF TG_TABLE_NAME = 'transcript' THEN
        PERFORM toolhost_chain_append('transcript', NEW.run_id, NEW.id::TEXT, 0, '',
                                      toolhost_transcript_digest(NEW));
    ELSIF TG_TABLE_NAME = 'used_tokens' THEN
        IF TG_OP = 'DELETE' THEN
            PERFORM toolhost_chain_append('token', '', OLD.token_id, 0, '', NULL);
        ELSE
            PERFORM toolhost_chain_append('token', '', NEW.token_id, 0, '',
                                          toolhost_token_digest(NEW));
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM toolhost_chain_append('task', OLD.run_id, OLD.task_id, 0, '', NULL);
    ELSE
        PERFORM toolhost_chain_append('task', NEW.run_id, NEW.task_id, 0, '',
                                      toolhost_task_digest(NEW));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER chain_reconciliations AFTER INSERT ON reconciliations
FOR EACH ROW EXECUTE FUNCTION toolhost_chain_rows();
CREATE TRIGGER chain_transcript AFTER INSERT ON transcript
FOR EACH ROW EXECUTE FUNCTION toolhost_chain_rows();
CREATE TRIGGER chain_tokens AFTER INSERT OR DELETE ON used_tokens
FOR EACH ROW EXECUTE FUNCTION toolhost_chain_rows();
CREATE TRIGGER chain_tasks AFTER INSERT OR UPDATE OR DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION toolhost_chain_rows();
"#;

/// Every link, every head and every chained row, in one snapshot.
pub(super) async fn evidence(client: &mut Client) -> Result<Evidence, LedgerError> {
    let tx = snapshot(client).await?;
    let links = links(&tx, "", &[]).await?;
    let heads = tx
        .query("SELECT chain, seq, hash FROM chain_heads", &[])
        .await
        .db()?
        .iter()
        .map(|r| Head {
            chain: r.get(0),
            seq: r.get(1),
            hash: r.get(2),
        })
        .collect();
    let rows = rows(&tx, "", &[]).await?;
    tx.commit().await.db()?;
    Ok(Evidence { links, heads, rows })
}

/// The links and chained rows of one call (its own and its reconciliation's), in one snapshot.
pub(super) async fn evidence_of_call(
    client: &mut Client,
    run_id: &str,
    call_id: &str,
) -> Result<Evidence, LedgerError> {
    let tx = snapshot(client).await?;
    let of_call = "WHERE run_id = $1 AND key = $2 AND kind IN ('call', 'reconcile')";
    let links = links(&tx, of_call, &[&run_id, &call_id]).await?;
    let rows = rows(&tx, of_call, &[&run_id, &call_id]).await?;
    tx.commit().await.db()?;
    Ok(Evidence {
        links,
        heads: Vec::new(),
        rows,
    })
}

/// A read-only transaction that sees one snapshot throughout.
async fn snapshot(client: &mut Client) -> Result<tokio_postgres::Transaction<'_>, LedgerError> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .db()
}

type Params<'a> = [&'a (dyn tokio_postgres::types::ToSql + Sync)];

async fn links(
    tx: &tokio_postgres::Transaction<'_>,
    filter: &str,
    params: &Params<'_>,
) -> Result<Vec<Link>, LedgerError> {
    Ok(tx
        .query(
            &format!(
                "SELECT chain, seq, prev, kind, run_id, key, first, lines, attached, at_ms, hash
                 FROM chain_links {filter} ORDER BY chain, seq"
            ),
            params,
        )
        .await
        .db()?
        .iter()
        .map(|r| Link {
            chain: r.get(0),
            seq: r.get(1),
            prev: r.get(2),
            kind: r.get(3),
            run_id: r.get(4),
            key: r.get(5),
            first: r.get(6),
            lines: r.get(7),
            attached: r.get(8),
            at_ms: r.get(9),
            hash: r.get(10),
        })
        .collect())
}

async fn rows(
    tx: &tokio_postgres::Transaction<'_>,
    filter: &str,
    params: &Params<'_>,
) -> Result<Vec<ChainedRow>, LedgerError> {
    Ok(tx
        .query(
            &format!("SELECT kind, run_id, key, events, digest FROM chain_rows {filter}"),
            params,
        )
        .await
        .db()?
        .iter()
        .map(|r| ChainedRow {
            kind: r.get(0),
            run_id: r.get(1),
            key: r.get(2),
            events: r.get(3),
            digest: r.get(4),
        })
        .collect())
}
