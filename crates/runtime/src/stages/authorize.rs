//! Stage 4, authorize: the policy's decision for the trusted caller (never anything the
//! arguments say), noted either way.

use toolhost_contract::{Code, Decision, Stage};
use toolhost_registry::Tool;

use super::super::endings::{end, Ended};
use super::super::Runtime;
use super::Call;

/// Allowed, or the `unauthorized` ending with the policy's model-safe message.
pub(crate) fn authorize(rt: &Runtime, c: &mut Call<'_>, tool: &Tool) -> Ended<()> {
    let decision = rt.policy().authorize(
        &c.ctx.caller,
        tool.name.as_str(),
        tool.risk,
        &c.call.arguments,
    );
    if !decision.allowed {
        let (reason, message) = (&decision.reason, decision.message);
        let code = Code::Unauthorized;
        return Err(end(
            &mut c.journal,
            c.call,
            Stage::Authorize,
            code,
            reason,
            message,
        ));
    }
    let allowed = Decision::Allowed.as_str();
    c.journal.note(Stage::Authorize, allowed, &decision.reason);
    Ok(())
}
