//! The call pipeline: a proposal is prepared once ([`Prepared`]: its tool as the caller sees
//! it, its canonical form), then passes the stages in the order `pipeline.rs` gives them, one
//! file each under `stages/`, over one per-call value.
//!
//! Every stage can end the call, and every ending is a [`ToolResult`] recorded in the ledger;
//! nothing here panics on input from a model or a guest.

mod diagnostics;
pub mod guards;
pub mod stream_args;

mod approvals;
pub mod batch;
mod clock;
mod copies;
mod endings;
pub mod evidence;
mod inflight;
mod pipeline;
mod prepared;
mod reconcile;
mod stages;
pub mod tasks;
mod trace;
mod transcripts;
mod visibility;

use std::sync::Arc;

use wasmtime::component::Val;

use guards::{Concurrency, RateLimiter};
use toolhost_contract::bounds::clip;
use toolhost_contract::{Caller, RunContext, ToolCall, ToolResult};
use toolhost_ledger::Ledger;
use toolhost_policy::{ApprovalKey, Policy};
use toolhost_registry::{Registry, Tool};
use toolhost_sandbox::{Execution, Sandbox};

pub use approvals::{parse_handle, ApprovalFailure, Approvals};
pub use clock::Clock;
pub use copies::MAX_WAITING_DUPLICATES;
pub use diagnostics::Diagnostics;
pub use prepared::{Prepared, Work};
pub use reconcile::ReconcileError;
pub use stages::validate::Passes;
pub use transcripts::{TranscriptAt, Transcripts};
pub use visibility::Visibility;

/// Largest serialized argument object accepted, checked before anything else looks at it.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Bytes of a guest's own error value shown to the model.
pub const MAX_TOOL_ERROR_MESSAGE: usize = 2048;

/// The run and call id `/readyz` reads: never admitted, so the read is answered "unknown call".
const READY_PROBE: &str = "toolhost-readyz-probe";

/// Runs calls against a registry in a sandbox, with the ledger, policy and guards around them.
///
/// It holds what lives as long as the process. What it does, and where:
///
/// - the call path, as inherent methods: [`prepare`](Runtime::prepare) (`prepared.rs`), then
///   [`run_prepared`](Runtime::run_prepared) or [`run_call`](Runtime::run_call), and the
///   `refuse*` endings (`pipeline.rs`, which gives the stages' order); batches
///   (`batch.rs`); [`would_pass_checks`](Runtime::would_pass_checks) (`stages/validate.rs`);
/// - what the front doors ask besides calls, each a named view over the runtime:
///   [`visibility`](Runtime::visibility) (what one caller is shown), [`approvals`](Runtime::approvals)
///   (who approves, a handle's call, minting), [`tasks`](Runtime::tasks) (MCP task rows),
///   [`transcripts`](Runtime::transcripts) (an agent run's transcript);
/// - the operator's: [`reconcile`](Runtime::reconcile) (`reconcile.rs`), and in this file
///   the parts (`ledger`, `policy`, `registry`, `sandbox`, `diagnostics`), readiness
///   ([`ledger_reads`](Runtime::ledger_reads)) and the counts.
pub struct Runtime {
    sandbox: Sandbox,
    /// The tools and the rules served now; [`Runtime::replace_served`] swaps in another pair
    /// while calls that already hold a tool finish on it.
    served: std::sync::RwLock<Served>,
    diagnostics: Diagnostics,
    ledger: Ledger,
    approval_key: ApprovalKey,
    approval_ttl: u64,
    /// Who may approve a tool that does not say.
    approvers: toolhost_contract::Approvers,
    /// The clock approvals are judged by.
    clock: Clock,
    rate: RateLimiter,
    concurrency: Concurrency,
    /// Budgets a new run gets from the config.
    run_budgets: toolhost_contract::Budgets,
    executions: std::sync::atomic::AtomicU64,
    /// Calls in `run_call` or `refuse` right now: a lone call commits on its own thread when
    /// the ledger is idle (see `crates/ledger/src/group.rs`).
    in_flight: std::sync::atomic::AtomicUsize,
    /// Copies of running calls waiting for their originals now (`copies.rs`).
    waiting_duplicates: std::sync::atomic::AtomicUsize,
    /// Per-call work done once, counted ([`Runtime::work`]).
    work: prepared::WorkCounts,
}

/// The tools and the authorization rules served together: one read gives both, and a reload
/// replaces both at once.
#[derive(Clone)]
struct Served {
    registry: Arc<Registry>,
    policy: Arc<Policy>,
}

/// Why an approval could not be minted.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    #[error(transparent)]
    Policy(#[from] toolhost_policy::PolicyError),
    #[error("cannot read the ledger: {0}")]
    Ledger(#[from] toolhost_ledger::LedgerError),
    #[error("no call in this host's ledger asked for this approval; approve only handles from an `approval_required` result")]
    NotRequested,
    #[error("this host does not record arguments, so it cannot show what this approval runs; pass the call's arguments with --arguments JSON (they are checked against the handle)")]
    ArgumentsNeeded,
    /// The call binding does not hold: other arguments, or rules changed (by a reload) since the
    /// call asked.
    #[error(
        "the arguments given are not the ones this approval was asked for, or the rules in force changed since it was asked; nothing was approved"
    )]
    ArgumentsMismatch,
    /// The tool the call named was replaced, changed or unloaded since it asked: the approval
    /// binds the definition the model was shown, so it could never run.
    #[error("tool `{tool}` is not the one this call asked approval for (it was replaced, changed or removed since); nothing was approved, and the call must be proposed again")]
    ToolChanged { tool: String },
}

/// What a runtime is built from; the host's config layer (`Config::start`) assembles the parts
/// from a checked config.
pub struct RuntimeParts {
    pub sandbox: Sandbox,
    pub registry: Registry,
    pub diagnostics: Diagnostics,
    pub ledger: Ledger,
    pub policy: Policy,
    pub approval_key: ApprovalKey,
    pub approval_ttl: u64,
    /// Who may approve a tool that does not say (`[policy.approval] approvers`).
    pub approvers: toolhost_contract::Approvers,
    /// The `[run]` section: run budgets, rate and concurrency.
    pub run: guards::RunLimitsConfig,
}

impl Runtime {
    /// A runtime over these parts.
    pub fn new(parts: RuntimeParts) -> Runtime {
        let run = parts.run;
        Runtime {
            sandbox: parts.sandbox,
            served: std::sync::RwLock::new(Served {
                registry: Arc::new(parts.registry),
                policy: Arc::new(parts.policy),
            }),
            diagnostics: parts.diagnostics,
            ledger: parts.ledger,
            approval_key: parts.approval_key,
            approval_ttl: parts.approval_ttl,
            approvers: parts.approvers,
            clock: Clock::default(),
            rate: RateLimiter::new(run.rate_per_principal, run.rate_burst),
            concurrency: Concurrency::new(run.concurrent_calls()),
            run_budgets: run.budgets(),
            executions: std::sync::atomic::AtomicU64::new(0),
            in_flight: Default::default(),
            waiting_duplicates: Default::default(),
            work: Default::default(),
        }
    }

    /// The clock approvals are judged by (tests move it forward instead of sleeping).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// **Benchmarks only.** The same runtime on the null ledger (`Ledger::null`): every stage
    /// runs as always, and nothing is recorded — so no replay and no exactly-once. It exists
    /// to measure the real ledger's share of a call; no frontend uses it.
    #[doc(hidden)]
    pub fn unrecorded_for_benchmarks(mut self) -> Result<Runtime, toolhost_ledger::LedgerError> {
        self.ledger = Ledger::null(self.ledger.options())?;
        Ok(self)
    }

    /// The engine and linkers calls run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The tools this runtime serves now: a snapshot, kept whole however long it is held.
    pub fn registry(&self) -> Arc<Registry> {
        self.read_served(|s| s.registry.clone())
    }

    /// The tools and the rules served now, from one read.
    fn served(&self) -> Served {
        self.read_served(Served::clone)
    }

    /// What `take` keeps of the pair served now, under one read of the lock.
    fn read_served<T>(&self, take: impl FnOnce(&Served) -> T) -> T {
        take(
            &self
                .served
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Serve `registry` under `policy` from now on, and return the tools they replace. A call
    /// prepared before holds its tool (and the compiled component under it) until it ends, and
    /// is authorized by the rules in force when it reaches that stage; every call prepared
    /// after sees only the new pair. `registry` must have been loaded into this runtime's
    /// sandbox.
    pub fn replace_served(&self, registry: Registry, policy: Policy) -> Arc<Registry> {
        let next = Served {
            registry: Arc::new(registry),
            policy: Arc::new(policy),
        };
        let mut current = self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *current, next).registry
    }

    /// Where host faults are recorded in detail.
    pub fn diagnostics(&self) -> &Diagnostics {
        &self.diagnostics
    }

    /// The ledger every call is recorded in.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Whether the ledger answers a read now: what `/readyz` asks.
    pub fn ledger_reads(&self) -> Result<(), toolhost_ledger::LedgerError> {
        match self.ledger.outcome(READY_PROBE, READY_PROBE) {
            Ok(_) | Err(toolhost_ledger::LedgerError::UnknownCall { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The authorization rules in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.read_served(|s| s.policy.clone())
    }

    /// Sandbox executions since this runtime started (calls that reached the execute stage).
    pub fn executions(&self) -> u64 {
        self.executions.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A run context for `principal` of `tenant`, a caller the config vouches for, with the
    /// configured budgets.
    pub fn context(&self, principal: &str, tenant: &str) -> RunContext {
        self.context_for(Caller::new(principal, tenant))
    }

    /// A run context for `caller`, as its door authenticated it, with the configured budgets.
    pub fn context_for(&self, caller: Caller) -> RunContext {
        let mut ctx = RunContext::for_caller(caller);
        ctx.budgets = self.run_budgets.clone();
        ctx
    }

    /// Run one call in a fresh run of the local principal (no replay across calls).
    pub async fn call(&self, call: &ToolCall) -> ToolResult {
        let ctx = self.context("local", "default");
        self.run_call(&ctx, call, None).await
    }

    /// The execution stage alone: run `tool` with already converted parameters.
    pub async fn execute(&self, tool: &Tool, params: &[Val]) -> Execution {
        let ctx = self.context("local", "default");
        stages::execute::in_sandbox(self, &ctx, "execute", tool, params).await
    }

    /// **Benchmarks only:** the tool's call on raw wasmtime, with no pipeline and no limits
    /// ([`Sandbox::call_floor`]). `params` come from [`Runtime::benchmark_params`].
    #[doc(hidden)]
    pub async fn call_floor(
        &self,
        tool: &Tool,
        params: &[Val],
    ) -> Result<Vec<Val>, wasmtime::Error> {
        self.sandbox
            .call_floor(
                tool.pre(),
                tool.func(),
                params,
                usize::from(tool.result().is_some()),
            )
            .await
    }

    /// **Benchmarks only:** validated, converted parameters for a call of `tool`.
    #[doc(hidden)]
    pub fn benchmark_params(
        &self,
        tool: &Tool,
        args: &serde_json::Value,
    ) -> Result<Vec<Val>, String> {
        let size = toolhost_contract::measure::json_len(args);
        stages::validate::parameters(tool, args, size)
    }
}
