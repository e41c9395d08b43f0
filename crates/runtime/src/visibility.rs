//! What one caller is shown of the tools ([`Runtime::visibility`]): the tools its policy could
//! allow it, and each one's input schema narrowed by the constraints that confine it.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use toolhost_contract::Caller;
use toolhost_policy::Policy;
use toolhost_registry::{Registry, Tool};

use super::Runtime;

/// The tools as one caller sees them: over MCP (`tools/list`, a task's tool) and to a model.
pub struct Visibility<'a> {
    rt: &'a Runtime,
    caller: &'a Caller,
    /// The tools served when the view was taken (a reload does not change a view).
    registry: Arc<Registry>,
    /// The rules served with them.
    policy: Arc<Policy>,
}

impl Runtime {
    /// The tools as `caller` sees them.
    pub fn visibility<'a>(&'a self, caller: &'a Caller) -> Visibility<'a> {
        let served = self.served();
        Visibility {
            rt: self,
            caller,
            registry: served.registry,
            policy: served.policy,
        }
    }
}

impl<'a> Visibility<'a> {
    /// Each tool the policy could allow the caller with some arguments (`Policy::may_see`).
    pub fn tools(&self) -> impl Iterator<Item = &Tool> + '_ {
        let (policy, caller) = (&self.policy, self.caller);
        self.registry
            .tools()
            .filter(move |t| policy.may_see(caller, t.name.as_str(), t.risk))
    }

    /// The tool `name`: `None` when there is none, or when the policy hides it from the
    /// caller — the two are answered alike.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.rt.work.resolved();
        self.registry
            .get(name)
            .filter(|t| self.policy.may_see(self.caller, t.name.as_str(), t.risk))
    }

    /// The input schema `tool` is shown with: its own, narrowed by the argument constraints of
    /// the rules that allow the caller ([`toolhost_policy::Policy::narrowing`]), so a caller
    /// confined to `projects/alice/` is told so before it calls.
    pub fn input_schema<'t>(&self, tool: &'t Tool) -> Cow<'t, Value> {
        match self
            .policy
            .narrowing(self.caller, tool.name.as_str(), tool.risk)
        {
            Some(narrowing) => {
                Cow::Owned(toolhost_policy::narrowed(&tool.input_schema, &narrowing))
            }
            None => Cow::Borrowed(&tool.input_schema),
        }
    }
}
