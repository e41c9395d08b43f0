//! libFuzzer entry for target `config`; the check is `toolhost_fuzz::config::check` (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::config::check(data));
