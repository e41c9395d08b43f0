//! The one wasmtime [`Engine`] of a host: fuel, epoch interruption, the pooling allocator, and
//! the ticker thread that advances epochs.

use std::sync::mpsc;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::{MAX_MEMORIES_PER_CALL, MAX_TABLES_PER_CALL};
use super::SandboxError;

/// How often the ticker advances the epoch; the granularity of epoch deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The most calls one host may be configured to hold an instance for at once (the pooling
/// allocator is sized from the config, up to this). Each slot reserves address space for the
/// largest memory ceiling, [`MAX_MEMORIES_PER_CALL`] times; a call beyond the pool fails to
/// instantiate (`rate_limited`, retryable, never a guest fault) instead of exhausting host
/// memory.
pub const MAX_CONCURRENT_INSTANCES: u32 = 128;

/// Core module instances one call's component may create (componentize-py and
/// componentize-js components use about a dozen).
pub const MAX_CORE_INSTANCES_PER_CALL: u32 = 16;

/// Guest wasm stack: deep enough for real tools, small enough that unbounded recursion traps
/// quickly.
pub const MAX_WASM_STACK: usize = 1 << 20;

/// Engine settings that depend on the configured tools.
#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// The largest memory ceiling of any tool; sizes the pooling allocator's memory slots.
    pub max_memory_bytes: u64,
    /// The largest table ceiling of any tool.
    pub max_table_elements: u64,
    /// Calls that may hold an instance at once (clamped to 1..=[`MAX_CONCURRENT_INSTANCES`]).
    pub max_instances: u32,
}

/// Slots whose memory is returned to the kernel in one go. Each `madvise` takes the process's
/// memory-map lock, so one per call serializes calls across threads; batching amortizes it.
/// At most `cores × (DECOMMIT_BATCH − 1)` freed slots stay resident meanwhile.
pub const DECOMMIT_BATCH: usize = 4;

/// Bytes of a freed slot's linear memory that are reset in place (`memset` back to the
/// component's image or zero) rather than returned to the kernel, per memory. Only pages the
/// call wrote are reset: the kernel's `PAGEMAP_SCAN` (Linux 6.7 and later) finds them. A small
/// tool's call writes fewer, so its next call in the slot takes no page faults and the host no
/// `madvise`; a call that wrote more has the rest decommitted as before. Each used slot keeps at
/// most this much resident. Without `PAGEMAP_SCAN` the first this-many bytes are reset instead.
pub const KEEP_RESIDENT_BYTES: usize = 256 * 1024;

/// The same for a freed slot's tables.
pub const TABLE_KEEP_RESIDENT_BYTES: usize = 64 * 1024;

/// Calls that may hold an instance at once under `settings`.
pub fn pool_slots(settings: EngineSettings) -> u32 {
    settings.max_instances.clamp(1, MAX_CONCURRENT_INSTANCES)
}

/// Build the engine every component of this host is compiled for.
pub fn build_engine(settings: EngineSettings) -> Result<Engine, SandboxError> {
    let slots = pool_slots(settings);
    let mut pool = PoolingAllocationConfig::new();
    // Every slot holds a call at its ceilings (memories, tables, core instances), so a call
    // the concurrency guard admitted always finds room: a Python component alone has several
    // memories and tables.
    pool.total_component_instances(slots)
        .total_core_instances(slots * MAX_CORE_INSTANCES_PER_CALL)
        .total_memories(slots * MAX_MEMORIES_PER_CALL as u32)
        .total_tables(slots * MAX_TABLES_PER_CALL as u32)
        .total_stacks(slots)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_CALL)
        .max_memories_per_component(MAX_MEMORIES_PER_CALL as u32)
        .max_tables_per_component(MAX_TABLES_PER_CALL as u32)
        // One page over the largest ceiling, so that the limiter (which records the breach)
        // refuses growth before the pool's hard cap does.
        .max_memory_size(usize::try_from(settings.max_memory_bytes).unwrap_or(usize::MAX) + 65_536)
        .table_elements(usize::try_from(settings.max_table_elements).unwrap_or(usize::MAX) + 1)
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES)
        .pagemap_scan(Enabled::Auto)
        .decommit_batch_size(DECOMMIT_BATCH)
        .max_unused_warm_slots(8.min(slots));

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(MAX_WASM_STACK + (1 << 20))
        .concurrency_support(false)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| SandboxError::Engine(e.into()))
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub struct EpochTicker {
    /// Dropped to stop the thread: its `recv_timeout` returns at once instead of after the tick
    /// it is sleeping through, so a host (and a one-shot `toolhost call`) stops without waiting
    /// up to [`EPOCH_TICK`].
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let engine = engine.clone();
        let thread = std::thread::Builder::new()
            .name("toolhost-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        EpochTicker {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Epoch ticks a deadline spans, rounded up, plus one so a call always gets at least the full
/// deadline.
pub fn deadline_ticks(deadline: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    let n = deadline.as_nanos().div_ceil(tick);
    u64::try_from(n).unwrap_or(u64::MAX - 1) + 1
}
