//! Loading one component: read it, compile it (or take it from the compile cache, writing
//! nothing yet), refuse any import the operator did not grant, and derive each exported
//! function's tool — name, schemas (refined), risk, limits, grant — ready for fast calls.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use wasmtime::component::types::{ComponentFunc, ComponentItem};
use wasmtime::component::{Component, ComponentExportIndex};

use super::config::{ComponentConfig, ToolConfig, ToolName};
use super::lock::{ComponentPin, ToolPin};
use super::trust::Evidence;
use super::{
    cache, docs, grants, imports, schema, validate, LoadSpec, Origin, Registry, RegistryError,
    Sha256Digest, Tool, ToolDefinition,
};
use toolhost_contract::{Risk, RiskSource};
use toolhost_sandbox::{Limits, Sandbox};

impl Registry {
    pub(super) fn load_component(
        &mut self,
        spec: &LoadSpec<'_>,
        c: &ComponentConfig,
        grants: grants::ComponentGrants,
        sandbox: &Sandbox,
    ) -> Result<(), RegistryError> {
        let (defaults, cache_dir) = (spec.defaults, spec.cache_dir);
        let path = c.label(spec.base_dir);
        // An `oci =` component was pulled already, its bytes checked against its digest.
        let pulled =
            match &c.oci {
                Some(_) => Some(spec.pulled.get(&c.source()).ok_or_else(|| {
                    RegistryError::ComponentRead {
                        path: path.clone(),
                        source: std::io::Error::other("it was not pulled"),
                    }
                })?),
                None => None,
            };
        let (bytes, component_digest) = match pulled {
            Some(p) => (Cow::Borrowed(&p.bytes[..]), p.component.clone()),
            None => {
                let bytes =
                    std::fs::read(&path).map_err(|source| RegistryError::ComponentRead {
                        path: path.clone(),
                        source,
                    })?;
                let digest = Sha256Digest::of(&bytes);
                (Cow::Owned(bytes), digest)
            }
        };
        // Before anything reads the bytes further: who vouches for them.
        let evidence = match pulled {
            Some(p) => Evidence::Registry {
                manifest: &p.manifest,
                signatures: p.signatures.as_deref().unwrap_or_default(),
            },
            None => Evidence::File {
                path: &path,
                digest: &component_digest,
            },
        };
        let signer = spec
            .trust
            .check(c, evidence)
            .map_err(|refusal| RegistryError::Untrusted {
                path: path.clone(),
                refusal,
            })?;
        check_needs(&path, &bytes, c, defaults.with(&c.limits))?;
        let engine = sandbox.engine();
        let (component, unsaved) =
            cache::load_unsaved(engine, &bytes, &component_digest, cache_dir).map_err(|e| {
                RegistryError::Compile {
                    path: path.clone(),
                    source: e.into(),
                }
            })?;
        let origin = match unsaved {
            Some(u) => {
                self.unsaved.push(u);
                Origin::Compiled
            }
            None => Origin::Cached,
        };
        self.origins.push((path.clone(), origin));

        // Grants per tool: the tool's own, else the component's.
        let grants::ComponentGrants {
            component: component_grant,
            tools: tool_grants,
        } = grants;
        let network = c.network.is_some() || c.tools.values().any(|t| t.network.is_some());

        if check_imports(&component, engine, &path, network)? && !reaches_any_host(c) {
            self.warnings.push(format!(
                "{}: imports wasi:http but may reach no host, so every request it sends is \
                 refused; grant `network = {{ allow = [\"host:port\"] }}`, or build it without \
                 the import (componentize-js: `-d http fetch-event`)",
                path.display()
            ));
        }
        let docs = match docs::read_docs(&bytes) {
            Ok(d) => d,
            Err(e) => {
                self.warnings.push(format!("{}: {e}", path.display()));
                docs::Docs::default()
            }
        };
        let (funcs, undeclared): (Vec<_>, Vec<_>) = exported_funcs(&component, engine)
            .into_iter()
            .partition(|f| docs.declares(f.interface.as_deref(), &f.name));
        let undeclared: Vec<String> = undeclared.iter().map(ExportedFunc::full_name).collect();
        if funcs.is_empty() && !undeclared.is_empty() {
            return Err(RegistryError::Undeclared {
                path,
                exports: undeclared.join(", "),
            });
        }
        for name in undeclared {
            self.warnings.push(format!(
                "{}: exports `{name}`, which its embedded WIT does not declare (a toolchain's \
                 own export): not a tool",
                path.display(),
            ));
        }
        if funcs.is_empty() {
            return Err(RegistryError::NoTools { path });
        }
        for export in c.tools.keys() {
            if !funcs.iter().any(|f| &f.name == export) {
                return Err(RegistryError::UnknownExport {
                    path,
                    export: export.clone(),
                    available: funcs
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        let pre = Arc::new(sandbox.prepare(&component, network)?);
        let component_limits = defaults.with(&c.limits);
        let no_tool_config = ToolConfig::default();
        let mut pin = ComponentPin {
            source: c.source(),
            manifest: pulled.map(|p| p.manifest.clone()),
            sha256: component_digest.clone(),
            tools: Default::default(),
        };

        for f in funcs {
            let tc = c.tools.get(&f.name).unwrap_or(&no_tool_config);
            let name = match &tc.name {
                Some(n) => n.clone(),
                None => ToolName::from_export(&f.name).map_err(|message| {
                    RegistryError::BadToolName {
                        path: path.clone(),
                        export: f.name.clone(),
                        message,
                    }
                })?,
            };
            let unsupported = |source| RegistryError::Unsupported {
                path: path.clone(),
                export: f.name.clone(),
                source,
            };
            let input_schema = schema::input_schema(&f.ty).map_err(unsupported)?;
            let output_schema = schema::output_schema(&f.ty).map_err(unsupported)?;
            let refined = |which: &'static str, derived: Value, r: &Option<Value>| {
                let schema = match r {
                    Some(r) => validate::refine(&derived, r),
                    None => Ok(derived),
                };
                // Arguments get exact integers; see `Validator::compile_arguments`.
                let compile = match which {
                    "input" => validate::Validator::compile_arguments,
                    _ => validate::Validator::compile,
                };
                schema
                    .and_then(|s| compile(&s).map(|v| (s, v)))
                    .map_err(|e| RegistryError::Refinement {
                        path: path.clone(),
                        export: f.name.clone(),
                        which,
                        message: e.to_string(),
                    })
            };
            let (input_schema, input_validator) = refined("input", input_schema, &tc.refine.input)?;
            let (output_schema, output_validator) =
                refined("output", output_schema, &tc.refine.output)?;
            let description = f
                .interface
                .as_deref()
                .and_then(|i| docs.get(i, &f.name))
                .map(str::to_string)
                .unwrap_or_else(|| format!("The `{}` tool.", f.name));
            let func = component
                .get_export_index(f.interface_index.as_ref(), &f.name)
                .expect("the export was just listed");
            let grant = tool_grants.get(&f.name).unwrap_or(&component_grant).clone();
            let (risk, risk_from) = match (tc.risk, c.risk) {
                (Some(r), _) => (r, RiskSource::Tool),
                (None, Some(r)) => (r, RiskSource::Component),
                (None, None) => {
                    let writable = grant.dirs.iter().any(|d| d.writable);
                    (
                        Risk::of_grants(writable, grant.has_network()),
                        RiskSource::Grants,
                    )
                }
            };
            let tool_pin = ToolPin::of(&ToolDefinition {
                name: name.to_string(),
                description: description.clone(),
                input_schema: input_schema.clone(),
                output_schema: output_schema.clone(),
                risk,
            });
            let tool = Tool {
                name: name.clone(),
                export: f.name.clone(),
                description,
                input_schema,
                output_schema,
                input_validator,
                output_validator,
                component_digest: component_digest.clone(),
                definition_digest: tool_pin.definition.clone(),
                risk,
                risk_from,
                approval: tc.approval,
                approvers: tc.approvers,
                task: tc.task,
                limits: component_limits.with(&tc.limits),
                grant,
                params: f.ty.params().map(|(n, t)| (n.to_string(), t)).collect(),
                result: f.ty.results().next(),
                func,
                pre: pre.clone(),
            };
            pin.tools.insert(name.to_string(), tool_pin);
            let here = format!("`{}` of {}", f.name, path.display());
            if let Some(prev) = self.tools.get(name.as_str()) {
                return Err(RegistryError::DuplicateName {
                    name: name.to_string(),
                    first: format!("`{}`", prev.export),
                    second: here,
                });
            }
            self.tools
                .insert(name.to_string(), std::sync::Arc::new(tool));
        }
        self.pins.push(pin);
        self.signers.push(signer);
        Ok(())
    }
}

struct ExportedFunc {
    interface: Option<String>,
    interface_index: Option<ComponentExportIndex>,
    name: String,
    ty: ComponentFunc,
}

impl ExportedFunc {
    /// `interface#function`, or the function's name when it is exported at the top level.
    fn full_name(&self) -> String {
        match &self.interface {
            Some(i) => format!("{i}#{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Every function the component exports, at the top level or in an exported interface.
fn exported_funcs(component: &Component, engine: &wasmtime::Engine) -> Vec<ExportedFunc> {
    let mut out = Vec::new();
    for (name, ext) in component.component_type().exports(engine) {
        match ext.ty {
            ComponentItem::ComponentFunc(ty) => out.push(ExportedFunc {
                interface: None,
                interface_index: None,
                name: name.to_string(),
                ty,
            }),
            ComponentItem::ComponentInstance(inst) => {
                let idx = component.get_export_index(None, name);
                for (fname, fext) in inst.exports(engine) {
                    if let ComponentItem::ComponentFunc(ty) = fext.ty {
                        out.push(ExportedFunc {
                            interface: Some(name.to_string()),
                            interface_index: idx,
                            name: fname.to_string(),
                            ty,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Refuse a component when the limits of its tools (the component's, or a tool's own) are
/// below what it needs to start at all: every call would fail at instantiation.
fn check_needs(
    path: &Path,
    bytes: &[u8],
    c: &ComponentConfig,
    base: Limits,
) -> Result<(), RegistryError> {
    let needs = super::needs::scan(bytes);
    let own = c
        .tools
        .iter()
        .map(|(export, t)| (format!("its tool `{export}`"), base.with(&t.limits)));
    for (whom, limits) in std::iter::once(("its tools".to_string(), base)).chain(own) {
        let checks = [
            (
                "bytes of linear memory",
                "memory_bytes",
                needs.memory_bytes,
                limits.memory_bytes,
            ),
            (
                "table elements",
                "table_elements",
                needs.table_elements,
                limits.table_elements,
            ),
        ];
        for (what, key, need, limit) in checks {
            if need > limit {
                return Err(RegistryError::LimitTooLow {
                    path: path.to_path_buf(),
                    whom,
                    what,
                    key,
                    need,
                    limit,
                });
            }
        }
    }
    Ok(())
}

/// Whether any network grant of the component or its tools names a host.
fn reaches_any_host(c: &ComponentConfig) -> bool {
    let grants = c
        .network
        .iter()
        .chain(c.tools.values().filter_map(|t| t.network.as_ref()));
    grants.into_iter().any(|g| !g.allow.is_empty())
}

/// Refuse an import the host does not link for this component; say whether it imports
/// `wasi:http`.
fn check_imports(
    component: &Component,
    engine: &wasmtime::Engine,
    path: &Path,
    network: bool,
) -> Result<bool, RegistryError> {
    let mut http = false;
    for (name, _) in component.component_type().imports(engine) {
        http |= imports::is_http(name);
        if !imports::is_allowed(name, network) {
            let hint = if imports::is_http(name) {
                "wasi:http is linked only for tools with a network grant; add `network = { allow = [\"host:port\"] }` to this component, or build it without the import (componentize-js: `-d http fetch-event`)"
            } else {
                "toolhost links only WASI 0.2 and toolhost:tool/host; remove the import from the component's world"
            };
            return Err(RegistryError::ImportNotGranted {
                path: path.to_path_buf(),
                import: name.to_string(),
                hint,
            });
        }
    }
    Ok(http)
}
