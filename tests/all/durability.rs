//! Durability by risk, under `kill -9`: a `read` call is not admitted before it runs, so one
//! interrupted by a crash runs again when resubmitted and is recorded once; a `write` call is
//! admitted and marked started before it runs, so one interrupted by a crash is closed as
//! `outcome_unknown` and never runs twice — until an operator reconciles it, and then it
//! replays what the operator recorded.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{guest, temp_config, toml_path, toolhost};

/// A loopback HTTP server that holds its first request open (reporting it on the channel) and
/// answers every later one.
struct HeldServer {
    port: u16,
    connections: Arc<AtomicUsize>,
    first: mpsc::Receiver<()>,
}

fn held_server() -> HeldServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let (tx, first) = mpsc::channel();
    let counter = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut sock) = stream else { return };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf);
            if n == 0 {
                held.push(sock);
                let _ = tx.send(());
                continue;
            }
            let body = "again";
            let _ = sock.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    HeldServer {
        port,
        connections,
        first,
    }
}

fn config(port: u16, risk: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    temp_config(&format!(
        "data_dir = {}\n[[component]]\npath = {}\nnetwork = {{ allow = [\"127.0.0.1:{port}\"] }}\n\
         [component.tools.http-get]\nrisk = \"{risk}\"\n",
        crate::support::own_data(),
        toml_path(&guest("http-get")),
    ))
}

fn call_args<'a>(cfg: &'a str, args: &'a str) -> Vec<&'a str> {
    vec![
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        "R",
        "--call-id",
        "c1",
        "http_get",
        args,
    ]
}

/// Start the call in a child process and wait (bounded) until its request reaches the server.
fn start_held_call(server: &HeldServer, cfg: &str, args: &str) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(call_args(cfg, args))
        .current_dir(crate::support::repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    server
        .first
        .recv_timeout(Duration::from_secs(120))
        .expect("the call never reached the server");
    child
}

fn calls(cfg: &str) -> Vec<Value> {
    let out = toolhost(&["ledger", "--config", cfg, "--run", "R"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()["calls"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_read_killed_mid_call_runs_again_and_is_recorded_once() {
    let server = held_server();
    let (_d, cfg) = config(server.port, "read");
    let cfg = cfg.to_str().unwrap();
    let args = format!(r#"{{"url":"http://127.0.0.1:{}/r"}}"#, server.port);
    let mut child = start_held_call(&server, cfg, &args);
    // Executing, and not admitted: a read commits once, with its outcome.
    assert!(calls(cfg).is_empty(), "{:?}", calls(cfg));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(calls(cfg).is_empty());

    let again = toolhost(&call_args(cfg, &args));
    let v = again.json();
    assert_eq!(v["status"], json!("completed"), "{v}");
    assert_eq!(v["output"]["body"], json!("again"), "{v}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 2, "it ran again");
    let recorded = calls(cfg);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["status"], json!("completed"));
    let stages: Vec<&str> = recorded[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["admit", "authorize", "execute", "record"]);

    // Resubmitted once more: the recorded result, not a third run.
    let replay = toolhost(&call_args(cfg, &args));
    assert_eq!(replay.json(), v);
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

#[test]
fn a_write_killed_mid_call_is_outcome_unknown_and_never_runs_twice() {
    let server = held_server();
    let (_d, cfg) = config(server.port, "write");
    let cfg = cfg.to_str().unwrap();
    let args = format!(r#"{{"url":"http://127.0.0.1:{}/w"}}"#, server.port);
    let mut child = start_held_call(&server, cfg, &args);
    // Executing, and admitted and started before it ran.
    let open = calls(cfg);
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["state"], json!("started"), "{}", open[0]);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let again = toolhost(&call_args(cfg, &args));
    let v = again.json();
    assert_eq!(v["status"], json!("outcome_unknown"), "{v}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 1, "it ran twice");
    let recorded = calls(cfg);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["status"], json!("outcome_unknown"));
}

/// `toolhost reconcile record` for a killed write: an output that breaks the tool's output
/// schema is refused (exit 2); a valid one is recorded, and the replay answers it, marked
/// reconciled, without running; a second reconciliation is refused (exit 1); the ledger keeps
/// `outcome_unknown` with its `recover` event and the `reconcile` event after it.
#[test]
fn a_killed_write_is_reconciled_by_an_operator_and_replays_that() {
    let server = held_server();
    let (_d, cfg) = config(server.port, "write");
    let cfg = cfg.to_str().unwrap();
    let args = format!(r#"{{"url":"http://127.0.0.1:{}/w"}}"#, server.port);
    let mut child = start_held_call(&server, cfg, &args);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let unknown = toolhost(&call_args(cfg, &args)).json();
    assert_eq!(unknown["status"], json!("outcome_unknown"), "{unknown}");

    let list = toolhost(&["reconcile", "--config", cfg, "list"]);
    assert_eq!(list.status, 0, "{}", list.stderr);
    let waiting = list.json();
    assert_eq!(waiting.as_array().map(Vec::len), Some(1), "{waiting}");
    assert_eq!(waiting[0]["call_id"], json!("c1"));
    // `--config` may come after the subcommand too, as on every other command.
    let after = toolhost(&["reconcile", "list", "--config", cfg]);
    assert_eq!(after.status, 0, "{}", after.stderr);
    assert_eq!(after.json(), waiting);

    let record = |output: &str| {
        toolhost(&[
            "reconcile",
            "--config",
            cfg,
            "record",
            "--run",
            "R",
            "--call",
            "c1",
            "completed",
            "--output",
            output,
            "--by",
            "ops",
            "--why",
            "the server's log shows a 200",
        ])
    };
    let bad = record(r#"{"status": "ok"}"#);
    assert_eq!(bad.status, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("output schema"), "{}", bad.stderr);
    let output = json!({"status": 200, "content-type": null, "body": "done", "truncated": false});
    let good = record(&output.to_string());
    assert_eq!(good.status, 0, "{}", good.stderr);
    let reconciled = good.json();
    assert_eq!(reconciled["status"], json!("completed"), "{reconciled}");
    assert!(reconciled["reconciled"]["at_ms"].is_i64(), "{reconciled}");

    let replay = toolhost(&call_args(cfg, &args));
    assert_eq!(replay.status, 0, "{}", replay.stderr);
    assert_eq!(replay.json(), reconciled);
    assert_eq!(replay.json()["output"], output);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1, "it ran again");

    let again = record(&output.to_string());
    assert_eq!(again.status, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("already reconciled"),
        "{}",
        again.stderr
    );

    let recorded = calls(cfg);
    assert_eq!(
        recorded[0]["status"],
        json!("outcome_unknown"),
        "{}",
        recorded[0]
    );
    assert_eq!(recorded[0]["reconciliation"]["operator"], json!("ops"));
    let events: Vec<(&str, &str)> = recorded[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["stage"].as_str().unwrap(),
                e["decision"].as_str().unwrap(),
            )
        })
        .collect();
    let recover = events.iter().position(|e| e.0 == "recover").unwrap();
    let reconcile = events.iter().position(|e| e.0 == "reconcile").unwrap();
    assert_eq!(
        events[recover],
        ("recover", "outcome_unknown"),
        "{events:?}"
    );
    assert_eq!(events[reconcile], ("reconcile", "completed"), "{events:?}");
    assert!(recover < reconcile, "{events:?}");
    assert_eq!(events.iter().filter(|e| e.0 == "reconcile").count(), 1);
    let left = toolhost(&["reconcile", "--config", cfg, "list"]).json();
    assert_eq!(left, json!([]));
}

/// A read call's claim is held while it executes; if its future is dropped (a front door gave
/// up on it), the claim goes with it: the same id sent again runs instead of waiting for an
/// outcome nobody will record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_read_call_releases_its_claim() {
    let (_d, cfg) = temp_config(&format!(
        "data_dir = {}\n{}",
        crate::support::own_data(),
        crate::support::hostile_component(
            "[component.tools.sleep-forever]\nrisk = \"read\"\nlimits = { deadline_ms = 1_500 }\n"
        ),
    ));
    let rt = std::sync::Arc::new(
        toolhost::Config::start_file(&cfg, toolhost::EpochMode::Ticker).unwrap(),
    );
    let ctx = rt.context("alice", "acme");
    let call = crate::support::call("sleep_forever", json!({}));
    let task = {
        let (rt, ctx, call) = (rt.clone(), ctx.clone(), call.clone());
        tokio::spawn(async move { rt.run_call(&ctx, &call, None).await })
    };
    for _ in 0..1000 {
        if rt.executions() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        rt.executions(),
        1,
        "the first call never reached the sandbox"
    );
    task.abort();
    let _ = task.await;
    let again = tokio::time::timeout(Duration::from_secs(30), rt.run_call(&ctx, &call, None))
        .await
        .unwrap();
    assert_eq!(
        again.code,
        Some(toolhost::Code::DeadlineExceeded),
        "{again:?}"
    );
    assert_eq!(rt.executions(), 2);
}
