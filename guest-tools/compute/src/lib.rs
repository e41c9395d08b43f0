//! Deterministic computations: SHA-256 and JSON Pointer lookup.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:compute/compute",
    generate_all,
});

use exports::example::compute::tools::Guest;
use sha2::{Digest, Sha256};
use std::fmt::Write;

struct Compute;

impl Guest for Compute {
    fn sha256(text: String) -> String {
        let digest = Sha256::digest(text.as_bytes());
        let mut hex = String::with_capacity(64);
        for byte in digest {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
        }
        hex
    }

    fn json_pointer(document: String, pointer: String) -> Result<String, String> {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!(
                "invalid pointer: {pointer:?} must be empty or start with '/'"
            ));
        }
        let value: serde_json::Value =
            serde_json::from_str(&document).map_err(|e| format!("invalid JSON: {e}"))?;
        let found = value
            .pointer(&pointer)
            .ok_or_else(|| format!("not found: {pointer}"))?;
        serde_json::to_string(found).map_err(|e| format!("cannot serialize value: {e}"))
    }
}

export!(Compute);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");
