//! The command line: `tools`, `check` and `call`, their output and their exit statuses.

use serde_json::{json, Value};

use crate::support::{adversarial_config, example_config, guest, toolhost};

/// `toolhost tools` prints Draft 2020-12 schemas whose `required` and `additionalProperties`
/// match each tool's WIT signature.
#[test]
fn tools_prints_draft_2020_12_definitions() {
    let cfg = example_config();
    for g in ["measure", "compute", "fs-tools", "http-get", "template"] {
        guest(g);
    }
    let out = toolhost(&["tools", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let defs: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = defs.iter().map(|d| d["name"].as_str().unwrap()).collect();
    for expected in [
        "convert_length",
        "convert_temperature",
        "sha256",
        "json_pointer",
        "read_text",
        "list_dir",
        "write_text",
        "http_get",
        "greet",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let params = |name: &str| -> Vec<&str> {
        match name {
            "convert_length" | "convert_temperature" => vec!["value", "from", "to"],
            "sha256" => vec!["text"],
            "json_pointer" => vec!["document", "pointer"],
            "read_text" | "list_dir" => vec!["path"],
            "write_text" => vec!["path", "content"],
            "http_get" => vec!["url"],
            "greet" => vec!["name"],
            other => panic!("unexpected tool {other}"),
        }
    };
    for d in &defs {
        let name = d["name"].as_str().unwrap();
        let input = &d["inputSchema"];
        assert_eq!(
            input["$schema"],
            json!("https://json-schema.org/draft/2020-12/schema")
        );
        assert_eq!(input["type"], json!("object"));
        assert_eq!(input["additionalProperties"], json!(false), "{name}");
        assert_eq!(input["required"], json!(params(name)), "{name}");
        let props: Vec<&String> = input["properties"].as_object().unwrap().keys().collect();
        assert_eq!(props.len(), params(name).len(), "{name}");
        assert_eq!(
            d["outputSchema"]["$schema"],
            json!("https://json-schema.org/draft/2020-12/schema")
        );
        let desc = d["description"].as_str().unwrap();
        assert!(
            desc.len() > 10 && !desc.starts_with("The `"),
            "{name}: no WIT docs: {desc}"
        );
    }
    let write = defs.iter().find(|d| d["name"] == "write_text").unwrap();
    assert_eq!(write["risk"], json!("write"));
    let from = &defs.iter().find(|d| d["name"] == "convert_length").unwrap()["inputSchema"]
        ["properties"]["from"];
    assert_eq!(from["type"], json!("string"));
    assert!(from["enum"]
        .as_array()
        .unwrap()
        .contains(&json!("kilometre")));
}

/// `check` prints the derived definitions of a good component.
#[test]
fn check_prints_definitions() {
    let out = toolhost(&["check", guest("template").to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let defs: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(defs.len(), 1);
    assert_eq!(defs[0]["name"], json!("greet"));
    assert!(defs[0]["description"].as_str().unwrap().contains("Greet"));
}

/// `check` refuses a component importing an interface nobody granted, naming the import.
#[test]
fn check_refuses_ungranted_import() {
    let out = toolhost(&["check", guest("ungranted").to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.contains("example:forbidden/vault"),
        "{}",
        out.stderr
    );
}

/// `check` refuses a file that is not a component, and a missing file, with exit status 2.
#[test]
fn check_refuses_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm not really").unwrap();
    let out = toolhost(&["check", junk.to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("not a valid WebAssembly component"),
        "{}",
        out.stderr
    );
    let out = toolhost(&["check", dir.path().join("none.wasm").to_str().unwrap()]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("cannot read component"),
        "{}",
        out.stderr
    );
}

/// `call` prints one ToolResult, echoes the call id, and exits 0 only when completed.
#[test]
fn call_prints_one_result_and_exit_status() {
    let cfg = adversarial_config();
    let cfg = cfg.to_str().unwrap();
    let out = toolhost(&[
        "call",
        "--config",
        cfg,
        "--call-id",
        "c-1",
        "greet",
        r#"{"name":"Bo"}"#,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["call_id"], json!("c-1"));
    assert_eq!(v["tool"], json!("greet"));
    assert_eq!(v["status"], json!("completed"));
    assert_eq!(v["output"], json!("Hello, Bo!"));
    for k in [
        "fuel_consumed",
        "wall_ms",
        "memory_peak_bytes",
        "output_bytes",
    ] {
        assert!(v["usage"][k].is_u64(), "usage.{k} missing: {v}");
    }
    assert!(v["usage"]["fuel_consumed"].as_u64().unwrap() > 0);
    assert_eq!(out.stdout.lines().count(), 1);

    for (tool, args, code) in [
        ("greet", "{not json", "invalid_arguments"),
        ("greet", r#"{"name": 5}"#, "invalid_arguments"),
        ("greet", r#"{"name": "a", "extra": 1}"#, "invalid_arguments"),
        ("greet", r#"{}"#, "invalid_arguments"),
        ("greet", r#"["a"]"#, "invalid_arguments"),
        ("no_such_tool", r#"{}"#, "unknown_tool"),
    ] {
        let out = toolhost(&["call", "--config", cfg, tool, args]);
        assert_eq!(out.status, 1, "{tool} {args}");
        let v = out.json();
        assert_eq!(v["status"], json!("failed"));
        assert_eq!(v["code"], json!(code), "{tool} {args}: {v}");
        assert!(v.get("output").is_none());
    }
}

/// A bad command line or a missing config exits 2.
#[test]
fn bad_command_line_exits_2() {
    assert_eq!(toolhost(&["call"]).status, 2);
    assert_eq!(toolhost(&["frobnicate"]).status, 2);
    let out = toolhost(&["tools", "--config", "/nonexistent/toolhost.toml"]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("cannot read config"), "{}", out.stderr);
}

/// A closed stdout (`toolhost tools | head -1`) is not a panic: the command ends as it would
/// have, with nothing on stderr about it.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["tools", "--config"])
        .arg(example_config())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the host has loaded its components and written anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// What a model chose (ids, arguments echoed in outputs) reaches a terminal with its C1
/// controls and reordering marks escaped: stdout holds none raw, and parses to the same values.
#[test]
fn call_output_cannot_drive_a_terminal() {
    let cfg = adversarial_config();
    let hostile = "\u{9b}2J\u{202e}gpj.exe\u{200b}";
    let args = json!({ "name": hostile }).to_string();
    let call_id = format!("id{hostile}");
    let out = toolhost(&[
        "call",
        "--config",
        cfg.to_str().unwrap(),
        "--call-id",
        &call_id,
        "greet",
        &args,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        !out.stdout
            .chars()
            .any(|c| c.is_control() && c != '\n' || matches!(c, '\u{202e}' | '\u{200b}')),
        "{:?}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["call_id"], json!(call_id));
    assert_eq!(v["output"], json!(format!("Hello, {hostile}!")));
}
