//! libFuzzer entry for target `approval`; the check is `toolhost_fuzz::approval::check` (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::approval::check(data));
