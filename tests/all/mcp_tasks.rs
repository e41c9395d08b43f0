//! MCP tasks over Streamable HTTP (2026-07-28 requests that declare the tasks extension):
//! a task answered at once and polled to its end; a cancel that stops the guest; a task that
//! waits for approval and runs once approved; one caller's task hidden from another. On
//! PostgreSQL (`pg_`): a task started on one host is polled, cancelled and approved through
//! another, and a task whose host is killed ends `outcome_unknown` and is reconciled.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{http_serve, HttpServer};
use crate::mcp_stateless::{answer, http_post, routing_headers, MODERN};
use crate::multi_host::Schema;
use crate::support::{guest, toml_path, toolhost};
use toolhost::contract::Caller;
use toolhost::serve::stateless::run_of;

const ALICE: &str = "alice-token";
const MALLORY: &str = "mallory-token";

/// The longest a task may take to reach the state a test waits for: wide, since a debug host
/// compiles the guest on its first call.
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// The longest a cancel may take to stop a running guest, asked on this host or another: the
/// running host reads cancel marks every 250 ms and the guest stops at its next epoch tick
/// (10 ms); a wide margin for loaded machines.
const CANCEL_BOUND: Duration = Duration::from_secs(10);

/// A config with the conformance guest's task tools (`slow_compute` optional and `write`, so a
/// start is committed before it runs; `confirm_delete` optional and needing approval) and
/// `greet`, alice and mallory as bearer-token callers, and `ledger` as its ledger section.
fn config(ledger: &str) -> (tempfile::TempDir, PathBuf) {
    config_serving(ledger, "")
}

/// [`config`] with `serve` added to its `[serve]` section.
pub(crate) fn config_serving(ledger: &str, serve: &str) -> (tempfile::TempDir, PathBuf) {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let token = |t: &str, who: &str| {
        format!(
            "[[serve.token]]\nsha256 = \"{}\"\nprincipal = \"{who}\"\ntenant = \"{who}-corp\"\n",
            hex::encode(Sha256::digest(t.as_bytes()))
        )
    };
    let text = format!(
        "data_dir = {data}\n{ledger}\n[serve]\n{serve}\n{alice}{mallory}\n\
         [[component]]\npath = {conformance}\n\
         [component.tools.slow-compute]\nrisk = \"write\"\ntask = \"optional\"\nlimits = {{ deadline_ms = 150_000 }}\n\
         [component.tools.confirm-delete]\ntask = \"optional\"\napproval = \"required\"\n\
         [[component]]\npath = {template}\n",
        data = toml_path(&dir.path().join("data")),
        alice = token(ALICE, "alice"),
        mallory = token(MALLORY, "mallory"),
        conformance = toml_path(&guest("conformance")),
        template = toml_path(&guest("template")),
    );
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A 2026-07-28 request that declares the tasks extension (or not), in alice's run `r1`.
pub(crate) fn request(id: u64, method: &str, mut params: Value, tasks: bool) -> Value {
    let mut caps = json!({"elicitation": {"form": {}}});
    if tasks {
        caps["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "toolhost/run": "r1",
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `message` to `server` as `token`, with its routing headers: the JSON-RPC answer.
pub(crate) fn send(server: &HttpServer, token: &str, message: &Value) -> Value {
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    headers.extend(routing_headers(message));
    let (_, _, body) = http_post(addr, &headers, message).expect("an HTTP answer");
    answer(&body, &message["id"])
}

/// Start `tool` with `arguments` as a task on `server`: its id.
pub(crate) fn start(server: &HttpServer, tool: &str, arguments: Value) -> String {
    let params = json!({"name": tool, "arguments": arguments});
    let created = send(server, ALICE, &request(1, "tools/call", params, true));
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_string()
}

/// `tasks/get` of `task` on `server` as `token`.
fn get(server: &HttpServer, token: &str, task: &str) -> Value {
    send(
        server,
        token,
        &request(2, "tasks/get", json!({"taskId": task}), true),
    )
}

/// Poll `task` on `server` until its status is `want` (bounded by `within`): the task.
pub(crate) fn until(server: &HttpServer, task: &str, want: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let got = get(server, ALICE, task);
        if got["result"]["status"] == want {
            return got["result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "task {task} is not {want} after {within:?}: {got}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cancel `task` through `server`: the ack.
fn cancel(server: &HttpServer, token: &str, task: &str) -> Value {
    send(
        server,
        token,
        &request(3, "tasks/cancel", json!({"taskId": task}), true),
    )
}

/// Answer `task`'s approval question through `server` with `approve`.
fn answer_approval(server: &HttpServer, task: &str, approve: bool) -> Value {
    let responses = json!({"approval": {"action": "accept", "content": {"approve": approve}}});
    let params = json!({"taskId": task, "inputResponses": responses});
    send(server, ALICE, &request(4, "tasks/update", params, true))
}

/// The calls of alice's run `r1` in the ledger.
pub(crate) fn calls(config: &std::path::Path) -> Vec<Value> {
    listing(config)["calls"].as_array().unwrap().clone()
}

/// `toolhost ledger --run` of alice's run `r1`.
fn listing(config: &std::path::Path) -> Value {
    listing_of(config, ("alice", "alice-corp"))
}

/// `toolhost ledger --run` of run `r1` of `principal` of `tenant`.
fn listing_of(config: &std::path::Path, (principal, tenant): (&str, &str)) -> Value {
    let alice = Caller::new(principal, tenant);
    let run = run_of(&alice, "r1");
    let out = toolhost(&[
        "ledger",
        "--config",
        config.to_str().unwrap(),
        "--run",
        &run,
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()
}

/// On one host: a task is answered at once and polled to its result; another caller is told
/// there is no such task (`-32602`, for get and cancel); a cancel stops a long guest within
/// the bound and the task ends as the ledger says (`failed`: `outcome_unknown`,
/// `cancelled_after_start`, since a `write` tool's effect is unknown once it started); a client without the extension gets the answer
/// in the request; and the host keeps serving.
#[test]
fn a_task_is_polled_to_its_end_and_cancelled_on_one_host() {
    let (_dir, cfg) = config("");
    let host = http_serve(&cfg);
    let task = start(&host, "slow_compute", json!({"seconds": 1, "label": "a"}));
    for token in [MALLORY] {
        for hidden in [get(&host, token, &task), cancel(&host, token, &task)] {
            assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
        }
    }
    let done = until(&host, &task, "completed", PATIENCE);
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "computed a in 1 s"}),
        "{done}"
    );
    assert_eq!(done["result"]["isError"], false);

    let long = start(&host, "slow_compute", json!({"seconds": 120, "label": "b"}));
    until(&host, &long, "working", PATIENCE);
    std::thread::sleep(Duration::from_millis(500)); // into the guest's sleep
    let asked = Instant::now();
    let ack = cancel(&host, ALICE, &long);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let stopped = until(&host, &long, "failed", CANCEL_BOUND);
    assert!(asked.elapsed() < CANCEL_BOUND);
    assert_eq!(
        stopped["error"]["data"]["toolhost/failure"]["status"], "outcome_unknown",
        "{stopped}"
    );
    assert_eq!(
        stopped["error"]["data"]["toolhost/failure"]["code"], "cancelled_after_start",
        "{stopped}"
    );
    let again = cancel(&host, ALICE, &long);
    assert_eq!(
        again["result"],
        json!({"resultType": "complete"}),
        "idempotent"
    );

    let params = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "c"}});
    let sync = send(&host, ALICE, &request(5, "tools/call", params, false));
    assert_eq!(sync["result"]["resultType"], "complete", "{sync}");
    assert!(sync["result"].get("taskId").is_none(), "{sync}");
    let params = json!({"name": "greet", "arguments": {"name": "still here"}});
    let greet = send(&host, ALICE, &request(6, "tools/call", params, true));
    assert_eq!(greet["result"]["isError"], false, "{greet}");
}

/// `message` to `server` as alice with exactly `headers` (and her token): status and body.
fn post_with(server: &HttpServer, headers: &[(&str, &str)], message: &Value) -> (u16, String) {
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut all = vec![("Authorization".to_string(), format!("Bearer {ALICE}"))];
    all.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let (status, _, body) = http_post(addr, &all, message).expect("an HTTP answer");
    (status, body)
}

/// `tasks/get`, `tasks/update` and `tasks/cancel` are served without an `Mcp-Name` header (the
/// official Python SDK sends none there), and refused `-32020` with one that names another
/// task; a `tools/call` without any routing header is one 400 that names all three.
#[test]
fn task_requests_need_no_name_header_but_a_wrong_one_is_refused() {
    let (_dir, cfg) = config("");
    let host = http_serve(&cfg);
    let task = start(&host, "slow_compute", json!({"seconds": 120, "label": "n"}));
    let version = ("MCP-Protocol-Version", MODERN);
    for (id, method) in [(20, "tasks/get"), (21, "tasks/update")] {
        let mut params = json!({"taskId": task});
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        let message = request(id, method, params, true);
        let (status, body) = post_with(&host, &[version, ("Mcp-Method", method)], &message);
        let got = answer(&body, &json!(id));
        assert_ne!(
            got["error"]["code"], -32020,
            "{method} without Mcp-Name: {body}"
        );
        assert_eq!(status, 200, "{method}: {body}");
        let (status, body) = post_with(
            &host,
            &[version, ("Mcp-Method", method), ("Mcp-Name", "task-other")],
            &message,
        );
        assert_eq!(status, 400, "{method} with another task's name: {body}");
        assert_eq!(answer(&body, &json!(id))["error"]["code"], -32020, "{body}");
    }
    let got = answer(
        &post_with(
            &host,
            &[version, ("Mcp-Method", "tasks/get")],
            &request(22, "tasks/get", json!({"taskId": task}), true),
        )
        .1,
        &json!(22),
    );
    assert_eq!(got["result"]["status"], "working", "{got}");
    let (status, body) = post_with(
        &host,
        &[version, ("Mcp-Method", "tasks/cancel")],
        &request(23, "tasks/cancel", json!({"taskId": task}), true),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        answer(&body, &json!(23))["result"]["resultType"],
        "complete",
        "{body}"
    );

    let params = json!({"name": "greet", "arguments": {"name": "x"}});
    let (status, body) = post_with(&host, &[], &request(24, "tools/call", params, false));
    assert_eq!(status, 400, "{body}");
    let error = &answer(&body, &json!(24))["error"];
    assert_eq!(error["code"], -32020, "{body}");
    assert_eq!(
        error["data"]["missing"],
        json!(["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"]),
        "{body}"
    );
}

/// The official Python SDK's 2026-07-28 client over HTTP, with the tasks extension written on
/// the SDK's own extension interface (`tests/mcp/client.py tasks`; the SDK sends no `Mcp-Name`
/// on `tasks/*`): a task polled to its result; a write task that waits for approval runs once
/// after a yes through `tasks/update`, and ends `approval_denied` after a no; a running write
/// task cancelled through `tasks/cancel` ends failed, `cancelled_after_start`.
#[test]
fn the_python_sdk_runs_tasks_over_http() {
    let (_dir, cfg) = config("");
    let host = http_serve(&cfg);
    let out = crate::mcp::client("tasks", &["--url", &host.url, "--token", ALICE]);
    let f = &out.facts;
    assert_eq!(
        f["polled"]["statuses"],
        json!(["working", "completed"]),
        "{f}"
    );
    assert_eq!(
        f["polled"]["output"],
        json!({"result": "computed sdk in 1 s"}),
        "{f}"
    );
    assert_eq!(
        f["approved"]["statuses"],
        json!(["input_required", "completed"]),
        "{f}"
    );
    assert_eq!(f["approved"]["questions"], 1, "{f}");
    assert_eq!(
        f["approved"]["output"],
        json!({"result": "deleted yes.txt"}),
        "{f}"
    );
    assert_eq!(f["denied"]["questions"], 1, "{f}");
    assert_eq!(f["denied"]["code"], "approval_denied", "{f}");
    assert_eq!(
        f["cancelled"]["statuses"],
        json!(["working", "failed"]),
        "{f}"
    );
    assert_eq!(f["cancelled"]["code"], "cancelled_after_start", "{f}");
}

/// A handshake-era session that declares the tasks extension (the Inspector does, by default)
/// never gets a 2026-07-28 task result: an `optional` task tool answers in the request, with
/// its structured content; a `required` one is refused `-32600`, naming the revision it needs.
#[test]
fn a_handshake_session_never_gets_a_task_result() {
    let (_dir, cfg) = config("");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "[component.tools.confirm-delete]",
        "[component.tools.failing-job]\ntask = \"required\"\n[component.tools.confirm-delete]",
    );
    std::fs::write(&cfg, text).unwrap();
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut session = crate::mcp_frames::Serve::start_declaring(&cfg, caps);
    let call = |id: u64, tool: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}})
        .to_string()
    };
    session.frame(call(1, "slow_compute", json!({"seconds": 0, "label": "s"})).as_bytes());
    let (_, inline) = session.until_answer(&json!(1));
    let result = &inline["result"];
    assert!(result.get("resultType").is_none(), "{inline}");
    assert!(result.get("taskId").is_none(), "{inline}");
    assert_eq!(
        result["structuredContent"],
        json!({"result": "computed s in 0 s"}),
        "{inline}"
    );
    session.frame(call(2, "failing_job", json!({})).as_bytes());
    let (_, refused) = session.until_answer(&json!(2));
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("2026-07-28"), "{refused}");
}

/// A task counts as one of its caller's requests in flight until its call ends: with two
/// allowed, alice runs one task and still polls it, her second is refused `rate_limited`, and
/// mallory's call is untouched; a call the pipeline would refuse (invalid arguments) is no
/// task and leaves no task row; once alice's task ends she may start another.
#[test]
fn a_task_counts_against_its_callers_requests_in_flight() {
    let (_dir, cfg) = config_serving("", "requests_in_flight = 2");
    let host = http_serve(&cfg);
    let long = start(
        &host,
        "slow_compute",
        json!({"seconds": 120, "label": "held"}),
    );
    until(&host, &long, "working", PATIENCE);
    let params = json!({"name": "slow_compute", "arguments": {"seconds": 120, "label": "more"}});
    let refused = send(&host, ALICE, &request(8, "tools/call", params, true));
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(
        refused["result"]["_meta"]["toolhost/failure"]["code"], "rate_limited",
        "{refused}"
    );
    let params = json!({"name": "greet", "arguments": {"name": "mallory"}});
    let other = send(&host, MALLORY, &request(9, "tools/call", params, false));
    assert_eq!(other["result"]["isError"], false, "{other}");

    let params = json!({"name": "slow_compute", "arguments": {"seconds": "x", "label": "bad"}});
    let invalid = send(&host, ALICE, &request(10, "tools/call", params, true));
    assert_eq!(invalid["result"]["resultType"], "complete", "{invalid}");
    assert_eq!(
        invalid["result"]["_meta"]["toolhost/failure"]["code"], "invalid_arguments",
        "{invalid}"
    );
    let tasks = listing(&cfg)["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), 1, "only the running task has a row: {tasks:?}");

    cancel(&host, ALICE, &long);
    until(&host, &long, "failed", CANCEL_BOUND);
    let next = start(
        &host,
        "slow_compute",
        json!({"seconds": 0, "label": "next"}),
    );
    until(&host, &next, "completed", PATIENCE);
}

/// The task rows of the ledger under `config`: each task's tool, whether its row keeps the
/// call's arguments, and whether it is open.
fn task_rows(config: &std::path::Path) -> Vec<(String, bool, bool)> {
    let db = config.parent().unwrap().join("data/ledger.sqlite");
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT tool, arguments_json IS NOT NULL, open_bytes IS NOT NULL FROM tasks
             ORDER BY created_at_ms, task_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// A caller's open tasks are capped (`open_tasks_per_caller`): past it, a task call is refused
/// `rate_limited` in the request and nothing is recorded of it; another caller has room of its
/// own; a task that ends frees its place. With `record_content` off, a task row keeps no
/// arguments of a call that needs no approval.
#[test]
fn a_callers_open_tasks_are_capped_and_keep_no_content() {
    let (_dir, cfg) = config_serving("", "open_tasks_per_caller = 2");
    let host = http_serve(&cfg);
    let secret = "do-not-keep-this-label";
    let held: Vec<_> = (0..2)
        .map(|i| {
            start(
                &host,
                "slow_compute",
                json!({"seconds": 120, "label": format!("{secret}-{i}")}),
            )
        })
        .collect();
    let params = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "third"}});
    let refused = send(&host, ALICE, &request(8, "tools/call", params, true));
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(
        refused["result"]["_meta"]["toolhost/failure"]["code"], "rate_limited",
        "{refused}"
    );
    let params = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "bob"}});
    let other = send(&host, MALLORY, &request(9, "tools/call", params, true));
    assert_eq!(other["result"]["resultType"], "task", "{other}");
    let rows = task_rows(&cfg);
    assert_eq!(rows.len(), 3, "the refused call has no row: {rows:?}");
    assert!(rows.iter().all(|(_, kept, _)| !kept), "{rows:?}");
    let db = std::fs::read(cfg.parent().unwrap().join("data/ledger.sqlite")).unwrap();
    let wal =
        std::fs::read(cfg.parent().unwrap().join("data/ledger.sqlite-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "an argument reached the ledger's files"
        );
    }

    cancel(&host, ALICE, &held[0]);
    until(&host, &held[0], "failed", CANCEL_BOUND);
    let next = start(
        &host,
        "slow_compute",
        json!({"seconds": 0, "label": "next"}),
    );
    until(&host, &next, "completed", PATIENCE);
    cancel(&host, ALICE, &held[1]);
    until(&host, &held[1], "failed", CANCEL_BOUND);
}

/// `tasks/update` answers to the authority `tools/call` does: an access token of the same
/// principal without the scope the task's tool needs cannot approve it (`-32600`, naming the
/// scope; the task still waits), one with it can. A scope rule naming a tool the caller may
/// not see answers as for an absent tool, never 403.
#[test]
fn a_task_is_approved_only_with_the_scope_its_tool_needs() {
    use crate::oauth::{jwks, Issuer, AUDIENCE, ISSUER};
    let issuer = Issuer::new("k1");
    let io = tokio::runtime::Runtime::new().unwrap();
    let idp = io.block_on(crate::api_server::ApiServer::serving(Some(jwks(&[
        &issuer,
    ]))));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "data_dir = {data}\n\
         [serve.oauth]\nissuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks = {jwks:?}\n\
         tenant_claim = \"org\"\nscopes = {{ \"tools:write\" = [\"confirm_delete\"], \"tools:greet\" = [\"greet\"] }}\n\
         [policy]\ndefault = \"allow\"\n\
         [[policy.rule]]\neffect = \"deny\"\nprincipals = [\"oauth:alice\"]\ntools = [\"greet\"]\n\
         [[component]]\npath = {conformance}\n\
         [component.tools.confirm-delete]\ntask = \"optional\"\napproval = \"required\"\n\
         [[component]]\npath = {template}\n",
        data = toml_path(&dir.path().join("data")),
        jwks = idp.url("/jwks"),
        conformance = toml_path(&guest("conformance")),
        template = toml_path(&guest("template")),
    );
    let cfg = dir.path().join("toolhost.toml");
    std::fs::write(&cfg, text).unwrap();
    let host = http_serve(&cfg);
    let writer = issuer.token("k1", json!({"scope": "tools:write"}));
    let reader = issuer.token("k1", json!({"scope": "openid"}));

    let params = json!({"name": "confirm_delete", "arguments": {"filename": "s.txt"}});
    let created = send(&host, &writer, &request(1, "tools/call", params, true));
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    let poll = |token: &str| {
        send(
            &host,
            token,
            &request(2, "tasks/get", json!({"taskId": task}), true),
        )
    };
    let deadline = Instant::now() + PATIENCE;
    while poll(&writer)["result"]["status"] != "input_required" {
        assert!(Instant::now() < deadline, "{}", poll(&writer));
        std::thread::sleep(Duration::from_millis(100));
    }
    let update = |token: &str| {
        let params = json!({"taskId": task, "inputResponses": {"approval": {"action": "accept",
            "content": {"approve": true}}}});
        send(&host, token, &request(3, "tasks/update", params, true))
    };
    let refused = update(&reader);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(
        refused["error"]["data"]["scope"], "tools:write",
        "{refused}"
    );
    assert_eq!(poll(&writer)["result"]["status"], "input_required");
    let ran = |cfg: &std::path::Path| {
        listing_of(cfg, ("oauth:alice", "acme"))["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["tool"] == "confirm_delete" && c["status"] == "completed")
            .count()
    };
    assert_eq!(ran(&cfg), 0, "the refused update ran nothing");
    let ack = update(&writer);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let deadline = Instant::now() + PATIENCE;
    while poll(&writer)["result"]["status"] != "completed" {
        assert!(Instant::now() < deadline, "{}", poll(&writer));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(ran(&cfg), 1);

    // greet is hidden from alice and needs a scope she lacks: answered as no such tool.
    let params = json!({"name": "greet", "arguments": {"name": "x"}});
    let hidden = send(&host, &reader, &request(4, "tools/call", params, false));
    assert_eq!(
        hidden["result"]["_meta"]["toolhost/failure"]["code"], "unknown_tool",
        "{hidden}"
    );
    drop(io);
}

/// A task of a tool that needs approval waits in `input_required` with the host's question;
/// approved through `tasks/update`, it runs the approved call once and completes; a declined
/// one completes `approval_denied` without running.
#[test]
fn a_task_waits_for_approval_and_runs_once_approved() {
    let (_dir, cfg) = config("");
    let host = http_serve(&cfg);
    let task = start(&host, "confirm_delete", json!({"filename": "a.txt"}));
    let waiting = until(&host, &task, "input_required", PATIENCE);
    assert_eq!(
        task_rows(&cfg),
        [("confirm_delete".to_string(), true, true)]
    );
    let question = &waiting["inputRequests"]["approval"];
    assert_eq!(question["method"], "elicitation/create", "{waiting}");
    assert!(question["params"]["message"]
        .as_str()
        .unwrap()
        .contains("a.txt"));
    let ack = answer_approval(&host, &task, true);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until(&host, &task, "completed", PATIENCE);
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "deleted a.txt"}),
        "{done}"
    );
    // Answering again changes nothing: the task is no longer waiting.
    answer_approval(&host, &task, true);
    let ran: Vec<_> = calls(&cfg)
        .into_iter()
        .filter(|c| c["tool"] == "confirm_delete" && c["status"] == "completed")
        .collect();
    assert_eq!(ran.len(), 1, "{ran:?}");
    // `toolhost ledger` lists the task, moved to the approved call, without its arguments.
    let tasks = listing(&cfg)["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["task_id"], json!(task));
    assert!(tasks[0]["call_id"].as_str().unwrap().ends_with("~approved"));
    assert_eq!(tasks[0]["call"]["state"], "finished", "{}", tasks[0]);
    assert!(tasks[0].get("arguments").is_none());
    // The row kept the arguments while the call waited (any host shows and runs them), and
    // forgets them once the approved call ended.
    assert_eq!(
        task_rows(&cfg),
        [("confirm_delete".to_string(), false, false)]
    );

    let declined = start(&host, "confirm_delete", json!({"filename": "b.txt"}));
    until(&host, &declined, "input_required", PATIENCE);
    answer_approval(&host, &declined, false);
    let done = until(&host, &declined, "completed", PATIENCE);
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert_eq!(
        done["result"]["_meta"]["toolhost/failure"]["code"],
        "approval_denied"
    );
}

/// A tool only the operator approves (`approvers = "operator"`) is never put to the client:
/// its task ends `completed` with `approval_required` (no `input_required` question), a
/// client's `tasks/update` is refused (`-32600`) and changes nothing, and a 2026-07-28 request from a client that can
/// answer questions gets the `approval_required` result, not `input_required`.
#[test]
fn an_operator_tool_is_never_approved_by_the_client() {
    let (_dir, cfg) = config("");
    operator_only(&cfg);
    let host = http_serve(&cfg);
    let task = start(&host, "confirm_delete", json!({"filename": "a.txt"}));
    let waiting = until(&host, &task, "completed", PATIENCE);
    assert_eq!(
        waiting["result"]["_meta"]["toolhost/failure"]["code"], "approval_required",
        "{waiting}"
    );
    let refused = answer_approval(&host, &task, true);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let after = get(&host, ALICE, &task);
    assert_eq!(
        after["result"]["result"]["_meta"]["toolhost/failure"]["code"], "approval_required",
        "{after}"
    );
    let params = json!({"name": "confirm_delete", "arguments": {"filename": "b.txt"}});
    let asked = send(&host, ALICE, &request(5, "tools/call", params, false));
    assert_eq!(asked["result"]["resultType"], "complete", "{asked}");
    assert_eq!(
        asked["result"]["_meta"]["toolhost/failure"]["code"], "approval_required",
        "{asked}"
    );
    let ran = calls(&cfg)
        .into_iter()
        .filter(|c| c["tool"] == "confirm_delete" && c["status"] == "completed")
        .count();
    assert_eq!(ran, 0);
}

/// Make `confirm_delete` in the config at `cfg` a tool only the operator approves.
pub(crate) fn operator_only(cfg: &std::path::Path) {
    let text = std::fs::read_to_string(cfg).unwrap();
    let text = text.replace(
        "approval = \"required\"\n",
        "approval = \"required\"\napprovers = \"operator\"\n",
    );
    std::fs::write(cfg, text).unwrap();
}

/// How many calls of `confirm_delete` in alice's run `r1` completed: how often it ran.
pub(crate) fn deletes_run(cfg: &std::path::Path) -> usize {
    calls(cfg)
        .into_iter()
        .filter(|c| c["tool"] == "confirm_delete" && c["status"] == "completed")
        .count()
}

/// `tools/call` of `tool` with `arguments`, the call named `name` in alice's run, with the
/// tasks extension declared (or not): the result.
fn named_call(host: &HttpServer, name: &str, tool: &str, arguments: Value, tasks: bool) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    let mut message = request(7, "tools/call", params, tasks);
    message["params"]["_meta"]["toolhost/callId"] = json!(name);
    send(host, ALICE, &message)["result"].clone()
}

/// A task whose call the client named is one task: a resend gets the same task and runs
/// nothing again; the name with other arguments is refused in the request
/// (`duplicate_call_id`); a name an answered call already holds is answered from the ledger
/// (a replay), never a task showing that call's result as its own.
#[test]
fn a_named_task_is_one_task_and_never_borrows_another_calls_result() {
    let (_dir, cfg) = config("");
    let host = http_serve(&cfg);
    let args = json!({"seconds": 1, "label": "n"});
    let first = named_call(&host, "job-1", "slow_compute", args.clone(), true);
    let again = named_call(&host, "job-1", "slow_compute", args.clone(), true);
    assert_eq!(first["resultType"], "task", "{first}");
    assert_eq!(again["taskId"], first["taskId"], "{again}");
    let task = first["taskId"].as_str().unwrap();
    until(&host, task, "completed", PATIENCE);
    let other = json!({"seconds": 2, "label": "other"});
    let refused = named_call(&host, "job-1", "slow_compute", other, true);
    assert_eq!(refused["resultType"], "complete", "{refused}");
    assert_eq!(
        refused["_meta"]["toolhost/failure"]["code"],
        "duplicate_call_id"
    );
    let ran = calls(&cfg)
        .iter()
        .filter(|c| c["call_id"] == "key:job-1")
        .count();
    assert_eq!(ran, 1, "one call for the name");

    let args = json!({"seconds": 0, "label": "sync"});
    let sync = named_call(&host, "job-2", "slow_compute", args.clone(), false);
    assert_eq!(sync["resultType"], "complete", "{sync}");
    let replay = named_call(&host, "job-2", "slow_compute", args, true);
    assert_eq!(replay["resultType"], "complete", "{replay}");
    assert_eq!(replay["structuredContent"], sync["structuredContent"]);
}

/// Two hosts on one PostgreSQL ledger: a task started on host A is polled to completion on
/// host B; a long one cancelled through B stops its guest on A within the bound; one waiting
/// for approval on A is approved through B and completes.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_task_on_one_host_is_polled_cancelled_and_approved_through_another() {
    let schema = Schema::new();
    let (_dir, cfg) = config(&schema.ledger_section());
    let a = http_serve(&cfg);
    let b = http_serve(&cfg);
    let task = start(&a, "slow_compute", json!({"seconds": 1, "label": "across"}));
    let done = until(&b, &task, "completed", PATIENCE);
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "computed across in 1 s"})
    );

    let long = start(&a, "slow_compute", json!({"seconds": 120, "label": "stop"}));
    until(&b, &long, "working", PATIENCE);
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    let ack = cancel(&b, ALICE, &long);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let stopped = until(&b, &long, "failed", CANCEL_BOUND);
    let took = asked.elapsed();
    assert_eq!(
        stopped["error"]["data"]["toolhost/failure"]["status"], "outcome_unknown",
        "{stopped}"
    );
    assert!(took < CANCEL_BOUND, "{took:?}");
    eprintln!("cancel across hosts took {} ms", took.as_millis());

    let approval = start(&a, "confirm_delete", json!({"filename": "c.txt"}));
    until(&b, &approval, "input_required", PATIENCE);
    answer_approval(&b, &approval, true);
    let done = until(&a, &approval, "completed", PATIENCE);
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"result": "deleted c.txt"})
    );
}

/// A task whose host is killed (`kill -9`) mid-call ends `failed` with `outcome_unknown` once
/// the host's lease passes (3 s here) and another host recovers the call; an operator then
/// reconciles it, and the task answers the reconciled result.
#[test]
#[ignore = "needs PostgreSQL (TOOLHOST_TEST_POSTGRES_URL)"]
fn pg_a_task_whose_host_dies_ends_outcome_unknown_and_is_reconciled() {
    let schema = Schema::new();
    let (_dir, cfg) = config(&schema.ledger_section());
    let mut doomed = http_serve(&cfg);
    let survivor = http_serve(&cfg);
    let task = start(
        &doomed,
        "slow_compute",
        json!({"seconds": 120, "label": "lost"}),
    );
    let started = Instant::now();
    while !calls(&cfg)
        .iter()
        .any(|c| c["tool"] == "slow_compute" && c["state"] == "started")
    {
        assert!(started.elapsed() < PATIENCE, "the call never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    doomed.child.kill().unwrap(); // SIGKILL
    doomed.child.wait().unwrap();
    let failed = until(&survivor, &task, "failed", PATIENCE);
    let failure = &failed["error"]["data"]["toolhost/failure"];
    assert_eq!(failure["status"], "outcome_unknown", "{failed}");
    let call_id = failure["call_id"].as_str().unwrap().to_string();
    let run = run_of(&Caller::new("alice", "alice-corp"), "r1");
    let record = toolhost(&[
        "reconcile",
        "--config",
        cfg.to_str().unwrap(),
        "record",
        "--run",
        &run,
        "--call",
        &call_id,
        "completed",
        "--output",
        "\"computed lost in 120 s\"",
        "--by",
        "ops",
        "--why",
        "the job's own log says it finished",
    ]);
    assert_eq!(record.status, 0, "{}", record.stderr);
    let reconciled = until(&survivor, &task, "completed", PATIENCE);
    assert_eq!(
        reconciled["result"]["structuredContent"],
        json!({"result": "computed lost in 120 s"}),
        "{reconciled}"
    );
    assert!(reconciled["result"]["_meta"]["toolhost/reconciled"]["at_ms"].is_i64());
}
