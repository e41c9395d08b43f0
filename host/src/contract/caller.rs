//! Who calls: the principal and tenant a trusted front door authenticated — the config's stdio
//! identity, a static bearer token, an OAuth issuer's subject — and never anything a tool's
//! arguments say.

use serde::{Deserialize, Serialize};

use super::RunContext;

/// The caller of a call, a session or a request: what policy authorizes, what the ledger binds
/// runs, tasks and approvals to, and what the sandbox gives per-caller grants for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Caller {
    pub principal: String,
    pub tenant: String,
}

impl Caller {
    pub fn new(principal: impl Into<String>, tenant: impl Into<String>) -> Self {
        Caller {
            principal: principal.into(),
            tenant: tenant.into(),
        }
    }

    /// The caller `principal` of tenant `t`, for unit tests.
    #[cfg(test)]
    pub(crate) fn of_test(principal: &str) -> Caller {
        Caller::new(principal, "t")
    }
}

impl From<&RunContext> for Caller {
    fn from(ctx: &RunContext) -> Self {
        Caller::new(ctx.principal.clone(), ctx.tenant.clone())
    }
}
