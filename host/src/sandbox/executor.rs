//! Runs one call: a fresh store and instance, fuel, an epoch deadline and an async wall-clock
//! timeout, the memory and table limiter, captured output — and says which limit ended it.

use std::time::{Duration, Instant};

use wasmtime::component::{ComponentExportIndex, InstancePre, ResourceTable, Val};
use wasmtime::{Store, Trap};
use wasmtime_wasi_http::WasiHttpCtx;

use super::engine::{deadline_ticks, EPOCH_TICK};
use super::grant::{build_wasi, Grant};
use super::host_api::Reports;
use super::limits::{CallLimiter, Limits};
use super::network::HttpPolicy;
use super::{CallState, Sandbox, SandboxError};

/// Which limit (or fault) ended a call early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    FuelExhausted,
    DeadlineExceeded,
    MemoryExceeded,
    OutputTooLarge,
    /// The guest trapped (panic, stack overflow, unreachable, ...). Operator detail only.
    Trap {
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

impl Sandbox {
    /// Instantiate `pre` in a fresh store and call `func` with `params` under `limits`.
    pub async fn execute(
        &self,
        pre: &InstancePre<CallState>,
        func: &ComponentExportIndex,
        params: &[Val],
        result_count: usize,
        limits: &Limits,
        grant: &Grant,
    ) -> Execution {
        let started = Instant::now();
        let (wasi, captured) = match build_wasi(grant, limits.output_bytes) {
            Ok(w) => w,
            Err(e) => return setup_failure(e, started),
        };
        let state = CallState {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            hooks: HttpPolicy::new(grant.network.clone()),
            limiter: CallLimiter::new(limits),
            reports: Reports::default(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        if let Err(e) = store.set_fuel(limits.fuel) {
            return setup_failure(SandboxError::Prepare(format!("{e:#}")), started);
        }
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.epoch_deadline_trap();

        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            let f = instance
                .get_func(&mut store, func)
                .ok_or_else(|| wasmtime::format_err!("exported function not found"))?;
            let mut results = vec![Val::Bool(false); result_count];
            f.call_async(&mut store, params, &mut results).await?;
            Ok::<_, wasmtime::Error>(results)
        };
        let timed = tokio::time::timeout(limits.deadline + TIMEOUT_GRACE, run).await;
        let wall = started.elapsed();

        let stdio_bytes = captured.len();
        let over_output = stdio_bytes > limits.output_bytes;
        let state = store.data();
        let outcome = match timed {
            Err(_elapsed) => Err(Fault::DeadlineExceeded),
            Ok(_) if over_output => Err(Fault::OutputTooLarge),
            Ok(Ok(results)) => Ok(results),
            Ok(Err(e)) => Err(classify(&e, &state.limiter)),
        };
        let fuel_left = store.get_fuel().unwrap_or(0);
        let state = store.into_data();
        Execution {
            outcome,
            fuel_consumed: limits.fuel.saturating_sub(fuel_left),
            wall,
            memory_peak_bytes: state.limiter.memory_peak as u64,
            stdio_bytes,
            stdout: captured.stdout.contents().to_vec(),
            stderr: captured.stderr.contents().to_vec(),
            reports: state.reports,
        }
    }
}

/// Which limit a guest error stands for. The limiter's record wins over the trap code: a Rust
/// guest whose allocation is refused aborts with `unreachable`, not with a memory trap.
fn classify(e: &wasmtime::Error, limiter: &CallLimiter) -> Fault {
    if limiter.memory_denied || limiter.table_denied {
        return Fault::MemoryExceeded;
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Fault::FuelExhausted,
        Some(Trap::Interrupt) => Fault::DeadlineExceeded,
        _ => Fault::Trap {
            detail: format!("{e:#}"),
        },
    }
}

fn setup_failure(e: SandboxError, started: Instant) -> Execution {
    Execution {
        outcome: Err(Fault::Setup {
            detail: e.to_string(),
        }),
        fuel_consumed: 0,
        wall: started.elapsed(),
        memory_peak_bytes: 0,
        stdio_bytes: 0,
        stdout: Vec::new(),
        stderr: Vec::new(),
        reports: Reports::default(),
    }
}
