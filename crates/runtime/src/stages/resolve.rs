//! Stage 2, resolve: the tool the call names, as its caller sees it — read from what was
//! prepared once. One the policy hides is answered as no tool at all; the journal says which,
//! for the operator.

use toolhost_contract::{Code, Stage};
use toolhost_registry::Tool;

use super::super::clip;
use super::super::endings::{end, Ended};
use super::Call;

/// The call's tool, or the `unknown_tool` ending.
pub(crate) fn resolve<'a>(c: &mut Call<'a>) -> Ended<&'a Tool> {
    let prepared = c.prepared;
    if let Some(tool) = prepared.tool() {
        return Ok(tool);
    }
    let message = format!("there is no tool named {:?}", clip(&c.call.name, 64));
    let detail = match prepared.registered() {
        Some(_) => "hidden from this caller by policy",
        None => "",
    };
    let code = Code::UnknownTool;
    Err(end(
        &mut c.journal,
        c.call,
        Stage::Resolve,
        code,
        detail,
        message,
    ))
}
