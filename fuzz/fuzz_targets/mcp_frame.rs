//! libFuzzer entry for target `mcp_frame`; the check is `toolhost_fuzz::mcp_frame::check` (see
//! its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolhost_fuzz::mcp_frame::check(data));
