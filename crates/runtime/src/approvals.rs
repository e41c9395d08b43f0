//! Approvals as the front doors see them ([`Runtime::approvals`]): who may approve a tool, the
//! call a handle was asked for, minting a token once a human said yes, and whether a handle
//! binds a call. The tokens themselves are `policy/approval.rs`'s.

use serde_json::Value;

use toolhost_contract::canonical::canonical_json;
use toolhost_contract::Approvers;
use toolhost_ledger::CallRecord;
use toolhost_registry::Tool;

use super::{ApproveError, Runtime};

/// What a front door tells apart about an approval that cannot be used, and how it reads a
/// handle: the policy's own types, offered here so that front doors reach approvals through
/// the runtime only.
pub use toolhost_policy::{parse_handle, ApprovalFailure, PolicyError};

/// The approval side of a [`Runtime`].
pub struct Approvals<'a> {
    rt: &'a Runtime,
}

impl Runtime {
    /// Approvals: who approves, what a handle names, tokens.
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { rt: self }
    }
}

impl Approvals<'_> {
    /// Who may approve calls of `tool`: its own setting, else the policy's default.
    pub fn approvers(&self, tool: &Tool) -> Approvers {
        tool.approvers.unwrap_or(self.rt.approvers)
    }

    /// Whether only the operator may approve calls of `tool` (the calling client is never
    /// asked, and its answers approve nothing).
    pub fn operator_only(&self, tool: &Tool) -> bool {
        self.approvers(tool) == Approvers::Operator
    }

    /// [`operator_only`](Self::operator_only) for the tool named `name` (false for no tool).
    pub fn operator_only_by_name(&self, name: &str) -> bool {
        self.rt
            .registry()
            .get(name)
            .is_some_and(|t| self.operator_only(t))
    }

    /// The call an approval handle was asked for, with the arguments a human must see before
    /// approving it (in canonical JSON, exactly as the approval binds them): the recorded ones
    /// (content recording on) or `given`, either way checked against the handle's call
    /// binding, so what is shown is what the token runs. A call of a
    /// tool whose definition is not the one it was asked under (replaced, changed, or no longer
    /// loaded) is refused: its approval could never run.
    pub fn call(
        &self,
        handle: &str,
        given: Option<&Value>,
    ) -> Result<(CallRecord, String), ApproveError> {
        let (run_id, call_id) = self.requested(handle)?;
        let record = self
            .rt
            .ledger
            .calls(Some(&run_id))?
            .into_iter()
            .find(|c| c.call_id == call_id)
            .ok_or(ApproveError::NotRequested)?;
        let arguments = match (given, &record.arguments) {
            (Some(a), _) => a.clone(),
            (None, Some(recorded)) => recorded.clone(),
            (None, None) => return Err(ApproveError::ArgumentsNeeded),
        };
        let registry = self.rt.registry();
        let definition = registry
            .get(&record.tool)
            .map(|t| t.definition_digest.as_str());
        if definition.is_none() || definition != record.definition_digest.as_deref() {
            return Err(ApproveError::ToolChanged {
                tool: record.tool.clone(),
            });
        }
        let canonical = canonical_json(&arguments);
        let definition = definition.unwrap_or_default();
        if !self.bind_call(handle, &record.tool, definition, &canonical, &record.run_id) {
            return Err(ApproveError::ArgumentsMismatch);
        }
        let canonical = String::from_utf8(canonical).expect("canonical JSON is UTF-8");
        Ok((record, canonical))
    }

    /// Mint the single-use token for an approval handle some call asked for (after a human saw
    /// [`call`](Self::call) and said yes).
    pub fn mint(&self, handle: &str) -> Result<String, ApproveError> {
        self.requested(handle)?;
        let now = self.rt.clock.unix_now();
        Ok(self.rt.approval_key.mint_at(handle, now)?)
    }

    /// Whether `handle` was asked for a call of `tool`, whose definition has this digest, under
    /// the rules in force now, with exactly these canonical arguments in `run_id`.
    pub fn bind_call(
        &self,
        handle: &str,
        tool: &str,
        definition: &str,
        canonical_arguments: &[u8],
        run_id: &str,
    ) -> bool {
        let policy = self.rt.policy();
        let shown = (tool, definition, policy.revision());
        toolhost_policy::handle_binds_call(handle, shown, canonical_arguments, run_id)
    }

    /// A handle's approval id and its expiry (unix seconds), if it reads as a handle.
    pub fn read_handle(&self, handle: &str) -> Result<(String, u64), PolicyError> {
        parse_handle(handle)
    }

    /// Whether `handle` reads as a handle whose expiry has passed by this host's clock.
    pub fn expired(&self, handle: &str) -> bool {
        self.read_handle(handle)
            .is_ok_and(|(_, at)| self.rt.clock.unix_now() >= at)
    }

    /// A key for `purpose`, derived from the approval key: the same on every host that shares
    /// the approval key (MCP's sealed request state uses one).
    pub fn derived_key(&self, purpose: &str) -> [u8; 32] {
        self.rt.approval_key.derive(purpose)
    }

    /// The `(run, call)` that asked for this approval handle; a handle nobody asked for is
    /// refused (a model could compute handles for calls it has not made).
    fn requested(&self, handle: &str) -> Result<(String, String), ApproveError> {
        let (digest, _expires) = self.read_handle(handle)?;
        self.rt
            .ledger
            .approval_request(&digest)?
            .ok_or(ApproveError::NotRequested)
    }
}
