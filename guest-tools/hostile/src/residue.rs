//! `residue`: look for what earlier calls left in linear memory, then leave some behind.
//!
//! The marker is an immediate in the code, never in a data segment, so a fresh instance holds
//! no copy of it until this call writes one. The scan reads every aligned 8-byte word of
//! linear memory with volatile reads.

use std::hint::black_box;
use std::sync::atomic::AtomicU64;

use super::ResidueReport;

/// The word this fixture writes and looks for.
const MARKER: u64 = 0x7e5f_d1c3_a9b2_4f61;

/// Bytes in a WebAssembly page.
const PAGE: usize = 65_536;

/// A static buffer (in `.bss`, zero in a fresh instance).
static STATIC_WORDS: [AtomicU64; 4096] = [const { AtomicU64::new(0) }; 4096];

/// Marker words in `[from, to)` of linear memory (8-byte aligned).
fn count(from: usize, to: usize) -> u64 {
    let mut found = 0;
    let mut at = from.max(8) & !7;
    while at + 8 <= to {
        // SAFETY: every address below the memory's size is readable in WebAssembly.
        if unsafe { std::ptr::read_volatile(at as *const u64) } == MARKER {
            found += 1;
        }
        at += 8;
    }
    found
}

fn memory_bytes() -> usize {
    core::arch::wasm32::memory_size(0) * PAGE
}

/// Fill `words` with the marker; how many were written.
fn fill(words: &mut [u64]) -> u64 {
    for w in words.iter_mut() {
        // SAFETY: `w` is a valid, aligned reference.
        unsafe { std::ptr::write_volatile(w, MARKER) };
    }
    words.len() as u64
}

pub fn residue(grow_pages: u32, block_kib: u32) -> ResidueReport {
    let pages_at_start = core::arch::wasm32::memory_size(0) as u32;
    let found_at_start = count(0, memory_bytes());
    let (mut found_in_grown, mut written) = (0, 0);
    let old = core::arch::wasm32::memory_grow(0, grow_pages as usize);
    if old != usize::MAX && grow_pages > 0 {
        let (from, to) = (old * PAGE, (old + grow_pages as usize) * PAGE);
        found_in_grown = count(from, to);
        // SAFETY: the pages were just grown for this call and nothing else refers to them.
        let grown = unsafe { std::slice::from_raw_parts_mut(from as *mut u64, (to - from) / 8) };
        written += fill(grown);
    }
    for w in &STATIC_WORDS {
        // SAFETY: the pointer is the atomic's own, and this instance has one thread.
        unsafe { std::ptr::write_volatile(w.as_ptr(), MARKER) };
    }
    written += STATIC_WORDS.len() as u64;
    let mut stack = [0u64; 512];
    written += fill(&mut stack);
    black_box(&stack);
    let kib = block_kib as usize;
    for size in [kib * 1024, kib * 8 * 1024] {
        let mut block = vec![0u64; size / 8];
        written += fill(&mut block);
        // Left in memory on purpose.
        std::mem::forget(black_box(block));
    }
    let found_after = count(0, memory_bytes());
    ResidueReport {
        pages_at_start,
        found_at_start,
        found_in_grown,
        written,
        found_after,
    }
}
