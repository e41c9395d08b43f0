//! The call pipeline: resolve → convert (strict WIT typing) → execute → check output → result.
//!
//! Every stage can end the call, and every ending is a [`ToolResult`]; nothing here panics on
//! input from a model or a guest. (Schema validation, policy, approval and the ledger join the
//! pipeline in later stages.)

mod diagnostics;

use serde_json::Value;
use wasmtime::component::types::Type;
use wasmtime::component::Val;

use crate::contract::{Code, ToolCall, ToolResult, Usage};
use crate::registry::config::Config;
use crate::registry::convert::{json_size_lower_bound, to_json, to_val};
use crate::registry::{engine_settings, Registry, RegistryError, Tool};
use crate::sandbox::{EpochMode, Execution, Fault, Sandbox};

pub use diagnostics::Diagnostics;

/// Largest serialized argument object accepted, checked before anything else looks at it.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Bytes of a guest's own error value shown to the model.
pub const MAX_TOOL_ERROR_MESSAGE: usize = 2048;

/// Runs calls against a registry in a sandbox.
pub struct Runtime {
    pub sandbox: Sandbox,
    pub registry: Registry,
    pub diagnostics: Diagnostics,
}

impl Runtime {
    /// Load a config file: engine sized for its limits, every component loaded, diagnostics
    /// under its data directory.
    pub fn from_config(
        path: &std::path::Path,
        epochs: EpochMode,
    ) -> Result<Runtime, RegistryError> {
        let config = Config::load(path)?;
        let sandbox = Sandbox::new(engine_settings(&config), epochs)?;
        let registry = Registry::load(&config, &sandbox)?;
        let diagnostics = Diagnostics::new(Some(config.data_dir().join("diagnostics.log")));
        Ok(Runtime::new(sandbox, registry, diagnostics))
    }

    pub fn new(sandbox: Sandbox, registry: Registry, diagnostics: Diagnostics) -> Self {
        Runtime {
            sandbox,
            registry,
            diagnostics,
        }
    }

    /// Run one call through the pipeline.
    pub async fn call(&self, call: &ToolCall) -> ToolResult {
        let Some(tool) = self.registry.get(&call.name) else {
            return ToolResult::failed(
                call,
                Code::UnknownTool,
                format!("there is no tool named {:?}", clip(&call.name, 64)),
                Usage::default(),
            );
        };
        let params = match arguments(tool, &call.arguments) {
            Ok(p) => p,
            Err(message) => {
                return ToolResult::failed(call, Code::InvalidArguments, message, Usage::default())
            }
        };
        let exec = self.execute(tool, &params).await;
        self.finish(call, tool, exec)
    }

    /// The execution stage alone: run `tool` with already converted parameters.
    pub async fn execute(&self, tool: &Tool, params: &[Val]) -> Execution {
        self.sandbox
            .execute(
                &tool.pre,
                &tool.func,
                params,
                usize::from(tool.result.is_some()),
                &tool.limits,
                &tool.grant,
            )
            .await
    }

    fn finish(&self, call: &ToolCall, tool: &Tool, exec: Execution) -> ToolResult {
        let mut usage = Usage {
            fuel_consumed: exec.fuel_consumed,
            wall_ms: exec.wall.as_millis() as u64,
            memory_peak_bytes: exec.memory_peak_bytes,
            output_bytes: exec.stdio_bytes,
        };
        let results = match exec.outcome {
            Ok(r) => r,
            Err(fault) => {
                let (code, message, detail) = match fault {
                    Fault::FuelExhausted => (
                        Code::FuelExhausted,
                        "the tool used up its compute budget",
                        None,
                    ),
                    Fault::DeadlineExceeded => (
                        Code::DeadlineExceeded,
                        "the tool did not finish within its time limit",
                        None,
                    ),
                    Fault::MemoryExceeded => (
                        Code::MemoryExceeded,
                        "the tool exceeded its memory limit",
                        None,
                    ),
                    Fault::OutputTooLarge => (
                        Code::OutputTooLarge,
                        "the tool produced more output than it is allowed",
                        None,
                    ),
                    Fault::Trap { detail } => (Code::GuestTrap, "the tool crashed", Some(detail)),
                    Fault::Setup { detail } => (
                        Code::HostError,
                        "the host could not run the tool",
                        Some(detail),
                    ),
                };
                let mut r = ToolResult::failed(call, code, message, usage);
                if detail.is_some() || !exec.stderr.is_empty() {
                    let detail = detail.unwrap_or_else(|| code.to_string());
                    r.diagnostic_id = Some(self.diagnostics.record(
                        tool.name.as_str(),
                        &call.call_id,
                        &detail,
                        &exec.stderr,
                    ));
                }
                return r;
            }
        };
        if results.iter().map(json_size_lower_bound).sum::<u64>() > tool.limits.output_bytes {
            return ToolResult::failed(
                call,
                Code::OutputTooLarge,
                "the tool returned more output than it is allowed",
                usage,
            );
        }
        let value = match (results.into_iter().next(), &tool.result) {
            (None, _) => Ok(Value::Null),
            (Some(Val::Result(r)), Some(Type::Result(_))) => match r {
                Ok(ok) => ok.map_or(Ok(Value::Null), |v| to_json(&v, "output")),
                Err(err) => {
                    let rendered = match err.map(|v| to_json(&v, "error")) {
                        Some(Ok(Value::String(s))) => s,
                        Some(Ok(v)) => v.to_string(),
                        Some(Err(_)) | None => "no detail".to_string(),
                    };
                    return ToolResult::failed(
                        call,
                        Code::ToolError,
                        format!(
                            "the tool reported an error: {}",
                            clip(&rendered, MAX_TOOL_ERROR_MESSAGE)
                        ),
                        usage,
                    );
                }
            },
            (Some(v), _) => to_json(&v, "output"),
        };
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                let mut r = ToolResult::failed(
                    call,
                    Code::InvalidOutput,
                    "the tool returned a value that has no JSON form",
                    usage,
                );
                r.diagnostic_id = Some(self.diagnostics.record(
                    tool.name.as_str(),
                    &call.call_id,
                    &e.to_string(),
                    &exec.stderr,
                ));
                return r;
            }
        };
        let size = serde_json::to_vec(&value)
            .map(|v| v.len() as u64)
            .unwrap_or(u64::MAX);
        usage.output_bytes = usage.output_bytes.saturating_add(size);
        if size > tool.limits.output_bytes {
            return ToolResult::failed(
                call,
                Code::OutputTooLarge,
                "the tool returned more output than it is allowed",
                usage,
            );
        }
        ToolResult::completed(call, value, usage)
    }
}

/// The validated parameters of a call, in WIT order, or a model-safe reason why not.
fn arguments(tool: &Tool, args: &Value) -> Result<Vec<Val>, String> {
    let size = serde_json::to_vec(args)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > MAX_INPUT_BYTES {
        return Err(format!(
            "the arguments are larger than {MAX_INPUT_BYTES} bytes"
        ));
    }
    let obj = args
        .as_object()
        .ok_or_else(|| "the arguments must be a JSON object".to_string())?;
    if let Some(extra) = obj
        .keys()
        .find(|k| !tool.params.iter().any(|(n, _)| n == *k))
    {
        return Err(format!("unexpected argument {:?}", clip(extra, 64)));
    }
    tool.params
        .iter()
        .map(|(name, ty)| {
            let v = obj
                .get(name)
                .ok_or_else(|| format!("missing argument {name:?}"))?;
            to_val(ty, v, &format!("arguments.{name}"))
                .map_err(|e| clip(&e.to_string(), 512).to_string())
        })
        .collect()
}

fn clip(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
