//! Where a call's approval comes from in MCP, for the handler: a token the client passes in
//! `_meta`, the session's client asked through `elicitation/create`, or (2026-07-28) an answer
//! to `input_required` (`mrtr.rs`); and what an unusable answer gets.

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ErrorData};
use rmcp::service::{RequestContext, RoleServer};

use super::mrtr::Resumed;
use toolhost_runtime::ApprovalFailure;
use toolhost_runtime::Runtime;

/// The token for an approved retry: minted for the sealed handle (which a call of this
/// deployment asked for), to be verified against the retry's own call and spent once.
pub(super) fn approved(
    runtime: &Runtime,
    resumed: &Resumed,
    tool: &str,
) -> Result<String, ApprovalFailure> {
    approved_handle(runtime, &resumed.handle, tool)
}

/// The token for `handle`, which a call of `tool` in this deployment asked for, once the
/// calling client's human said yes; refused (`approval_invalid`) for a tool only the operator
/// approves.
pub(super) fn approved_handle(
    runtime: &Runtime,
    handle: &str,
    tool: &str,
) -> Result<String, ApprovalFailure> {
    let approvals = runtime.approvals();
    if approvals.operator_only_by_name(tool) {
        return Err(ApprovalFailure::Invalid {
            reason: "only the operator's channel approves this tool (approvers = \"operator\"); \
                     the client's answer approves nothing"
                .into(),
        });
    }
    operator_approved(runtime, handle)
}

/// The token for `handle`, which a call of this deployment asked for, once the operator said
/// yes (the console): any tool, whoever its approvers are.
pub(super) fn operator_approved(
    runtime: &Runtime,
    handle: &str,
) -> Result<String, ApprovalFailure> {
    let approvals = runtime.approvals();
    approvals.mint(handle).map_err(|e| {
        if approvals.expired(handle) {
            ApprovalFailure::Expired
        } else {
            ApprovalFailure::Invalid {
                reason: e.to_string(),
            }
        }
    })
}

/// The JSON-RPC error a retry with an unusable `requestState` gets: `-32602`, the approval
/// code and its fixed message under `data["toolhost/failure"]`.
pub(super) fn state_refused(failure: &ApprovalFailure) -> ErrorData {
    let data = serde_json::json!({ super::mapping::FAILURE_META: {
        "status": "failed",
        "code": failure.code().as_str(),
        "message": failure.message(),
    }});
    ErrorData::invalid_params(failure.message(), Some(data))
}

/// The `_meta` key a client resubmits a call with, carrying a token from `toolhost approve`.
pub const APPROVAL_TOKEN_META: &str = "toolhost/approvalToken";

pub(super) fn approval_token(
    request: &CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
) -> Option<String> {
    let from = |m: &rmcp::model::RequestMetaObject| {
        m.get(APPROVAL_TOKEN_META)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    request
        .meta
        .as_ref()
        .and_then(from)
        .or_else(|| from(&cx.meta))
}

pub(super) fn supports_form_elicitation(cx: &RequestContext<RoleServer>) -> bool {
    cx.peer
        .supported_elicitation_modes()
        .contains(&rmcp::service::ElicitationMode::Form)
}

/// Whether these capabilities take form elicitation: `elicitation` declared with `form`, or
/// with neither mode (which means form, as in rmcp's session check).
pub(super) fn form_elicitation(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}
