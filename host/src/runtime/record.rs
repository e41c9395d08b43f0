//! Stage 9, record: the outcome is committed before it is returned — and when the ledger
//! cannot take it (a database outage), the outcome of an admitted call is owed and recorded as
//! soon as a later commit shows the ledger reachable again (the ledger keeps what it owes,
//! `ledger/owed.rs`).

use crate::contract::{RunContext, Status, ToolCall, ToolResult};
use crate::ledger::{Admission, Applied, LedgerError, Outcome, Write};

use super::Runtime;

/// Why an outcome is not in the ledger, and whether its call is (admitted before it ran).
pub(super) struct Unrecorded {
    error: LedgerError,
    call_admitted: bool,
}

impl Runtime {
    /// Stage 9: commit the outcome before it is returned. If that fails the effect may have
    /// happened but is not recorded: say so rather than pretend.
    ///
    /// An admitted call whose outcome cannot be committed (the ledger is away) is *owed*: its
    /// result is kept and recorded by the first later commit that succeeds, so the call does not
    /// stay open while its host lives (see [`Ledger::pay_owed`](crate::ledger::Ledger::pay_owed)).
    pub(super) async fn record(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        result: ToolResult,
    ) -> ToolResult {
        let recorded = match Outcome::of(&result) {
            Err(error) => Err(Unrecorded {
                error,
                call_admitted: false,
            }),
            Ok(outcome) => self.commit_outcome(ctx, call, outcome).await,
        };
        match recorded {
            Ok(None) => {
                if self.ledger.owes() {
                    self.ledger.pay_owed(self.inline()).await;
                }
                result
            }
            Ok(Some(other)) => self.lost_admission(ctx, call, other).await,
            Err(Unrecorded {
                error,
                call_admitted,
            }) => {
                if call_admitted {
                    self.ledger.owe(&ctx.run_id, &result);
                }
                let detail = error.to_string();
                let mut r = self.host_fault(
                    call,
                    "the host could not record this call's outcome",
                    &detail,
                );
                r.status = Status::OutcomeUnknown;
                r
            }
        }
    }

    /// Commit `outcome` (with the admission of a call admitted late). `Some` is the decision
    /// of another process that admitted this id first: then nothing of this call is recorded.
    async fn commit_outcome(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        outcome: Outcome,
    ) -> Result<Option<Admission>, Unrecorded> {
        let Some((late, events, started)) = self.late_admission(ctx, call) else {
            let log = self.take_pending(ctx, call);
            if log.settled {
                return Ok(None);
            }
            let write = Write::Finish {
                run_id: ctx.run_id.clone(),
                call_id: call.call_id.clone(),
                outcome: outcome.started_at(log.started_at_ms),
                events: log.events,
            };
            return match self.ledger.commit(write, self.inline()).await {
                Ok(_) => Ok(None),
                Err(error) => Err(Unrecorded {
                    error,
                    call_admitted: true,
                }),
            };
        };
        let not_admitted = |error| Unrecorded {
            error,
            call_admitted: false,
        };
        let write = self
            .ledger
            .late_write(
                &ctx.run_id,
                &call.call_id,
                &late.opening(call, &events),
                Some(outcome.started_at(started)),
            )
            .map_err(not_admitted)?;
        let admitted = self.ledger.commit(write, self.inline()).await;
        // The claim ends here; a decision a duplicate added meanwhile is recorded after.
        let leftover = self.take_pending(ctx, call);
        self.append_noted(ctx, call, leftover.events).await;
        match admitted.map_err(not_admitted)? {
            Applied::Admission(Admission::New { .. }) | Applied::Done => Ok(None),
            Applied::Admission(other) => Ok(Some(other)),
        }
    }
}
