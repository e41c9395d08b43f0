//! Per-call limits and the resource limiter that enforces (and records) the memory and table
//! ceilings.

use std::time::Duration;

use serde::Deserialize;

use toolhost_contract::ConfigProblem;

/// Default fuel per call: about two billion Wasm instructions, a couple of seconds of compute.
pub const DEFAULT_FUEL: u64 = 2_000_000_000;
/// Default wall-clock deadline per call.
pub const DEFAULT_DEADLINE_MS: u64 = 10_000;
/// Default linear-memory ceiling per call: 64 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
/// Default table-element ceiling per call (function-pointer tables of a Rust guest are small).
pub const DEFAULT_TABLE_ELEMENTS: u64 = 20_000;
/// Default output ceiling per call (stdout + stderr, and separately the returned value): 1 MiB.
pub const DEFAULT_OUTPUT_BYTES: u64 = 1 << 20;

/// Default free space a call's writable grants must leave on their file systems: 256 MiB, for
/// the ledger, the logs and every other caller sharing the disk.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 256 << 20;

/// Default bytes a call may write into its writable grants: 64 MiB, far more than a tool's
/// answer to one step needs, a quarter of the disk reserve.
pub const DEFAULT_WRITE_BYTES: u64 = 64 << 20;

/// Hard caps no configuration may exceed: they bound what one call can take from the host.
pub const MAX_FUEL: u64 = 1_000_000_000_000;
/// One hour: longer calls belong in a job system, not an agent step.
pub const MAX_DEADLINE_MS: u64 = 3_600_000;
/// 4 GiB: the whole 32-bit address space of a guest.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;
/// Bounds the host memory a table can pin.
pub const MAX_TABLE_ELEMENTS: u64 = 1_000_000;
/// 64 MiB of captured output per call is already far more than a model can read.
pub const MAX_OUTPUT_BYTES: u64 = 64 << 20;
/// 1 TiB: past it a call is a bulk job, not a tool call.
pub const MAX_WRITE_BYTES: u64 = 1 << 40;

/// The limits one call runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel budget (Wasm instructions, roughly).
    pub fuel: u64,
    /// Wall-clock deadline for the execution stage.
    pub deadline: Duration,
    /// Linear-memory ceiling, bytes, over all memories of the instance.
    pub memory_bytes: u64,
    /// Table-element ceiling per table.
    pub table_elements: u64,
    /// Output ceiling: stdout + stderr together, and the returned value (as JSON) separately.
    pub output_bytes: u64,
    /// Free space, bytes, a call with writable grants must leave on each of their file
    /// systems: it does not start below it, and is stopped when it writes past it.
    pub disk_reserve_bytes: u64,
    /// Bytes a call may write into its writable grants (each created entry counts as
    /// [`super::ENTRY_BYTES`]); past it the call is stopped, `host_resources_exceeded`.
    pub write_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: DEFAULT_FUEL,
            deadline: Duration::from_millis(DEFAULT_DEADLINE_MS),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            table_elements: DEFAULT_TABLE_ELEMENTS,
            output_bytes: DEFAULT_OUTPUT_BYTES,
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            write_bytes: DEFAULT_WRITE_BYTES,
        }
    }
}

impl Limits {
    /// These limits with the fields an override sets replaced.
    pub fn with(self, o: &LimitsOverride) -> Limits {
        let LimitsOverride {
            fuel,
            deadline_ms,
            memory_bytes,
            table_elements,
            output_bytes,
            disk_reserve_bytes,
            write_bytes,
        } = *o;
        Limits {
            fuel: fuel.unwrap_or(self.fuel),
            deadline: deadline_ms.map_or(self.deadline, Duration::from_millis),
            memory_bytes: memory_bytes.unwrap_or(self.memory_bytes),
            table_elements: table_elements.unwrap_or(self.table_elements),
            output_bytes: output_bytes.unwrap_or(self.output_bytes),
            disk_reserve_bytes: disk_reserve_bytes.unwrap_or(self.disk_reserve_bytes),
            write_bytes: write_bytes.unwrap_or(self.write_bytes),
        }
    }
}

/// Limits as written in the config: each field optional, layered over the defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsOverride {
    pub fuel: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub table_elements: Option<u64>,
    pub output_bytes: Option<u64>,
    pub disk_reserve_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
}

impl LimitsOverride {
    /// Every limit out of range, keyed under `at` (e.g. `component[0].limits`).
    pub fn validate(&self, at: &str, problems: &mut Vec<ConfigProblem>) {
        let mut check = |name: &str, v: Option<u64>, min: u64, max: u64| {
            if let Some(v) = v.filter(|v| *v < min || *v > max) {
                problems.push(ConfigProblem::new(
                    format!("{at}.{name}"),
                    format!("{v} is out of range; use a value from {min} to {max}"),
                ));
            }
        };
        check("fuel", self.fuel, 1, MAX_FUEL);
        check("deadline_ms", self.deadline_ms, 1, MAX_DEADLINE_MS);
        check("memory_bytes", self.memory_bytes, 65_536, MAX_MEMORY_BYTES);
        check("table_elements", self.table_elements, 1, MAX_TABLE_ELEMENTS);
        check("output_bytes", self.output_bytes, 1, MAX_OUTPUT_BYTES);
        check("disk_reserve_bytes", self.disk_reserve_bytes, 0, u64::MAX);
        check("write_bytes", self.write_bytes, 0, MAX_WRITE_BYTES);
    }
}

/// Enforces the memory and table ceilings of one call and records what happened, so that a
/// failed allocation is classified as `memory_exceeded` from this record rather than from the
/// guest's trap (a Rust guest aborts with `unreachable` when its allocator fails).
#[derive(Debug)]
pub struct CallLimiter {
    memory_bytes: usize,
    table_elements: usize,
    memory_total: usize,
    /// Largest total linear memory seen.
    pub memory_peak: usize,
    /// A memory growth was refused.
    pub memory_denied: bool,
    /// A table growth was refused.
    pub table_denied: bool,
}

impl CallLimiter {
    pub fn new(limits: &Limits) -> Self {
        CallLimiter {
            memory_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
            table_elements: usize::try_from(limits.table_elements).unwrap_or(usize::MAX),
            memory_total: 0,
            memory_peak: 0,
            memory_denied: false,
            table_denied: false,
        }
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current);
        let total = self.memory_total.saturating_add(grow);
        if total > self.memory_bytes || maximum.is_some_and(|m| desired > m) {
            self.memory_denied = true;
            return Ok(false);
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements || maximum.is_some_and(|m| desired > m) {
            self.table_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_denied = true;
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES_PER_CALL
    }
    fn tables(&self) -> usize {
        MAX_TABLES_PER_CALL
    }
    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_CALL
    }
}

/// Least bytes one guest→host transfer may make the host allocate (see [`hostcall_bytes`]):
/// room for ordinary WASI traffic (a file write passes its whole buffer in one call).
pub const MIN_HOSTCALL_BYTES: u64 = 16 << 20;
/// Most bytes one guest→host transfer may make the host allocate, whatever the limits say: with
/// one transfer alive at a time per call, a call holds at most its linear memory plus this.
pub const MAX_HOSTCALL_BYTES: u64 = 48 << 20;

/// The host memory one guest→host transfer may take: the arguments of one host-import call
/// (`log`, `progress`, a WASI write, ...) or the returned value of the tool, as wasmtime lifts
/// them (its "hostcall fuel": string bytes, and one `Val` per list element, field and payload).
/// A returned value whose JSON fits the output ceiling needs at most one `Val` per JSON byte, so
/// that much is allowed, between [`MIN_HOSTCALL_BYTES`] and [`MAX_HOSTCALL_BYTES`]. A transfer
/// past it stops the call as `output_too_large` before the host allocates it.
pub fn hostcall_bytes(limits: &Limits) -> usize {
    let per_json_byte = std::mem::size_of::<wasmtime::component::Val>() as u64;
    let bytes = limits
        .output_bytes
        .saturating_mul(per_json_byte)
        .clamp(MIN_HOSTCALL_BYTES, MAX_HOSTCALL_BYTES);
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Whether wasmtime refused a guest→host transfer for exceeding [`hostcall_bytes`]. wasmtime
/// exposes no type for it, only this message; the `huge_list` and `flood_host` fixtures fail
/// if it changes.
pub fn is_hostcall_data_exhausted(e: &wasmtime::Error) -> bool {
    e.chain().any(|c| {
        c.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// Core instances one call may create (a Rust component has a handful).
pub const MAX_INSTANCES_PER_CALL: usize = 32;
/// Tables one call may create.
pub const MAX_TABLES_PER_CALL: usize = 16;
/// Linear memories one call may create.
pub const MAX_MEMORIES_PER_CALL: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    /// Growth past the ceiling is refused and recorded; growth under it is allowed and tracked.
    #[test]
    fn memory_ceiling_is_enforced_and_recorded() {
        let limits = Limits {
            memory_bytes: 1 << 20,
            ..Limits::default()
        };
        let mut l = CallLimiter::new(&limits);
        assert!(l.memory_growing(0, 512 << 10, None).unwrap());
        assert!(!l.memory_denied);
        assert!(!l.memory_growing(512 << 10, 2 << 20, None).unwrap());
        assert!(l.memory_denied);
        assert_eq!(l.memory_peak, 512 << 10);
    }

    /// Config overrides replace only the fields they set, and out-of-range values are refused.
    #[test]
    fn overrides_layer_and_validate() {
        let o = LimitsOverride {
            fuel: Some(5),
            ..Default::default()
        };
        let l = Limits::default().with(&o);
        assert_eq!(l.fuel, 5);
        assert_eq!(l.memory_bytes, DEFAULT_MEMORY_BYTES);
        let bad = LimitsOverride {
            memory_bytes: Some(MAX_MEMORY_BYTES + 1),
            ..Default::default()
        };
        let mut problems = Vec::new();
        bad.validate("limits", &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "limits.memory_bytes");
    }
}
