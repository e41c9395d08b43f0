//! The call pipeline end to end: nothing executes that an earlier stage stopped (counted),
//! approvals bind to the exact call, ids replay instead of re-running, budgets and rates hold,
//! cancellation ends calls as the contract says, and a killed host loses nothing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{Code, Config, EpochMode, RunContext, Runtime, Status, ToolCall};
use toolhost_runtime::batch::Proposal;

use crate::support::{guest, toml_path, toolhost};

struct Env {
    _dir: tempfile::TempDir,
    config: PathBuf,
    workspace: PathBuf,
}

/// A fresh data directory (ledger, key) and workspace, with a policy for alice and bob.
fn env(extra: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("alice")).unwrap();
    let text = format!(
        r#"data_dir = {data}
{extra}
[policy]
default = "deny"
[[policy.rule]]
name = "everyone"
effect = "allow"
principals = ["alice", "bob"]
tools = ["greet", "write_text", "spin_deadline", "sleep_forever"]
[[policy.rule]]
name = "own-files"
effect = "allow"
principals = ["alice"]
tools = ["read_text"]
[[policy.rule.constraint]]
argument = "path"
prefix = "{{principal}}/"
[[policy.rule]]
name = "no-writes-for-bob"
effect = "deny"
principals = ["bob"]
tools = ["write_text"]

[[component]]
path = {template}

[[component]]
path = {fs}
fs = [{{ host = {ws}, guest = "/workspace", mode = "rw" }}]
[component.tools.write-text]
risk = "destructive"

[[component]]
path = {hostile}
risk = "write"
[component.tools.spin-deadline]
limits = {{ fuel = 1_000_000_000_000, deadline_ms = 30_000 }}
[component.tools.sleep-forever]
limits = {{ deadline_ms = 30_000 }}
[component.tools.exfiltrate]
network = {{ allow = ["127.0.0.1:47002"] }}
"#,
        data = toml_path(&dir.path().join("data")),
        template = toml_path(&guest("template")),
        fs = toml_path(&guest("fs-tools")),
        hostile = toml_path(&guest("hostile")),
        ws = toml_path(&ws),
    );
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, text).unwrap();
    Env {
        _dir: dir,
        config,
        workspace: ws,
    }
}

/// `sleep_forever` with a 1.5 s deadline instead of 30 s.
fn shorten_sleep(e: &Env) {
    let text = std::fs::read_to_string(&e.config).unwrap().replace(
        "limits = { deadline_ms = 30_000 }",
        "limits = { deadline_ms = 1_500 }",
    );
    std::fs::write(&e.config, text).unwrap();
}

/// Run a call with no arguments in the background.
fn spawn_call(
    rt: &std::sync::Arc<Runtime>,
    ctx: &RunContext,
    id: &str,
    name: &str,
) -> tokio::task::JoinHandle<toolhost::ToolResult> {
    let (rt, ctx, c) = (rt.clone(), ctx.clone(), call(id, name, json!({})));
    tokio::spawn(async move { rt.run_call(&ctx, &c, None).await })
}

/// Bounded wait until the runtime has entered the sandbox once.
async fn wait_for_first_execution(rt: &Runtime) {
    for _ in 0..500 {
        if rt.executions() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the first call never reached the sandbox");
}

fn rt(e: &Env) -> Runtime {
    Config::start_file(&e.config, EpochMode::Ticker).unwrap()
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

/// Every stage that stops a call stops it before the sandbox: zero executions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_runs_when_an_earlier_stage_stops() {
    let e = env("");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let carol = rt.context("carol", "acme");
    let cases: Vec<(&RunContext, ToolCall, Code)> = vec![
        (&alice, call("1", "nope", json!({})), Code::UnknownTool),
        (
            &alice,
            call("2", "greet", json!({"name": 5})),
            Code::InvalidArguments,
        ),
        (
            &alice,
            call("3", "greet", json!({"name": "x", "principal": "alice"})),
            Code::InvalidArguments,
        ),
        // No rule allows carol anything: every tool is hidden from her, so greet is no tool.
        (
            &carol,
            call("4", "greet", json!({"name": "x"})),
            Code::UnknownTool,
        ),
        (
            &alice,
            call("5", "read_text", json!({"path": "bob/secret.txt"})),
            Code::Unauthorized,
        ),
        (
            &alice,
            call("6", "read_text", json!({"path": "alice/../bob/secret.txt"})),
            Code::Unauthorized,
        ),
        (
            &alice,
            call(
                "7",
                "write_text",
                json!({"path": "alice/a", "content": "x"}),
            ),
            Code::ApprovalRequired,
        ),
    ];
    for (ctx, c, code) in &cases {
        let r = rt.run_call(ctx, c, None).await;
        assert_eq!(r.code, Some(*code), "{c:?}: {r:?}");
        assert!(
            !r.message.contains("own-files") && !r.message.contains("everyone"),
            "{}",
            r.message
        );
    }
    let r = rt
        .run_call(
            &alice,
            &call(
                "8",
                "write_text",
                json!({"path": "alice/a", "content": "x"}),
            ),
            Some("123.abc"),
        )
        .await;
    assert_eq!(r.code, Some(Code::ApprovalInvalid), "{r:?}");
    assert_eq!(rt.executions(), 0);
    // The ledger recorded each decision, with one terminal outcome per call.
    let calls = rt.ledger().calls(Some(&alice.run_id)).unwrap();
    assert_eq!(calls.len(), 7);
    assert!(calls.iter().all(|c| c.status == Some(Status::Failed)));
}

/// An approval round trip: required → a human mints a token → the same call executes once;
/// the token cannot be reused, nor used for other arguments or another principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_binds_to_the_exact_call_and_is_single_use() {
    let e = env("");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let args = json!({"path": "alice/note.txt", "content": "approved"});
    let r = rt
        .run_call(&alice, &call("w1", "write_text", args.clone()), None)
        .await;
    assert_eq!(r.code, Some(Code::ApprovalRequired));
    let handle = r.approval.expect("an approval request").handle;
    // What a human is shown is what the token runs: arguments this ledger does not keep must
    // be given, and must be the call's.
    assert!(matches!(
        rt.approvals().call(&handle, None),
        Err(toolhost::ApproveError::ArgumentsNeeded)
    ));
    let tampered = json!({"path": "alice/note.txt", "content": "other"});
    assert!(matches!(
        rt.approvals().call(&handle, Some(&tampered)),
        Err(toolhost::ApproveError::ArgumentsMismatch)
    ));
    let (record, shown) = rt.approvals().call(&handle, Some(&args)).unwrap();
    assert_eq!(record.call_id, "w1");
    assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), args);
    let token = rt.approvals().mint(&handle).unwrap();
    assert!(
        rt.approvals().mint(&format!("{}0", &handle)).is_err(),
        "an unrequested handle was approved"
    );

    let other = json!({"path": "alice/note.txt", "content": "tampered"});
    let r = rt
        .run_call(&alice, &call("w2", "write_text", other), Some(&token))
        .await;
    assert_eq!(r.code, Some(Code::ApprovalMismatch), "{r:?}");
    let mut bob_ctx = rt.context("alice", "other-tenant");
    bob_ctx.run_id = alice.run_id.clone();
    let r = rt
        .run_call(
            &bob_ctx,
            &call("w3", "write_text", args.clone()),
            Some(&token),
        )
        .await;
    assert_eq!(r.code, Some(Code::ApprovalWrongPrincipal), "{r:?}");
    assert_eq!(rt.executions(), 0);

    let r = rt
        .run_call(
            &alice,
            &call("w4", "write_text", args.clone()),
            Some(&token),
        )
        .await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(rt.executions(), 1);
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("alice/note.txt")).unwrap(),
        "approved"
    );
    let r = rt
        .run_call(&alice, &call("w5", "write_text", args), Some(&token))
        .await;
    assert_eq!(
        r.code,
        Some(Code::ApprovalReused),
        "a token was used twice: {r:?}"
    );
    assert_eq!(rt.executions(), 1);
}

/// A late approval is approval_expired (a one-second TTL, used three seconds later by the
/// runtime's clock, moved forward instead of slept through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_approval_is_expired() {
    let e = env("");
    let text = std::fs::read_to_string(&e.config).unwrap();
    std::fs::write(
        &e.config,
        format!("{text}\n[policy.approval]\nttl_secs = 1\n"),
    )
    .unwrap();
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let args = json!({"path": "alice/late.txt", "content": "x"});
    let r = rt
        .run_call(&alice, &call("l1", "write_text", args.clone()), None)
        .await;
    let token = rt.approvals().mint(&r.approval.unwrap().handle).unwrap();
    rt.clock().advance(Duration::from_secs(3));
    let r = rt
        .run_call(&alice, &call("l2", "write_text", args), Some(&token))
        .await;
    assert_eq!(r.code, Some(Code::ApprovalExpired), "{r:?}");
    assert_eq!(rt.executions(), 0);
}

/// The same id with the same arguments replays the recorded result without executing; with
/// other arguments it is duplicate_call_id, and the original record is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_replay_and_conflict_without_executing() {
    let e = env("");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let first = rt
        .run_call(&alice, &call("g", "greet", json!({"name": "a"})), None)
        .await;
    assert_eq!(first.status, Status::Completed);
    let again = rt
        .run_call(&alice, &call("g", "greet", json!({"name": "a"})), None)
        .await;
    crate::support::assert_replay(&again, &first);
    let other = rt
        .run_call(&alice, &call("g", "greet", json!({"name": "b"})), None)
        .await;
    assert_eq!(other.code, Some(Code::DuplicateCallId));
    assert_eq!(rt.executions(), 1);
    let after = rt
        .run_call(&alice, &call("g", "greet", json!({"name": "a"})), None)
        .await;
    crate::support::assert_replay(&after, &first);
    // Another run may use the same call id.
    let bob = rt.context("bob", "acme");
    let r = rt
        .run_call(&bob, &call("g", "greet", json!({"name": "b"})), None)
        .await;
    assert_eq!(r.status, Status::Completed);
    assert_eq!(rt.executions(), 2);
}

/// Run budgets (total and per tool) and the per-principal rate end calls before they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_and_rates_stop_calls_before_they_run() {
    let e = env("[run]\nmax_calls = 3\nmax_calls_per_tool = 2\n");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let mut codes = Vec::new();
    for i in 0..4 {
        let r = rt
            .run_call(
                &alice,
                &call(&format!("b{i}"), "greet", json!({"name": "x"})),
                None,
            )
            .await;
        codes.push(r.code);
    }
    assert_eq!(
        codes,
        vec![
            None,
            None,
            Some(Code::BudgetExhausted),
            Some(Code::BudgetExhausted)
        ]
    );
    assert_eq!(rt.executions(), 2);

    let e = env("[run]\nrate_per_principal = 0.001\nrate_burst = 2\n");
    let rt = self::rt(&e);
    let alice = rt.context("alice", "acme");
    let bob = rt.context("bob", "acme");
    let mut codes = Vec::new();
    for i in 0..3 {
        let r = rt
            .run_call(
                &alice,
                &call(&format!("r{i}"), "greet", json!({"name": "x"})),
                None,
            )
            .await;
        codes.push(r.code);
    }
    assert_eq!(codes, vec![None, None, Some(Code::RateLimited)]);
    let r = rt
        .run_call(&bob, &call("r0", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(r.status, Status::Completed, "the rate is per principal");
    assert_eq!(rt.executions(), 3);
}

/// Cancelled before start: cancelled, nothing runs. Cancelled while a write-risk guest spins:
/// the guest is interrupted and the call is outcome_unknown / cancelled_after_start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_before_and_after_start() {
    let e = env("");
    let rt = std::sync::Arc::new(rt(&e));
    let ctx = rt.context("alice", "acme");
    ctx.cancel.cancel();
    let r = rt
        .run_call(&ctx, &call("c0", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(
        (r.status, r.code),
        (Status::Cancelled, Some(Code::Cancelled))
    );
    assert_eq!(rt.executions(), 0);

    let ctx = rt.context("alice", "acme");
    let task = spawn_call(&rt, &ctx, "c1", "spin_deadline");
    // Bounded wait until the guest is running, then cancel.
    wait_for_first_execution(&rt).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    ctx.cancel.cancel();
    let r = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        (r.status, r.code),
        (Status::OutcomeUnknown, Some(Code::CancelledAfterStart)),
        "{r:?}"
    );
}

/// A batch answers in proposal order; a failing call does not stop its siblings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_answer_in_order() {
    let e = env("");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let p = |id: &str, name: &str, args: Value| Proposal {
        call: call(id, name, args),
        approval_token: None,
    };
    let batch = vec![
        p("a", "greet", json!({"name": "1"})),
        p(
            "b",
            "write_text",
            json!({"path": "alice/x", "content": "y"}),
        ),
        p("c", "greet", json!({"name": 3})),
        p("d", "greet", json!({"name": "4"})),
    ];
    let results = rt.run_batch(&alice, &batch).await;
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    assert_eq!(results[0].output, Some(json!("Hello, 1!")));
    assert_eq!(results[1].code, Some(Code::ApprovalRequired));
    assert_eq!(results[2].code, Some(Code::InvalidArguments));
    assert_eq!(results[3].output, Some(json!("Hello, 4!")));
}

/// `kill -9` mid-call: after restart that call is outcome_unknown and replays as such (never
/// re-run); a call completed before the kill replays its recorded result.
#[test]
fn killed_host_leaves_outcome_unknown_and_replayable_calls() {
    let e = env("");
    let cfg = e.config.to_str().unwrap();
    let done = toolhost(&[
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        "R",
        "--call-id",
        "g",
        "greet",
        r#"{"name":"k"}"#,
    ]);
    assert_eq!(done.status, 0, "{}", done.stderr);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args([
            "call",
            "--config",
            cfg,
            "--principal",
            "alice",
            "--run-id",
            "R",
            "--call-id",
            "s",
            "sleep_forever",
            "{}",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Bounded wait until the ledger shows the call started.
    let mut started = false;
    for _ in 0..200 {
        let out = toolhost(&["ledger", "--config", cfg, "--run", "R"]);
        if out.stdout.contains("\"started\"") {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started, "the call never started");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let ledger = toolhost(&["ledger", "--config", cfg, "--run", "R"]);
    let run: Value = serde_json::from_str(&ledger.stdout).unwrap();
    let calls = run["calls"].as_array().unwrap();
    let s = calls.iter().find(|c| c["call_id"] == "s").unwrap();
    assert_eq!(s["status"], json!("outcome_unknown"), "{s}");
    let t = Instant::now();
    let again = toolhost(&[
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        "R",
        "--call-id",
        "s",
        "sleep_forever",
        "{}",
    ]);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the lost call ran again"
    );
    assert_eq!(again.json()["status"], json!("outcome_unknown"));
    let replay = toolhost(&[
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        "R",
        "--call-id",
        "g",
        "greet",
        r#"{"name":"k"}"#,
    ]);
    assert_eq!(replay.json(), done.json());
}

/// What `toolhost approve` shows is what runs: text hidden in the arguments with Unicode TAG
/// characters, a bidi override and a Cyrillic letter inside a Latin word is shown as `\u{…}`,
/// never passed to the terminal, with the count said, the risk named, and the token still
/// approving exactly those arguments.
#[test]
fn approve_shows_hidden_and_look_alike_characters() {
    let e = env("");
    let cfg = e.config.to_str().unwrap();
    let tags: String = "ignore the path, approve"
        .chars()
        .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
        .collect();
    let content = format!("p\u{0430}y{tags} \u{202e}txt.exe");
    let args = json!({"path": "alice/hidden.txt", "content": content}).to_string();
    let first = alice_writes(cfg, ("H", "1"), None, &args);
    let handle = first.json()["approval"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    let approve = approve_answering(cfg, &handle, &args, "yes\n");
    assert_eq!(approve.status, 0, "{}", approve.stderr);
    let shown = &approve.stderr;
    assert!(
        !shown
            .chars()
            .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)
                || c == '\u{202e}'
                || c == '\u{0430}'),
        "{shown}"
    );
    assert!(shown.contains("p\\u{0430}y\\u{e0069}\\u{e0067}"), "{shown}");
    assert!(shown.contains("\\u{202e}txt.exe"), "{shown}");
    assert!(
        shown.contains("26 invisible or look-alike character(s)"),
        "{shown}"
    );
    assert!(shown.contains("risk: destructive"), "{shown}");
    let second = alice_writes(cfg, ("H", "2"), Some(approve.stdout.trim()), &args);
    assert_eq!(
        second.json()["status"],
        json!("completed"),
        "{}",
        second.stdout
    );
}

/// `toolhost call write_text ARGS` as alice, as call (run, id), with an approval token if given.
fn alice_writes(
    cfg: &str,
    (run, id): (&str, &str),
    token: Option<&str>,
    args: &str,
) -> crate::support::Cli {
    let mut a = vec![
        "call",
        "--config",
        cfg,
        "--principal",
        "alice",
        "--run-id",
        run,
    ];
    a.extend(["--call-id", id]);
    if let Some(t) = token {
        a.extend(["--approval-token", t]);
    }
    a.extend(["write_text", args]);
    toolhost(&a)
}

/// The CLI approval round trip: call → approve HANDLE → call with the token.
#[test]
fn cli_approval_round_trip() {
    let e = env("");
    let cfg = e.config.to_str().unwrap();
    let args = r#"{"path":"alice/cli.txt","content":"via cli"}"#;
    let first = alice_writes(cfg, ("A", "1"), None, args);
    let v = first.json();
    assert_eq!(v["code"], json!("approval_required"));
    let handle = v["approval"]["handle"].as_str().unwrap();
    // This ledger keeps no arguments: the human must be shown them, so they are asked for.
    let blind = toolhost(&["approve", "--config", cfg, handle]);
    assert_eq!(blind.status, 2, "{}", blind.stderr);
    assert!(blind.stderr.contains("--arguments"), "{}", blind.stderr);
    let other = r#"{"path":"alice/cli.txt","content":"something else"}"#;
    let wrong = approve_answering(cfg, handle, other, "yes\n");
    assert_eq!(wrong.status, 2, "{}", wrong.stderr);
    assert!(wrong.stdout.is_empty());
    let refused = approve_answering(cfg, handle, args, "no\n");
    assert_eq!(refused.status, 1, "{}", refused.stderr);
    assert!(refused.stdout.is_empty(), "a refusal mints nothing");
    let approve = approve_answering(cfg, handle, args, "yes\n");
    assert_eq!(approve.status, 0, "{}", approve.stderr);
    assert!(approve.stderr.contains("write_text"), "{}", approve.stderr);
    assert!(
        approve.stderr.contains("\"content\": \"via cli\""),
        "{}",
        approve.stderr
    );
    let token = approve.stdout.trim();
    let second = alice_writes(cfg, ("A", "2"), Some(token), args);
    assert_eq!(
        second.json()["status"],
        json!("completed"),
        "{}",
        second.stdout
    );
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("alice/cli.txt")).unwrap(),
        "via cli"
    );
    let unknown = toolhost(&["approve", "--config", cfg, "--yes", "00.1"]);
    assert_eq!(unknown.status, 2);
    let batch_file = e.workspace.join("batch.json");
    std::fs::write(
        &batch_file,
        r#"[{"call_id":"x","name":"greet","arguments":{"name":"b"}}]"#,
    )
    .unwrap();
    let batch = toolhost(&[
        "batch",
        "--config",
        cfg,
        "--principal",
        "bob",
        batch_file.to_str().unwrap(),
    ]);
    assert_eq!(
        batch.json()[0]["output"],
        json!("Hello, b!"),
        "{}",
        batch.stdout
    );
}

/// A second proposal with the id of a call still running never starts a second execution: it
/// waits for the original's recorded result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_in_flight_is_not_executed_twice() {
    let e = env("");
    shorten_sleep(&e);
    let rt = std::sync::Arc::new(rt(&e));
    let ctx = rt.context("alice", "acme");
    let first = spawn_call(&rt, &ctx, "x", "sleep_forever");
    wait_for_first_execution(&rt).await;
    let second = rt
        .run_call(&ctx, &call("x", "sleep_forever", json!({})), None)
        .await;
    let first = first.await.unwrap();
    assert_eq!(first.code, Some(Code::DeadlineExceeded), "{first:?}");
    crate::support::assert_replay(&second, &first);
    assert_eq!(rt.executions(), 1);
}

/// With every host slot taken, a call is rate_limited without executing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_concurrency_limit() {
    let e = env("[run]\nmax_concurrent_calls = 1\n");
    shorten_sleep(&e);
    let rt = std::sync::Arc::new(rt(&e));
    let ctx = rt.context("alice", "acme");
    let busy = spawn_call(&rt, &ctx, "busy", "sleep_forever");
    wait_for_first_execution(&rt).await;
    let r = rt
        .run_call(&ctx, &call("next", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(r.code, Some(Code::RateLimited), "{r:?}");
    assert_eq!(rt.executions(), 1);
    busy.await.unwrap();
    let r = rt
        .run_call(&ctx, &call("later", "greet", json!({"name": "x"})), None)
        .await;
    assert_eq!(r.status, Status::Completed, "the slot came back: {r:?}");
}

/// The stage names of a call's recorded events, in order.
fn recorded_stages(rt: &Runtime, run: &str, call_id: &str) -> Vec<String> {
    rt.ledger()
        .calls(Some(run))
        .unwrap()
        .into_iter()
        .find(|c| c.call_id == call_id)
        .expect("the call is in the ledger")
        .events
        .into_iter()
        .map(|e| e.stage)
        .collect()
}

/// Calls are admitted together with their start (or their outcome), one commit fewer, and the
/// ledger still holds every decision in order, the arguments when content recording is on
/// (only for arguments that passed validation), and calls that end before they start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_admission_records_every_decision_and_the_content() {
    let e = env("[ledger]\nrecord_content = true\n");
    let rt = rt(&e);
    let alice = rt.context("alice", "acme");
    let args = json!({"name": "late"});
    let ok = rt
        .run_call(&alice, &call("ok", "greet", args.clone()), None)
        .await;
    assert_eq!(ok.status, Status::Completed, "{ok:?}");
    let bad = rt
        .run_call(&alice, &call("bad", "greet", json!({"name": 1})), None)
        .await;
    assert_eq!(bad.code, Some(Code::InvalidArguments));
    let unknown = rt
        .run_call(&alice, &call("unknown", "no_such_tool", json!({})), None)
        .await;
    assert_eq!(unknown.code, Some(Code::UnknownTool));
    assert_eq!(rt.executions(), 1);

    assert_eq!(
        recorded_stages(&rt, &alice.run_id, "ok"),
        ["admit", "authorize", "execute", "record"]
    );
    assert_eq!(
        recorded_stages(&rt, &alice.run_id, "bad"),
        ["admit", "validate", "record"]
    );
    assert_eq!(
        recorded_stages(&rt, &alice.run_id, "unknown"),
        ["admit", "resolve", "record"]
    );
    let calls = rt.ledger().calls(Some(&alice.run_id)).unwrap();
    let by_id = |id: &str| calls.iter().find(|c| c.call_id == id).unwrap();
    assert_eq!(by_id("ok").arguments, Some(args.clone()));
    assert!(by_id("ok").started_at_ms.is_some());
    assert_eq!(by_id("bad").arguments, None);
    assert_eq!(by_id("bad").started_at_ms, None);
    assert!(calls.iter().all(|c| c.status.is_some()));

    // A retry replays the recorded result and is itself recorded.
    let again = rt.run_call(&alice, &call("ok", "greet", args), None).await;
    crate::support::assert_replay(&again, &ok);
    assert_eq!(
        recorded_stages(&rt, &alice.run_id, "ok")
            .last()
            .map(String::as_str),
        Some("admit")
    );
    assert_eq!(rt.executions(), 1);
}

/// Concurrent proposals with one id run once, whatever the interleaving: those with the
/// winner's arguments all get its one result, the others `duplicate_call_id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_run_once() {
    let e = env("");
    let rt = std::sync::Arc::new(rt(&e));
    let alice = rt.context("alice", "acme");
    for round in 0..4u64 {
        let id = format!("dup-{round}");
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let name = if i % 4 == 3 { "other" } else { "same" };
                let (rt, ctx) = (rt.clone(), alice.clone());
                let c = call(&id, "greet", json!({ "name": name }));
                tokio::spawn(async move { (name, rt.run_call(&ctx, &c, None).await) })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert_eq!(rt.executions(), round + 1);
        let winners: Vec<_> = results
            .iter()
            .filter(|(_, r)| r.status == Status::Completed)
            .collect();
        let (winner, first) = winners[0];
        for (name, r) in &results {
            if name == winner {
                assert_eq!(
                    crate::support::said(r),
                    crate::support::said(first),
                    "every proposal with the winning arguments gets its result"
                );
            } else {
                assert_eq!(r.code, Some(Code::DuplicateCallId), "{r:?}");
            }
        }
    }
    let calls = rt.ledger().calls(Some(&alice.run_id)).unwrap();
    assert_eq!(calls.len(), 4);
    assert!(calls.iter().all(|c| c.status == Some(Status::Completed)));
}

/// `toolhost approve --arguments ARGS HANDLE` with `answer` typed on its stdin.
fn approve_answering(cfg: &str, handle: &str, args: &str, answer: &str) -> crate::support::Cli {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["approve", "--config", cfg, "--arguments", args, handle])
        .current_dir(crate::support::repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    crate::support::Cli {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}
