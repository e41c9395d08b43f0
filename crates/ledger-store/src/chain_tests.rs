use super::*;

/// A chain built the way the databases build it, and the rows it records.
#[derive(Default)]
struct Ledger {
    evidence: Evidence,
}

const A1: &str = "{\"stage\":\"admit\",\"decision\":\"new\"}\n";
const A2: &str = "{\"stage\":\"authorize\",\"decision\":\"allow\"}\n";
const A3: &str = "{\"stage\":\"record\",\"decision\":\"completed\"}\n";

impl Ledger {
    fn append(
        &mut self,
        kind: &str,
        run: &str,
        key: &str,
        first: i64,
        text: &str,
        attached: Option<&str>,
    ) {
        let seq = self.evidence.links.len() as i64 + 1;
        let prev = self
            .evidence
            .links
            .last()
            .map_or(String::new(), |l| l.hash.clone());
        let mut link = Link {
            chain: "local".into(),
            seq,
            prev,
            kind: kind.into(),
            run_id: run.into(),
            key: key.into(),
            first,
            lines: line_digests(text),
            attached: attached.map(str::to_owned),
            at_ms: 1_000 + seq,
            hash: String::new(),
        };
        link.hash = link.expected_hash();
        self.evidence.links.push(link);
    }

    fn row(&mut self, kind: &str, run: &str, key: &str, events: Option<&str>, digest: &str) {
        self.evidence.rows.push(ChainedRow {
            kind: kind.into(),
            run_id: run.into(),
            key: key.into(),
            events: events.map(str::to_owned),
            digest: digest.into(),
        });
    }

    /// Two calls of run `r` (three writes each), a reconciliation and a pruned token.
    fn sample() -> Ledger {
        let mut l = Ledger::default();
        for call in ["c1", "c2"] {
            l.append("call", "r", call, 0, A1, Some("admitted:a"));
            l.append("call", "r", call, 1, A2, None);
            l.append("call", "r", call, 2, A3, Some("finished:f"));
            l.row(
                "call",
                "r",
                call,
                Some(&format!("{A1}{A2}{A3}")),
                "finished:f",
            );
        }
        l.append("reconcile", "r", "c2", 0, "", Some("settled"));
        l.row("reconcile", "r", "c2", None, "settled");
        l.append("token", "", "t1", 0, "", Some("spent"));
        l.append("token", "", "t1", 0, "", None);
        l
    }

    fn findings(&self) -> Vec<Finding> {
        verify(&self.evidence).findings
    }

    fn events_of(&mut self, call: &str) -> &mut String {
        self.evidence
            .rows
            .iter_mut()
            .find(|r| r.key == call && r.kind == "call")
            .and_then(|r| r.events.as_mut())
            .unwrap()
    }
}

/// The digest of fields is length-prefixed: moving a byte between fields changes it.
#[test]
fn field_boundaries_are_part_of_the_digest() {
    let ab = digest_fields([Some(&b"a"[..]), Some(&b"b"[..])]);
    assert_ne!(ab, digest_fields([Some(&b"ab"[..]), Some(&b""[..])]));
    assert_ne!(ab, digest_fields([Some(&b"a"[..]), None, Some(&b"b"[..])]));
    assert_ne!(digest_fields([None]), digest_fields([Some(&b""[..])]));
    // The preimage of `["a", NULL]` is `1:a;-;`.
    assert_eq!(
        digest_fields([Some(&b"a"[..]), None]),
        hex::encode(Sha256::digest(b"1:a;-;"))
    );
}

/// Lines are split at newlines, without the piece after the last.
#[test]
fn lines_are_split_at_newlines() {
    assert!(lines("").is_empty());
    assert_eq!(lines("a\n"), ["a"]);
    assert_eq!(lines("a\nb"), ["a", "b"]);
    assert_eq!(lines("a\n\nb\n"), ["a", "", "b"]);
    assert_eq!(line_digests("a\nb\n").split(' ').count(), 2);
}

/// An untouched ledger verifies, pruned token and all.
#[test]
fn an_untouched_ledger_is_intact() {
    let report = verify(&Ledger::sample().evidence);
    assert!(report.intact(), "{:?}", report.findings);
    assert_eq!((report.chains, report.links, report.rows), (1, 9, 3));
}

/// An edited event line is named by call and index.
#[test]
fn an_altered_event_is_named() {
    let mut l = Ledger::sample();
    *l.events_of("c2") = format!("{A1}{}{A3}", A2.replace("allow", "deny"));
    assert_eq!(
        l.findings(),
        [Finding::EventAltered {
            run_id: "r".into(),
            call_id: "c2".into(),
            index: 1,
            chain: "local".into(),
            seq: 5
        }]
    );
}

/// A deleted event line is named as missing, not as altered.
#[test]
fn a_deleted_event_is_named() {
    let mut l = Ledger::sample();
    *l.events_of("c1") = format!("{A1}{A3}");
    assert_eq!(
        l.findings(),
        [Finding::EventMissing {
            run_id: "r".into(),
            call_id: "c1".into(),
            index: 1,
            chain: "local".into(),
            seq: 2
        }]
    );
    *l.events_of("c1") = A1.into();
    assert!(matches!(
        l.findings()[..],
        [Finding::EventMissing { index: 1, .. }]
    ));
}

/// An event line added in the middle or at the end is named as inserted.
#[test]
fn an_inserted_event_is_named() {
    let mut l = Ledger::sample();
    *l.events_of("c1") = format!("{A1}{A2}{A2}{A3}");
    assert!(matches!(
        &l.findings()[..],
        [Finding::EventInserted { index: 2, call_id, .. }] if call_id == "c1"
    ));
    *l.events_of("c1") = format!("{A1}{A2}{A3}{A2}");
    assert!(matches!(
        l.findings()[..],
        [Finding::EventInserted { index: 3, .. }]
    ));
}

/// An edited outcome is found through the digest of the recorded columns.
#[test]
fn an_altered_row_is_named() {
    let mut l = Ledger::sample();
    l.evidence.rows[0].digest = "edited".into();
    assert_eq!(
        l.findings(),
        [Finding::RowAltered {
            kind: "call".into(),
            run_id: "r".into(),
            key: "c1".into(),
            chain: "local".into(),
            seq: 3
        }]
    );
}

/// A deleted call, a row no link records, and a pruned token brought back are all found.
#[test]
fn missing_and_unchained_rows_are_named() {
    let mut l = Ledger::sample();
    l.evidence.rows.retain(|r| r.key != "c1");
    l.row("call", "r", "c9", Some(A1), "x");
    l.row("token", "", "t1", None, "spent");
    let found = l.findings();
    assert!(found.contains(&Finding::RowMissing {
        kind: "call".into(),
        run_id: "r".into(),
        key: "c1".into(),
        chain: "local".into(),
        seq: 3
    }));
    assert!(found.contains(&Finding::RowUnchained {
        kind: "call".into(),
        run_id: "r".into(),
        key: "c9".into()
    }));
    assert!(found.contains(&Finding::RowUnchained {
        kind: "token".into(),
        run_id: String::new(),
        key: "t1".into()
    }));
    assert_eq!(found.len(), 3, "{found:?}");
}

/// A link edited, one deleted, and one whose hash was recomputed after an edit are found.
#[test]
fn broken_chains_are_named() {
    let mut l = Ledger::sample();
    l.evidence.links[3].lines = line_digests(A2);
    assert!(l.findings().contains(&Finding::LinkAltered {
        chain: "local".into(),
        seq: 4
    }));

    let mut l = Ledger::sample();
    l.evidence.links.remove(4);
    let found = l.findings();
    assert_eq!(
        found[0],
        Finding::LinksMissing {
            chain: "local".into(),
            from: 5,
            to: 5
        }
    );
    // The call's second line is no longer recorded by any link.
    assert!(found
        .iter()
        .any(|f| matches!(f, Finding::EventInserted { .. })));

    let mut l = Ledger::sample();
    l.evidence.links[3].at_ms += 1;
    l.evidence.links[3].hash = l.evidence.links[3].expected_hash();
    assert_eq!(
        l.findings(),
        [Finding::LinkBroken {
            chain: "local".into(),
            seq: 5
        }]
    );
}

/// A recorded head past the last link shows that links were cut from the end.
#[test]
fn a_cut_end_is_found_by_the_head() {
    let mut l = Ledger::sample();
    let last = l.evidence.links.pop().unwrap();
    l.evidence.heads.push(Head {
        chain: "local".into(),
        seq: last.seq,
        hash: last.hash,
    });
    assert!(l.findings().contains(&Finding::HeadMismatch {
        chain: "local".into(),
        head: 9,
        last: 8
    }));
}

/// An outcome changed through the triggers is chained, yet named: a finished call is final.
#[test]
fn a_chained_rewrite_of_a_final_row_is_named() {
    let mut l = Ledger::sample();
    l.append("call", "r", "c1", 3, "", Some("finished:edited"));
    l.evidence.rows[0].digest = "finished:edited".into();
    assert_eq!(
        l.findings(),
        [Finding::RowRewritten {
            kind: "call".into(),
            run_id: "r".into(),
            key: "c1".into(),
            chain: "local".into(),
            seq: 10
        }]
    );
    let mut l = Ledger::sample();
    l.append("reconcile", "r", "c2", 0, "", Some("other"));
    l.evidence.rows[2].digest = "other".into();
    assert!(
        matches!(&l.findings()[..], [Finding::RowRewritten { kind, seq: 10, .. }] if kind == "reconcile")
    );
}

/// Links of a connection that named no host are reported.
#[test]
fn links_of_no_host_are_reported() {
    let mut l = Ledger::sample();
    l.evidence.links.iter_mut().for_each(|link| {
        link.chain = UNNAMED_CHAIN.into();
        link.hash = String::new();
    });
    let mut relinked = Vec::new();
    for mut link in std::mem::take(&mut l.evidence.links) {
        link.prev = relinked
            .last()
            .map_or(String::new(), |p: &Link| p.hash.clone());
        link.hash = link.expected_hash();
        relinked.push(link);
    }
    l.evidence.links = relinked;
    assert_eq!(
        l.findings(),
        [Finding::UnknownWriter {
            chain: UNNAMED_CHAIN.into(),
            links: 9
        }]
    );
}

/// At most `MAX_FINDINGS` findings are kept; the rest are counted.
#[test]
fn findings_are_capped_and_the_rest_counted() {
    let mut l = Ledger::sample();
    for i in 0..(MAX_FINDINGS + 7) {
        l.row("call", "r", &format!("forged-{i}"), Some(A1), "x");
    }
    let report = verify(&l.evidence);
    assert_eq!(report.findings.len(), MAX_FINDINGS);
    assert_eq!(report.more, 7);
    assert!(!report.intact());
}

/// A link whose predecessor is gone, read from a backend that keeps no `prev` (SQLite), is
/// not called altered: the gap is the finding.
#[test]
fn after_a_gap_an_unknown_prev_is_not_an_alteration() {
    let mut l = Ledger::sample();
    l.evidence.links.remove(4);
    l.evidence.links[4].prev = String::new();
    let found = l.findings();
    assert!(found.contains(&Finding::LinksMissing {
        chain: "local".into(),
        from: 5,
        to: 5
    }));
    assert!(
        !found
            .iter()
            .any(|f| matches!(f, Finding::LinkAltered { .. })),
        "{found:?}"
    );
}
