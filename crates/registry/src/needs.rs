//! What a component needs at instantiation before it runs a single instruction: the initial
//! size of its linear memories and tables. A tool whose limits are below that could never be
//! called (every call would fail at instantiation), so loading refuses it and says which limit
//! to raise.

use wasmparser::{Parser, Payload};

/// Bytes of one Wasm page (the default page size).
const PAGE_BYTES: u64 = 65_536;

/// The component's initial needs, summed over every core module it defines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Initial bytes of every memory the modules define (imported memories are counted where
    /// they are defined).
    pub memory_bytes: u64,
    /// Initial elements of the largest table.
    pub table_elements: u64,
}

/// Scan a component (or module) for its memories and tables. Sections that do not parse add
/// nothing: the compiler has already refused a malformed component.
pub fn scan(bytes: &[u8]) -> Needs {
    let mut needs = Needs::default();
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::MemorySection(memories) => {
                for memory in memories.into_iter().flatten() {
                    let page = memory
                        .page_size_log2
                        .map_or(PAGE_BYTES, |log2| 1u64 << log2.min(16));
                    needs.memory_bytes = needs
                        .memory_bytes
                        .saturating_add(memory.initial.saturating_mul(page));
                }
            }
            Payload::TableSection(tables) => {
                for table in tables.into_iter().flatten() {
                    needs.table_elements = needs.table_elements.max(table.ty.initial);
                }
            }
            _ => {}
        }
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{MemorySection, MemoryType, Module, RefType, TableSection, TableType};

    /// Memories add up, tables take the largest, in nested modules of a component too.
    #[test]
    fn memories_add_up_and_tables_take_the_largest() {
        let mut module = Module::new();
        let mut tables = TableSection::new();
        for initial in [10, 300] {
            tables.table(TableType {
                element_type: RefType::FUNCREF,
                minimum: initial,
                maximum: None,
                table64: false,
                shared: false,
            });
        }
        module.section(&tables);
        let mut memories = MemorySection::new();
        for pages in [2, 3] {
            memories.memory(MemoryType {
                minimum: pages,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
        }
        module.section(&memories);
        let mut component = wasm_encoder::Component::new();
        component.section(&wasm_encoder::ModuleSection(&module));
        let needs = scan(&component.finish());
        assert_eq!(needs.memory_bytes, 5 * PAGE_BYTES);
        assert_eq!(needs.table_elements, 300);
    }
}
