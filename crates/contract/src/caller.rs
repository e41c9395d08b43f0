//! Who calls: the principal and tenant a trusted front door authenticated — the config's stdio
//! identity, a static bearer token, an OAuth issuer's subject — and never anything a tool's
//! arguments say.

/// The caller of a call, a session or a request: what policy authorizes, what the ledger binds
/// runs, tasks and approvals to, and what the sandbox gives per-caller grants for. The same
/// value travels from the door that authenticated it to the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Caller {
    pub principal: String,
    pub tenant: String,
    /// Which door vouched for it. Policy, the ledger and the sandbox read only the principal
    /// and tenant; the origin is for logs and for telling two doors' callers apart.
    pub origin: Origin,
}

/// Where a [`Caller`] came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The config's own identity (`[serve] principal`, a command line's `--principal`): stdio
    /// sessions, tokenless HTTP on loopback, `toolhost call` and `agent`.
    #[default]
    Local,
    /// A static bearer token of `[[serve.token]]`.
    Token,
    /// An access token of this OAuth issuer.
    OAuth { issuer: String },
}

impl Caller {
    /// A caller the config vouches for ([`Origin::Local`]).
    pub fn new(principal: impl Into<String>, tenant: impl Into<String>) -> Self {
        Caller::with_origin(principal, tenant, Origin::Local)
    }

    pub fn with_origin(
        principal: impl Into<String>,
        tenant: impl Into<String>,
        origin: Origin,
    ) -> Self {
        Caller {
            principal: principal.into(),
            tenant: tenant.into(),
            origin,
        }
    }
}
