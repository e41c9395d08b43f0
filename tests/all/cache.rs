//! Compiled components are cached on disk: the second load deserializes instead of compiling.

use toolhost::registry::Origin;
use toolhost::{Config, EpochMode, Registry, Sandbox};

use crate::support::{guest, temp_config, toml_path};

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
    let load = || {
        let sandbox = Sandbox::new(
            toolhost::registry::engine_settings(&config),
            EpochMode::Manual,
        )
        .unwrap();
        Registry::load(&config, &sandbox).unwrap().origins[0].1
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
    let load = || {
        let sandbox = Sandbox::new(
            toolhost::registry::engine_settings(&config),
            EpochMode::Manual,
        )
        .unwrap();
        Registry::load(&config, &sandbox).unwrap().origins[0].1
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
