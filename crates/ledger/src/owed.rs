//! Outcomes the ledger owes: an admitted call whose outcome could not be committed when it
//! ended (a database outage) is kept here, bounded, and recorded by the first later commit
//! that shows the ledger reachable again; its call does not stay open while its host lives.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::events::PendingEvent;
use super::group::Inline;
use super::outcome::Outcome;
use super::write::Write;
use super::{Ledger, LedgerError};
use toolhost_contract::{Decision, Stage, ToolResult};

/// Outcomes kept while the ledger is away; past this the oldest is given up (its call stays
/// open until recovery closes it `outcome_unknown`).
pub const MAX_OWED_OUTCOMES: usize = 1024;
/// Bytes of owed outcomes kept (each counted by the output its tool produced, at least
/// [`OWED_OVERHEAD_BYTES`]): an outage must not turn results into unbounded host memory.
pub const MAX_OWED_BYTES: usize = 64 << 20;
/// What one owed outcome counts for besides its output (ids, message, usage).
const OWED_OVERHEAD_BYTES: usize = 1024;
/// Commits tried for one owed outcome before it is given up.
const MAX_OWED_ATTEMPTS: u32 = 5;

/// An outcome the ledger did not take when its call ended.
#[derive(Debug)]
pub(super) struct Owed {
    run_id: String,
    result: ToolResult,
    attempts: u32,
}

impl Owed {
    /// What it counts for against [`MAX_OWED_BYTES`].
    fn size(&self) -> usize {
        usize::try_from(self.result.usage.output_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(self.result.message.len())
            .saturating_add(OWED_OVERHEAD_BYTES)
    }
}

/// The owed outcomes, oldest first, bounded in number and bytes; whether there are any is
/// read without the lock on every commit.
#[derive(Debug, Default)]
pub(super) struct OwedOutcomes {
    queue: std::sync::Mutex<(VecDeque<Owed>, usize)>,
    count: std::sync::atomic::AtomicUsize,
}

impl OwedOutcomes {
    fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Keep `owed`, giving up the oldest while the bounds are passed (one larger than all the
    /// bytes allowed is not kept at all).
    fn push(&self, owed: Owed) {
        let mut guard = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let (queue, bytes) = &mut *guard;
        let size = owed.size();
        if size <= MAX_OWED_BYTES {
            while queue.len() >= MAX_OWED_OUTCOMES || *bytes + size > MAX_OWED_BYTES {
                let Some(oldest) = queue.pop_front() else {
                    break;
                };
                *bytes -= oldest.size();
            }
            *bytes += size;
            queue.push_back(owed);
        }
        self.count.store(queue.len(), Ordering::Relaxed);
    }

    /// Everything owed, oldest first; the queue is left empty.
    fn take(&self) -> Vec<Owed> {
        let mut guard = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let (queue, bytes) = &mut *guard;
        *bytes = 0;
        self.count.store(0, Ordering::Relaxed);
        queue.drain(..).collect()
    }
}

impl Ledger {
    /// Whether any outcome is owed (one atomic read, for the call path to ask first).
    pub fn owes(&self) -> bool {
        self.owed.any()
    }

    /// Keep the outcome of an admitted call that the ledger could not take when the call
    /// ended, for a later commit ([`Ledger::pay_owed`]); bounded in number and bytes.
    pub fn owe(&self, run_id: &str, result: &ToolResult) {
        self.owed.push(Owed {
            run_id: run_id.to_string(),
            result: result.clone(),
            attempts: 0,
        });
    }

    /// Record every owed outcome (call it when the ledger just took a commit). An outcome whose call was
    /// closed meanwhile (by lease recovery on another host) is dropped; one that fails again is
    /// kept for the next try, at most [`MAX_OWED_ATTEMPTS`] times.
    pub async fn pay_owed(&self, inline: Inline) {
        if !self.owed.any() {
            return;
        }
        for mut o in self.owed.take() {
            let Ok(outcome) = Outcome::of(&o.result) else {
                continue;
            };
            let write = Write::Finish {
                run_id: o.run_id.clone(),
                call_id: o.result.call_id.clone(),
                outcome,
                events: vec![PendingEvent::now(
                    Stage::Record.as_str(),
                    Decision::RecordedLate.as_str(),
                    "the ledger could not take this outcome when the call ended; it was \
                     returned as outcome_unknown then",
                )],
            };
            match self.commit(write, inline).await {
                Ok(_)
                | Err(LedgerError::AlreadyFinished { .. } | LedgerError::UnknownCall { .. }) => {}
                Err(_) => {
                    o.attempts += 1;
                    if o.attempts < MAX_OWED_ATTEMPTS {
                        self.owed.push(o);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_contract::{Code, ToolCall, Usage};

    fn owed(id: usize, output_bytes: u64) -> Owed {
        let call = ToolCall {
            call_id: format!("c{id}"),
            name: "t".into(),
            arguments: serde_json::Value::Null,
        };
        let usage = Usage {
            output_bytes,
            ..Usage::default()
        };
        Owed {
            run_id: "r".into(),
            result: ToolResult::failed(&call, Code::HostError, "m", usage),
            attempts: 0,
        }
    }

    fn ids(o: &OwedOutcomes) -> Vec<String> {
        o.take().into_iter().map(|o| o.result.call_id).collect()
    }

    /// Past the count the oldest go; `take` empties the queue.
    #[test]
    fn bounded_in_number() {
        let o = OwedOutcomes::default();
        for i in 0..MAX_OWED_OUTCOMES + 5 {
            o.push(owed(i, 0));
        }
        let kept = ids(&o);
        assert_eq!(kept.len(), MAX_OWED_OUTCOMES);
        assert_eq!(kept[0], "c5");
        assert!(!o.any());
        assert!(ids(&o).is_empty());
    }

    /// Past the bytes the oldest go, and one result larger than all the bytes is not kept:
    /// an outage cannot turn outputs into unbounded host memory.
    #[test]
    fn bounded_in_bytes() {
        let o = OwedOutcomes::default();
        let big = (MAX_OWED_BYTES / 3) as u64;
        for i in 0..5 {
            o.push(owed(i, big));
        }
        assert_eq!(ids(&o), ["c3", "c4"]);
        o.push(owed(9, MAX_OWED_BYTES as u64 + 1));
        assert!(!o.any());
        o.push(owed(10, 0));
        assert_eq!(ids(&o), ["c10"]);
    }
}
