//! The ledger's hash chain: what a link is, how its hash is computed, and how a ledger is
//! checked against its chains (`toolhost ledger verify`).
//!
//! Every write to a chained table (a call's row and its events, a reconciliation, a transcript
//! entry, a spent token, a task) appends one [`Link`] in the same transaction. The database
//! appends it (a trigger per table, `docs/ledger-chain.md`), so no write path can skip it. A
//! link names its chain and position, the previous link's hash, what it covers, and the
//! digests of that: the event lines the write appended, one digest each, and the digest of the
//! row's recorded columns when the write changed them. Its hash covers all of that.
//!
//! SQLite keeps one chain per file (its writes are serialised anyway). PostgreSQL keeps one per
//! host, with its head in a row of its own, so hosts never wait on each other's head.
//!
//! [`verify`] walks each chain (every hash recomputed, every `prev` followed, no position
//! missing), then matches each row against its links: each event line against its digest, the
//! recorded columns against the latest digest. What it finds is named by run, call and
//! position.

use std::collections::HashMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use super::chain_findings::{Finding, Report, MAX_FINDINGS};

/// The first field of every link's preimage: the format of this chain.
pub const CHAIN_FORMAT: &str = "toolhost.chain.v1";

/// The chain of a PostgreSQL connection that did not say which host it is.
pub const UNNAMED_CHAIN: &str = "unnamed";

/// The SHA-256 (hex) of `fields`, each written as `<bytes>:<value>;`, and a missing one as
/// `-;`, so that no two lists of fields share a preimage. The SQL functions of both backends
/// (`toolhost_digest`) compute exactly this.
pub fn digest_fields<'a>(fields: impl IntoIterator<Item = Option<&'a [u8]>>) -> String {
    let mut digest = FieldDigest::default();
    for field in fields {
        digest.push(field);
    }
    digest.finish()
}

/// [`digest_fields`] a field at a time, for a caller whose fields are not all at hand at once
/// (SQLite's function reads each argument in turn, without copying it).
#[derive(Default)]
pub struct FieldDigest(Sha256);

impl FieldDigest {
    /// Add one field (`None`: a missing one).
    pub fn push(&mut self, field: Option<&[u8]>) {
        match field {
            None => self.0.update(b"-;"),
            Some(bytes) => {
                self.0.update(bytes.len().to_string().as_bytes());
                self.0.update(b":");
                self.0.update(bytes);
                self.0.update(b";");
            }
        }
    }

    /// The digest of the fields added, in hex.
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// The lines of an events text: split at each newline, without the empty piece after the last.
pub fn lines(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n').collect()
}

/// The SHA-256 (hex) of one event line.
pub fn line_digest(line: &str) -> String {
    hex::encode(Sha256::digest(line.as_bytes()))
}

/// The digests of the lines of `text`, separated by single spaces (empty for no line).
pub fn line_digests(text: &str) -> String {
    lines(text)
        .into_iter()
        .map(line_digest)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One link of a chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// Which chain: `local` on SQLite, the host's lease id on PostgreSQL.
    pub chain: String,
    /// Its position in the chain, from 1.
    pub seq: i64,
    /// The previous link's hash (empty for the first; SQLite reads it from the previous link,
    /// so it is empty too when that link is gone).
    pub prev: String,
    /// What it covers: `call`, `reconcile`, `transcript`, `token` or `task`.
    pub kind: String,
    /// The run of what it covers (empty for a token).
    pub run_id: String,
    /// The call id, transcript entry id, token id or task id.
    pub key: String,
    /// For a call: the index of its first event line this write appended.
    pub first: i64,
    /// The digests of the event lines this write appended ([`line_digests`]).
    pub lines: String,
    /// The digest of the row's recorded columns after this write, when the write changed
    /// them; `None` when it changed none (for a call) or deleted the row (for the others).
    pub attached: Option<String>,
    /// When it was appended, by the database's clock (unix milliseconds).
    pub at_ms: i64,
    pub hash: String,
}

impl Link {
    /// The hash this link must carry.
    pub fn expected_hash(&self) -> String {
        let (seq, first, at) = (
            self.seq.to_string(),
            self.first.to_string(),
            self.at_ms.to_string(),
        );
        digest_fields([
            Some(CHAIN_FORMAT.as_bytes()),
            Some(self.chain.as_bytes()),
            Some(seq.as_bytes()),
            Some(self.prev.as_bytes()),
            Some(self.kind.as_bytes()),
            Some(self.run_id.as_bytes()),
            Some(self.key.as_bytes()),
            Some(first.as_bytes()),
            Some(self.lines.as_bytes()),
            self.attached.as_deref().map(str::as_bytes),
            Some(at.as_bytes()),
        ])
    }

    fn line_list(&self) -> Vec<&str> {
        if self.lines.is_empty() {
            Vec::new()
        } else {
            self.lines.split(' ').collect()
        }
    }
}

/// The head a chain's host last wrote (PostgreSQL keeps one row per chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub chain: String,
    pub seq: i64,
    pub hash: String,
}

/// A chained row as it is now: its key, its events (a call's) and the digest of its recorded
/// columns, computed by the database with the same expression its trigger uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainedRow {
    pub kind: String,
    pub run_id: String,
    pub key: String,
    pub events: Option<String>,
    pub digest: String,
}

/// Everything [`verify`] reads, as the backend found it.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub links: Vec<Link>,
    pub heads: Vec<Head>,
    pub rows: Vec<ChainedRow>,
}

/// Which kinds of rows their hosts delete in the course of things (pruning): a missing row of
/// these is a finding only when no link records its deletion.
fn deleted_in_course(kind: &str) -> bool {
    matches!(kind, "token" | "task")
}

/// Check `evidence`: every chain whole, every row as its links recorded it.
pub fn verify(evidence: &Evidence) -> Report {
    let mut report = Report {
        links: evidence.links.len(),
        rows: evidence.rows.len(),
        ..Report::default()
    };
    let mut chains: HashMap<&str, Vec<&Link>> = HashMap::new();
    for link in &evidence.links {
        chains.entry(&link.chain).or_default().push(link);
    }
    report.chains = chains.len();
    let mut names: Vec<&str> = chains.keys().copied().collect();
    names.sort_unstable();
    for name in names {
        let links = chains.get_mut(name).expect("a chain named above");
        links.sort_by_key(|l| l.seq);
        walk(name, links, &mut report);
        if name == UNNAMED_CHAIN {
            report.found(Finding::UnknownWriter {
                chain: name.to_owned(),
                links: links.len(),
            });
        }
        let last = links.last().map_or(0, |l| l.seq);
        if let Some(head) = evidence.heads.iter().find(|h| h.chain == name) {
            if head.seq != last || links.last().is_some_and(|l| l.hash != head.hash) {
                report.found(Finding::HeadMismatch {
                    chain: name.to_owned(),
                    head: head.seq,
                    last,
                });
            }
        }
    }
    for head in &evidence.heads {
        if head.seq > 0 && !chains.contains_key(head.chain.as_str()) {
            report.found(Finding::HeadMismatch {
                chain: head.chain.clone(),
                head: head.seq,
                last: 0,
            });
        }
    }
    match_rows(evidence, &mut report);
    report
}

/// Check one call's evidence ([`Store::chain_of_call`](crate::Store::chain_of_call)): each of
/// its links carries its own hash, and its rows are what the links recorded. Its links are
/// not contiguous in their chains, so neither `prev`s nor gaps are checked here.
pub fn verify_call(evidence: &Evidence) -> Report {
    let mut report = Report {
        links: evidence.links.len(),
        rows: evidence.rows.len(),
        ..Report::default()
    };
    for link in &evidence.links {
        if link.expected_hash() != link.hash {
            report.found(Finding::LinkAltered {
                chain: link.chain.clone(),
                seq: link.seq,
            });
        }
    }
    match_rows(evidence, &mut report);
    report
}

/// One chain, in position order: hashes, `prev`s, and gaps.
fn walk(chain: &str, links: &[&Link], report: &mut Report) {
    let mut expected_seq = 1;
    let mut prev_hash: Option<&str> = Some("");
    for link in links {
        if link.seq != expected_seq {
            report.found(Finding::LinksMissing {
                chain: chain.to_owned(),
                from: expected_seq,
                to: link.seq - 1,
            });
            prev_hash = None;
        }
        // After a gap a backend that does not store `prev` (SQLite) cannot give it: the gap
        // is the finding, and the link's own hash cannot be recomputed.
        let unknown_prev = prev_hash.is_none() && link.prev.is_empty();
        if !unknown_prev && link.expected_hash() != link.hash {
            report.found(Finding::LinkAltered {
                chain: chain.to_owned(),
                seq: link.seq,
            });
        } else if prev_hash.is_some_and(|p| p != link.prev) {
            report.found(Finding::LinkBroken {
                chain: chain.to_owned(),
                seq: link.seq,
            });
        }
        prev_hash = Some(&link.hash);
        expected_seq = link.seq + 1;
    }
}

type RowKey<'a> = (&'a str, &'a str, &'a str);

/// Each row against its links, and each link against its row.
fn match_rows(evidence: &Evidence, report: &mut Report) {
    let mut by_row: HashMap<RowKey<'_>, Vec<&Link>> = HashMap::new();
    for link in &evidence.links {
        by_row
            .entry((&link.kind, &link.run_id, &link.key))
            .or_default()
            .push(link);
    }
    for row in &evidence.rows {
        let key = (row.kind.as_str(), row.run_id.as_str(), row.key.as_str());
        let Some(mut links) = by_row.remove(&key) else {
            report.found(Finding::RowUnchained {
                kind: row.kind.clone(),
                run_id: row.run_id.clone(),
                key: row.key.clone(),
            });
            continue;
        };
        if let Some(events) = &row.events {
            // A call's links tile its events in order of their first line.
            links.sort_by_key(|l| (l.first, l.at_ms, l.seq));
            match_events(row, events, &links, report);
        } else {
            links.sort_by_key(|l| (l.at_ms, l.seq));
        }
        rewritten(row, &links, report);
        let recorded = links.iter().rev().find(|l| l.attached.is_some());
        if let Some(link) = recorded {
            if link.attached.as_deref() != Some(row.digest.as_str()) {
                report.found(Finding::RowAltered {
                    kind: row.kind.clone(),
                    run_id: row.run_id.clone(),
                    key: row.key.clone(),
                    chain: link.chain.clone(),
                    seq: link.seq,
                });
            }
        }
        if row.events.is_none() && links.last().is_some_and(|l| l.attached.is_none()) {
            // The latest link records a deletion, yet the row is here.
            report.found(Finding::RowUnchained {
                kind: row.kind.clone(),
                run_id: row.run_id.clone(),
                key: row.key.clone(),
            });
        }
    }
    // Links whose rows are gone.
    let mut gone: Vec<(RowKey<'_>, Vec<&Link>)> = by_row.into_iter().collect();
    gone.sort_by_key(|(_, links)| links.iter().map(|l| (l.at_ms, l.seq)).min());
    for ((kind, run_id, key), mut links) in gone {
        links.sort_by_key(|l| (l.at_ms, l.seq));
        let last = links.last().expect("a row's links are never empty");
        if deleted_in_course(kind) && last.attached.is_none() {
            continue;
        }
        report.found(Finding::RowMissing {
            kind: kind.to_owned(),
            run_id: run_id.to_owned(),
            key: key.to_owned(),
            chain: last.chain.clone(),
            seq: last.seq,
        });
    }
}

/// A change of a row after it was final: a call's recorded columns after it finished, or a
/// second record of a row that is written once.
fn rewritten(row: &ChainedRow, links: &[&Link], report: &mut Report) {
    let mut recorded = links.iter().filter(|l| l.attached.is_some());
    let second = match row.kind.as_str() {
        "call" => {
            let mut finished = recorded.skip_while(|l| {
                !l.attached
                    .as_deref()
                    .is_some_and(|a| a.starts_with("finished:"))
            });
            finished.nth(1)
        }
        "task" => None,
        _ => recorded.nth(1),
    };
    if let Some(link) = second {
        report.found(Finding::RowRewritten {
            kind: row.kind.clone(),
            run_id: row.run_id.clone(),
            key: row.key.clone(),
            chain: link.chain.clone(),
            seq: link.seq,
        });
    }
}

/// A call's event lines against the digests its links recorded: the first difference named
/// as an altered, inserted or missing line.
fn match_events(row: &ChainedRow, events: &str, links: &[&Link], report: &mut Report) {
    // Each recorded line with the link that recorded it.
    let mut recorded: Vec<(&str, &Link)> = Vec::new();
    for link in links {
        for digest in link.line_list() {
            recorded.push((digest, link));
        }
    }
    // Lines before the first link's first line were written before the chain began.
    let skip = usize::try_from(links.first().map_or(0, |l| l.first)).unwrap_or(0);
    let actual: Vec<String> = lines(events)
        .into_iter()
        .skip(skip)
        .map(line_digest)
        .collect();
    let (run_id, call_id) = (row.run_id.clone(), row.key.clone());
    for (i, (want, link)) in recorded.iter().enumerate() {
        match actual.get(i) {
            Some(have) if have == want => continue,
            Some(have) => {
                let index = skip + i;
                let finding = if actual.len() > recorded.len()
                    && actual.get(i + 1) == Some(&(*want).to_owned())
                {
                    Finding::EventInserted {
                        run_id,
                        call_id,
                        index,
                    }
                } else if actual.len() < recorded.len()
                    && recorded.get(i + 1).is_some_and(|(next, _)| next == have)
                {
                    Finding::EventMissing {
                        run_id,
                        call_id,
                        index,
                        chain: link.chain.clone(),
                        seq: link.seq,
                    }
                } else {
                    Finding::EventAltered {
                        run_id,
                        call_id,
                        index,
                        chain: link.chain.clone(),
                        seq: link.seq,
                    }
                };
                report.found(finding);
                return;
            }
            None => {
                report.found(Finding::EventMissing {
                    run_id,
                    call_id,
                    index: skip + i,
                    chain: link.chain.clone(),
                    seq: link.seq,
                });
                return;
            }
        }
    }
    if actual.len() > recorded.len() {
        report.found(Finding::EventInserted {
            run_id,
            call_id,
            index: skip + recorded.len(),
        });
    }
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
