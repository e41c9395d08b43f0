//! `toolhost embed-wit`: a tool's WIT source, `///` docs included, put into its component.
//!
//! The host reads tool descriptions from the [`WIT_SECTION`] custom section (`docs.rs`). Rust
//! tools embed it themselves with a `#[link_section]` static; componentize-py and
//! componentize-js drop every doc and offer no such hook, so their build ends with this step.
//! The section is written first in the component, before any nested module, so it is the one
//! [`read_docs`](super::docs::read_docs) finds; a top-level one from an earlier run is dropped.
//! Every other section is copied byte for byte.

use std::ops::Range;

use wasm_encoder::{CustomSection, RawSection};
use wasmparser::{Chunk, Encoding, Parser, Payload};

use super::docs::{parse_docs, Docs, DocsError, MAX_WIT_BYTES, WIT_SECTION};

/// Why the WIT could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("not a WebAssembly component: {0}")]
    NotComponent(String),
    #[error(transparent)]
    Docs(#[from] DocsError),
}

/// `component` with `wit` as its [`WIT_SECTION`], and the docs the host will read from it.
/// The WIT must parse beside the host's `toolhost:tool` package and fit [`MAX_WIT_BYTES`].
pub fn embed_wit(component: &[u8], wit: &str) -> Result<(Vec<u8>, Docs), EmbedError> {
    if wit.len() > MAX_WIT_BYTES {
        return Err(DocsError::TooLarge.into());
    }
    let docs = parse_docs(wit)?;
    let mut out = wasm_encoder::Component::new();
    out.section(&CustomSection {
        name: WIT_SECTION.into(),
        data: wit.as_bytes().into(),
    });
    for (id, range) in top_level_sections(component)? {
        out.section(&RawSection {
            id,
            data: &component[range],
        });
    }
    Ok((out.finish(), docs))
}

/// The id and byte range of each top-level section of a component, but its [`WIT_SECTION`]s.
fn top_level_sections(component: &[u8]) -> Result<Vec<(u8, Range<usize>)>, EmbedError> {
    let bad = |e: wasmparser::BinaryReaderError| EmbedError::NotComponent(e.to_string());
    let mut parser = Parser::new(0);
    let mut offset = 0;
    let mut sections = Vec::new();
    loop {
        let (payload, consumed) = match parser.parse(&component[offset..], true).map_err(bad)? {
            Chunk::Parsed { payload, consumed } => (payload, consumed),
            Chunk::NeedMoreData(_) => {
                return Err(EmbedError::NotComponent("it ends early".into()));
            }
        };
        offset += consumed;
        match &payload {
            Payload::Version { encoding, .. } if *encoding != Encoding::Component => {
                return Err(EmbedError::NotComponent(
                    "it is a core module; build a component (wasm32-wasip2)".into(),
                ));
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // Copied whole, not entered (the parser has stepped over it; the slice must
                // too): nested sections are the nested unit's own.
                offset = unchecked_range.end;
            }
            Payload::CustomSection(c) if c.name() == WIT_SECTION => continue,
            Payload::End(_) => break,
            _ => {}
        }
        if let Some((id, range)) = payload.as_section() {
            sections.push((id, range));
        }
    }
    if offset != component.len() {
        return Err(EmbedError::NotComponent(
            "bytes follow its end; it is not one component".into(),
        ));
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docs::read_docs;

    const WIT: &str = "package a:b@1.0.0;\ninterface tools {\n  /// Adds.\n  add: func(x: u32) -> u32;\n}\nworld w { include toolhost:tool/tool@0.1.0; export tools; }\n";

    /// A component with a nested core module that carries a `toolhost-wit` of its own, and a
    /// top-level custom section.
    fn component() -> Vec<u8> {
        let mut module = wasm_encoder::Module::new();
        module.section(&CustomSection {
            name: WIT_SECTION.into(),
            data: b"package old:old;".as_slice().into(),
        });
        let mut c = wasm_encoder::Component::new();
        c.section(&wasm_encoder::ModuleSection(&module));
        c.section(&CustomSection {
            name: "producers-like".into(),
            data: b"kept".as_slice().into(),
        });
        c.finish()
    }

    /// The embedded WIT is the one the host reads (before the nested module's), the other
    /// sections are kept byte for byte, and embedding again replaces it rather than adding one.
    #[test]
    fn embedded_wit_is_read_and_replaced() {
        let original = component();
        let (once, docs) = embed_wit(&original, WIT).unwrap();
        assert_eq!(docs.get("a:b/tools@1.0.0", "add"), Some("Adds."));
        let read = read_docs(&once).unwrap();
        assert_eq!(read.get("a:b/tools@1.0.0", "add"), Some("Adds."));
        wasmparser::Validator::new().validate_all(&once).unwrap();
        let other = WIT.replace("Adds.", "Sums.");
        let (twice, _) = embed_wit(&once, &other).unwrap();
        let read = read_docs(&twice).unwrap();
        assert_eq!(read.get("a:b/tools@1.0.0", "add"), Some("Sums."));
        assert_eq!(twice.len(), once.len(), "one section, replaced");
        let tail = |bytes: &[u8]| bytes[bytes.len() - original.len() + 8..].to_vec();
        assert_eq!(
            tail(&twice),
            original[8..].to_vec(),
            "the rest is copied as is"
        );
    }

    /// WIT that does not parse, or is too large, and bytes that are not a component, are errors.
    #[test]
    fn bad_inputs_are_errors() {
        let c = component();
        assert!(matches!(
            embed_wit(&c, "package a:b; interface {"),
            Err(EmbedError::Docs(DocsError::Invalid(_)))
        ));
        let big = format!("{WIT}//{}", "x".repeat(MAX_WIT_BYTES));
        assert!(matches!(
            embed_wit(&c, &big),
            Err(EmbedError::Docs(DocsError::TooLarge))
        ));
        let module = wasm_encoder::Module::new().finish();
        assert!(matches!(
            embed_wit(&module, WIT),
            Err(EmbedError::NotComponent(_))
        ));
        assert!(matches!(
            embed_wit(b"\0asm junk", WIT),
            Err(EmbedError::NotComponent(_))
        ));
        let mut trailing = c.clone();
        trailing.extend_from_slice(&c);
        assert!(matches!(
            embed_wit(&trailing, WIT),
            Err(EmbedError::NotComponent(_))
        ));
    }
}
