//! The real example tools do their jobs, and their failures are the tool's own errors.

use serde_json::json;
use toolhost::{Code, Status};

use crate::support::{guest, http_server, run, runtime, temp_config, toml_path};

fn cache() -> String {
    crate::support::own_data()
}

/// Length and temperature conversions, enum-constrained units, and the tool's own error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_converts_units() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        cache(),
        toml_path(&guest("measure"))
    ));
    let rt = runtime(&cfg);
    let r = run(
        &rt,
        "convert_length",
        json!({"value": 1.5, "from": "kilometre", "to": "metre"}),
    )
    .await;
    assert_eq!(r.output, Some(json!(1500.0)), "{r:?}");
    let r = run(
        &rt,
        "convert_temperature",
        json!({"value": 100.0, "from": "celsius", "to": "fahrenheit"}),
    )
    .await;
    let f = r.output.as_ref().and_then(|v| v.as_f64()).unwrap();
    assert!((f - 212.0).abs() < 1e-9, "{r:?}");
    let r = run(
        &rt,
        "convert_length",
        json!({"value": 1, "from": "parsec", "to": "metre"}),
    )
    .await;
    assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
    assert!(r.message.contains("/from"), "{}", r.message);
    let r = run(
        &rt,
        "convert_temperature",
        json!({"value": -500.0, "from": "celsius", "to": "kelvin"}),
    )
    .await;
    assert_eq!(r.code, Some(Code::ToolError), "{r:?}");
}

/// SHA-256 of a known vector, and JSON-pointer lookups that hit and miss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_hashes_and_looks_up() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        cache(),
        toml_path(&guest("compute"))
    ));
    let rt = runtime(&cfg);
    let r = run(&rt, "sha256", json!({"text": "abc"})).await;
    assert_eq!(
        r.output,
        Some(json!(
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        ))
    );
    let doc = r#"{"a": {"b": [10, 20, {"c": "x"}]}}"#;
    let r = run(
        &rt,
        "json_pointer",
        json!({"document": doc, "pointer": "/a/b/2"}),
    )
    .await;
    assert_eq!(r.output, Some(json!(r#"{"c":"x"}"#)), "{r:?}");
    let r = run(
        &rt,
        "json_pointer",
        json!({"document": doc, "pointer": "/nope"}),
    )
    .await;
    assert_eq!(r.code, Some(Code::ToolError), "{r:?}");
}

/// Write (created, then replaced), read back, list — inside the granted workspace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_tools_work_inside_the_workspace_only() {
    let ws = tempfile::tempdir().unwrap();
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\nfs = [{{ host = {}, guest = \"/workspace\", mode = \"rw\" }}]\n",
        cache(),
        toml_path(&guest("fs-tools")),
        toml_path(ws.path())
    ));
    let rt = runtime(&cfg);
    let r = run(
        &rt,
        "write_text",
        json!({"path": "notes.txt", "content": "héllo"}),
    )
    .await;
    assert_eq!(
        r.output,
        Some(json!({"created": true, "bytes-written": 6})),
        "{r:?}"
    );
    let r = run(
        &rt,
        "write_text",
        json!({"path": "notes.txt", "content": "bye"}),
    )
    .await;
    assert_eq!(
        r.output,
        Some(json!({"created": false, "bytes-written": 3})),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "bye"
    );
    let r = run(&rt, "read_text", json!({"path": "/workspace/notes.txt"})).await;
    assert_eq!(r.output, Some(json!("bye")), "{r:?}");
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let r = run(&rt, "list_dir", json!({"path": "."})).await;
    assert_eq!(
        r.output,
        Some(json!([
            {"name": "notes.txt", "kind": "file", "size": 3},
            {"name": "sub", "kind": "directory", "size": r.output.as_ref().unwrap()[1]["size"]}
        ])),
        "{r:?}"
    );
    let r = run(&rt, "read_text", json!({"path": "../../etc/passwd"})).await;
    assert_eq!(r.code, Some(Code::ToolError), "{r:?}");
    assert!(!r.message.contains("root:"));
    let r = run(&rt, "read_text", json!({"path": "missing.txt"})).await;
    assert_eq!(r.code, Some(Code::ToolError), "{r:?}");
}

/// An allowed loopback server answers; a port off the allowlist is refused before connecting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_get_reaches_only_the_allowlist() {
    let allowed = http_server("hello from loopback").await;
    let other = http_server("secret").await;
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\nnetwork = {{ allow = [\"127.0.0.1:{}\"] }}\n",
        cache(),
        toml_path(&guest("http-get")),
        allowed.port
    ));
    let rt = runtime(&cfg);
    let url = format!("http://127.0.0.1:{}/x", allowed.port);
    let r = run(&rt, "http_get", json!({"url": url})).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    let out = r.output.unwrap();
    assert_eq!(out["status"], json!(200));
    assert_eq!(out["body"], json!("hello from loopback"));
    assert_eq!(out["truncated"], json!(false));

    let url = format!("http://127.0.0.1:{}/x", other.port);
    let r = run(&rt, "http_get", json!({"url": url})).await;
    assert_eq!(r.code, Some(Code::ToolError), "{r:?}");
    assert!(r.message.contains("Denied"), "{}", r.message);
    assert_eq!(
        other.connections.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// Without a network grant the HTTP component is refused at load, naming the import.
#[test]
fn http_get_without_grant_is_refused_at_load() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        cache(),
        toml_path(&guest("http-get"))
    ));
    let err = toolhost::Config::start_file(&cfg, toolhost::EpochMode::Manual)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("imports `wasi:http/"), "{err}");
    assert!(err.contains("network"), "{err}");
}

/// The template tool greets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_greets() {
    let rt = runtime(&crate::support::example_config());
    let r = run(&rt, "greet", json!({"name": "Ada"})).await;
    assert_eq!(r.output, Some(json!("Hello, Ada!")), "{r:?}");
}

/// On the null ledger (the benchmarks' `pipeline_no_ledger`) every stage still runs and the
/// call completes, and nothing is recorded: the same id runs again instead of replaying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_null_ledger_runs_every_stage_and_records_nothing() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\n",
        cache(),
        toml_path(&guest("compute"))
    ));
    let rt = runtime(&cfg).unrecorded_for_benchmarks().unwrap();
    let ctx = rt.context("local", "default");
    let c = toolhost::ToolCall {
        call_id: "same".into(),
        name: "sha256".into(),
        arguments: json!({"text": "abc"}),
    };
    for _ in 0..2 {
        let r = rt.run_call(&ctx, &c, None).await;
        assert_eq!(r.status, Status::Completed, "{r:?}");
    }
    assert_eq!(rt.executions(), 2);
    assert!(rt.ledger().calls(None).unwrap().is_empty());
    // Validation still refuses what it refuses.
    let bad = toolhost::ToolCall {
        call_id: "bad".into(),
        name: "sha256".into(),
        arguments: json!({"text": 1}),
    };
    let r = rt.run_call(&ctx, &bad, None).await;
    assert_eq!(r.code, Some(Code::InvalidArguments), "{r:?}");
}
