//! libFuzzer entry for target `convert`; the check is `toolhost_fuzz::convert::check` (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::convert::check(data));
