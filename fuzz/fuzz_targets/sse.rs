//! libFuzzer entry for target `sse`; the check is `toolhost_fuzz::sse::check` (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::sse::check(data));
