//! How much harm a tool can do, and whether its calls need a human: shared vocabulary of the
//! config (which sets them), the registry (which attaches them to tools), the policy (which
//! decides with them) and the MCP mapping (which turns them into client hints).

use serde::{Deserialize, Serialize};

/// How much harm a tool can do; drives approval defaults and client hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads only; no effect outside the call.
    #[default]
    Read,
    /// Changes state the operator granted (e.g. writes files).
    Write,
    /// Talks to the outside world.
    External,
    /// Can destroy data.
    Destructive,
}

/// Where a tool's risk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskSource {
    /// `[component.tools.NAME] risk`.
    Tool,
    /// The component's `risk`.
    Component,
    /// Nobody declared one: the most its grants allow ([`Risk::of_grants`]).
    Grants,
}

impl Risk {
    /// The wire name (`read`, `write`, `external`, `destructive`).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::External => "external",
            Risk::Destructive => "destructive",
        }
    }

    /// The risk a tool nobody declared one for is treated as: the most its grants allow. A
    /// network grant reaches the outside world (`external`); a writable directory changes
    /// state (`write`); nothing granted leaves only reads (`read`). Never lower than what the
    /// tool could do, so an undeclared tool is never hinted harmless.
    pub fn of_grants(writable_dir: bool, network: bool) -> Risk {
        match (network, writable_dir) {
            (true, _) => Risk::External,
            (false, true) => Risk::Write,
            (false, false) => Risk::Read,
        }
    }
}

/// Whether a tool's calls run as MCP tasks (per-tool `task = "…"` in the config): a client that
/// declares the tasks extension gets a task handle at once and polls it, on any host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// Calls always answer in the request (the default).
    #[default]
    Never,
    /// A task for a client that declared the extension; the request's answer for another.
    Optional,
    /// A task, always: a client that did not declare the extension is refused (`-32021`).
    Required,
}

/// Who may answer a tool's approval question (`approvers = "…"` per tool, or the default in
/// `[policy.approval]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approvers {
    /// The client that made the call may ask its human (MCP elicitation, `input_required`, a
    /// task's `tasks/update`), as well as the operator. The default: it is how MCP puts a
    /// human in the loop, and the host cannot tell a human's answer from a program's.
    #[default]
    Client,
    /// Only the operator's channel (`toolhost approve`, the terminal or command of `toolhost
    /// call` and `agent`); the calling client is never asked, and an answer from it approves
    /// nothing. For unattended agents, whose client would approve its own calls.
    Operator,
}

/// Whether a tool's calls need a human approval (per-tool `approval = "…"` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Every call needs an approval.
    Required,
    /// No call needs an approval, even for a `destructive` tool.
    Never,
    /// Only calls of `destructive` tools need an approval.
    #[default]
    Default,
}
