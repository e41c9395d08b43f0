//! The `types` guest component (`guest-tools/types`, every WIT type a tool signature can use),
//! loaded once per process: a [`Runtime`] over it and the WIT types of its functions.
//!
//! Component types can only be obtained from a compiled component, so the fixture loads the
//! prebuilt guest (`just build-guests`). Its data directory is `.toolhost/fuzz` under the repo
//! root (gitignored; only this fixture uses it): the compile cache makes later starts fast, and
//! the ledger it opens is never written, since no check executes a call.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use toolhost::{Config, EpochMode, Runtime, ToolName};
use toolhost_registry::schema::{type_schema, DRAFT_2020_12};
use toolhost_registry::validate::Validator;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};

/// The loaded component.
pub struct Fixture {
    pub runtime: Runtime,
    /// Every exported function, in export order.
    pub functions: Vec<Function>,
    /// Every distinct type in the functions' parameters and results, nested ones included.
    pub types: Vec<TypeCase>,
}

/// One exported function: the tool the registry made of it and its parameters.
pub struct Function {
    pub tool: String,
    pub params: Vec<(String, Type)>,
}

/// One WIT type and the standard Draft 2020-12 schema the host derives from it.
pub struct TypeCase {
    /// Where the type first occurs, e.g. `echo-compound(v).shape.rect`.
    pub label: String,
    pub ty: Type,
    pub schema: Validator,
}

/// The repository root: `fuzz/` and `host/` (the two crates that compile this file) both sit
/// one level below it.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is inside the repository")
        .to_path_buf()
}

/// The built guest the fixture loads.
pub const GUEST: &str = "guest-tools/target/wasm32-wasip2/release/types.wasm";

/// The fixture, loaded on first use.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(load)
}

fn load() -> Fixture {
    let root = repo_root();
    let guest = root.join(GUEST);
    assert!(
        guest.is_file(),
        "{} is missing: run `just build-guests` first",
        guest.display()
    );
    let text = format!("data_dir = \".toolhost/fuzz\"\n[[component]]\npath = \"{GUEST}\"\n");
    let config = Config::parse(&text, &root).expect("the fixture config parses");
    let runtime = config.start(EpochMode::Manual).expect("the fixture loads");

    let engine = runtime.sandbox().engine();
    let bytes = std::fs::read(&guest).expect("the guest is readable");
    let cache = config.data_dir().join("cache");
    let (component, _) = toolhost_registry::cache::load_component(engine, &bytes, Some(&cache))
        .expect("it compiles");
    let mut funcs: Vec<(String, ComponentFunc)> = Vec::new();
    for (name, item) in component.component_type().exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(f) => funcs.push((name.to_string(), f)),
            ComponentItem::ComponentInstance(inst) => {
                for (fname, fitem) in inst.exports(engine) {
                    if let ComponentItem::ComponentFunc(f) = fitem.ty {
                        funcs.push((fname.to_string(), f));
                    }
                }
            }
            _ => {}
        }
    }

    let mut functions = Vec::new();
    let mut types = Vec::new();
    for (export, f) in &funcs {
        let tool = ToolName::from_export(export).expect("a valid tool name");
        assert!(
            runtime.registry().get(tool.as_str()).is_some(),
            "the registry has {tool}"
        );
        let params: Vec<(String, Type)> = f
            .params()
            .map(|(name, ty)| (name.to_string(), ty))
            .collect();
        for (name, ty) in &params {
            collect(&mut types, ty, format!("{export}({name})"));
        }
        for (i, ty) in f.results().enumerate() {
            collect(&mut types, &ty, format!("{export}->{i}"));
        }
        functions.push(Function {
            tool: tool.as_str().to_string(),
            params,
        });
    }
    assert!(
        functions.len() >= 4 && types.len() >= 20,
        "the types guest covers every kind"
    );
    Fixture {
        runtime,
        functions,
        types,
    }
}

/// Add `ty` and every type nested in it, each once.
fn collect(out: &mut Vec<TypeCase>, ty: &Type, label: String) {
    if out.iter().any(|c| &c.ty == ty) {
        return;
    }
    let mut schema = type_schema(ty, &label).expect("every type of the guest is supported");
    if let Value::Object(m) = &mut schema {
        m.insert("$schema".into(), Value::String(DRAFT_2020_12.into()));
    }
    let schema = Validator::compile(&schema).expect("a derived schema compiles");
    out.push(TypeCase {
        label: label.clone(),
        ty: ty.clone(),
        schema,
    });
    match ty {
        Type::List(l) => collect(out, &l.ty(), format!("{label}[]")),
        Type::Record(r) => {
            for f in r.fields() {
                collect(out, &f.ty, format!("{label}.{}", f.name));
            }
        }
        Type::Tuple(t) => {
            for (i, x) in t.types().enumerate() {
                collect(out, &x, format!("{label}[{i}]"));
            }
        }
        Type::Variant(v) => {
            for c in v.cases() {
                if let Some(x) = &c.ty {
                    collect(out, x, format!("{label}.{}", c.name));
                }
            }
        }
        Type::Option(o) => collect(out, &o.ty(), format!("{label}?")),
        Type::Result(r) => {
            if let Some(x) = r.ok() {
                collect(out, &x, format!("{label}.ok"));
            }
            if let Some(x) = r.err() {
                collect(out, &x, format!("{label}.err"));
            }
        }
        _ => {}
    }
}
