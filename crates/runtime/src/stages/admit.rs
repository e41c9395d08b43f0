//! Stage 1, admit: the ledger opens the call under its admission key, or says who holds the
//! id. The admission digest binds the caller as well as the call (the ledger's `owner.rs` says
//! how), so an id is never answered with another caller's outcome. A copy of a running call
//! waits for the original's outcome (`../copies.rs`) and never runs beside it.

use tracing::Instrument;

use toolhost_contract::{Caller, RunContext, ToolCall, ToolResult};
use toolhost_ledger::{bind_caller, CallKey, Held, Journal, OpenCall};
use toolhost_telemetry::Laps;

use super::super::copies::wait_for_original;
use super::super::endings::{duplicate_call_id, foreign, host_fault, replayed, still_running};
use super::super::{Prepared, Runtime};

/// How many times a copy opens its call again after the original it waited for was given up
/// before admission (see [`admit`]). Each time costs a wait for a claim that then vanished;
/// past this, a client cancelling its own proposals in a loop gets "still running" instead of
/// keeping a copy cycling.
const MAX_REOPENS: usize = 2;

/// The admission digest of a call with fingerprint `fingerprint` from `caller`.
pub(crate) fn admission_digest(caller: &Caller, fingerprint: &str) -> String {
    bind_caller(fingerprint, &caller.principal, &caller.tenant)
}

/// What the ledger is asked to open for a call: its admission key (which binds the caller)
/// and who asks. `late`: admitted with its first commit rather than at once.
pub(crate) fn open_call(
    ctx: &RunContext,
    call: &ToolCall,
    prepared: &Prepared,
    late: bool,
) -> OpenCall {
    OpenCall {
        key: CallKey {
            run_id: ctx.run_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            args_digest: admission_digest(&ctx.caller, prepared.fingerprint()),
            args_size: prepared.canonical().bytes().len() as u64,
            component_digest: prepared
                .registered()
                .map(|t| t.component_digest.to_string()),
            definition_digest: prepared
                .registered()
                .map(|t| t.definition_digest.to_string()),
        },
        caller: ctx.caller.clone(),
        late,
    }
}

/// Admit the call (or claim its id), or answer it. A copy of a running call waits for the
/// original's outcome; if the original was given up before it was admitted (its future
/// dropped), nothing of it was recorded and the copy opens the call again, at most
/// [`MAX_REOPENS`] times.
pub(crate) async fn admit<'a>(
    rt: &'a Runtime,
    ctx: &RunContext,
    call: &ToolCall,
    (prepared, late): (&Prepared, bool),
    laps: &mut Laps,
) -> Result<Journal<'a>, ToolResult> {
    let mut opening = open_call(ctx, call, prepared, late);
    for _ in 0..=MAX_REOPENS {
        let admitted = rt
            .ledger
            .open_call(opening, rt.inline())
            .instrument(tracing::debug_span!("admit"))
            .await;
        laps.lap("admit");
        match admitted {
            Ok(journal) => return Ok(journal),
            Err(Held::InFlight) => {
                let copy = open_call(ctx, call, prepared, late);
                match wait_for_original(rt, call, &copy).await {
                    Some(answer) => return Err(answer),
                    None => opening = copy,
                }
            }
            Err(held) => return Err(answered(rt, ctx, call, prepared, held).await),
        }
    }
    Err(still_running(call))
}

/// The answer to a call whose id the ledger holds (or could not read).
pub(crate) async fn answered(
    rt: &Runtime,
    ctx: &RunContext,
    call: &ToolCall,
    prepared: &Prepared,
    held: Held,
) -> ToolResult {
    match held {
        Held::Replay(recorded) => replayed(*recorded),
        Held::InFlight => {
            let copy = open_call(ctx, call, prepared, false);
            wait_for_original(rt, call, &copy)
                .await
                .unwrap_or_else(|| still_running(call))
        }
        Held::Reused => duplicate_call_id(call),
        Held::Foreign => foreign(call),
        Held::Fault(e) => host_fault(
            &rt.diagnostics,
            ctx,
            call,
            "the host could not record this call",
            &e.to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_contract::canonical::canonical_call;
    use toolhost_ledger::same_caller;

    fn digest(principal: &str, tenant: &str) -> String {
        let call = canonical_call("read", &serde_json::json!({"path": "a"}));
        admission_digest(&Caller::new(principal, tenant), &call.digest())
    }

    /// One call from one caller has one digest; another principal, another tenant, or a
    /// principal/tenant split moved between the two, has another; the args part is shared.
    #[test]
    fn the_digest_binds_the_caller() {
        let alice = digest("alice", "acme");
        assert_eq!(alice, digest("alice", "acme"));
        for (p, t) in [
            ("bob", "acme"),
            ("alice", "other"),
            ("alic", "eacme"),
            ("", "aliceacme"),
        ] {
            let other = digest(p, t);
            assert_ne!(alice, other, "{p}/{t}");
            assert!(!same_caller(&alice, &other), "{p}/{t}");
            assert_eq!(
                alice.split_once('|').unwrap().0,
                other.split_once('|').unwrap().0
            );
        }
        assert!(same_caller(&alice, &alice));
        assert!(
            !same_caller(&alice, "abc"),
            "an untagged digest is nobody's"
        );
    }
}
