//! libFuzzer entry for target `arguments`; the check is `toolhost_fuzz::arguments::check` (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::arguments::check(data));
