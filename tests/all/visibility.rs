//! The front door per caller. Visibility follows authority: each caller is offered the tools
//! its policy could allow it, over MCP (stdio and HTTP) and to a model in the agent loop; a
//! call to a tool hidden from the caller answers exactly as a call to no tool does, and is
//! recorded as refused. And each caller's HTTP requests are bounded in rate and in flight.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhost::{Code, Status, ToolCall};

use crate::support::{guest, toml_path};

/// A config in `dir`: greet (template) and the fs-tools over a workspace; alice may call
/// everything, the stdio user everything but `write_text`, mallory `greet` and `read_text`
/// under her own prefix.
fn config(dir: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let token = |t: &str, who: &str| {
        format!(
            "[[serve.token]]\nsha256 = \"{}\"\nprincipal = \"{who}\"\ntenant = \"{who}-corp\"\n",
            hex::encode(Sha256::digest(t.as_bytes()))
        )
    };
    let text = format!(
        "data_dir = {data}\n[serve]\nprincipal = \"stdio-user\"\n{alice}{mallory}\n\
         [policy]\ndefault = \"deny\"\n\
         [[policy.rule]]\neffect = \"allow\"\nprincipals = [\"alice\", \"stdio-user\"]\ntools = [\"*\"]\n\
         [[policy.rule]]\neffect = \"deny\"\nprincipals = [\"stdio-user\"]\ntools = [\"write_text\"]\n\
         [[policy.rule]]\neffect = \"allow\"\nprincipals = [\"mallory\"]\ntools = [\"greet\"]\n\
         [[policy.rule]]\neffect = \"allow\"\nprincipals = [\"mallory\"]\ntools = [\"read_text\"]\n\
         [[policy.rule.constraint]]\nargument = \"path\"\nprefix = \"{{principal}}/\"\n\
         [[component]]\npath = {template}\n\
         [[component]]\npath = {fs}\nfs = [{{ host = {ws}, guest = \"/workspace\", mode = \"rw\" }}]\n\
         [component.tools.write-text]\nrisk = \"write\"\n",
        data = toml_path(&dir.join("data")),
        alice = token("alice-token", "alice"),
        mallory = token("mallory-token", "mallory"),
        template = toml_path(&guest("template")),
        fs = toml_path(&guest("fs-tools")),
        ws = toml_path(&ws),
    );
    let path = dir.join("toolhost.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The names in a `tools/list` answer, sorted.
fn names(answer: &Value) -> Vec<String> {
    let mut n: Vec<String> = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

/// `answer` with `name` written as `NAME` and `call` as `CALL`, to compare a hidden tool's
/// answer with an absent one's.
fn anonymized(answer: &Value, name: &str, call: &str) -> String {
    answer["result"]
        .to_string()
        .replace(name, "NAME")
        .replace(call, "CALL")
}

/// Over HTTP, alice and mallory list different tools, and mallory's `read_text` schema carries
/// her prefix; mallory's call of a tool hidden from her answers exactly as her call of a tool
/// that does not exist. Over stdio, the stdio user lists
/// all but the one tool denied to it outright.
#[test]
fn two_callers_see_different_tools_over_both_transports() {
    use crate::mcp_stateless::{call, modern, request, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let list = |id| request(id, "tools/list", json!({}), json!({}));

    let http = crate::mcp_frames::Http::start(&cfg);
    let (_, alice) = modern(&http.addr, "alice-token", &list(1));
    let (_, mallory) = modern(&http.addr, "mallory-token", &list(2));
    let all = names(&alice);
    assert!(all.contains(&"write_text".to_string()), "{all:?}");
    assert_eq!(names(&mallory), ["greet", "read_text"], "{mallory}");
    // Mallory's `read_text` schema carries her prefix; alice's is the tool's own.
    let accepts = |answer: &Value, path: &str| {
        let tool = answer["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "read_text")
            .unwrap();
        jsonschema::draft202012::new(&tool["inputSchema"])
            .unwrap()
            .is_valid(&json!({ "path": path }))
    };
    assert!(accepts(&mallory, "mallory/notes.txt"));
    assert!(!accepts(&mallory, "alice/notes.txt"), "{mallory}");
    assert!(!accepts(&mallory, "mallorys/notes.txt"));
    assert!(accepts(&alice, "alice/notes.txt") && accepts(&alice, "mallory/notes.txt"));

    let (_, hidden) = modern(
        &http.addr,
        "mallory-token",
        &call(3, "write_text", json!({"path": "x", "content": "y"}), "h1"),
    );
    let (_, absent) = modern(
        &http.addr,
        "mallory-token",
        &call(4, "wrote_text", json!({"path": "x", "content": "y"}), "h2"),
    );
    assert_eq!(
        crate::mcp_stateless::code(&hidden["result"]),
        "unknown_tool"
    );
    assert_eq!(
        anonymized(&hidden, "write_text", "key:h1"),
        anonymized(&absent, "wrote_text", "key:h2")
    );
    let (_, allowed) = modern(
        &http.addr,
        "alice-token",
        &call(
            5,
            "write_text",
            json!({"path": "a.txt", "content": "y"}),
            "a1",
        ),
    );
    assert_eq!(allowed["result"]["isError"], false, "{allowed}");
    drop(http);

    let mut stdio = Stdio::start(&cfg);
    let own = names(&stdio.ask(&list(6)));
    let expected: Vec<String> = all.into_iter().filter(|n| n != "write_text").collect();
    assert_eq!(own, expected);
}

/// The agent loop offers a model only the caller's tools, with the caller's constraints in their
/// schemas; a hidden tool the model names anyway ends `unknown_tool` and is recorded, with the
/// reason the operator reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_offers_each_caller_its_tools_and_records_a_hidden_call() {
    use crate::openai::{scripted_run, text, tool_calls, Reply};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let rt = crate::support::runtime(&cfg);
    let mut offered = Vec::new();
    for who in ["alice", "mallory"] {
        let args = json!({"path": "x", "content": "y"}).to_string();
        let replies = vec![
            Reply::Stream(tool_calls(&[("call_1", "write_text", &args)], 8, 10)),
            Reply::Stream(text("done", 5)),
        ];
        let (summary, server) = scripted_run(&rt, replies, who, &format!("{who}-corp")).await;
        let run_id = summary.run_id.clone();
        let mut tools: Vec<String> = server.requests()[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        tools.sort();
        offered.push(tools);
        let read_text = server.requests()[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "read_text")
            .unwrap()["function"]["parameters"]["properties"]["path"]
            .clone();
        let pattern = (who == "mallory").then_some("^mallory(/|$)");
        assert_eq!(read_text["pattern"].as_str(), pattern, "{read_text}");
        let call = &rt.ledger().calls(Some(&run_id)).unwrap()[0];
        if who == "mallory" {
            assert_eq!(call.code, Some(Code::UnknownTool), "{call:?}");
            let resolve = call.events.iter().find(|e| e.stage == "resolve").unwrap();
            assert_eq!(resolve.detail, "hidden from this caller by policy");
        } else {
            assert_eq!(call.status, Some(Status::Completed), "{call:?}");
        }
    }
    assert!(offered[0].contains(&"write_text".to_string()));
    assert_eq!(offered[1], ["greet", "read_text"]);
}

/// A call straight through the pipeline (as `toolhost call` makes it): hidden and absent tools
/// answer the same message and code.
#[tokio::test]
async fn the_pipeline_answers_hidden_as_absent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let rt = crate::support::runtime(&cfg);
    let ctx = rt.context("mallory", "mallory-corp");
    let ask = |name: &str| ToolCall {
        call_id: format!("c-{name}"),
        name: name.to_string(),
        arguments: json!({"path": "x", "content": "y"}),
    };
    let hidden = rt.run_call(&ctx, &ask("write_text"), None).await;
    let absent = rt.run_call(&ctx, &ask("wrote_text"), None).await;
    assert_eq!(hidden.code, Some(Code::UnknownTool));
    assert_eq!(
        hidden.message.replace("write_text", "NAME"),
        absent.message.replace("wrote_text", "NAME")
    );
}

/// Per-caller limits at the HTTP door: bob's burst of requests is cut at his rate (429 with
/// `Retry-After`), while alice is served; mallory with one request in flight (a call held at
/// the API) is refused a second one, and served again once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_bounds_each_callers_rate_and_requests_in_flight() {
    use crate::api_server::ApiServer;
    use crate::mcp_stateless::{call, http_post, request, routing_headers};
    use sha2::{Digest, Sha256};
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = |t: &str, who: &str| {
        format!(
            "[[serve.token]]\nsha256 = \"{}\"\nprincipal = \"{who}\"\n",
            hex::encode(Sha256::digest(t.as_bytes()))
        )
    };
    let top = format!(
        "[serve]\nrequests_per_second = 0.01\nrequest_burst = 3\nrequests_in_flight = 1\n{}{}{}",
        token("alice-token", "alice"),
        token("bob-token", "bob"),
        token("mallory-token", "mallory")
    );
    let allow = [api.authority()];
    let cfg = crate::call_context::downstream_config(dir.path(), &top, &allow, &allow, "");
    let http = tokio::task::spawn_blocking(move || crate::mcp_frames::Http::start(&cfg))
        .await
        .unwrap();
    let addr = http.addr.clone();
    let send = |token: &'static str, message: serde_json::Value| {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || {
            let mut headers = routing_headers(&message);
            headers.push(("Authorization".into(), format!("Bearer {token}")));
            let (status, h, _) = http_post(&addr, &headers, &message).expect("an answer");
            (status, h.get("retry-after").cloned())
        })
    };
    let list = || request(1, "tools/list", json!({}), json!({}));

    let mut bob = Vec::new();
    for _ in 0..6 {
        bob.push(send("bob-token", list()).await.unwrap());
    }
    let statuses: Vec<u16> = bob.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    assert_eq!(bob[3].1.as_deref(), Some("1"));
    assert_eq!(send("alice-token", list()).await.unwrap().0, 200);

    let charge = call(
        2,
        "charge",
        json!({"url": api.url("/hold"), "amount-cents": 1}),
        "m1",
    );
    let held = send("mallory-token", charge);
    assert_eq!(
        api.wait_for(1).await.len(),
        1,
        "mallory's call is held at the API"
    );
    assert_eq!(send("mallory-token", list()).await.unwrap().0, 429);
    assert_eq!(send("alice-token", list()).await.unwrap().0, 200);
    api.release();
    assert_eq!(held.await.unwrap().0, 200);
    assert_eq!(send("mallory-token", list()).await.unwrap().0, 200);
    drop(http);
}

/// One request on a new kept-alive connection as `token`: the connection (left open) and the
/// status line and headers of its answer.
fn kept_alive(addr: &str, token: &str, message: &Value) -> (std::net::TcpStream, String) {
    use std::io::{Read, Write};
    let body = message.to_string();
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Authorization: Bearer {token}\r\n",
        body.len()
    );
    for (k, v) in crate::mcp_stateless::routing_headers(message) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(body.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert!(got.len() < 64 << 10, "an answer's head is small");
        assert_eq!(sock.read(&mut byte).unwrap(), 1, "the head ends");
        got.push(byte[0]);
    }
    (sock, String::from_utf8_lossy(&got).to_ascii_lowercase())
}

/// Each principal holds at most `connections_per_principal` open connections: a request on
/// one more is answered 429 and its connection closed, another principal is served, and a
/// closed connection frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_bounds_each_callers_open_connections() {
    use crate::mcp_stateless::request;
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(config(dir.path()))
        .unwrap()
        .replace("[serve]\n", "[serve]\nconnections_per_principal = 2\n");
    let cfg = dir.path().join("toolhost.toml");
    std::fs::write(&cfg, text).unwrap();
    let http = tokio::task::spawn_blocking(move || crate::mcp_frames::Http::start(&cfg))
        .await
        .unwrap();
    let addr = http.addr.clone();
    tokio::task::spawn_blocking(move || {
        let list = request(1, "tools/list", json!({}), json!({}));
        let (a1, head) = kept_alive(&addr, "alice-token", &list);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let (_a2, head) = kept_alive(&addr, "alice-token", &list);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let (mut a3, head) = kept_alive(&addr, "alice-token", &list);
        assert!(head.starts_with("http/1.1 429"), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(head.contains("retry-after: 1"), "{head}");
        let mut rest = Vec::new();
        a3.read_to_end(&mut rest).expect("the server closes it");
        let (_m1, head) = kept_alive(&addr, "mallory-token", &list);
        assert!(head.starts_with("http/1.1 200"), "another caller: {head}");
        drop(a1);
        let mut tries = 0;
        loop {
            let (_a4, head) = kept_alive(&addr, "alice-token", &list);
            if head.starts_with("http/1.1 200") {
                break;
            }
            tries += 1;
            assert!(tries < 250, "the closed connection's place never came back");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    drop(http);
}
