//! Stage 3, validate: the arguments against the tool's schema, then into WIT values.

use serde_json::Value;
use wasmtime::component::Val;

use toolhost_contract::{Code, RunContext, Stage, ToolCall};
use toolhost_registry::convert::to_val;
use toolhost_registry::Tool;

use super::super::endings::{end, Ended};
use super::super::{clip, Prepared, Runtime, MAX_INPUT_BYTES};
use super::Call;

/// The validated parameters in WIT order, or the `invalid_arguments` ending.
pub(crate) fn validate(c: &mut Call<'_>, tool: &Tool) -> Ended<Vec<Val>> {
    let size = c.prepared.canonical().arguments().len() as u64;
    match parameters(tool, &c.call.arguments, size) {
        Ok(params) => Ok(params),
        Err(message) => {
            let code = Code::InvalidArguments;
            Err(end(
                &mut c.journal,
                c.call,
                Stage::Validate,
                code,
                "",
                message,
            ))
        }
    }
}

/// The parameters of `args` (`size` bytes in canonical form), or a model-safe reason why not.
pub(crate) fn parameters(tool: &Tool, args: &Value, size: u64) -> Result<Vec<Val>, String> {
    if size > MAX_INPUT_BYTES as u64 {
        return Err(format!(
            "the arguments are larger than {MAX_INPUT_BYTES} bytes"
        ));
    }
    if let Err(violations) = tool.input_validator().validate(args) {
        let text: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        return Err(format!(
            "invalid arguments: {}",
            clip(&text.join("; "), 1024)
        ));
    }
    let obj = args
        .as_object()
        .ok_or_else(|| "the arguments must be a JSON object".to_string())?;
    if let Some(extra) = obj
        .keys()
        .find(|k| !tool.params().iter().any(|(n, _)| n == *k))
    {
        return Err(format!("unexpected argument {:?}", clip(extra, 64)));
    }
    tool.params()
        .iter()
        .map(|(name, ty)| {
            let v = obj
                .get(name)
                .ok_or_else(|| format!("missing argument {name:?}"))?;
            to_val(ty, v, &format!("/{name}"))
                .map_err(|e| format!("invalid arguments: {}", clip(&e.to_string(), 512)))
        })
        .collect()
}

/// What the checks before a run say of a call that passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passes {
    /// The call will wait for a human's approval before it runs.
    pub needs_approval: bool,
}

impl Runtime {
    /// Whether `call` would pass resolve, validate and authorize for `ctx`'s caller: the tool
    /// is visible to them, the arguments are valid, and the policy allows the call. A front
    /// door that answers before running (an MCP task) asks this first, so that a call the
    /// pipeline would refuse is refused at once, and nothing of it is kept for later.
    pub fn would_pass_checks(
        &self,
        ctx: &RunContext,
        call: &ToolCall,
        prepared: &Prepared,
    ) -> Option<Passes> {
        super::super::prepared::debug_check(prepared, call);
        let tool = prepared.tool()?;
        let size = prepared.canonical().arguments().len() as u64;
        parameters(tool, &call.arguments, size).ok()?;
        let allowed = self
            .policy()
            .authorize(&ctx.caller, tool.name.as_str(), tool.risk, &call.arguments)
            .allowed;
        allowed.then(|| Passes {
            needs_approval: toolhost_policy::needs_approval(tool.approval, tool.risk),
        })
    }
}
