//! Bounds on the strings a call carries into the host's records, checked before anything is
//! written.
//!
//! A tool name, a call id, a run id, a principal and a tenant are each stored — in the ledger's
//! row and index, in the replayed result, in the audit trail — so without a bound a caller
//! decides how much the host writes: a 10 MB tool name cost about 20 MB of ledger per call.
//! [`check_call`] runs first in every call the runtime admits or refuses (the ledger refuses
//! oversized keys too, as a backstop), and the frontends that keep their own copy of a proposal
//! check it before they use it: the MCP handler with [`check_proposal`], the agent loop with
//! [`cut_tool_name`] for the name it sends back to the model. A call that breaks a bound is
//! answered with [`Refusal::result`], whose `tool` and `call_id` are cut to the bounds, and is
//! **not recorded**: its key or its name is what cannot be stored.
//!
//! | what | bound | code when broken |
//! |---|---|---|
//! | tool name | [`MAX_TOOL_NAME_CHARS`] characters | `unknown_tool` (no tool has such a name) |
//! | call id | [`MAX_CALL_ID_BYTES`] bytes | `invalid_arguments` |
//! | run id | [`MAX_RUN_ID_BYTES`] bytes | `invalid_arguments` |
//! | principal, tenant | [`MAX_SUBJECT_BYTES`] bytes each | `unauthorized` (no rule can name it) |
//!
//! An empty tool name is no tool's name either: it ends `unknown_tool` at the resolve stage and
//! is recorded like any unknown name (it costs nothing to store). Arguments have their own bound (`MAX_INPUT_BYTES`, checked in validation) and are stored
//! only as a digest unless content recording is on; messages and outputs are bounded where they
//! are made.

use super::{Code, RunContext, ToolCall, ToolResult, Usage};

/// Longest tool name a call may carry, in characters. MCP (2025-11-25) says tool names are 1 to
/// 128 characters; a configured name is at most 64 (OpenAI's limit, `MAX_TOOL_NAME_LEN`), so a
/// name past 128 can only be unknown, and nothing longer needs to be kept to say so.
pub const MAX_TOOL_NAME_CHARS: usize = 128;

/// Longest call id, in bytes. Ids are keys: each is stored in the ledger row, its unique index
/// and the replayed result, so 256 bytes costs under 1 KiB a call. It holds every id the
/// frontends make — a UUID (36), the agent's `p:` + a provider id cut to 200, MCP's `rpc-s:` +
/// a JSON-RPC id of up to 249 bytes — and any id a person would type.
pub const MAX_CALL_ID_BYTES: usize = 256;

/// Longest run id, in bytes: stored with every call of the run, like a call id (the host's own
/// are `run-` or `mcp-` + 32 hex digits).
pub const MAX_RUN_ID_BYTES: usize = 256;

/// Longest principal or tenant, in bytes. Each is written into the audit trail of every
/// authorization decision; 256 bytes holds an email address, a UUID or an OIDC subject.
pub const MAX_SUBJECT_BYTES: usize = 256;

/// Which bound a call broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the tool name is longer than {MAX_TOOL_NAME_CHARS} characters")]
    ToolNameTooLong,
    #[error("the call id is longer than {MAX_CALL_ID_BYTES} bytes")]
    CallIdTooLong,
    #[error("the run id is longer than {MAX_RUN_ID_BYTES} bytes")]
    RunIdTooLong,
    #[error("the principal is longer than {MAX_SUBJECT_BYTES} bytes")]
    PrincipalTooLong,
    #[error("the tenant is longer than {MAX_SUBJECT_BYTES} bytes")]
    TenantTooLong,
}

impl Refusal {
    /// The stable code a call that broke this bound ends with (see the module docs).
    pub fn code(self) -> Code {
        match self {
            Refusal::ToolNameTooLong => Code::UnknownTool,
            Refusal::CallIdTooLong | Refusal::RunIdTooLong => Code::InvalidArguments,
            Refusal::PrincipalTooLong | Refusal::TenantTooLong => Code::Unauthorized,
        }
    }

    /// The answer to `call`: `failed` with [`Refusal::code`] and a model-safe message; its
    /// `tool` and `call_id` are cut to their bounds (ending in `…` when cut), so the answer is
    /// small whatever the call carried.
    pub fn result(self, call: &ToolCall) -> ToolResult {
        let bounded = ToolCall {
            call_id: cut_bytes(&call.call_id, MAX_CALL_ID_BYTES),
            name: cut_chars(&call.name, MAX_TOOL_NAME_CHARS),
            arguments: serde_json::Value::Null,
        };
        ToolResult::failed(&bounded, self.code(), self.to_string(), Usage::default())
    }
}

/// Check a tool name as a call carries it: at most [`MAX_TOOL_NAME_CHARS`] characters.
pub fn check_tool_name(name: &str) -> Result<(), Refusal> {
    // Counting stops at the bound, so a huge name costs no more than a short one.
    if name.chars().nth(MAX_TOOL_NAME_CHARS).is_some() {
        return Err(Refusal::ToolNameTooLong);
    }
    Ok(())
}

/// Check what a proposal itself carries: its tool name, then its call id.
pub fn check_proposal(call: &ToolCall) -> Result<(), Refusal> {
    check_tool_name(&call.name)?;
    if call.call_id.len() > MAX_CALL_ID_BYTES {
        return Err(Refusal::CallIdTooLong);
    }
    Ok(())
}

/// Check every string of `call` and `ctx` the host stores: [`check_proposal`], then the run
/// id, the principal and the tenant.
pub fn check_call(ctx: &RunContext, call: &ToolCall) -> Result<(), Refusal> {
    check_proposal(call)?;
    if ctx.run_id.len() > MAX_RUN_ID_BYTES {
        return Err(Refusal::RunIdTooLong);
    }
    if ctx.caller.principal.len() > MAX_SUBJECT_BYTES {
        return Err(Refusal::PrincipalTooLong);
    }
    if ctx.caller.tenant.len() > MAX_SUBJECT_BYTES {
        return Err(Refusal::TenantTooLong);
    }
    Ok(())
}

/// `name` cut to [`MAX_TOOL_NAME_CHARS`] characters (ending in `…` when cut): the form a
/// frontend keeps of a name it must echo, such as the agent's copy of the model's message.
pub fn cut_tool_name(name: &str) -> String {
    cut_chars(name, MAX_TOOL_NAME_CHARS)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn clip(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// `s` if it has at most `max` characters, else its first `max - 1` and `…`.
fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some(_) => {
            let end = s.char_indices().nth(max - 1).map_or(s.len(), |(i, _)| i);
            format!("{}…", &s[..end])
        }
    }
}

/// `s` if it has at most `max` bytes, else its longest prefix that fits together with `…`.
fn cut_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let end = s.floor_char_boundary(max - '…'.len_utf8());
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clip_keeps_whole_characters_within_the_bytes() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("héllo", 6), "héllo");
        assert_eq!(clip("héllo", 100), "héllo");
        assert_eq!(clip("", 0), "");
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: json!({}),
        }
    }

    /// Names of up to 128 characters pass (multi-byte ones counted as characters); longer
    /// ones are `unknown_tool`, and their cut form fits the bound.
    #[test]
    fn tool_name_bounds() {
        assert_eq!(check_tool_name("a"), Ok(()));
        assert_eq!(check_tool_name(&"é".repeat(MAX_TOOL_NAME_CHARS)), Ok(()));
        let long = "x".repeat(MAX_TOOL_NAME_CHARS + 1);
        assert_eq!(check_tool_name(&long), Err(Refusal::ToolNameTooLong));
        assert_eq!(Refusal::ToolNameTooLong.code(), Code::UnknownTool);
        assert_eq!(check_tool_name(&cut_tool_name(&long)), Ok(()));
        assert_eq!(cut_tool_name("greet"), "greet");
    }

    /// Each stored string of a call or its run has its bound, checked in a fixed order.
    #[test]
    fn every_stored_string_is_bounded() {
        let ctx = RunContext::new("alice", "acme");
        let at = |n: usize| "i".repeat(n);
        assert_eq!(check_call(&ctx, &call(&at(MAX_CALL_ID_BYTES), "t")), Ok(()));
        assert_eq!(
            check_call(&ctx, &call(&at(MAX_CALL_ID_BYTES + 1), "t")),
            Err(Refusal::CallIdTooLong)
        );
        assert_eq!(
            check_call(&ctx, &call(&at(MAX_CALL_ID_BYTES + 1), &at(200))),
            Err(Refusal::ToolNameTooLong)
        );
        let long_run = ctx.clone().with_run_id(at(MAX_RUN_ID_BYTES + 1));
        assert_eq!(
            check_call(&long_run, &call("c", "t")),
            Err(Refusal::RunIdTooLong)
        );
        let long_principal = RunContext::new(at(MAX_SUBJECT_BYTES + 1), "acme");
        assert_eq!(
            check_call(&long_principal, &call("c", "t")),
            Err(Refusal::PrincipalTooLong)
        );
        let long_tenant = RunContext::new("alice", at(MAX_SUBJECT_BYTES + 1));
        assert_eq!(
            check_call(&long_tenant, &call("c", "t")),
            Err(Refusal::TenantTooLong)
        );
        assert_eq!(Refusal::CallIdTooLong.code(), Code::InvalidArguments);
        assert_eq!(Refusal::PrincipalTooLong.code(), Code::Unauthorized);
    }

    /// The refusal of a 10 MB name and id is small: both are cut to their bounds.
    #[test]
    fn refusal_result_is_bounded() {
        let huge = "é".repeat(5 << 20);
        let r = Refusal::ToolNameTooLong.result(&call(&huge, &huge));
        assert_eq!(r.code, Some(Code::UnknownTool));
        assert_eq!(r.tool.chars().count(), MAX_TOOL_NAME_CHARS);
        assert!(r.tool.ends_with('…'));
        assert!(r.call_id.len() <= MAX_CALL_ID_BYTES, "{}", r.call_id.len());
        assert!(r.call_id.ends_with('…'));
        assert!(serde_json::to_vec(&r).unwrap().len() < 2048);
        let small = Refusal::CallIdTooLong.result(&call("c1", "greet"));
        assert_eq!(
            (small.call_id.as_str(), small.tool.as_str()),
            ("c1", "greet")
        );
    }
}
