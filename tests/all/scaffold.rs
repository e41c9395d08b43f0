//! `toolhost new` in each language, as a new tool author runs it: in a directory outside the
//! repository, with the binary alone — `new`, the printed build command, then a call of the
//! built component and the project's own test.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::repo;

/// Run `cmd` in `dir` with the toolhost binary on the PATH (and in `$TOOLHOST`); panic with its
/// output unless it succeeds. Returns stdout.
fn run_in(dir: &Path, cmd: &str, extra_env: &[(&str, &Path)]) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_toolhost"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run_with(dir, cmd, extra_env, &path, Some(bin))
}

/// Run `cmd` in `dir` with the machine's PATH only and no `$TOOLHOST`: toolhost is reachable
/// only by the path `cmd` names. Returns stdout.
fn run_without_toolhost(dir: &Path, cmd: &str, extra_env: &[(&str, &Path)]) -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    run_with(dir, cmd, extra_env, &path, None)
}

fn run_with(
    dir: &Path,
    cmd: &str,
    extra_env: &[(&str, &Path)],
    path: &str,
    toolhost: Option<&Path>,
) -> String {
    let mut c = Command::new("sh");
    c.args(["-c", cmd]).current_dir(dir).env("PATH", path);
    match toolhost {
        Some(bin) => c.env("TOOLHOST", bin),
        None => c.env_remove("TOOLHOST"),
    };
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().expect("sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`{cmd}` failed in {}:\nstdout: {stdout}\nstderr: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `/path/to/toolhost new NAME --lang LANG` → `sh build.sh` (toolhost on neither the PATH nor
/// `$TOOLHOST`: the scripts find the binary that wrote them, and the build leaves the component
/// compiled in the cache its calls read) → `toolhost call --component NAME.wasm …` completes
/// with the template's answer and its description, and the project's test passes.
fn three_commands(lang: &str, extra_env: &[(&str, &Path)]) {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        !dir.path().starts_with(repo()),
        "the project must be outside the repository"
    );
    let printed = run_without_toolhost(
        dir.path(),
        &format!(
            "'{}' new greet --lang {lang}",
            env!("CARGO_BIN_EXE_toolhost")
        ),
        &[],
    );
    assert!(printed.contains("sh build.sh"), "{printed}");
    let project = dir.path().join("greet");
    run_without_toolhost(&project, "sh build.sh", extra_env);
    let cache = project.join(".toolhost/cache");
    let cached = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert!(
        cached > 0,
        "{lang}: nothing compiled in {}",
        cache.display()
    );
    run_without_toolhost(&project, "sh test.sh", &[]);
    let out = run_in(
        &project,
        r#"toolhost call --component greet.wasm greet '{"name":"Ada"}'"#,
        &[],
    );
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["status"], json!("completed"), "{lang}: {r}");
    assert_eq!(r["output"], json!("Hello, Ada!"), "{lang}: {r}");
    let tools: Value = serde_json::from_str(&run_in(
        &project,
        "toolhost tools --component greet.wasm",
        &[],
    ))
    .unwrap();
    assert_eq!(
        tools[0]["description"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap(),
        "Greet someone by name. Returns a friendly sentence.",
        "{lang}: {tools}"
    );
    assert_eq!(tools.as_array().unwrap().len(), 1, "{lang}: {tools}");
    run_in(&project, "sh test.sh", &[]);
}

/// Rust, with the scaffold's target directory shared across runs (its build is the slow part).
#[test]
fn new_rust_tool_in_three_commands() {
    let target = repo().join("target/scaffold-rust");
    three_commands("rust", &[("CARGO_TARGET_DIR", &target)]);
}

/// Python (componentize-py, installed by the project's build into its own `.venv`).
#[test]
fn new_python_tool_in_three_commands() {
    three_commands("python", &[]);
}

/// JavaScript (componentize-js, installed by the project's build with npm).
#[test]
fn new_js_tool_in_three_commands() {
    three_commands("js", &[]);
}

/// `new` refuses a bad name and an existing directory with exit status 2, writing nothing.
#[test]
fn new_refuses_bad_names_and_existing_directories() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["new", "Bad_Name"][..],
        &["new", "world"],
        &["new", "app", "--lang", "python"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["new", "taken"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
