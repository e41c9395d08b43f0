//! Tool descriptions from the WIT a component embeds.
//!
//! The component model binary keeps types but drops `///` docs, so a tool component embeds its
//! own WIT source in a custom section named [`WIT_SECTION`] (the template guest shows how: one
//! `#[link_section]` static). The host parses it against its own `toolhost:tool` package and
//! reads each exported function's docs.

use std::collections::HashMap;

use wasmparser::{Parser, Payload};

/// The custom section a tool component embeds its WIT source in.
pub const WIT_SECTION: &str = "toolhost-wit";

/// Largest embedded WIT accepted; a component is untrusted input.
pub const MAX_WIT_BYTES: usize = 256 * 1024;

/// The host's own WIT package, which tool worlds include.
pub const TOOL_WIT: &str = include_str!("../../../wit/tool.wit");

/// Docs per exported interface (`pkg:name/iface@ver`) and function name.
#[derive(Debug, Default)]
pub struct Docs {
    funcs: HashMap<(String, String), String>,
}

impl Docs {
    /// The doc comment of `func` in the exported interface `interface`, if any.
    pub fn get(&self, interface: &str, func: &str) -> Option<&str> {
        self.funcs
            .get(&(interface.to_string(), func.to_string()))
            .map(String::as_str)
    }
}

/// Why the embedded WIT could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DocsError {
    #[error("the component does not embed its WIT (custom section `{WIT_SECTION}`), so its tools have no descriptions")]
    Missing,
    #[error("the embedded WIT is larger than {MAX_WIT_BYTES} bytes")]
    TooLarge,
    #[error("the embedded WIT does not parse: {0}")]
    Invalid(String),
}

/// Find the embedded WIT in a component (in any nested core module) and read its docs.
pub fn read_docs(component: &[u8]) -> Result<Docs, DocsError> {
    let mut text = None;
    for payload in Parser::new(0).parse_all(component) {
        let Ok(payload) = payload else { break };
        if let Payload::CustomSection(s) = payload {
            if s.name() == WIT_SECTION {
                if s.data().len() > MAX_WIT_BYTES {
                    return Err(DocsError::TooLarge);
                }
                text = Some(
                    std::str::from_utf8(s.data())
                        .map_err(|_| DocsError::Invalid("not UTF-8".into()))?
                        .to_string(),
                );
                break;
            }
        }
    }
    let text = text.ok_or(DocsError::Missing)?;
    parse_docs(&text)
}

/// Parse WIT source (which may include `toolhost:tool`) and collect function docs.
pub fn parse_docs(text: &str) -> Result<Docs, DocsError> {
    let mut resolve = wit_parser::Resolve::default();
    resolve
        .push_str("toolhost-tool.wit", TOOL_WIT)
        .map_err(|e| DocsError::Invalid(format!("{e:#}")))?;
    resolve
        .push_str("component.wit", text)
        .map_err(|e| DocsError::Invalid(format!("{e:#}")))?;
    let mut docs = Docs::default();
    for (id, iface) in resolve.interfaces.iter() {
        let Some(name) = resolve.id_of(id) else {
            continue;
        };
        for (fname, f) in &iface.functions {
            if let Some(d) = &f.docs.contents {
                docs.funcs
                    .insert((name.clone(), fname.clone()), d.trim().to_string());
            }
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Function docs are found under the versioned interface name the component exports.
    #[test]
    fn reads_function_docs() {
        let docs = parse_docs(
            "package a:b@1.0.0;\ninterface tools {\n  /// Adds.\n  /// Twice.\n  add: func(x: u32) -> u32;\n  none: func();\n}\nworld w { include toolhost:tool/tool@0.1.0; export tools; }\n",
        )
        .unwrap();
        assert_eq!(docs.get("a:b/tools@1.0.0", "add"), Some("Adds.\nTwice."));
        assert_eq!(docs.get("a:b/tools@1.0.0", "none"), None);
    }

    /// Malformed WIT is an error, not a panic.
    #[test]
    fn bad_wit_is_an_error() {
        assert!(matches!(parse_docs("package"), Err(DocsError::Invalid(_))));
    }
}
