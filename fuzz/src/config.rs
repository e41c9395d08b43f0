//! Target `config`: [`Config::parse`] (TOML text → the validated config) and what the host
//! derives from a parsed config without touching a file: effective limits, engine settings, the
//! compiled policy, the rate limiter, the serve identities.
//!
//! Input: UTF-8 text. Invariants, beyond "no panic":
//!
//! - a config that parses depends only on its TOML value, not its formatting: re-serialized by
//!   `toml` and parsed again, it gives the same config;
//! - every limit a tool can end up with (file defaults, then the component's, then the tool's)
//!   is within its hard cap, and so are the engine settings sized from them.

use std::path::Path;
use std::time::Instant;

use toolhost::config::engine_settings;
use toolhost::Config;
use toolhost_ledger::MemoryLimits;
use toolhost_policy::Policy;
use toolhost_runtime::guards::RateLimiter;
use toolhost_sandbox::{
    Limits, MAX_DEADLINE_MS, MAX_FUEL, MAX_MEMORY_BYTES, MAX_OUTPUT_BYTES, MAX_TABLE_ELEMENTS,
};

/// Check one fuzz input.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Path::new("/fuzz/base");
    let Ok(config) = Config::parse(text, base) else {
        return;
    };

    let table: toml::Table = toml::from_str(text).expect("a config that parses is TOML");
    let normalized = toml::to_string(&table).expect("a TOML table serializes");
    let again = Config::parse(&normalized, base)
        .unwrap_or_else(|e| panic!("re-serialized, the config is refused: {e}\n{normalized}"));
    assert_eq!(
        format!("{config:?}"),
        format!("{again:?}"),
        "re-serialized, the config differs:\n{normalized}"
    );

    let defaults = config.default_limits();
    within_caps(&defaults, "limits");
    for (i, c) in config.components.iter().enumerate() {
        let component = defaults.with(&c.limits);
        within_caps(&component, &format!("component[{i}]"));
        for (export, t) in &c.tools {
            within_caps(
                &component.with(&t.limits),
                &format!("component[{i}].tools.{export}"),
            );
        }
    }
    let settings = engine_settings(&config);
    assert!(settings.max_memory_bytes <= MAX_MEMORY_BYTES);
    assert!(settings.max_table_elements <= MAX_TABLE_ELEMENTS);

    if let Some(p) = &config.policy {
        let _ = Policy::from_config(p, base);
    }
    let rate = RateLimiter::new(config.run.rate_per_principal, config.run.rate_burst);
    if let Some((rate, burst)) = rate.settings() {
        let _ = MemoryLimits::default().take_rate("fuzz", rate, burst, Instant::now());
    }
    let _ = config.agent.deadline();
    let _ = config.serve.local_identity();
    let _ = config.serve.identify("fuzz-token");
    let _ = config.data_dir();
}

fn within_caps(l: &Limits, at: &str) {
    assert!(l.fuel >= 1 && l.fuel <= MAX_FUEL, "{at}: fuel {}", l.fuel);
    let ms = l.deadline.as_millis();
    assert!(
        ms >= 1 && ms <= u128::from(MAX_DEADLINE_MS),
        "{at}: deadline {ms} ms"
    );
    assert!(
        l.memory_bytes >= 65_536 && l.memory_bytes <= MAX_MEMORY_BYTES,
        "{at}: memory {}",
        l.memory_bytes
    );
    assert!(
        l.table_elements >= 1 && l.table_elements <= MAX_TABLE_ELEMENTS,
        "{at}: tables {}",
        l.table_elements
    );
    assert!(
        l.output_bytes >= 1 && l.output_bytes <= MAX_OUTPUT_BYTES,
        "{at}: output {}",
        l.output_bytes
    );
}
