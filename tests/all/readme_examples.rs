//! The README's request examples, run as a reader copies them: each block marked
//! `<!-- example: NAME -->` runs against the repository's `toolhost.toml` (stdio examples start
//! their own server; HTTP ones reach one this test starts, at the address the README names), and
//! answers `greet` in the era it claims.

use std::path::Path;
use std::process::Command;

use crate::mcp::http_serve;
use crate::support::repo;

/// The address the README's HTTP examples name.
const README_ADDRESS: &str = "http://127.0.0.1:8701";

/// Every marked example: (name, fence language, body).
fn examples(text: &str) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("<!-- example: ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        let lang = fence.strip_prefix("```").unwrap_or_else(|| {
            panic!("the example {name} is not followed by a fenced block: {fence}")
        });
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        found.push((name.to_string(), lang.to_string(), body.join("\n")));
    }
    found
}

/// Run one example's body; its stdout, after asserting it succeeded.
fn run(name: &str, lang: &str, body: &str) -> String {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_toolhost")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let module = repo().join(format!(
        "tests/mcp/modern/.readme-{name}-{}.mjs",
        std::process::id()
    ));
    let mut command = match lang {
        "sh" | "bash" => {
            let mut c = Command::new("bash");
            c.args(["-c", body]);
            c
        }
        "python" => {
            let mut c = Command::new(crate::mcp::python());
            c.args(["-c", body]);
            c
        }
        "js" => {
            // In the directory whose node_modules has the client the example imports.
            std::fs::write(&module, body).unwrap();
            let mut c = Command::new(crate::mcp_modern::node());
            c.arg(&module);
            c
        }
        other => panic!("the example {name} is in {other}, which this test cannot run"),
    };
    let out = command
        .current_dir(repo())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .output()
        .expect("the example's interpreter starts");
    let _ = std::fs::remove_file(&module);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Each example answers `greet` with "Hello, Ada!" in the era it claims: a 2026-07-28 answer
/// carries `resultType` (the SDKs print the version they negotiated), a handshake-era one does
/// not.
#[test]
fn every_example_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let found = examples(&readme);
    let names: Vec<&str> = found.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "stdio-2026",
            "stdio-2025",
            "http-2026",
            "http-2025",
            "python",
            "typescript"
        ]
    );
    let server = http_serve(&repo().join("toolhost.toml"));
    let base = server.url.trim_end_matches("/mcp");
    for (name, lang, body) in &found {
        let body = body.replace(README_ADDRESS, base);
        let out = run(name, lang, &body);
        assert!(out.contains("Hello, Ada!"), "{name}: {out}");
        match name.as_str() {
            "stdio-2026" | "http-2026" => {
                assert!(out.contains(r#""resultType":"complete""#), "{name}: {out}")
            }
            "stdio-2025" | "http-2025" => assert!(!out.contains("resultType"), "{name}: {out}"),
            _ => assert!(out.starts_with("2026-07-28 "), "{name}: {out}"),
        }
    }
}
