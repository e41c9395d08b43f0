//! What `chain::verify` finds, and its report.

use std::fmt;

use serde::Serialize;

/// How many findings [`verify`](super::chain::verify) keeps; the count of the rest is reported.
pub const MAX_FINDINGS: usize = 100;

/// What [`verify`](super::chain::verify) found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "finding", rename_all = "snake_case")]
pub enum Finding {
    /// A link whose fields no longer give its hash: the link itself was edited.
    LinkAltered { chain: String, seq: i64 },
    /// A link whose `prev` is not the hash of the link before it.
    LinkBroken { chain: String, seq: i64 },
    /// Positions missing from a chain: links deleted.
    LinksMissing { chain: String, from: i64, to: i64 },
    /// The chain's recorded head is not its last link: links deleted from its end, or the
    /// head edited.
    HeadMismatch { chain: String, head: i64, last: i64 },
    /// An event line that is not the one its link recorded.
    EventAltered {
        run_id: String,
        call_id: String,
        index: usize,
        chain: String,
        seq: i64,
    },
    /// An event line no link recorded.
    EventInserted {
        run_id: String,
        call_id: String,
        index: usize,
    },
    /// An event line a link recorded that is gone.
    EventMissing {
        run_id: String,
        call_id: String,
        index: usize,
        chain: String,
        seq: i64,
    },
    /// A row whose recorded columns (a call's outcome, a reconciliation, …) are not what its
    /// latest link recorded.
    RowAltered {
        kind: String,
        run_id: String,
        key: String,
        chain: String,
        seq: i64,
    },
    /// A row changed after it was final: a call's recorded columns after it finished, a
    /// reconciliation, transcript entry or spent token after it was written. The change is
    /// chained, so it was made through the database's own triggers.
    RowRewritten {
        kind: String,
        run_id: String,
        key: String,
        chain: String,
        seq: i64,
    },
    /// Links appended by a connection that named no toolhost host (PostgreSQL): written
    /// outside toolhost, by hand or by a script.
    UnknownWriter { chain: String, links: usize },
    /// A row its links record that is gone, and no link records its deletion.
    RowMissing {
        kind: String,
        run_id: String,
        key: String,
        chain: String,
        seq: i64,
    },
    /// A row no link records: inserted outside the ledger.
    RowUnchained {
        kind: String,
        run_id: String,
        key: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::LinkAltered { chain, seq } => {
                write!(f, "chain {chain} position {seq}: the link was altered")
            }
            Finding::LinkBroken { chain, seq } => write!(
                f,
                "chain {chain} position {seq}: does not follow the link before it"
            ),
            Finding::LinksMissing { chain, from, to } => {
                write!(f, "chain {chain} positions {from}–{to}: missing")
            }
            Finding::HeadMismatch { chain, head, last } => write!(
                f,
                "chain {chain}: its head is position {head}, its last link is {last}"
            ),
            Finding::EventAltered {
                run_id,
                call_id,
                index,
                chain,
                seq,
            } => write!(
                f,
                "run {run_id:?} call {call_id:?} event {index}: altered (chain {chain} \
                 position {seq})"
            ),
            Finding::EventInserted {
                run_id,
                call_id,
                index,
            } => write!(
                f,
                "run {run_id:?} call {call_id:?} event {index}: inserted (no link records it)"
            ),
            Finding::EventMissing {
                run_id,
                call_id,
                index,
                chain,
                seq,
            } => write!(
                f,
                "run {run_id:?} call {call_id:?} event {index}: missing (chain {chain} \
                 position {seq})"
            ),
            Finding::RowAltered {
                kind,
                run_id,
                key,
                chain,
                seq,
            } => write!(
                f,
                "{kind} {key:?} of run {run_id:?}: its recorded columns were altered (chain \
                 {chain} position {seq})"
            ),
            Finding::RowRewritten {
                kind,
                run_id,
                key,
                chain,
                seq,
            } => write!(
                f,
                "{kind} {key:?} of run {run_id:?}: changed after it was final (chain {chain} \
                 position {seq})"
            ),
            Finding::UnknownWriter { chain, links } => write!(
                f,
                "chain {chain}: {links} link(s) written by a connection that is no toolhost host"
            ),
            Finding::RowMissing {
                kind,
                run_id,
                key,
                chain,
                seq,
            } => write!(
                f,
                "{kind} {key:?} of run {run_id:?}: missing (chain {chain} position {seq})"
            ),
            Finding::RowUnchained { kind, run_id, key } => write!(
                f,
                "{kind} {key:?} of run {run_id:?}: inserted (no link records it)"
            ),
        }
    }
}

/// What [`verify`](super::chain::verify) checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub chains: usize,
    pub links: usize,
    pub rows: usize,
    /// The first [`MAX_FINDINGS`] findings: chains first, then rows in the order read.
    pub findings: Vec<Finding>,
    /// How many more were found.
    pub more: usize,
}

impl Report {
    pub(crate) fn found(&mut self, finding: Finding) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(finding);
        } else {
            self.more += 1;
        }
    }

    /// Whether nothing was found.
    pub fn intact(&self) -> bool {
        self.findings.is_empty()
    }
}
