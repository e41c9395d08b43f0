//! The benchmark's configs: the bench tools in a fresh data directory, and for cold start,
//! N byte-distinct copies of the component (so each has its own compile-cache entry).

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// The built bench component; a clear message when guests were not built.
pub fn bench_component() -> PathBuf {
    let p = repo().join("guest-tools/target/wasm32-wasip2/release/bench_tools.wasm");
    assert!(
        p.is_file(),
        "{} is missing: run `just build-guests` first",
        p.display()
    );
    p
}

fn toml_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// A config with the bench component in `dir`, with the given ledger durability.
pub fn config(dir: &Path, synchronous_full: bool) -> PathBuf {
    config_with(dir, synchronous_full, "read")
}

/// [`config`] with the tools at `risk` (the ledger commits a `read` call once, others twice).
pub fn config_with(dir: &Path, synchronous_full: bool, risk: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("the bench directory is created");
    let text = format!(
        "data_dir = {data}\n\
         [limits]\nmemory_bytes = 33_554_432\ndeadline_ms = 30_000\n\
         [run]\nmax_concurrent_calls = {slots}\n\
         [serve]\nrequests_per_second = 1_000_000.0\n\
         [ledger]\nsynchronous = \"{sync}\"\n\
         [[component]]\npath = {component}\nrisk = \"{risk}\"\n",
        data = toml_path(&dir.join("data")),
        sync = if synchronous_full { "full" } else { "normal" },
        component = toml_path(&bench_component()),
        slots = std::env::var("TOOLHOST_BENCH_SLOTS").unwrap_or_else(|_| "128".into()),
    );
    let path = dir.join(format!(
        "{}-{risk}.toml",
        if synchronous_full { "full" } else { "normal" }
    ));
    std::fs::write(&path, text).expect("the bench config is written");
    path
}

/// The read-tool config on a PostgreSQL ledger (`url`, in `schema`), for the multi-host figures.
pub fn postgres_config(dir: &Path, url: &str, schema: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("the bench directory is created");
    let text = format!(
        "data_dir = {data}
         [limits]
memory_bytes = 33_554_432
deadline_ms = 30_000
         [run]
max_concurrent_calls = 128
         [serve]
requests_per_second = 1_000_000.0
         [ledger]
url = {url:?}
schema = {schema:?}
         [[component]]
path = {component}
risk = \"read\"
",
        data = toml_path(&dir.join("data-pg")),
        component = toml_path(&bench_component()),
    );
    let path = dir.join("postgres.toml");
    std::fs::write(&path, text).expect("the bench config is written");
    path
}

/// A config with `n` distinct copies of the bench component (tools renamed `add_<i>` …).
pub fn copies_config(dir: &Path, n: usize) -> PathBuf {
    let original = std::fs::read(bench_component()).expect("the component reads");
    let mut text = format!("data_dir = {}\n", toml_path(&dir.join(format!("data-{n}"))));
    for i in 0..n {
        let mut bytes = original.clone();
        // A custom section at the end makes the bytes (and so the cache key) distinct.
        let name = b"toolhost-bench-copy";
        let payload = format!("{i}");
        let body_len = 1 + name.len() + payload.len();
        bytes.push(0);
        leb128(&mut bytes, body_len);
        leb128(&mut bytes, name.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(payload.as_bytes());
        let path = dir.join(format!("copy-{n}-{i}.wasm"));
        std::fs::write(&path, bytes).expect("a copy is written");
        text.push_str(&format!(
            "[[component]]\npath = {}\n[component.tools.add]\nname = \"add_{i}\"\n\
             [component.tools.echo-items]\nname = \"echo_items_{i}\"\n\
             [component.tools.fill]\nname = \"fill_{i}\"\n",
            toml_path(&path)
        ));
    }
    let path = dir.join(format!("copies-{n}.toml"));
    std::fs::write(&path, text).expect("the copies config is written");
    path
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// About `bytes` of items for `echo_items` (each item serializes to ~120 bytes).
pub fn items(bytes: usize) -> serde_json::Value {
    let n = bytes / 120;
    serde_json::Value::Array(
        (0..n)
            .map(|i| {
                serde_json::json!({
                    "id": i,
                    "name": format!("item number {i:05}"),
                    "tags": ["alpha", "beta", format!("t{i}")],
                    "score": i as f64 * 0.5,
                    "active": i % 2 == 0,
                })
            })
            .collect(),
    )
}
