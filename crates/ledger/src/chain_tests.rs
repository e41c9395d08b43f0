//! The hash chain on every backend: every contract test ends with its whole ledger verified
//! (`contract!`), and the bodies here alter a ledger as someone with access to its database
//! would — past the triggers, or through them — and check that `verify` names what changed.

use serde_json::{json, Value};

use super::chain::Finding;
use super::contract_tests::{self, admit, call, usage, Site};
use super::*;
use toolhost_contract::ToolResult;

/// Whoever can reach the database: SQL run past the chain's triggers, or through them.
pub(super) trait Access {
    /// Run `sql` with the chain's triggers off (SQLite: dropped and made again around it;
    /// PostgreSQL: `session_replication_role = replica`).
    fn past_triggers(&self, sql: &str);
    /// Run `sql` as a connection that names a host, so that the triggers chain it.
    fn through_triggers(&self, sql: &str);
    /// A call's events, as stored.
    fn events(&self, run: &str, call: &str) -> String;
}

/// `text` as an SQL string literal (both databases double a quote).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The whole ledger `site` holds verifies.
pub(super) fn assert_intact(site: &dyn Site) {
    let l = site.open(LedgerOptions::default());
    let report = l.verify().unwrap();
    assert!(report.intact(), "{:#?}", report.findings);
}

/// A ledger with run `r`: `c1` completed, `c2` admitted and started, both with events.
fn two_calls(site: &dyn Site) -> Ledger {
    let l = site.open(LedgerOptions::default());
    let c1 = call("c1", json!({"text": "hi"}));
    admit(&l, "r", &c1);
    l.event("r", "c1", "authorize", "allow", "rule 1").unwrap();
    l.mark_started("r", "c1").unwrap();
    l.finish("r", "c1", &ToolResult::completed(&c1, json!("hi"), usage()))
        .unwrap();
    admit(&l, "r", &call("c2", json!({"text": "ho"})));
    l.mark_started("r", "c2").unwrap();
    let report = l.verify().unwrap();
    assert!(report.intact(), "{:#?}", report.findings);
    assert!(report.links >= 6, "{report:?}");
    l
}

/// The findings of a fresh host's verify.
fn findings(site: &dyn Site) -> Vec<Finding> {
    site.open(LedgerOptions::default())
        .verify()
        .unwrap()
        .findings
}

const EDIT_OUTPUT: &str =
    "UPDATE calls SET result_json = replace(result_json, '\"hi\"', '\"forged\"') \
     WHERE run_id = 'r' AND call_id = 'c1'";

/// An output edited past the triggers is named by run, call and the link that recorded it.
pub(super) fn verify_names_an_output_edited_past_the_chain(site: &dyn Site, db: &dyn Access) {
    drop(two_calls(site));
    db.past_triggers(EDIT_OUTPUT);
    assert!(
        matches!(
            &findings(site)[..],
            [Finding::RowAltered { kind, run_id, key, seq, .. }]
                if kind == "call" && run_id == "r" && key == "c1" && *seq > 1
        ),
        "{:#?}",
        findings(site)
    );
}

/// An output edited through the triggers is chained, and named all the same: a finished call
/// never changes.
pub(super) fn verify_names_an_output_edited_through_the_chain(site: &dyn Site, db: &dyn Access) {
    drop(two_calls(site));
    db.through_triggers(EDIT_OUTPUT);
    let found = findings(site);
    assert!(
        matches!(
            &found[..],
            [Finding::RowRewritten { kind, run_id, key, .. }]
                if kind == "call" && run_id == "r" && key == "c1"
        ),
        "{found:#?}"
    );
}

/// A call's second event deleted, past the triggers or through them: named by run, call and
/// index.
fn delete_an_event(site: &dyn Site, db: &dyn Access, through: bool) {
    drop(two_calls(site));
    let events = db.events("r", "c1");
    let kept: Vec<&str> = events
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| l)
        .collect();
    let sql = format!(
        "UPDATE calls SET events = {} WHERE run_id = 'r' AND call_id = 'c1'",
        literal(&format!("{}\n", kept.join("\n")))
    );
    if through {
        db.through_triggers(&sql);
    } else {
        db.past_triggers(&sql);
    }
    let found = findings(site);
    assert!(
        matches!(
            found.first(),
            Some(Finding::EventMissing { run_id, call_id, index: 1, .. })
                if run_id == "r" && call_id == "c1"
        ),
        "{found:#?}"
    );
}

/// A deleted event, past the triggers.
pub(super) fn verify_names_an_event_deleted_past_the_chain(site: &dyn Site, db: &dyn Access) {
    delete_an_event(site, db, false);
}

/// A deleted event, through the triggers: the lines the links recorded are gone all the same.
pub(super) fn verify_names_an_event_deleted_through_the_chain(site: &dyn Site, db: &dyn Access) {
    delete_an_event(site, db, true);
}

/// An inserted event is named by run, call and index, in the middle or at the end.
pub(super) fn verify_names_an_inserted_event(site: &dyn Site, db: &dyn Access) {
    drop(two_calls(site));
    let events = db.events("r", "c2");
    let forged = "{\"at_ms\":1,\"stage\":\"approve\",\"decision\":\"approved\",\"detail\":\"\"}";
    let mut lines: Vec<&str> = events.lines().collect();
    lines.insert(1, forged);
    db.past_triggers(&format!(
        "UPDATE calls SET events = {} WHERE run_id = 'r' AND call_id = 'c2'",
        literal(&format!("{}\n", lines.join("\n")))
    ));
    let found = findings(site);
    assert!(
        matches!(
            &found[..],
            [Finding::EventInserted { run_id, call_id, index: 1 }]
                if run_id == "r" && call_id == "c2"
        ),
        "{found:#?}"
    );
}

/// A deleted call, and a link deleted from a chain, are found.
pub(super) fn verify_names_deleted_calls_and_links(site: &dyn Site, db: &dyn Access) {
    drop(two_calls(site));
    db.past_triggers("DELETE FROM calls WHERE run_id = 'r' AND call_id = 'c2'");
    let found = findings(site);
    assert!(
        found.iter().any(|f| matches!(f,
            Finding::RowMissing { kind, key, .. } if kind == "call" && key == "c2")),
        "{found:#?}"
    );
    db.past_triggers("DELETE FROM chain_links WHERE run_id = 'r' AND key = 'c1' AND first = 0");
    let found = findings(site);
    assert!(
        found
            .iter()
            .any(|f| matches!(f, Finding::LinksMissing { .. })),
        "{found:#?}"
    );
}

/// A finished call's receipt opens with the host's public key alone and says what the ledger
/// recorded; a change of any field fails it; a call without an outcome, one never admitted and
/// one whose record was altered get none.
pub(super) fn a_receipt_verifies_offline_and_fails_after_any_change(
    site: &dyn Site,
    db: &dyn Access,
) {
    use base64::Engine as _;
    let l = two_calls(site);
    let dir = tempfile::tempdir().unwrap();
    let key = ReceiptKey::load_or_create(&dir.path().join("receipt.key")).unwrap();
    std::fs::write(dir.path().join("receipt.pub"), key.public_pem()).unwrap();
    let public = PublicReceiptKey::read(&dir.path().join("receipt.pub")).unwrap();

    let envelope = l.receipt("r", "c1", &key, 1_700_000_000_000).unwrap();
    let sealed = serde_json::to_vec(&envelope).unwrap();
    let statement = read_statement(&public.open(&sealed).unwrap()).unwrap();
    let p = &statement["predicate"];
    assert_eq!(
        (p["run_id"].as_str(), p["call_id"].as_str()),
        (Some("r"), Some("c1"))
    );
    assert_eq!(p["tool"], "echo");
    assert_eq!(p["outcome"]["status"], "completed");
    assert_eq!(p["issued_at_ms"], 1_700_000_000_000i64);
    let (digest, _) = contract_tests::args_key(&json!({"text": "hi"}));
    assert_eq!(statement["subject"][0]["digest"]["sha256"], digest);
    assert_eq!(p["arguments"]["sha256"], digest);
    let stages: Vec<&str> = p["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["admit", "authorize", "record"]);
    let links = p["chain"]["links"].as_array().unwrap();
    assert!(links.len() >= 3, "{links:?}");
    assert!(links
        .iter()
        .all(|k| k["hash"].as_str().unwrap().len() == 64));

    // Any field changed, and the signature no longer holds.
    let b64 = base64::engine::general_purpose::STANDARD;
    let edits: [(&str, Value); 5] = [
        ("/predicate/outcome/status", json!("failed")),
        ("/predicate/tool", json!("delete_everything")),
        ("/subject/0/digest/sha256", json!("00")),
        ("/predicate/chain/links/0/hash", json!("00")),
        ("/predicate/decisions/1/decision", json!("deny")),
    ];
    for (path, value) in edits {
        let mut changed_statement = statement.clone();
        *changed_statement.pointer_mut(path).unwrap() = value;
        let mut changed = envelope.clone();
        changed.payload = b64.encode(serde_json::to_vec(&changed_statement).unwrap());
        let opened = public.open(&serde_json::to_vec(&changed).unwrap());
        assert!(
            matches!(opened, Err(ReceiptError::BadSignature)),
            "{path}: {opened:?}"
        );
    }

    assert!(matches!(
        l.receipt("r", "c2", &key, 1),
        Err(ReceiptError::NotFinished { .. })
    ));
    assert!(matches!(
        l.receipt("r", "nope", &key, 1),
        Err(ReceiptError::Ledger(LedgerError::UnknownCall { .. }))
    ));
    drop(l);
    db.past_triggers(EDIT_OUTPUT);
    let l = site.open(LedgerOptions::default());
    let refused = l.receipt("r", "c1", &key, 1);
    assert!(
        matches!(&refused, Err(ReceiptError::Tampered { findings, .. }) if findings.contains("c1")),
        "{refused:?}"
    );
}

/// The bodies above, on each backend.
macro_rules! chain_contract {
    ($($name:ident),* $(,)?) => {
        /// The chain on SQLite.
        mod sqlite_chain {
            $(
                #[test]
                fn $name() {
                    let site = super::super::contract_tests::SqliteSite::new();
                    super::$name(&site, &site);
                }
            )*
        }

        /// The chain on PostgreSQL.
        mod pg_chain {
            $(
                #[test]
                #[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
                fn $name() {
                    let site = super::super::contract_tests::PgSite::new();
                    super::$name(&site, &site);
                }
            )*
        }
    };
}

chain_contract!(
    verify_names_an_output_edited_past_the_chain,
    verify_names_an_output_edited_through_the_chain,
    verify_names_an_event_deleted_past_the_chain,
    verify_names_an_event_deleted_through_the_chain,
    verify_names_an_inserted_event,
    verify_names_deleted_calls_and_links,
    a_receipt_verifies_offline_and_fails_after_any_change,
);
