//! The host's own resources stay bounded: a hostile call costs the host about its ceilings, and
//! the table ceiling holds for a guest that grows a table without end.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::json;
use toolhost::{Code, Status};

use crate::support::{adversarial_config, repo, run, runtime, temp_config, toml_path};

/// Run the real binary and return its exit code, stdout, and peak resident set (bytes).
#[allow(unsafe_code)]
fn call_with_peak_rss(tool: &str) -> (i32, String, u64) {
    let cfg = adversarial_config();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "--config", cfg.to_str().unwrap(), tool, "{}"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain FFI with valid pointers; `child` is not waited on by std afterwards.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, out, usage.ru_maxrss as u64 * 1024)
}

/// Memory-hungry fixtures cost the host no more than a trivial call plus the memory ceiling
/// (32 MiB) plus twice the output ceiling, with 16 MiB of slack for the lifted result.
#[test]
fn hostile_calls_keep_host_memory_bounded() {
    let (code, _, baseline) = call_with_peak_rss("greet_baseline_unknown");
    assert_eq!(code, 1);
    let bound = baseline + (32 << 20) + 2 * 65_536 + (16 << 20);
    for tool in ["balloon", "huge_result", "flood_stdout", "log_spam"] {
        let (_, out, peak) = call_with_peak_rss(tool);
        assert!(out.contains("\"status\""), "{tool}: {out}");
        assert!(
            peak <= bound,
            "{tool}: peak RSS {} MiB over the bound {} MiB (baseline {} MiB)",
            peak >> 20,
            bound >> 20,
            baseline >> 20
        );
    }
}

/// A guest that grows its table without end is stopped at the table ceiling, as
/// memory_exceeded, and the host serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_growth_hits_the_ceiling() {
    let component = table_grower();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("tables.wasm");
    std::fs::write(&wasm, component).unwrap();
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[limits]\ntable_elements = 10_000\n[[component]]\npath = {}\n[[component]]\npath = {}\n",
        crate::support::own_data(),
        toml_path(&wasm),
        toml_path(&crate::support::guest("template")),
    ));
    let rt = runtime(&cfg);
    let r = run(&rt, "grow_table", json!({})).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(Code::MemoryExceeded), "{r:?}");
    let r = run(&rt, "greet", json!({"name": "t"})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
}

/// A component whose one export, `grow-table`, grows a funcref table by 1000 elements until
/// growth fails, then traps: `(loop (br_if 0 (i32.ne (table.grow (ref.null func) 1000) -1)))
/// unreachable`. Built with wasm-encoder (already in the host's tree through wasmtime), so the
/// benchmark build does not compile a WAT parser for one test.
fn table_grower() -> Vec<u8> {
    use wasm_encoder::{
        Alias, BlockType, CanonicalFunctionSection, CodeSection, Component, ComponentAliasSection,
        ComponentExportKind, ComponentExportSection, ComponentTypeSection, ComponentValType,
        ExportKind, ExportSection, Function, FunctionSection, HeapType, InstanceSection, ModuleArg,
        ModuleSection, PrimitiveValType, RefType, TableSection, TableType, TypeSection, ValType,
    };
    let mut module = wasm_encoder::Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I32]);
    module.section(&types);
    let mut functions = FunctionSection::new();
    functions.function(0);
    module.section(&functions);
    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: 1,
        maximum: None,
        shared: false,
    });
    module.section(&tables);
    let mut exports = ExportSection::new();
    exports.export("grow", ExportKind::Func, 0);
    module.section(&exports);
    let mut grow = Function::new([]);
    grow.instructions()
        .loop_(BlockType::Empty)
        .ref_null(HeapType::FUNC)
        .i32_const(1000)
        .table_grow(0)
        .i32_const(-1)
        .i32_ne()
        .br_if(0)
        .end()
        .unreachable()
        .end();
    let mut code = CodeSection::new();
    code.function(&grow);
    module.section(&code);

    let mut component = Component::new();
    component.section(&ModuleSection(&module));
    let mut instances = InstanceSection::new();
    instances.instantiate(0, Vec::<(&str, ModuleArg)>::new());
    component.section(&instances);
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::CoreInstanceExport {
        instance: 0,
        kind: ExportKind::Func,
        name: "grow",
    });
    component.section(&aliases);
    let mut func_types = ComponentTypeSection::new();
    func_types
        .function()
        .params(Vec::<(&str, ComponentValType)>::new())
        .result(Some(ComponentValType::Primitive(PrimitiveValType::U32)));
    component.section(&func_types);
    let mut lifts = CanonicalFunctionSection::new();
    lifts.lift(0, 0, []);
    component.section(&lifts);
    let mut component_exports = ComponentExportSection::new();
    component_exports.export("grow-table", ComponentExportKind::Func, 0, None);
    component.section(&component_exports);
    component.finish()
}
