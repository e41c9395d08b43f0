//! A tool author's path without a config file: `--component`, `check` filling the compile
//! cache, and `embed-wit`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhost::{Config, EpochMode};
use toolhost_registry::Origin;

use crate::support::{guest, toolhost};

/// A copy of a built guest in a fresh directory: (dir guard, path of the copy).
fn copy_of(crate_name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tool.wasm");
    std::fs::copy(guest(crate_name), &path).unwrap();
    (dir, path)
}

fn cache_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".toolhost/cache")).map_or(0, |d| d.count())
}

/// `--component` runs one component with no config file: its tools are listed and called, and
/// its state lives in `.toolhost` beside it, not in the directory the command runs from.
#[test]
fn one_component_runs_without_a_config() {
    let (dir, wasm) = copy_of("template");
    let wasm = wasm.to_str().unwrap();
    let out = toolhost(&["tools", "--component", wasm]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json()[0]["name"], json!("greet"));
    let out = toolhost(&["call", "--component", wasm, "greet", r#"{"name":"Ada"}"#]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["status"], json!("completed"));
    assert_eq!(r["output"], json!("Hello, Ada!"));
    assert!(dir.path().join(".toolhost/ledger.sqlite").is_file());
    let out = toolhost(&["ledger", "--component", wasm]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json().as_array().unwrap().len(), 1);
    // A config and a component at once is a usage error.
    let out = toolhost(&["tools", "--config", "toolhost.toml", "--component", wasm]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
}

/// `--component` grants nothing: the fs guest's reads find no directory, and a component that
/// imports `wasi:http` is refused with the fix (grant, or drop the import) in the message.
#[test]
fn a_component_alone_is_granted_nothing() {
    let (_dir, fs) = copy_of("fs-tools");
    let out = toolhost(&[
        "call",
        "--component",
        fs.to_str().unwrap(),
        "read_text",
        r#"{"path":"notes.txt"}"#,
    ]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert_eq!(out.json()["status"], json!("failed"));
    let (_dir, http) = copy_of("http-get");
    let out = toolhost(&["tools", "--component", http.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("wasi:http") && out.stderr.contains("-d http fetch-event"),
        "{}",
        out.stderr
    );
}

/// `check` compiles the component into the cache its calls use: loading it afterwards as
/// `--component` does is a cache hit, and a call adds no second entry.
#[test]
fn check_fills_the_cache_calls_use() {
    let (dir, wasm) = copy_of("template");
    let out = toolhost(&["check", wasm.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(cache_entries(dir.path()), 1);
    assert!(
        !dir.path().join(".toolhost/ledger.sqlite").exists(),
        "check opened a ledger"
    );
    let config = Config::single_component(&wasm);
    let checked = toolhost::config::check(&config, EpochMode::Manual).unwrap();
    assert_eq!(checked.registry.origins[0].1, Origin::Cached);
    let out = toolhost(&[
        "call",
        "--component",
        wasm.to_str().unwrap(),
        "greet",
        r#"{"name":"Ada"}"#,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(cache_entries(dir.path()), 1);
    // `--component` is accepted by check too.
    let out = toolhost(&["check", "--component", wasm.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

/// `check` of a component importing `wasi:http` loads it as a network grant would, and warns
/// that without a host to reach its requests are refused.
#[test]
fn check_warns_of_http_without_a_host() {
    let (_dir, http) = copy_of("http-get");
    let out = toolhost(&["check", http.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("imports wasi:http but may reach no host"),
        "{}",
        out.stderr
    );
}

/// `embed-wit` gives a component the descriptions of a WIT file; the tools that WIT's world
/// does not declare are no longer offered, with a warning naming them.
#[test]
fn embedded_wit_describes_and_declares_the_tools() {
    let (dir, wasm) = copy_of("template");
    let wit = dir.path().join("world.wit");
    std::fs::write(
        &wit,
        "package example:template@0.1.0;\n\
         interface tools {\n  /// Says hello, from a WIT embedded after the build.\n  \
         greet: func(name: string) -> string;\n}\n\
         world template { include toolhost:tool/tool@0.1.0; export tools; }\n",
    )
    .unwrap();
    let out = toolhost(&["embed-wit", wasm.to_str().unwrap(), wit.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("1 described function"),
        "{}",
        out.stderr
    );
    let out = toolhost(&["check", wasm.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let defs: Value = out.json();
    assert_eq!(
        defs[0]["description"],
        json!("Says hello, from a WIT embedded after the build.")
    );
    // A world that exports another interface declares none of the component's functions.
    std::fs::write(
        &wit,
        "package example:template@0.1.0;\ninterface other { f: func(); }\n\
         world template { include toolhost:tool/tool@0.1.0; export other; }\n",
    )
    .unwrap();
    let out = toolhost(&["embed-wit", wasm.to_str().unwrap(), wit.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = toolhost(&["check", wasm.to_str().unwrap()]);
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("example:template/tools@0.1.0#greet")
            && out
                .stderr
                .contains("exports no function its embedded WIT declares"),
        "{}",
        out.stderr
    );
}

/// `embed-wit` refuses WIT that does not parse and a file that is not a component, and leaves
/// the component as it was.
#[test]
fn embed_wit_refuses_bad_input() {
    let (dir, wasm) = copy_of("template");
    let before = std::fs::read(&wasm).unwrap();
    let wit = dir.path().join("bad.wit");
    std::fs::write(&wit, "package a:b; interface {").unwrap();
    let out = toolhost(&["embed-wit", wasm.to_str().unwrap(), wit.to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("does not parse"), "{}", out.stderr);
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(&wit, "package a:b;\nworld w {}\n").unwrap();
    let out = toolhost(&["embed-wit", junk.to_str().unwrap(), wit.to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("core module"), "{}", out.stderr);
    assert_eq!(std::fs::read(&wasm).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 3, "no temporary file left: {names:?}");
}

/// A component whose memory at start exceeds its tools' ceiling is refused at load, naming the
/// limit to raise and the size it needs, for the component's limits and a tool's own alike.
#[test]
fn limits_below_what_a_component_needs_are_refused_at_load() {
    let (dir, _wasm) = copy_of("template");
    for (limits, whom) in [
        ("limits = { memory_bytes = 65_536 }", "its tools"),
        (
            "[component.tools.greet]\nlimits = { memory_bytes = 65_536 }",
            "its tool `greet`",
        ),
    ] {
        let cfg = dir.path().join("toolhost.toml");
        std::fs::write(
            &cfg,
            format!("[[component]]\npath = \"tool.wasm\"\n{limits}\n"),
        )
        .unwrap();
        let out = toolhost(&["tools", "--config", cfg.to_str().unwrap()]);
        assert_eq!(out.status, 2, "{}", out.stdout);
        assert!(
            out.stderr.contains("bytes of linear memory when it starts")
                && out.stderr.contains(whom)
                && out.stderr.contains("raise `limits = { memory_bytes = "),
            "{}",
            out.stderr
        );
    }
}
