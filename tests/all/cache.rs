//! Compiled components are cached on disk: the second load deserializes instead of compiling.

use toolhost::{Config, EpochMode};
use toolhost_registry::Origin;

use crate::support::{guest, temp_config, toml_path};

/// Checking a config compiles in memory and writes nothing, not even the data directory.
#[test]
fn checking_writes_nothing() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("data");
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        toml_path(&dir),
        toml_path(&guest("template"))
    ));
    let config = Config::load(&cfg).unwrap();
    let checked = toolhost::config::check(&config, EpochMode::Manual).unwrap();
    assert_eq!(checked.registry.origins[0].1, Origin::Compiled);
    assert!(!dir.exists(), "checking created the data directory");
}

/// A fresh data directory compiles; a restart with the same engine settings loads the cache.
#[test]
fn second_load_comes_from_the_cache() {
    let data = tempfile::tempdir().unwrap();
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        toml_path(data.path()),
        toml_path(&guest("template"))
    ));
    let config = Config::load(&cfg).unwrap();
    // Checking reads the cache and writes nothing; saving writes what was compiled.
    let load = || {
        let mut checked = toolhost::config::check(&config, EpochMode::Manual).unwrap();
        checked.registry.save_cache();
        checked.registry.origins[0].1
    };
    assert_eq!(load(), Origin::Compiled);
    let cached: Vec<_> = std::fs::read_dir(data.path().join("cache"))
        .unwrap()
        .collect();
    assert_eq!(cached.len(), 1);
    assert_eq!(load(), Origin::Cached);
}

/// A corrupt cache entry is not trusted: the component is compiled again.
#[test]
fn corrupt_cache_entry_is_recompiled() {
    let data = tempfile::tempdir().unwrap();
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        toml_path(data.path()),
        toml_path(&guest("template"))
    ));
    let config = Config::load(&cfg).unwrap();
    // Checking reads the cache and writes nothing; saving writes what was compiled.
    let load = || {
        let mut checked = toolhost::config::check(&config, EpochMode::Manual).unwrap();
        checked.registry.save_cache();
        checked.registry.origins[0].1
    };
    assert_eq!(load(), Origin::Compiled);
    let entry = std::fs::read_dir(data.path().join("cache"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&entry, b"garbage").unwrap();
    assert_eq!(load(), Origin::Compiled);
}
