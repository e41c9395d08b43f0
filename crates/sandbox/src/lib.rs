//! The sandbox: one engine, linkers with exactly the interfaces a grant allows, and the
//! executor that runs one call in a fresh store under every limit.
//!
//! The sandbox knows nothing of policy or of JSON: it takes component values and a grant, and
//! gives back component values or a [`Fault`] that says which limit ended the call.

mod allowlist;
mod descriptors;
mod disk;
mod echo;
mod engine;
mod executor;
mod grant;
mod host_api;
mod host_budget;
mod host_dir;
mod limits;
mod network;
mod redact;
mod secrets;
mod shadow;
mod write_budget;

use wasmtime::component::{Component, HasData, InstancePre, Linker, ResourceTable};
use wasmtime::Engine;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use allowlist::{Allowlist, HostPort};
pub use descriptors::{
    share as share_descriptors, DescriptorPlan, CALL_FIXED_FDS, HOST_RESERVED_FDS,
    MIN_HANDLES_PER_CALL,
};
pub use engine::{
    deadline_ticks, EngineSettings, DECOMMIT_BATCH, EPOCH_TICK, KEEP_RESIDENT_BYTES,
    MAX_CONCURRENT_INSTANCES, TABLE_KEEP_RESIDENT_BYTES,
};
pub use executor::{Execution, Fault, Invocation};
pub use grant::{CallIds, DirGrant, DirSource, Grant, PathPart};
pub use host_api::{
    idempotency_key, CallContext, Report, Reports, MAX_REPORTS_PER_CALL, MAX_REPORT_MESSAGE_BYTES,
};
pub use host_budget::{
    HTTP_BODY_CHUNK_BYTES, HTTP_FIELDS_BYTES, LISTING_ENTRY_BYTES, MAX_HOST_HANDLES_PER_CALL,
    MAX_HTTP_REQUESTS_IN_FLIGHT, MAX_LISTING_BYTES_PER_CALL,
};
pub use host_dir::{check_caller_name, HostDir, HostDirError, MAX_CALLER_COMPONENT_BYTES};
pub use limits::*;
pub use secrets::{
    CallSecrets, Secret, SecretValue, SecretValueError, Secrets, MAX_SECRETS_PER_COMPONENT,
    MAX_SECRET_BYTES, MIN_SECRET_BYTES,
};
pub use shadow::HostBudgetError;
/// wasmtime's trap kinds, as [`Fault::Trap`] carries them.
pub use wasmtime::Trap;
pub use write_budget::ENTRY_BYTES;

/// A fault of the host side of the sandbox (not of a guest).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("could not create the wasmtime engine")]
    Engine(#[source] BoxError),
    #[error("could not link the host interfaces")]
    Link(#[source] BoxError),
    #[error("could not prepare the component for instantiation")]
    Prepare(#[source] BoxError),
    #[error("could not open the directory granted at {guest}: {detail}")]
    Preopen { guest: String, detail: String },
    #[error("could not open the caller's own granted directory: {0}")]
    CallerDir(String),
}

/// A cause as errors keep it (wasmtime's errors become one of these).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether the engine's epoch advances on its own (production) or only when a test says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochMode {
    /// A ticker thread advances the epoch every [`EPOCH_TICK`].
    Ticker,
    /// Nothing advances the epoch; tests call [`Sandbox::increment_epoch`].
    Manual,
}

/// The per-call store state.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    hooks: network::HttpPolicy,
    limiter: limits::CallLimiter,
    host: host_api::HostApi,
    budget: host_budget::HostBudget,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

struct HostData;
impl HasData for HostData {
    type Data<'a> = &'a mut host_api::HostApi;
}

/// The engine and linkers of one host.
pub struct Sandbox {
    engine: Engine,
    settings: EngineSettings,
    base: Linker<CallState>,
    with_http: Linker<CallState>,
    descriptors: DescriptorPlan,
    _ticker: Option<engine::EpochTicker>,
}

impl Sandbox {
    /// Create the engine (pooling allocator sized by `settings`) and the linkers, raise the
    /// soft descriptor limit and share it out among the pool's calls.
    pub fn new(settings: EngineSettings, epochs: EpochMode) -> Result<Self, SandboxError> {
        let engine = engine::build_engine(settings)?;
        let descriptors = descriptors::plan(engine::pool_slots(settings));
        let link = |e: wasmtime::Error| SandboxError::Link(e.into());
        let mut base = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut base).map_err(link)?;
        host_budget::charge_listings(&mut base).map_err(link)?;
        write_budget::charge_writes(&mut base).map_err(link)?;
        host_api::add_to_linker::<CallState, HostData>(&mut base, |s| &mut s.host).map_err(link)?;
        let mut with_http = base.clone();
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut with_http).map_err(link)?;
        let ticker = match epochs {
            EpochMode::Ticker => Some(engine::EpochTicker::start(&engine)),
            EpochMode::Manual => None,
        };
        Ok(Sandbox {
            engine,
            settings,
            base,
            with_http,
            descriptors,
            _ticker: ticker,
        })
    }

    /// What the engine was sized for: a tool loaded later must fit it.
    pub fn settings(&self) -> EngineSettings {
        self.settings
    }

    /// How the host's descriptors are shared out among calls.
    pub fn descriptors(&self) -> DescriptorPlan {
        self.descriptors
    }

    /// The engine components must be compiled for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Advance the epoch by one tick (for tests running with [`EpochMode::Manual`]).
    pub fn increment_epoch(&self) {
        self.engine.increment_epoch();
    }

    /// Resolve a component's imports once; `http` links `wasi:http` (only for network grants).
    pub fn prepare(
        &self,
        component: &Component,
        http: bool,
    ) -> Result<InstancePre<CallState>, SandboxError> {
        let linker = if http { &self.with_http } else { &self.base };
        linker
            .instantiate_pre(component)
            .map_err(|e| SandboxError::Prepare(e.into()))
    }
}
