//! Runs one call: a fresh store and instance, fuel, an epoch deadline (checked every tick, which
//! also yields so cancellation is seen) and an async wall-clock timeout, the memory and table limiter, captured output — and says which limit ended it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::component::{ComponentExportIndex, InstancePre, ResourceTable, Val};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi_http::WasiHttpCtx;

use toolhost_contract::LiveSinks;

use super::disk::DiskWatch;
use super::engine::{deadline_ticks, EPOCH_TICK};
use super::grant::{build_wasi, CallIds, Grant};
use super::host_api::{CallContext, HostApi, Reports};
use super::host_budget::{is_table_full, HostBudget, HTTP_FIELDS_BYTES};
use super::limits::{hostcall_bytes, is_hostcall_data_exhausted, CallLimiter, Limits};
use super::network::HttpPolicy;
use super::secrets::CallSecrets;
use super::shadow::HostBudgetError;
use super::{CallState, Sandbox, SandboxError};

/// Which limit (or fault) ended a call early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    FuelExhausted,
    DeadlineExceeded,
    MemoryExceeded,
    OutputTooLarge,
    /// The call held more of the host's resources than its budget (`host_budget.rs`).
    HostResourcesExceeded(HostBudgetError),
    /// The caller cancelled the call after it started.
    Cancelled,
    /// Every instance slot of the host was taken: the host's own limit, not the guest's fault.
    HostBusy,
    /// The guest trapped (panic, stack overflow, unreachable, ...): wasmtime's trap kind when
    /// the error carries one, so callers and tests can tell which. Operator detail only.
    Trap {
        kind: Option<Trap>,
        detail: String,
    },
    /// The host could not set up the call. Operator detail only.
    Setup {
        detail: String,
    },
}

/// What one execution produced.
#[derive(Debug)]
pub struct Execution {
    pub outcome: Result<Vec<Val>, Fault>,
    pub fuel_consumed: u64,
    pub wall: Duration,
    pub memory_peak_bytes: u64,
    /// Bytes written to stdout + stderr (capped at the ceiling + 1 per stream).
    pub stdio_bytes: u64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub reports: Reports,
}

/// The async timeout fires this long after the deadline: the epoch trap normally ends a
/// computing guest first; the timeout ends a guest blocked inside a host call.
const TIMEOUT_GRACE: Duration = Duration::from_millis(2 * EPOCH_TICK.as_millis() as u64);

/// One call for the sandbox to run: the prepared component and its function, the converted
/// parameters, and everything that bounds the call.
pub struct Invocation<'a> {
    pub pre: &'a InstancePre<CallState>,
    pub func: &'a ComponentExportIndex,
    pub params: &'a [Val],
    /// How many results the function returns (0 or 1).
    pub result_count: usize,
    pub limits: Limits,
    pub grant: &'a Grant,
    /// Who the call runs for (the caller's own granted directory, if any) and its ids.
    pub call: CallIds<'a>,
    /// Cancels the call: the guest is interrupted at its next epoch tick.
    pub cancel: &'a CancellationToken,
    /// Where the guest's progress and log reports go while it runs.
    pub live: LiveSinks,
}

impl Sandbox {
    /// Instantiate the invocation's component in a fresh store and call its function under
    /// its limits.
    pub async fn execute(&self, invocation: Invocation<'_>) -> Execution {
        let Invocation {
            pre,
            func,
            params,
            result_count,
            limits,
            grant,
            call,
            cancel,
            live,
        } = invocation;
        let limits = &limits;
        let started = Instant::now();
        let disk = DiskWatch::of(grant, limits.disk_reserve_bytes);
        if let Some(d) = disk.as_ref().filter(|d| d.below_reserve()) {
            let over = Fault::HostResourcesExceeded(HostBudgetError::Disk(d.reserve()));
            return ended_before_start(over, started);
        }
        let secrets = CallSecrets::new(&grant.secrets);
        let (wasi, captured) = match build_wasi(grant, call, &secrets, limits.output_bytes) {
            Ok(w) => w,
            Err(e) => return setup_failure(e, started),
        };
        let handles = self.descriptors.handles_per_call;
        let mut table = ResourceTable::new();
        table.set_max_capacity(handles);
        let state = CallState {
            wasi,
            table,
            http: http_ctx(),
            hooks: HttpPolicy::new(grant.network.clone(), secrets.clone()),
            limiter: CallLimiter::new(limits),
            host: HostApi {
                reports: Reports {
                    live,
                    ..Reports::default()
                },
                context: call_context(call, limits),
                secrets: secrets.clone(),
            },
            budget: HostBudget::new(limits.write_bytes),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(hostcall_bytes(limits));
        if let Err(e) = store.set_fuel(limits.fuel) {
            return setup_failure(SandboxError::Prepare(e.into()), started);
        }
        // Every tick: stop when cancelled or out of ticks, otherwise yield to the executor so
        // the async timeout and cancellation are observed even while the guest computes.
        let mut remaining = deadline_ticks(limits.deadline);
        let stop = cancel.clone();
        let disk_full = Arc::new(AtomicBool::new(false));
        let full = disk_full.clone();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if disk.as_ref().is_some_and(DiskWatch::below_reserve) {
                full.store(true, Ordering::Relaxed);
                return Ok(UpdateDeadline::Interrupt);
            }
            remaining = remaining.saturating_sub(1);
            if stop.is_cancelled() || remaining == 0 {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });

        let run = instantiate_and_call(&mut store, pre, func, params, result_count);
        let timed = tokio::select! {
            t = tokio::time::timeout(limits.deadline + TIMEOUT_GRACE, run) => Some(t),
            _ = cancel.cancelled() => None,
        };
        let wall = started.elapsed();

        let stdio_bytes = captured.len();
        let over_output = stdio_bytes > limits.output_bytes;
        let state = store.data();
        let mut outcome = match timed {
            _ if disk_full.load(Ordering::Relaxed) => Err(Fault::HostResourcesExceeded(
                HostBudgetError::Disk(limits.disk_reserve_bytes),
            )),
            None => Err(Fault::Cancelled),
            Some(Err(_elapsed)) => Err(Fault::DeadlineExceeded),
            Some(Ok(_)) if over_output => Err(Fault::OutputTooLarge),
            Some(Ok(Ok(results))) => Ok(results),
            Some(Ok(Err(_))) if cancel.is_cancelled() => Err(Fault::Cancelled),
            Some(Ok(Err(e))) => Err(classify(&e, &state.limiter, handles)),
        };
        // Nothing the call leaves holds a secret's value, whatever way the guest found it.
        match &mut outcome {
            Ok(results) => secrets.redact_vals(results),
            Err(Fault::Trap { detail, .. }) => {
                *detail = secrets.redact_string(std::mem::take(detail))
            }
            Err(_) => {}
        }
        let fuel_left = store.get_fuel().unwrap_or(0);
        let state = store.into_data();
        Execution {
            outcome,
            fuel_consumed: limits.fuel.saturating_sub(fuel_left),
            wall,
            memory_peak_bytes: state.limiter.memory_peak as u64,
            stdio_bytes,
            stdout: secrets.redact_cut(captured.stdout.contents().to_vec(), over_output),
            stderr: secrets.redact_cut(captured.stderr.contents().to_vec(), over_output),
            reports: state.host.reports,
        }
    }
}

/// Which limit a guest error stands for. The limiter's record wins over the trap code: a Rust
/// guest whose allocation is refused aborts with `unreachable`, not with a memory trap.
/// Errors that name their cause unambiguously (a refused transfer, a full instance pool) come
/// first: a guest may have probed its memory ceiling earlier in the same call.
fn classify(e: &wasmtime::Error, limiter: &CallLimiter, handles: usize) -> Fault {
    if is_hostcall_data_exhausted(e) {
        return Fault::OutputTooLarge;
    }
    if is_table_full(e) {
        return Fault::HostResourcesExceeded(HostBudgetError::Handles(handles));
    }
    if let Some(over) = e.downcast_ref::<HostBudgetError>() {
        return Fault::HostResourcesExceeded(*over);
    }
    if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
        .is_some()
    {
        return Fault::HostBusy;
    }
    if limiter.memory_denied || limiter.table_denied {
        return Fault::MemoryExceeded;
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Fault::FuelExhausted,
        Some(Trap::Interrupt) => Fault::DeadlineExceeded,
        kind => Fault::Trap {
            kind: kind.copied(),
            detail: format!("{e:#}"),
        },
    }
}

impl Sandbox {
    /// **The cost floor, for benchmarks.** Raw wasmtime on this engine: a fresh store with an
    /// empty WASI context (no limiter, no pipes, fuel and epoch deadline out of the way),
    /// instantiate `pre`, call `func`, drop. No limits are enforced: never give it a guest
    /// you do not trust.
    #[doc(hidden)]
    pub async fn call_floor(
        &self,
        pre: &InstancePre<CallState>,
        func: &ComponentExportIndex,
        params: &[Val],
        result_count: usize,
    ) -> Result<Vec<Val>, wasmtime::Error> {
        let state = CallState {
            wasi: wasmtime_wasi::WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            hooks: HttpPolicy::new(
                super::allowlist::Allowlist::default(),
                CallSecrets::default(),
            ),
            limiter: CallLimiter::new(&Limits::default()),
            host: HostApi {
                reports: Reports::default(),
                context: call_context(
                    CallIds {
                        caller: &NOBODY,
                        run_id: "",
                        call_id: "",
                    },
                    &Limits::default(),
                ),
                secrets: CallSecrets::default(),
            },
            budget: HostBudget::new(u64::MAX),
        };
        let mut store = Store::new(&self.engine, state);
        store.set_fuel(u64::MAX)?;
        store.set_epoch_deadline(u64::MAX / 2);
        instantiate_and_call(&mut store, pre, func, params, result_count).await
    }
}

/// Instantiate `pre` in `store` and call `func`: the part both a limited call and the floor run.
async fn instantiate_and_call(
    store: &mut Store<CallState>,
    pre: &InstancePre<CallState>,
    func: &ComponentExportIndex,
    params: &[Val],
    result_count: usize,
) -> Result<Vec<Val>, wasmtime::Error> {
    let instance = pre.instantiate_async(&mut *store).await?;
    let f = instance
        .get_func(&mut *store, func)
        .ok_or_else(|| wasmtime::format_err!("exported function not found"))?;
    let mut results = vec![Val::Bool(false); result_count];
    f.call_async(&mut *store, params, &mut results).await?;
    Ok(results)
}

/// The caller of a benchmark's floor call, which has no caller.
const NOBODY: toolhost_contract::Caller = toolhost_contract::Caller {
    principal: String::new(),
    tenant: String::new(),
    origin: toolhost_contract::Origin::Local,
};

/// What `host.context()` answers in `call` under `limits` (starting now); the idempotency key
/// is derived when the guest first asks (`HostApi::context`).
fn call_context(call: CallIds<'_>, limits: &Limits) -> CallContext {
    let deadline_unix_ms = std::time::SystemTime::now()
        .checked_add(limits.deadline)
        .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(u64::MAX, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        });
    CallContext {
        principal: call.caller.principal.clone(),
        tenant: call.caller.tenant.clone(),
        run_id: call.run_id.to_string(),
        call_id: call.call_id.to_string(),
        idempotency_key: String::new(),
        deadline_unix_ms,
    }
}

/// A `wasi:http` context whose header fields hold at most [`HTTP_FIELDS_BYTES`] each.
fn http_ctx() -> WasiHttpCtx {
    let mut ctx = WasiHttpCtx::new();
    ctx.set_field_size_limit(HTTP_FIELDS_BYTES);
    ctx
}

fn setup_failure(e: SandboxError, started: Instant) -> Execution {
    let fault = Fault::Setup {
        detail: toolhost_contract::error_chain(&e),
    };
    ended_before_start(fault, started)
}

/// What a call that never started produced: its fault, and nothing else.
fn ended_before_start(fault: Fault, started: Instant) -> Execution {
    Execution {
        outcome: Err(fault),
        fuel_consumed: 0,
        wall: started.elapsed(),
        memory_peak_bytes: 0,
        stdio_bytes: 0,
        stdout: Vec::new(),
        stderr: Vec::new(),
        reports: Reports::default(),
    }
}
