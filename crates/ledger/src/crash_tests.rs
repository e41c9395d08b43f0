//! A process killed (`kill -9`) while its writer commits groups: every write a caller was told
//! is committed is in the file, nothing else of an unfinished group is, and recovery leaves
//! every call with exactly one terminal outcome.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use toolhost_contract::canonical::digest_bytes;
use toolhost_contract::{Status, ToolCall, ToolResult, Usage};

const CHILD_ENV: &str = "TOOLHOST_LEDGER_CRASH_CHILD";

/// Run by [`killed_mid_group_loses_nothing_it_answered`] in a child process: 64 tasks admit and
/// finish calls as fast as the writer commits them, printing each answer it got.
#[test]
#[ignore = "the child half of killed_mid_group_loses_nothing_it_answered"]
fn crash_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let ledger =
        std::sync::Arc::new(Ledger::open(path.as_ref(), LedgerOptions::default()).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let tasks: Vec<_> = (0..64)
            .map(|t| {
                let l = ledger.clone();
                tokio::spawn(async move {
                    for i in 0..100_000 {
                        let id = format!("t{t}-{i}");
                        let key = CallKey {
                            run_id: "crash".into(),
                            call_id: id.clone(),
                            tool: "echo".into(),
                            args_digest: digest_bytes(b"{}"),
                            args_size: 2,
                            ..Default::default()
                        };
                        let admitted = l.admit_async(key, Inline::Never).await.unwrap();
                        assert!(matches!(admitted, Admission::New { .. }));
                        say(&format!("admitted {id}"));
                        let call = ToolCall {
                            call_id: id.clone(),
                            name: "echo".into(),
                            arguments: json!({}),
                        };
                        let result = ToolResult::completed(&call, json!(id), Usage::default());
                        let write = Write::Finish {
                            run_id: "crash".into(),
                            call_id: id.clone(),
                            outcome: Outcome::of(&result).unwrap(),
                            events: vec![],
                        };
                        l.commit(write, Inline::Never).await.unwrap();
                        say(&format!("finished {id}"));
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[test]
fn killed_mid_group_loses_nothing_it_answered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_tests::crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut admitted = Vec::new();
    let mut finished = Vec::new();
    let until = Instant::now() + Duration::from_secs(120);
    while finished.len() < 3000 && Instant::now() < until {
        let Some(Ok(line)) = lines.next() else { break };
        match line.split_once(' ') {
            Some(("admitted", id)) => admitted.push(id.to_string()),
            Some(("finished", id)) => finished.push(id.to_string()),
            _ => {}
        }
    }
    child.kill().unwrap(); // SIGKILL, mid-stream
    child.wait().unwrap();
    // What the child printed before it died was answered before it died.
    for line in lines.map_while(Result::ok) {
        match line.split_once(' ') {
            Some(("admitted", id)) => admitted.push(id.to_string()),
            Some(("finished", id)) => finished.push(id.to_string()),
            _ => {}
        }
    }
    assert!(
        finished.len() >= 3000,
        "the child finished {} calls",
        finished.len()
    );

    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    for id in &finished {
        let r = ledger.outcome("crash", id).unwrap();
        assert_eq!(r.map(|r| r.output), Some(Some(json!(id))), "{id}");
    }
    for id in &admitted {
        assert!(ledger.is_admitted("crash", id).unwrap(), "{id}");
    }
    let finished_set: std::collections::HashSet<&str> =
        finished.iter().map(String::as_str).collect();
    let closed = ledger.recover().unwrap();
    let calls = ledger.calls(Some("crash")).unwrap();
    // Every call in the file has exactly one terminal outcome now: its own, or outcome_unknown
    // for the ones the kill interrupted (never one of each).
    for c in &calls {
        let unknown = closed.iter().any(|(_, id)| *id == c.call_id);
        let status = c.status.expect("every call is closed");
        assert_eq!(status == Status::OutcomeUnknown, unknown, "{}", c.call_id);
        if finished_set.contains(c.call_id.as_str()) {
            assert_eq!(status, Status::Completed, "{}", c.call_id);
        }
    }
    assert!(calls.len() >= finished.len());
}
