//! What a component may import. Standard WASI 0.2 interfaces are always linked and are inert
//! without a grant; `wasi:http` only for a tool with a network grant; `toolhost:tool/host`
//! always. Anything else is refused at load, by name.

/// Interface packages always linked (inert unless granted).
const ALWAYS: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
    "toolhost:tool/host@0.1.",
];

/// Interfaces linked only for a network grant.
const WITH_NETWORK: &[&str] = &["wasi:http/outgoing-handler@0.2.", "wasi:http/types@0.2."];

/// Whether an import is one the host links for a component with (or without) a network grant.
pub fn is_allowed(import: &str, network: bool) -> bool {
    let wasi02 = |prefix: &&str| {
        import.starts_with(prefix) && (prefix.starts_with("toolhost:") || import.contains("@0.2."))
    };
    ALWAYS.iter().any(wasi02) || (network && WITH_NETWORK.iter().any(|p| import.starts_with(p)))
}

/// Whether an import is `wasi:http`, to say "grant network" rather than "unknown".
pub fn is_http(import: &str) -> bool {
    WITH_NETWORK.iter().any(|p| import.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WASI 0.2 and the host interface pass; HTTP only with network; everything else never.
    #[test]
    fn import_allowlist() {
        assert!(is_allowed("wasi:cli/stdout@0.2.6", false));
        assert!(is_allowed("toolhost:tool/host@0.1.0", false));
        assert!(!is_allowed("wasi:http/outgoing-handler@0.2.6", false));
        assert!(is_allowed("wasi:http/outgoing-handler@0.2.6", true));
        assert!(!is_allowed("wasi:cli/stdout@0.3.0", true));
        assert!(!is_allowed("example:forbidden/vault@0.1.0", true));
        assert!(!is_allowed("wasi:keyvalue/store@0.2.0", true));
    }
}
