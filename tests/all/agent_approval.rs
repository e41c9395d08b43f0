//! A human in the loop of the `toolhost agent` binary: a call that needs approval is asked at
//! the terminal (driven here through a pseudo-terminal) or of an `--approve-with` command; an
//! approval runs that call once and is never reused for another; every question and answer is
//! in the ledger.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::openai::{scripted, text, tool_calls, Reply, Scripted};
use crate::support::toolhost;

/// `write_text` needs approval; a workspace to write in; a ledger of its own.
fn setup() -> (tempfile::TempDir, String, std::path::PathBuf) {
    let (dir, path, ws) = crate::support::approval_config(Some(crate::support::own_data()));
    (dir, path.display().to_string(), ws)
}

/// The model proposes the same write twice (two ids, the same arguments), then finishes.
async fn two_identical_writes() -> Scripted {
    let args = r#"{"path":"note.txt","content":"approved once"}"#;
    scripted(
        vec![
            Reply::Stream(tool_calls(&[("w1", "write_text", args)], 8, 10)),
            Reply::Stream(tool_calls(&[("w2", "write_text", args)], 8, 10)),
            Reply::Stream(text("Done.", 5)),
        ],
        None,
    )
    .await
}

fn agent_args<'a>(config: &'a str, base: &'a str) -> Vec<&'a str> {
    vec![
        "agent",
        "--config",
        config,
        "--base-url",
        base,
        "--model",
        "m",
        "--prompt",
        "write the note",
    ]
}

/// One call's `approve` events as (decision, detail).
type ApproveEvents = Vec<(String, String)>;

/// The events of the approve stage of each call of the run: (call id, events, code).
fn approvals(config: &str, run: &str) -> Vec<(String, ApproveEvents, String)> {
    let l = toolhost(&["ledger", "--config", config, "--run", run]).json();
    l["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let events = c["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["stage"] == "approve")
                .map(|e| {
                    (
                        e["decision"].as_str().unwrap().to_string(),
                        e["detail"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            (
                c["call_id"].as_str().unwrap().to_string(),
                events,
                c["code"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// `--approve-with`: the command reads the request on stdin and approves the first call; the
/// identical second call is asked again (the first approval is spent) and denied. The note is
/// written once; the ledger shows both questions and both answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_with_a_command() {
    let server = two_identical_writes().await;
    let (dir, config, ws) = setup();
    let base = server.base_url();
    let marker = dir.path().join("asked-once");
    let requests = dir.path().join("requests.jsonl");
    // Approves only a write_text request, only the first time; keeps what it was sent.
    let cmd = format!(
        "cat >> '{req}'; if [ -e '{m}' ]; then echo deny; else touch '{m}'; \
         echo '{{\"decision\":\"approve\"}}'; fi",
        req = requests.display(),
        m = marker.display()
    );
    let mut args = agent_args(&config, &base);
    args.extend(["--approve-with", &cmd]);
    let out = toolhost(&args);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let summary = out.json();
    assert_eq!(summary["failures"]["approval_denied"], 1, "{summary}");
    assert_eq!(summary["tool_calls"]["completed"], 1, "{summary}");
    assert_eq!(
        std::fs::read_to_string(ws.join("note.txt")).unwrap(),
        "approved once"
    );
    let sent: Vec<Value> = std::fs::read_to_string(&requests)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["tool"], "write_text");
    assert_eq!(sent[0]["arguments"]["content"], "approved once");
    assert_eq!(sent[0]["call_id"], "p:w1");
    assert_eq!(sent[1]["call_id"], "p:w2");

    let run = summary["run_id"].as_str().unwrap();
    let a = approvals(&config, run);
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(a[0].0, "p:w1");
    assert_eq!(a[0].1[0].0, "asked");
    assert_eq!(a[0].1[0].1, sent[0]["digest"].as_str().unwrap());
    assert_eq!(
        a[0].1[1],
        (
            "approved".to_string(),
            "by a human, through the --approve-with command".to_string()
        )
    );
    // Each question binds its own call (the digest also covers its expiry second).
    assert_eq!(a[1].1[0].0, "asked");
    assert_eq!(a[1].1[0].1, sent[1]["digest"].as_str().unwrap());
    assert_eq!(a[1].1[1].0, "approval_denied");
    assert_eq!(a[1].2, "approval_denied");
}

/// A command that hangs approves nothing: the call ends `approval_required` (and can still be
/// approved with `toolhost approve`), the ledger says why, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_approver_approves_nothing() {
    let server = scripted(
        vec![
            Reply::Stream(tool_calls(
                &[("w1", "write_text", r#"{"path":"n.txt","content":"x"}"#)],
                8,
                10,
            )),
            Reply::Stream(text("ok", 1)),
        ],
        None,
    )
    .await;
    let (_dir, config, ws) = setup();
    let base = server.base_url();
    let mut args = agent_args(&config, &base);
    args.extend([
        "--approve-with",
        "sleep 30; echo approve",
        "--approval-timeout-secs",
        "1",
    ]);
    let out = toolhost(&args);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.elapsed < Duration::from_secs(25));
    assert_eq!(out.json()["failures"]["approval_required"], 1);
    assert!(!ws.join("n.txt").exists());
    let run = out.json()["run_id"].as_str().unwrap().to_string();
    let a = approvals(&config, &run);
    assert_eq!(
        a[0].1[1],
        (
            "unanswered".to_string(),
            "the --approve-with command: the command did not answer in time".to_string()
        )
    );
    assert_eq!(a[0].1[2].0, "approval_required");
}

/// A pseudo-terminal: the child's stdin and stderr are its slave side; the test reads the
/// master side (what the human sees) on a thread and types into it.
struct Pty {
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
}

impl Pty {
    fn open() -> (Pty, std::fs::File) {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        let master = std::fs::File::from(master);
        let seen = Arc::new(Mutex::new(String::new()));
        let (mut reader, log) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends when the child side closes (EIO) — bounded by the child's life.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        (Pty { master, seen }, slave)
    }

    /// Wait (bounded) until the screen shows `text` `n` times in all.
    fn wait_for(&self, text: &str, n: usize) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if self.seen.lock().unwrap().matches(text).count() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{text:?} did not appear {n} time(s): {}",
            self.seen.lock().unwrap()
        );
    }

    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }
}

/// At a terminal: the question shows the tool, the arguments and the digest; a typed `yes`
/// runs the first call once; the identical second call is asked again and `no` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_at_the_terminal() {
    let server = two_identical_writes().await;
    let (_dir, config, ws) = setup();
    let base = server.base_url();
    let (out, screen) = tokio::task::spawn_blocking(move || {
        let (mut pty, slave) = Pty::open();
        let child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(agent_args(&config, &base))
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let prompt = "Type yes to run it, no to refuse it:";
        pty.wait_for(prompt, 1);
        pty.type_line("yes");
        pty.wait_for(prompt, 2);
        pty.type_line("no");
        let out = child.wait_with_output().unwrap();
        let screen = pty.seen.lock().unwrap().clone();
        ((out, config), screen)
    })
    .await
    .unwrap();
    let ((out, config), screen) = (out, screen);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{screen}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["tool_calls"]["completed"], 1, "{summary}");
    assert_eq!(summary["failures"]["approval_denied"], 1, "{summary}");
    assert_eq!(
        std::fs::read_to_string(ws.join("note.txt")).unwrap(),
        "approved once"
    );
    for want in [
        "tool: write_text",
        "risk: write",
        "\"content\": \"approved once\"",
        "approval digest:",
    ] {
        assert!(screen.contains(want), "{want:?} not on screen: {screen}");
    }
    let run = summary["run_id"].as_str().unwrap();
    let a = approvals(&config, run);
    assert_eq!(a[0].1[1].1, "by a human, through the terminal");
    assert_eq!(a[1].1[1].0, "approval_denied");
}

/// Without a terminal and without `--approve-with`, such a call ends `approval_required`, as
/// before: nobody is asked, nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_nobody_is_asked() {
    let server = two_identical_writes().await;
    let (_dir, config, ws) = setup();
    let base = server.base_url();
    let out = toolhost(&agent_args(&config, &base));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json()["failures"]["approval_required"], 2);
    assert!(!ws.join("note.txt").exists());
}
