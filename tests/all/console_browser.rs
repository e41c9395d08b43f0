//! The approval console in a real browser: Debian's Chromium, driven by Playwright
//! (`tests/console/drive.mjs`, installed by `just setup-console`). An operator signs in, sees
//! the waiting calls, reads one whose arguments carry markup and hidden TAG characters (shown
//! as text, nothing injected, no script run), approves it once, follows it to its receipt and
//! its run's timeline, and denies another; a page of another origin that posts an approval in
//! the same browser is refused. The test takes the screenshot `target/console-approval.png`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::console::{console_section, hostile_filename, OPERATOR};
use crate::mcp::http_serve;
use crate::mcp_tasks::{config_serving, deletes_run, start, until, PATIENCE};
use crate::support::repo;

/// A page of another origin that posts an approval of `task` to `target` as it loads, served
/// on loopback to at most 4 requests within 300 s (then the thread ends).
fn forger(target: &str, task: &str) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let page = format!(
        "<!doctype html><form id=f method=post action=\"{target}\">\
         <input name=id value=\"{task}\"><input name=decision value=approve>\
         <input name=csrf value=guessed></form>\
         <script>document.getElementById('f').submit()</script>"
    );
    let served = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(300);
        let mut answered = 0;
        while answered < 4 && Instant::now() < until {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            answered += 1;
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    (url, served)
}

/// An operator approves a hostile-looking call once and denies another in Chromium; the page
/// shows the call as text only; a cross-origin post is refused; the receipt and the timeline
/// show the approved call.
#[test]
fn an_operator_approves_and_denies_in_chromium() {
    let (_dir, cfg) = config_serving("", &console_section());
    let host = http_serve(&cfg);
    let base = host.url.trim_end_matches("/mcp").to_string();
    let approve = start(
        &host,
        "confirm_delete",
        json!({"filename": hostile_filename()}),
    );
    let deny = start(&host, "confirm_delete", json!({"filename": "keep.txt"}));
    until(&host, &approve, "input_required", PATIENCE);
    until(&host, &deny, "input_required", PATIENCE);
    let (forger_url, served) = forger(&format!("{base}/console/task"), &approve);
    let shot = repo().join("target/console-approval.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new("node")
        .arg(repo().join("tests/console/drive.mjs"))
        .current_dir(repo().join("tests/console"))
        .env("CONSOLE", &base)
        .env("OPERATOR", OPERATOR)
        .env("APPROVE", &approve)
        .env("DENY", &deny)
        .env("FORGER", &forger_url)
        .env("SHOT", &shot)
        .output()
        .expect("node runs (just setup-console installs playwright-core and chromium)");
    drop(served); // it ends by itself
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
    assert_eq!(seen["signInShown"], 1, "{seen}");
    assert_eq!(seen["operator"], "ops-one", "{seen}");
    assert_eq!(seen["waitingRows"], 2, "{seen}");
    assert_eq!(seen["heading"], "Approve this tool call?", "{seen}");
    // Markup is text, the TAG characters are shown as escapes, and nothing ran or loaded.
    let shown = seen["arguments"].as_str().unwrap();
    assert!(
        shown.contains("<img src=x onerror=alert(1)><script>alert(2)</script>a.txt"),
        "{shown}"
    );
    assert!(shown.contains("\\u{e0061}\\u{e0070}\\u{e0070}"), "{shown}");
    assert!(seen["description"]
        .as_str()
        .unwrap()
        .contains("<script>alert(2)</script>"));
    assert_eq!(seen["injected"], 0, "{seen}");
    assert_eq!(seen["injectedAfter"], 0, "{seen}");
    assert_eq!(seen["dialogs"], 0, "{seen}");
    assert_eq!(
        seen["cookieVisibleToScript"], 0,
        "the session cookie is HttpOnly: {seen}"
    );
    // The forged cross-origin approval was refused and changed nothing.
    assert_eq!(seen["forgedStatus"], 403, "{seen}");
    assert_eq!(
        seen["headingAfterForgery"], "Approve this tool call?",
        "{seen}"
    );
    // Approved once: completed, its output text; the receipt and the timeline show it.
    assert_eq!(seen["approvedState"], "completed", "{seen}");
    let output = seen["approvedOutput"].as_str().unwrap();
    assert!(output.contains("deleted <img src=x"), "{output}");
    let receipt = seen["receipt"].as_str().unwrap();
    assert!(
        receipt.contains("\"tool\": \"confirm_delete\""),
        "{receipt}"
    );
    assert!(receipt.contains("~approved"), "{receipt}");
    assert!(seen["timelineCalls"].as_u64().unwrap() >= 3, "{seen}");
    assert!(seen["timeline"]
        .as_str()
        .unwrap()
        .contains("approval_required"));
    assert_eq!(seen["deniedCode"], "approval_denied", "{seen}");
    assert_eq!(seen["waitingAfter"], 0, "{seen}");
    assert_eq!(seen["cspViolations"], 0, "{seen}");
    assert_eq!(deletes_run(&cfg), 1, "the approved call ran once");
    assert!(shot.exists(), "the screenshot was taken");
}
